//! Shapes shared by many resources: actions, pagination, protection, prices, errors.

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// User labels (`labels` schema): string keys to string values.
pub type Labels = BTreeMap<String, String>;

/// `pagination` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pagination {
    /// Current page (1-based).
    pub page: u64,
    /// Entries per page.
    pub per_page: u64,
    /// Previous page, `null` on the first page.
    pub previous_page: Option<u64>,
    /// Next page, `null` on the last page.
    pub next_page: Option<u64>,
    /// Last page number (the API may send `null` on the last page; the fake always sends it).
    pub last_page: Option<u64>,
    /// Total number of entries matching the filters.
    pub total_entries: Option<u64>,
}

/// `meta` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// Pagination information.
    pub pagination: Pagination,
}

/// `protection` schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protection {
    /// Delete protection.
    pub delete: bool,
}

/// `resource` schema: a reference `{id, type}` used in actions and `used_by`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resource {
    /// Resource id.
    pub id: u64,
    /// Resource type, e.g. `server`, `load_balancer`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// `resource_id` schema: `{id}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceId {
    /// Resource id.
    pub id: u64,
}

/// Status of an [`Action`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    /// Still in progress.
    Running,
    /// Finished successfully.
    Success,
    /// Finished with an error.
    Error,
}

/// `error` schema as used inside actions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionError {
    /// Error code.
    pub code: String,
    /// Error message.
    pub message: String,
}

/// `action` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// Action id.
    pub id: u64,
    /// Command, e.g. `create_server`, `add_target`.
    pub command: String,
    pub status: ActionStatus,
    /// Progress in percent.
    pub progress: u8,
    /// Start time (RFC 3339).
    pub started: String,
    /// End time, `null` while running.
    pub finished: Option<String>,
    /// Resources the action works on; the first one is the one it locks.
    pub resources: Vec<Resource>,
    /// Error, `null` unless `status` is `error`.
    pub error: Option<ActionError>,
}

/// `price` schema: decimal strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    /// Price without VAT.
    pub net: String,
    /// Price with VAT.
    pub gross: String,
}

/// `price_per_time` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PricePerTime {
    /// Location name.
    pub location: String,
    /// Hourly price.
    pub price_hourly: Price,
    /// Monthly price.
    pub price_monthly: Price,
    /// Included traffic in bytes.
    pub included_traffic: u64,
    /// Price per additional TB of traffic.
    pub price_per_tb_traffic: Price,
}

/// `deprecation_info` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeprecationInfo {
    /// When the deprecation was announced (RFC 3339).
    pub announced: String,
    /// After this time the resource can no longer be ordered (RFC 3339).
    pub unavailable_after: String,
}

/// `error_response` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorResponse {
    pub error: ErrorBody,
}

/// The `error` object of an [`ErrorResponse`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Error code.
    pub code: String,
    /// Error message.
    pub message: String,
    /// Code-specific details (may be `null` or `{}`).
    #[serde(default)]
    pub details: serde_json::Value,
}
