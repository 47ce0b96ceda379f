//! `/actions`.

use reqwest::Method;
use serde::Deserialize;

use crate::client::{Client, Target};
use crate::error::Error;
use crate::models::{Action, ActionId};

/// Action endpoints.
#[derive(Debug, Clone, Copy)]
pub struct Actions<'a>(pub(crate) &'a Client);

#[derive(Deserialize)]
struct One {
    action: Action,
}

/// Ids per `GET /actions?id=..` request (keeps URLs short).
const IDS_PER_REQUEST: usize = 25;

impl Actions<'_> {
    /// `GET /actions/{id}`.
    pub async fn get(&self, id: ActionId) -> Result<Action, Error> {
        let one: One = self.0.json::<_, ()>(Method::GET, &Target::with_id("/actions/{id}", id), &[], None).await?;
        Ok(one.action)
    }

    /// `GET /actions?id=1&id=2..`: several actions in one request (per 25 ids).
    pub async fn get_many(&self, ids: &[ActionId]) -> Result<Vec<Action>, Error> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(IDS_PER_REQUEST) {
            let filters: Vec<(&str, String)> = chunk.iter().map(|id| ("id", id.to_string())).collect();
            let page = self
                .0
                .page::<Action>(&Target::fixed("/actions"), "actions", &filters, 1, crate::client::LIST_ALL_PER_PAGE)
                .await?;
            out.extend(page.items);
        }
        Ok(out)
    }
}
