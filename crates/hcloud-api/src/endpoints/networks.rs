//! `/networks`.

use reqwest::Method;
use serde::Deserialize;

use super::common::{ActionEnvelope, Created, push_filter, selector_from_labels};
use crate::client::{Client, Target};
use crate::error::Error;
use crate::models::{Action, CreateNetworkRequest, Labels, Network, NetworkId, NetworkListParams, Route};
use crate::paging::Page;

/// Network endpoints.
#[derive(Debug, Clone, Copy)]
pub struct Networks<'a>(pub(crate) &'a Client);

#[derive(Deserialize)]
struct One {
    network: Network,
}

fn filters(params: &NetworkListParams) -> Vec<(&'static str, String)> {
    let mut q = Vec::new();
    push_filter(&mut q, "name", &params.name);
    push_filter(&mut q, "label_selector", &params.label_selector);
    q
}

impl Networks<'_> {
    /// `GET /networks/{id}`.
    pub async fn get(&self, id: NetworkId) -> Result<Network, Error> {
        let one: One = self.0.json::<_, ()>(Method::GET, &Target::with_id("/networks/{id}", id), &[], None).await?;
        Ok(one.network)
    }

    /// `GET /networks` — one page.
    pub async fn list(&self, params: &NetworkListParams, page: u32, per_page: u32) -> Result<Page<Network>, Error> {
        self.0.page(&Target::fixed("/networks"), "networks", &filters(params), page, per_page).await
    }

    /// `GET /networks` — every page.
    pub async fn list_all(&self, params: &NetworkListParams) -> Result<Vec<Network>, Error> {
        self.0.all(&Target::fixed("/networks"), "networks", &filters(params)).await
    }

    /// Every network carrying all of `labels` (see [`selector_from_labels`]).
    pub async fn list_by_labels(&self, labels: &Labels) -> Result<Vec<Network>, Error> {
        let params = NetworkListParams { label_selector: Some(selector_from_labels(labels)?), ..Default::default() };
        self.list_all(&params).await
    }

    /// The network with exactly this name, if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<Network>, Error> {
        let params = NetworkListParams { name: Some(name.to_owned()), ..Default::default() };
        Ok(self.list(&params, 1, 1).await?.items.into_iter().find(|n| n.name == name))
    }

    /// `POST /networks`. Never repeated once it may have been applied: see
    /// [`Error::OutcomeUnknown`].
    pub async fn create(&self, req: &CreateNetworkRequest) -> Result<Created<Network>, Error> {
        let one: One = self.0.json(Method::POST, &Target::create("/networks"), &[], Some(req)).await?;
        Ok(Created { resource: one.network, action: None, next_actions: Vec::new() })
    }

    /// `DELETE /networks/{id}` (also succeeds if a retry found it already gone).
    pub async fn delete(&self, id: NetworkId) -> Result<(), Error> {
        self.0.delete(&Target::with_id("/networks/{id}", id)).await?;
        Ok(())
    }

    /// `POST /networks/{id}/actions/add_route`.
    pub async fn add_route(&self, id: NetworkId, route: &Route) -> Result<Action, Error> {
        let a: ActionEnvelope = self
            .0
            .json(Method::POST, &Target::with_id("/networks/{id}/actions/add_route", id), &[], Some(route))
            .await?;
        Ok(a.action)
    }

    /// `POST /networks/{id}/actions/delete_route`.
    pub async fn delete_route(&self, id: NetworkId, route: &Route) -> Result<Action, Error> {
        let a: ActionEnvelope = self
            .0
            .json(Method::POST, &Target::with_id("/networks/{id}/actions/delete_route", id), &[], Some(route))
            .await?;
        Ok(a.action)
    }
}
