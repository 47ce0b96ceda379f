//! Private networks, subnets and routes.

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::common::{Labels, NetworkId, Protection, ServerId};

/// A private network.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Network {
    pub id: NetworkId,
    pub name: String,
    /// The network's range, e.g. `10.0.0.0/8`.
    pub ip_range: IpNet,
    #[serde(default)]
    pub subnets: Vec<Subnet>,
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Attached servers.
    #[serde(default)]
    pub servers: Vec<ServerId>,
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub protection: Protection,
}

/// A subnet of a network.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Subnet {
    /// `cloud`, `server` or `vswitch`.
    #[serde(rename = "type", default = "cloud")]
    pub kind: String,
    /// The subnet's range.
    pub ip_range: IpNet,
    /// Network zone, e.g. `eu-central`.
    pub network_zone: String,
    /// Gateway (answered by the API; not sent on create).
    #[serde(default, skip_serializing)]
    pub gateway: Option<IpAddr>,
}

fn cloud() -> String {
    "cloud".to_owned()
}

/// A route of a network: traffic for `destination` goes to `gateway`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub struct Route {
    /// Destination range.
    pub destination: IpNet,
    /// Next hop: a private IP of a server in the network.
    pub gateway: IpAddr,
}

/// Filters for listing networks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NetworkListParams {
    /// Exact name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Label selector, e.g. `env=prod,!legacy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// Body of `POST /networks`.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreateNetworkRequest {
    pub name: String,
    /// The network's range.
    pub ip_range: IpNet,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<Subnet>,
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
}
