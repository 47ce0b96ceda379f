//! Load balancers, their services, targets and types.

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use super::common::{CertificateId, Deprecation, Labels, LoadBalancerId, Location, NetworkId, Protection, ServerId};

crate::string_enum! {
    /// Protocol of a load balancer service.
    #[derive(Default)]
    pub enum LbProtocol {
        /// Plain TCP.
        #[default]
        Tcp = "tcp",
        /// HTTP.
        Http = "http",
        /// HTTPS (TLS terminated at the load balancer).
        Https = "https",
    }
}

crate::string_enum! {
    /// Load balancing algorithm.
    #[derive(Default)]
    pub enum Algorithm {
        /// Round robin.
        #[default]
        RoundRobin = "round_robin",
        /// Least connections.
        LeastConnections = "least_connections",
    }
}

crate::string_enum! {
    /// Kind of a load balancer target.
    #[derive(Default)]
    pub enum TargetKind {
        /// A cloud server.
        #[default]
        Server = "server",
        /// An IP (e.g. a dedicated server).
        Ip = "ip",
        /// All servers matching a label selector.
        LabelSelector = "label_selector",
    }
}

crate::string_enum! {
    /// Health of a target for one listen port.
    pub enum HealthStatus {
        /// Healthy.
        Healthy = "healthy",
        /// Unhealthy.
        Unhealthy = "unhealthy",
        /// Not determined yet.
        Undetermined = "unknown",
    }
}

/// A load balancer.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct LoadBalancer {
    pub id: LoadBalancerId,
    pub name: String,
    pub labels: Labels,
    pub load_balancer_type: LoadBalancerType,
    pub location: Location,
    pub algorithm: AlgorithmSpec,
    pub protection: Protection,
    /// Public interface and addresses.
    pub public_net: LbPublicNet,
    /// Private network attachments.
    pub private_net: Vec<LbPrivateNet>,
    /// Services (one per listen port).
    pub services: Vec<LbService>,
    pub targets: Vec<LbTarget>,
    /// Creation time.
    pub created: String,
}

/// `{"type": "..."}` wrapper of the algorithm.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct AlgorithmSpec {
    /// The algorithm.
    #[serde(rename = "type")]
    pub kind: Algorithm,
}

/// A load balancer's public interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LbPublicNet {
    /// Whether the public interface is enabled.
    pub enabled: bool,
    /// Public IPv4.
    pub ipv4: LbIpv4,
    /// Public IPv6.
    pub ipv6: LbIpv6,
}

/// A load balancer's public IPv4.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LbIpv4 {
    /// The address.
    pub ip: Option<Ipv4Addr>,
    /// Reverse DNS name.
    pub dns_ptr: Option<String>,
}

/// A load balancer's public IPv6.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LbIpv6 {
    /// The address.
    pub ip: Option<Ipv6Addr>,
    /// Reverse DNS name.
    pub dns_ptr: Option<String>,
}

/// A load balancer's attachment to a private network.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LbPrivateNet {
    pub network: NetworkId,
    /// The load balancer's IP in it.
    pub ip: Option<IpAddr>,
}

/// A load balancer service: a listen port forwarded to a destination port on the targets.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct LbService {
    pub protocol: LbProtocol,
    /// Port the load balancer listens on.
    pub listen_port: u16,
    /// Port on the targets.
    pub destination_port: u16,
    /// Whether the PROXY protocol header is sent.
    pub proxyprotocol: bool,
    /// Health check; always present in answers, and required by `add_service`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// HTTP options (http/https only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpOptions>,
}

/// Health check of a service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct HealthCheck {
    /// `tcp` or `http`.
    pub protocol: LbProtocol,
    /// Port on the targets.
    pub port: u16,
    /// Seconds between checks.
    pub interval: u32,
    /// Seconds until a check fails.
    pub timeout: u32,
    /// Failed checks until a target is unhealthy.
    pub retries: u32,
    /// HTTP options (http only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HealthCheckHttp>,
}

/// HTTP options of a health check.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct HealthCheckHttp {
    /// Host header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub path: String,
    /// Expected response body substring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// Expected status codes, e.g. `2??`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub status_codes: Vec<String>,
    /// Use TLS.
    pub tls: bool,
}

/// HTTP options of a service.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct HttpOptions {
    /// Sticky-session cookie name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookie_name: Option<String>,
    /// Sticky-session cookie lifetime in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookie_lifetime: Option<u32>,
    /// Certificates (https only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<CertificateId>,
    /// Redirect HTTP to HTTPS.
    pub redirect_http: bool,
    pub sticky_sessions: bool,
    /// Idle timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_idle: Option<u32>,
}

/// A target of a load balancer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LbTarget {
    /// `server`, `ip` or `label_selector` (the JSON `type`): which of the next three fields is set.
    #[serde(rename = "type")]
    pub kind: TargetKind,
    /// The server, for server targets.
    pub server: Option<IdRef<ServerId>>,
    /// The IP, for ip targets.
    pub ip: Option<IpRef>,
    /// The selector, for label-selector targets.
    pub label_selector: Option<SelectorRef>,
    /// Whether traffic goes to the server's private IP.
    pub use_private_ip: bool,
    /// Health per listen port (server and ip targets).
    pub health_status: Vec<TargetHealth>,
    /// The servers a label-selector target currently matches.
    pub targets: Vec<LbSelectedTarget>,
}

