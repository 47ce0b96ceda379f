//! Types shared by several resources: ids, labels, protection, actions, pagination, locations.

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// Id of a server.
    ServerId
);
id_type!(
    /// Id of a network.
    NetworkId
);
id_type!(
    /// Id of a load balancer.
    LoadBalancerId
);
id_type!(
    /// Id of a certificate.
    CertificateId
);
id_type!(
    /// Id of an action.
    ActionId
);

/// Resource labels (`key=value`).
pub type Labels = BTreeMap<String, String>;

/// Delete protection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Protection {
    /// Whether deletion is blocked.
    pub delete: bool,
}

crate::string_enum! {
    /// State of an action.
    #[derive(Default)]
    pub enum ActionStatus {
        /// Still running.
        #[default]
        Running = "running",
        /// Finished successfully.
        Success = "success",
        /// Finished with an error.
        Error = "error",
    }
}

/// An error reported by a finished action.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ActionError {
    /// Error code.
    pub code: crate::error_code::ErrorCode,
    /// Error message.
    pub message: String,
}

/// A reference to a resource, as in an action's `resources`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ResourceRef {
    /// The resource's id.
    pub id: i64,
    /// The resource's type, e.g. `server`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// An asynchronous operation of the API.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Action {
    pub id: ActionId,
    /// What the action does, e.g. `add_target`.
    pub command: String,
    /// Current state.
    pub status: ActionStatus,
    /// Progress in percent.
    pub progress: i32,
    /// Start time (RFC 3339).
    pub started: String,
    /// End time, once finished.
    pub finished: Option<String>,
    /// The resources the action works on.
    pub resources: Vec<ResourceRef>,
    /// The error, if the action failed.
    pub error: Option<ActionError>,
}

/// Pagination metadata of a list response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Pagination {
    /// This page's number.
    pub page: u32,
    /// Entries per page.
    pub per_page: u32,
    /// The previous page, if any.
    pub previous_page: Option<u32>,
    /// The next page, if any.
    pub next_page: Option<u32>,
    /// The last page, if known.
    pub last_page: Option<u32>,
    /// Total number of entries, if known.
    pub total_entries: Option<u32>,
}

/// `meta` of a list response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Meta {
    /// Pagination, if the list is paginated.
    pub pagination: Option<Pagination>,
}

/// A location (`fsn1`, `nbg1`, ...).
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Location {
    pub id: i64,
    /// Name, e.g. `fsn1`.
    pub name: String,
    pub description: String,
    /// ISO country code.
    pub country: String,
    pub city: String,
    pub latitude: f64,
    pub longitude: f64,
    /// Network zone, e.g. `eu-central`.
    pub network_zone: String,
}

/// Deprecation of a type.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Deprecation {
    /// When the deprecation was announced (RFC 3339).
    pub announced: String,
    /// After this time the type can no longer be ordered (RFC 3339).
    pub unavailable_after: String,
}
