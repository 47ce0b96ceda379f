//! What every endpoint group shares: the created-resource and action envelopes, label
//! selectors and query filters.

use serde::Deserialize;

use crate::error::Error;
use crate::models::{Action, Labels};

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

/// The label selector that matches exactly the resources carrying all of `labels`
/// (`k1=v1,k2=v2`), for finding a resource by the labels it was created with — e.g. after a
/// create ended with [`Error::OutcomeUnknown`].
///
/// Keys may contain letters, digits, `.`, `_`, `-` and `/` (for a prefix); values letters,
/// digits, `.`, `_` and `-`; neither may be empty, and `labels` must not be empty (a selector
/// matching every resource would find things that were not created with these labels).
pub fn selector_from_labels(labels: &Labels) -> Result<String, Error> {
    if labels.is_empty() {
        return Err(Error::InvalidArgument("a label lookup needs at least one label".to_owned()));
    }
    let ok_key = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/');
    let ok_value = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let mut parts = Vec::with_capacity(labels.len());
    for (k, v) in labels {
        if k.is_empty() || !k.chars().all(ok_key) {
            return Err(Error::InvalidArgument(format!(
                "label key {k:?} cannot be used in a label selector: accepted are letters, digits, '.', '_', '-' and '/'"
            )));
        }
        if v.is_empty() || !v.chars().all(ok_value) {
            return Err(Error::InvalidArgument(format!(
                "label {k}={v:?} cannot be used in a label selector: the value must be non-empty letters, digits, \
                 '.', '_' or '-'"
            )));
        }
        parts.push(format!("{k}={v}"));
    }
    Ok(parts.join(","))
}

/// Adds a filter to a query if set.
pub(crate) fn push_filter<'a>(query: &mut Vec<(&'a str, String)>, key: &'a str, value: &Option<String>) {
    if let Some(v) = value {
        query.push((key, v.clone()));
    }
}
