//! Load balancer shapes (`load_balancer` schema and parts).

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use serde::{Deserialize, Serialize};

use super::catalog::{LoadBalancerType, Location};
use super::common::{Labels, Protection, ResourceId};

/// `load_balancer_algorithm` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Algorithm {
    /// `round_robin` or `least_connections`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// Public IPv4/IPv6 of a load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerPublicIp {
    /// Address.
    pub ip: Option<String>,
    /// Reverse DNS entry.
    pub dns_ptr: Option<String>,
}

/// `load_balancer_public_net` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerPublicNet {
    /// Whether the public interface is enabled.
    pub enabled: bool,
    pub ipv4: LoadBalancerPublicIp,
    /// IPv6 (an address, not a network).
    pub ipv6: LoadBalancerPublicIp,
}

/// `load_balancer_private_net` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerPrivateNet {
    /// Network id.
    pub network: u64,
    /// Private IP.
    pub ip: String,
}

/// `http` schema of a service.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceHttp {
    /// Sticky-session cookie name.
    pub cookie_name: String,
    /// Sticky-session cookie lifetime in seconds.
    pub cookie_lifetime: u64,
    /// Certificate ids (https).
    pub certificates: Vec<u64>,
    /// Redirect http to https.
    pub redirect_http: bool,
    pub sticky_sessions: bool,
    /// Idle timeout in seconds (not in the OpenAPI description; echoed when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_idle: Option<u64>,
}

/// `http` part of a health check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthCheckHttp {
    /// Host header, `null` for none.
    pub domain: Option<String>,
    /// Request path.
    pub path: String,
    /// Expected response body substring.
    pub response: String,
    /// Accepted status codes, e.g. `2??`.
    pub status_codes: Vec<String>,
    /// Use TLS.
    pub tls: bool,
}

/// Health check of a service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthCheck {
    /// `tcp` or `http`.
    pub protocol: String,
    /// Port checked on the targets.
    pub port: u16,
    /// Interval in seconds.
    pub interval: u64,
    /// Timeout in seconds.
    pub timeout: u64,
    /// Retries before a target is unhealthy.
    pub retries: u64,
    /// HTTP details (only for `http` health checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HealthCheckHttp>,
}

/// `load_balancer_service` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    /// `tcp`, `http` or `https`.
    pub protocol: String,
    /// Port the load balancer listens on.
    pub listen_port: u16,
    /// Port on the targets.
    pub destination_port: u16,
    /// Whether the PROXY protocol header is sent to the targets.
    pub proxyprotocol: bool,
    pub health_check: HealthCheck,
    /// HTTP settings (only for `http`/`https`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<ServiceHttp>,
}

/// `load_balancer_target_health_status` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetHealthStatus {
    /// Service listen port.
    pub listen_port: u16,
    /// `healthy`, `unhealthy` or `unknown`.
    pub status: String,
}

/// `load_balancer_target_ip` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetIp {
    /// Address.
    pub ip: String,
}

/// `label_selector` schema of a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetLabelSelector {
    /// Selector expression.
    pub selector: String,
}

/// `load_balancer_selected_target` schema: a server matched by a label selector target.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectedTarget {
    /// Always `server`.
    #[serde(rename = "type")]
    pub kind: String,
    pub server: ResourceId,
    /// Health per service.
    pub health_status: Vec<TargetHealthStatus>,
    /// Whether the private IP is used.
    pub use_private_ip: bool,
}

/// `load_balancer_target` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// `server`, `ip` or `label_selector`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Server (type `server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ResourceId>,
    /// IP (type `ip`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<TargetIp>,
    /// Selector (type `label_selector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<TargetLabelSelector>,
    /// Health per service (types `server` and `ip`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_status: Option<Vec<TargetHealthStatus>>,
    /// Whether the private IP is used (types `server` and `label_selector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_private_ip: Option<bool>,
    /// Servers matched by a `label_selector` target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<SelectedTarget>>,
}

/// `load_balancer` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadBalancer {
    /// Load balancer id.
    pub id: u64,
    pub name: String,
    /// Public interface.
    pub public_net: LoadBalancerPublicNet,
    /// Private networks.
    pub private_net: Vec<LoadBalancerPrivateNet>,
    pub location: Location,
    pub load_balancer_type: LoadBalancerType,
    pub protection: Protection,
    pub labels: Labels,
    /// Creation time (RFC 3339).
    pub created: String,
    pub services: Vec<Service>,
    pub targets: Vec<Target>,
    pub algorithm: Algorithm,
    /// Outbound traffic this month in bytes.
    pub outgoing_traffic: Option<u64>,
    /// Inbound traffic this month in bytes.
    pub ingoing_traffic: Option<u64>,
    /// Included traffic in bytes.
    pub included_traffic: u64,
}