/// A server matched by a label-selector target.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LbSelectedTarget {
    pub server: Option<IdRef<ServerId>>,
    /// Whether traffic goes to the server's private IP.
    pub use_private_ip: bool,
    /// Health per listen port.
    pub health_status: Vec<TargetHealth>,
}

/// `{"id": ...}`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct IdRef<T> {
    pub id: T,
}

/// `{"ip": ...}`.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct IpRef {
    pub ip: IpAddr,
}

/// `{"selector": ...}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct SelectorRef {
    /// The label selector.
    pub selector: String,
}

/// Health of a target on one listen port.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TargetHealth {
    pub listen_port: u16,
    pub status: HealthStatus,
}

/// A load balancer type (`lb11`, `lb21`, `lb31`).
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LoadBalancerType {
    pub id: i64,
    pub name: String,
    pub description: String,
    /// Maximum number of targets.
    pub max_targets: u32,
    /// Maximum number of services.
    pub max_services: u32,
    /// Maximum number of connections.
    pub max_connections: u32,
    /// Maximum number of certificates.
    pub max_assigned_certificates: u32,
    /// Deprecation, if announced.
    pub deprecation: Option<Deprecation>,
}

/// Filters for listing load balancers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LoadBalancerListParams {
    /// Exact name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Label selector, e.g. `env=prod,!legacy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// Body of `POST /load_balancers`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CreateLoadBalancerRequest {
    pub name: String,
    /// Type name, e.g. `lb11`.
    pub load_balancer_type: String,
    /// Location name (or use `network_zone`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Network zone (or use `location`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_zone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<AlgorithmSpec>,
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// Network to attach at creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkId>,
    /// Whether the public interface is enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_interface: Option<bool>,
    /// Services to create.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<LbService>,
    /// Targets to add.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetSpec>,
}

/// Body of `PUT /load_balancers/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateLoadBalancerRequest {
    /// New name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New labels (replace all labels).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
}

/// Body of `update_service`: only the listen port is required; absent fields stay unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateServiceRequest {
    /// Identifies the service.
    pub listen_port: u16,
    /// New protocol.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<LbProtocol>,
    /// New destination port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_port: Option<u16>,
    /// New PROXY protocol setting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxyprotocol: Option<bool>,
    /// New health check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// New HTTP options; fields left `None` stay unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<UpdateHttpOptions>,
}

/// HTTP options of `update_service`: `None` leaves a setting unchanged.
///
/// `certificates: Some(vec![])` removes every certificate (e.g. when a service changes from
/// https to http); `None` keeps them. Redirect and sticky sessions stay as they are unless
/// given — unlike [`HttpOptions`], whose `false` would switch them off.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateHttpOptions {
    /// Sticky-session cookie name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookie_name: Option<String>,
    /// Sticky-session cookie lifetime in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookie_lifetime: Option<u32>,
    /// Certificates (https only); `Some(vec![])` clears them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificates: Option<Vec<CertificateId>>,
    /// Redirect HTTP to HTTPS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_http: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky_sessions: Option<bool>,
    /// Idle timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_idle: Option<u32>,
}

/// A target to add or remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// A cloud server.
    Server {
        /// The server.
        id: ServerId,
        /// Send traffic to the server's private IP.
        use_private_ip: bool,
    },
    /// An IP.
    Ip(IpAddr),
    /// Every server matching a label selector (resolved by the API, listed in
    /// [`LbTarget::targets`]).
    LabelSelector {
        /// The selector, e.g. `k8s-cluster=prod,role=worker`.
        selector: String,
        /// Send traffic to the servers' private IPs.
        use_private_ip: bool,
    },
}

impl Serialize for TargetSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self {
            TargetSpec::Server { id, use_private_ip } => {
                m.serialize_entry("type", "server")?;
                m.serialize_entry("server", &IdRef { id: *id })?;
                m.serialize_entry("use_private_ip", use_private_ip)?;
            }
            TargetSpec::Ip(ip) => {
                m.serialize_entry("type", "ip")?;
                m.serialize_entry("ip", &IpRef { ip: *ip })?;
            }
            TargetSpec::LabelSelector { selector, use_private_ip } => {
                m.serialize_entry("type", "label_selector")?;
                m.serialize_entry("label_selector", &SelectorRef { selector: selector.clone() })?;
                m.serialize_entry("use_private_ip", use_private_ip)?;
            }
        }
        m.end()
    }
}

/// Body of `attach_to_network`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AttachLbToNetworkRequest {
    pub network: NetworkId,
    /// A fixed IP in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpAddr>,
    /// The subnet range to take the IP from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_range: Option<ipnet::IpNet>,
}
