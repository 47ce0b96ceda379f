//! `/servers`.

use reqwest::Method;
use serde::Deserialize;

use super::common::{ActionEnvelope, Created, push_filter, selector_from_labels};
use crate::client::{Client, Target};
use crate::error::Error;
use crate::models::{
    Action, AttachServerToNetworkRequest, CreateServerRequest, Labels, NetworkId, Server, ServerId, ServerListParams,
};
use crate::paging::Page;

/// Server endpoints.
#[derive(Debug, Clone, Copy)]
pub struct Servers<'a>(pub(crate) &'a Client);

#[derive(Deserialize)]
struct One {
    server: Server,
}

#[derive(Deserialize)]
struct CreateAnswer {
    server: Server,
    #[serde(default)]
    action: Option<Action>,
    #[serde(default)]
    next_actions: Vec<Action>,
}

fn filters(params: &ServerListParams) -> Vec<(&'static str, String)> {
    let mut q = Vec::new();
    push_filter(&mut q, "name", &params.name);
    push_filter(&mut q, "label_selector", &params.label_selector);
    q
}

impl Servers<'_> {
    /// `GET /servers/{id}`.
    pub async fn get(&self, id: ServerId) -> Result<Server, Error> {
        let one: One = self.0.json::<_, ()>(Method::GET, &Target::with_id("/servers/{id}", id), &[], None).await?;
        Ok(one.server)
    }

    /// `GET /servers/{id}`, mapping `not_found` to `None`. Only the API's own `not_found`
    /// error means absent; any other answer (e.g. a 404 page of a proxy) is an error.
    pub async fn find(&self, id: ServerId) -> Result<Option<Server>, Error> {
        match self.get(id).await {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /servers` — one page.
    pub async fn list(&self, params: &ServerListParams, page: u32, per_page: u32) -> Result<Page<Server>, Error> {
        self.0.page(&Target::fixed("/servers"), "servers", &filters(params), page, per_page).await
    }

    /// `GET /servers` — every page.
    pub async fn list_all(&self, params: &ServerListParams) -> Result<Vec<Server>, Error> {
        self.0.all(&Target::fixed("/servers"), "servers", &filters(params)).await
    }

    /// Every server carrying all of `labels` (see [`selector_from_labels`]).
    pub async fn list_by_labels(&self, labels: &Labels) -> Result<Vec<Server>, Error> {
        let params = ServerListParams { label_selector: Some(selector_from_labels(labels)?), ..Default::default() };
        self.list_all(&params).await
    }

    /// The server with exactly this name, if any (`GET /servers?name=`).
    pub async fn get_by_name(&self, name: &str) -> Result<Option<Server>, Error> {
        let params = ServerListParams { name: Some(name.to_owned()), ..Default::default() };
        let page = self.list(&params, 1, 1).await?;
        Ok(page.items.into_iter().find(|s| s.name == name))
    }

    /// `POST /servers`. Never repeated once it may have been applied: see
    /// [`Error::OutcomeUnknown`].
    pub async fn create(&self, req: &CreateServerRequest) -> Result<Created<Server>, Error> {
        let a: CreateAnswer = self.0.json(Method::POST, &Target::create("/servers"), &[], Some(req)).await?;
        Ok(Created { resource: a.server, action: a.action, next_actions: a.next_actions })
    }

    /// `DELETE /servers/{id}`: the deleting action, or `None` if a retry found the server
    /// already gone (an earlier attempt whose answer was lost deleted it).
    pub async fn delete(&self, id: ServerId) -> Result<Option<Action>, Error> {
        self.0.delete(&Target::with_id("/servers/{id}", id)).await
    }

    async fn action<B: serde::Serialize + ?Sized>(
        &self,
        template: &'static str,
        id: ServerId,
        body: Option<&B>,
    ) -> Result<Action, Error> {
        let a: ActionEnvelope = self.0.json(Method::POST, &Target::with_id(template, id), &[], body).await?;
        Ok(a.action)
    }

    /// `POST /servers/{id}/actions/poweroff` (hard power off).
    pub async fn poweroff(&self, id: ServerId) -> Result<Action, Error> {
        self.action::<()>("/servers/{id}/actions/poweroff", id, None).await
    }

    /// `POST /servers/{id}/actions/poweron`.
    pub async fn poweron(&self, id: ServerId) -> Result<Action, Error> {
        self.action::<()>("/servers/{id}/actions/poweron", id, None).await
    }

    /// `POST /servers/{id}/actions/shutdown` (ACPI shutdown).
    pub async fn shutdown(&self, id: ServerId) -> Result<Action, Error> {
        self.action::<()>("/servers/{id}/actions/shutdown", id, None).await
    }

    /// `POST /servers/{id}/actions/attach_to_network`.
    pub async fn attach_to_network(&self, id: ServerId, req: &AttachServerToNetworkRequest) -> Result<Action, Error> {
        self.action("/servers/{id}/actions/attach_to_network", id, Some(req)).await
    }

    /// `POST /servers/{id}/actions/detach_from_network`.
    pub async fn detach_from_network(&self, id: ServerId, network: NetworkId) -> Result<Action, Error> {
        self.action("/servers/{id}/actions/detach_from_network", id, Some(&serde_json::json!({ "network": network })))
            .await
    }
}
