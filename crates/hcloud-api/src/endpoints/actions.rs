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

/// A resource kind's list of every action (`GET /{kind}/actions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionList {
    /// `GET /servers/actions`: create, delete, power, rebuild, `change_type`, network attach
    /// and detach, and the Primary IP assignments of servers.
    Servers,
    /// `GET /primary_ips/actions`: assign and unassign, rDNS, protection.
    PrimaryIps,
}

impl ActionList {
    fn target(self) -> Target {
        match self {
            ActionList::Servers => Target::fixed("/servers/actions"),
            ActionList::PrimaryIps => Target::fixed("/primary_ips/actions"),
        }
    }
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

    /// The newest action of `list` (`GET /{kind}/actions?sort=id:desc&per_page=1`), or with
    /// `running_only` the newest still running (`&status=running`); `None` when there is
    /// none. One request.
    pub async fn newest(&self, list: ActionList, running_only: bool) -> Result<Option<Action>, Error> {
        let mut filters = vec![("sort", "id:desc".to_owned())];
        if running_only {
            filters.push(("status", "running".to_owned()));
        }
        let page = self.0.page::<Action>(&list.target(), "actions", &filters, 1, 1).await?;
        Ok(page.items.into_iter().next())
    }
}
