//! Network shapes (`network` schema and parts).

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use serde::{Deserialize, Serialize};

use super::common::{Labels, Protection};

/// `route` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Destination CIDR.
    pub destination: String,
    /// Gateway address.
    pub gateway: String,
}

/// `subnet_with_gateway` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    /// `cloud`, `server` or `vswitch`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Subnet range (CIDR).
    pub ip_range: String,
    /// Network zone, e.g. `eu-central`.
    pub network_zone: String,
    /// Gateway (the first IP of the network's range).
    pub gateway: String,
    /// vSwitch id for `vswitch` subnets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vswitch_id: Option<u64>,
}

/// `network` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// Network id.
    pub id: u64,
    pub name: String,
    /// IP range (CIDR).
    pub ip_range: String,
    pub subnets: Vec<Subnet>,
    pub routes: Vec<Route>,
    /// Attached server ids.
    pub servers: Vec<u64>,
    /// Attached load balancer ids.
    pub load_balancers: Vec<u64>,
    pub protection: Protection,
    pub labels: Labels,
    /// Creation time (RFC 3339).
    pub created: String,
    /// Whether routes are exposed to a vSwitch.
    pub expose_routes_to_vswitch: bool,
}
