//! Endpoint groups, one per resource: `client.servers().get(id)`, `client.load_balancers()...`.

mod actions;
mod catalog;
mod certificates;
mod load_balancers;
mod networks;
mod servers;

pub use actions::Actions;
pub use catalog::{LoadBalancerTypes, Locations, ServerTypes};
pub use certificates::Certificates;
pub use load_balancers::LoadBalancers;
pub use networks::Networks;
pub use servers::Servers;

use serde::Deserialize;

use crate::models::Action;

/// A created resource with the action that finishes its creation.
#[derive(Debug, Clone, PartialEq)]
pub struct Created<T> {
    /// The resource as the API returned it right after the request.
    pub resource: T,
    /// The creating action, if the API returned one.
    pub action: Option<Action>,
    /// Follow-up actions (e.g. a server's start), if any.
    pub next_actions: Vec<Action>,
}

/// `{"action": {...}}`.
#[derive(Deserialize)]
pub(crate) struct ActionEnvelope {
    pub(crate) action: Action,
}

/// Adds a filter to a query if set.
pub(crate) fn push_filter<'a>(query: &mut Vec<(&'a str, String)>, key: &'a str, value: &Option<String>) {
    if let Some(v) = value {
        query.push((key, v.clone()));
    }
}
