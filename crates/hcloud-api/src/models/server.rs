//! Servers and server types.

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::common::{Deprecation, Labels, Location, NetworkId, ServerId};

crate::string_enum! {
    /// Power/lifecycle state of a server.
    pub enum ServerStatus {
        /// Running.
        Running = "running",
        /// Being created.
        Initializing = "initializing",
        /// Starting.
        Starting = "starting",
        /// Stopping.
        Stopping = "stopping",
        /// Powered off.
        Off = "off",
        /// Being deleted.
        Deleting = "deleting",
        /// Migrating.
        Migrating = "migrating",
        /// Rebuilding.
        Rebuilding = "rebuilding",
    }
}

impl Default for ServerStatus {
    fn default() -> Self {
        ServerStatus::Unknown(String::new())
    }
}

/// A cloud server.
///
/// `datacenter` is deliberately absent: the API removed it in 2026 and the client never needs it.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Server {
    pub id: ServerId,
    /// Name (unique per project).
    pub name: String,
    pub status: ServerStatus,
    /// Creation time (RFC 3339).
    pub created: String,
    pub server_type: ServerType,
    pub location: Location,
    /// Public network configuration.
    pub public_net: ServerPublicNet,
    /// Private networks the server is attached to.
    pub private_net: Vec<ServerPrivateNet>,
    pub labels: Labels,
    /// Ids of load balancers targeting this server.
    pub load_balancers: Vec<i64>,
}

impl Server {
    /// The server's IP in `network`, if attached.
    pub fn private_ip_in(&self, network: NetworkId) -> Option<IpAddr> {
        self.private_net.iter().find(|p| p.network == network).and_then(|p| p.ip)
    }
}

/// Public addresses of a server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ServerPublicNet {
    /// The public IPv4, if one is assigned.
    pub ipv4: Option<ServerIpv4>,
    /// The public IPv6 network, if one is assigned.
    pub ipv6: Option<ServerIpv6>,
}

/// A server's public IPv4.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerIpv4 {
    /// The address.
    pub ip: Ipv4Addr,
    /// Whether the address is blocked.
    #[serde(default)]
    pub blocked: bool,
    /// Reverse DNS name.
    #[serde(default)]
    pub dns_ptr: String,
}

/// A server's public IPv6 network (a /64).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerIpv6 {
    /// The network, e.g. `2001:db8:1::/64`.
    pub ip: IpNet,
    /// Whether the network is blocked.
    #[serde(default)]
    pub blocked: bool,
}

/// A server's attachment to a private network.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ServerPrivateNet {
    pub network: NetworkId,
    /// The server's IP in it.
    pub ip: Option<IpAddr>,
    /// Additional IPs.
    pub alias_ips: Vec<String>,
    /// MAC address of the interface.
    pub mac_address: String,
}

/// A server type (`cx23`, `cpx11`, ...).
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ServerType {
    pub id: i64,
    pub name: String,
    pub description: String,
    /// CPU cores.
    pub cores: u32,
    /// Memory in GB.
    pub memory: f64,
    /// Disk in GB.
    pub disk: f64,
    /// `shared` or `dedicated`.
    pub cpu_type: String,
    /// `x86` or `arm`.
    pub architecture: String,
    /// Deprecation, if announced.
    pub deprecation: Option<Deprecation>,
}

/// Filters for listing servers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServerListParams {
    /// Exact name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Label selector, e.g. `env=prod,!legacy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// Public network options when creating a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreateServerPublicNet {
    /// Assign a public IPv4.
    pub enable_ipv4: bool,
    /// Assign a public IPv6 network.
    pub enable_ipv6: bool,
}

/// Body of `POST /servers`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CreateServerRequest {
    pub name: String,
    /// Server type name.
    pub server_type: String,
    /// Image name or id, e.g. `ubuntu-24.04`.
    pub image: String,
    /// Location name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// Networks to attach at creation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<NetworkId>,
    /// Public network options.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_net: Option<CreateServerPublicNet>,
}

/// Body of `POST /servers/{id}/actions/attach_to_network`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AttachServerToNetworkRequest {
    pub network: NetworkId,
    /// A fixed IP in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpAddr>,
}
