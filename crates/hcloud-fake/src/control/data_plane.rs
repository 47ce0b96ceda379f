//! Types of the data plane's control surface: what listens and what the health checks found
//! (see [`crate::data_plane`]; read with [`crate::FakeHandle::data_plane`] or
//! `GET /_fake/data_plane`).

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::data_plane::config::ProxyProtocolVersion;

/// Whether a listener is serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListenerState {
    /// Bound and accepting connections.
    Listening,
    /// Binding failed (see `error`); retried at every reconcile.
    BindFailed,
}

/// Where a listener sends a target's connections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataPlaneTarget {
    /// The server, for a server target or a server selected by a label selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<u64>,
    /// The IP, for an IP target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// The target's address (public IPv4, private IP with `use_private_ip`, or the IP) and
    /// the service's destination port; `None` when the target has no usable address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
}

/// One Load Balancer service's listener on `<public IPv4>:<listen_port>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataPlaneListener {
    /// The Load Balancer.
    pub load_balancer: u64,
    /// The service's listen port.
    pub listen_port: u16,
    /// The address listened on (the Load Balancer's public IPv4 and the listen port).
    pub address: SocketAddr,
    /// The service's protocol (`tcp`, `http`, `https`), or `redirect_http` for the port 80 of an
    /// `https` service that redirects.
    pub protocol: String,
    /// Listening or not.
    pub state: ListenerState,
    /// Why binding failed (e.g. address in use, address not local).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every target of the service (healthy or not) and where its connections go.
    pub targets: Vec<DataPlaneTarget>,
    /// Connections accepted so far.
    pub accepted_connections: u64,
    /// Connections open now.
    pub active_connections: u64,
    /// Connections closed at once because no target was healthy (or the chosen target
    /// refused).
    pub rejected_connections: u64,
}

/// The health checks of one target for one service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataPlaneCheck {
    /// The Load Balancer.
    pub load_balancer: u64,
    /// The service's listen port.
    pub listen_port: u16,
    /// The server, for a server target or a server selected by a label selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<u64>,
    /// The IP, for an IP target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// Where the checks go (target address and health check port); `None` when the target
    /// has no usable address (see `last_error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
    /// Health check protocol (`tcp` or `http`).
    pub protocol: String,
    /// What the checks found: `healthy`, `unhealthy` or `unknown` (before the first check
    /// completes). A test override (`target_health`) is not applied here.
    pub status: String,
    /// Checks completed.
    pub checks: u64,
    /// Failed checks since the last success.
    pub consecutive_failures: u64,
    /// Why the last check failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Connections forwarded to this target by this service, open now.
    pub active_connections: u64,
}

/// The data plane as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataPlaneStatus {
    /// Whether the fake was configured with a data plane.
    pub enabled: bool,
    /// Whether its tasks are running (a [`crate::FakeServer`] serves the fake).
    pub running: bool,
    /// The configured addresses (range or list), when enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<String>,
    /// The PROXY protocol version sent, when enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<ProxyProtocolVersion>,
    /// Listeners, by Load Balancer and address.
    pub listeners: Vec<DataPlaneListener>,
    /// Health checks, by Load Balancer, listen port and target.
    pub checks: Vec<DataPlaneCheck>,
}
