//! Request bodies the fake accepts (`*_request` schemas).
//!
//! Enumerations are kept as strings and validated by the handlers, so an unknown value is
//! answered with `invalid_input` naming the field, as the API does. Fields with API defaults
//! are optional.

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use serde::{Deserialize, Serialize};

use super::common::{Labels, ResourceId};
use super::load_balancer::{TargetIp, TargetLabelSelector};
use super::network::Route;

/// A reference by id or by name (`server_type`, `image`, `location`, `load_balancer_type`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IdOrName {
    /// Numeric id.
    Id(u64),
    /// Name (a numeric string is also tried as an id).
    Name(String),
}

impl IdOrName {
    /// The reference as text, for error messages.
    pub fn describe(&self) -> String {
        match self {
            Self::Id(id) => id.to_string(),
            Self::Name(n) => n.clone(),
        }
    }
}

impl From<&str> for IdOrName {
    fn from(s: &str) -> Self {
        Self::Name(s.to_owned())
    }
}

/// `public_net` of `create_server_request`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateServerPublicNet {
    /// Assign a public IPv4 (default true).
    #[serde(default)]
    pub enable_ipv4: Option<bool>,
    /// Assign a public IPv6 network (default true).
    #[serde(default)]
    pub enable_ipv6: Option<bool>,
}

/// `create_server_request` schema (the fields the fake uses).
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateServerRequest {
    /// Name (must be a valid hostname).
    pub name: String,
    /// Server type by name or id.
    pub server_type: IdOrName,
    /// Image by name or id.
    pub image: IdOrName,
    /// Location by name or id (default `fsn1`).
    #[serde(default)]
    pub location: Option<IdOrName>,
    /// Deprecated datacenter name (e.g. `fsn1-dc14`); only its location prefix is used,
    /// when `location` is absent.
    #[serde(default)]
    pub datacenter: Option<String>,
    #[serde(default)]
    pub labels: Option<Labels>,
    /// Network ids to attach at creation.
    #[serde(default)]
    pub networks: Option<Vec<u64>>,
    /// Public interface options.
    #[serde(default)]
    pub public_net: Option<CreateServerPublicNet>,
    /// Start after creation (default true).
    #[serde(default)]
    pub start_after_create: Option<bool>,
    /// SSH keys; when given no root password is returned.
    #[serde(default)]
    pub ssh_keys: Option<Vec<serde_json::Value>>,
}

/// `attach_server_to_network_request` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachServerToNetworkRequest {
    /// Network id.
    pub network: u64,
    /// Requested private IP.
    #[serde(default)]
    pub ip: Option<String>,
    /// Additional alias IPs.
    #[serde(default)]
    pub alias_ips: Option<Vec<String>>,
    /// Subnet range to take the IP from.
    #[serde(default)]
    pub ip_range: Option<String>,
}

/// `detach_*_from_network_request` schemas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetachFromNetworkRequest {
    /// Network id.
    pub network: u64,
}

/// `subnet` schema (request).
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubnetRequest {
    /// `cloud`, `server` or `vswitch`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Subnet range (CIDR).
    #[serde(default)]
    pub ip_range: Option<String>,
    pub network_zone: String,
    /// Robot vSwitch id; the API requires it for `vswitch` subnets and accepts it only there.
    #[serde(default)]
    pub vswitch_id: Option<u64>,
}

/// `create_network_request` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateNetworkRequest {
    pub name: String,
    /// IP range (CIDR, RFC 1918).
    pub ip_range: String,
    #[serde(default)]
    pub subnets: Option<Vec<SubnetRequest>>,
    #[serde(default)]
    pub routes: Option<Vec<Route>>,
    #[serde(default)]
    pub labels: Option<Labels>,
    /// Expose routes to a vSwitch.
    #[serde(default)]
    pub expose_routes_to_vswitch: Option<bool>,
}

/// `algorithm` of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlgorithmRequest {
    /// `round_robin` or `least_connections`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// `http` of a health check (request; all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthCheckHttpRequest {
    /// Host header.
    #[serde(default)]
    pub domain: Option<String>,
    /// Path (default `/`).
    #[serde(default)]
    pub path: Option<String>,
    /// Expected body substring.
    #[serde(default)]
    pub response: Option<String>,
    /// Accepted status codes (default `["2??","3??"]`).
    #[serde(default)]
    pub status_codes: Option<Vec<String>>,
    /// Use TLS (default false).
    #[serde(default)]
    pub tls: Option<bool>,
}

/// Health check of a service (request; all optional, API defaults filled in).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthCheckRequest {
    /// `tcp` (default) or `http`.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Port (default: the destination port).
    #[serde(default)]
    pub port: Option<u16>,
    /// Interval in seconds (default 15).
    #[serde(default)]
    pub interval: Option<u64>,
    /// Timeout in seconds (default 10).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Retries (default 3).
    #[serde(default)]
    pub retries: Option<u64>,
    /// HTTP details.
    #[serde(default)]
    pub http: Option<HealthCheckHttpRequest>,
}

/// `http` of a service (request; all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceHttpRequest {
    /// Cookie name (default `HCLBSTICKY`).
    #[serde(default)]
    pub cookie_name: Option<String>,
    /// Cookie lifetime (default 300).
    #[serde(default)]
    pub cookie_lifetime: Option<u64>,
    /// Certificate ids.
    #[serde(default)]
    pub certificates: Option<Vec<u64>>,
    /// Redirect http to https (default false).
    #[serde(default)]
    pub redirect_http: Option<bool>,
    /// Sticky sessions (default false).
    #[serde(default)]
    pub sticky_sessions: Option<bool>,
    /// Idle timeout in seconds (unset unless given).
    #[serde(default)]
    pub timeout_idle: Option<u64>,
}

/// `load_balancer_service` as a request (`add_service`, `services` on create).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceRequest {
    /// `tcp`, `http` or `https`.
    pub protocol: String,
    /// Listen port (default 80 for http, 443 for https; required for tcp).
    #[serde(default)]
    pub listen_port: Option<u16>,
    /// Destination port (default 80 for http/https; required for tcp).
    #[serde(default)]
    pub destination_port: Option<u16>,
    /// PROXY protocol (default false).
    #[serde(default)]
    pub proxyprotocol: Option<bool>,
    /// Health check (absent: `tcp` on the destination port every 15 s, 10 s timeout, 3 retries).
    #[serde(default)]
    pub health_check: Option<HealthCheckRequest>,
    /// HTTP settings.
    #[serde(default)]
    pub http: Option<ServiceHttpRequest>,
}

/// `update_load_balancer_service` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateServiceRequest {
    /// Listen port identifying the service.
    pub listen_port: u16,
    /// New protocol.
    #[serde(default)]
    pub protocol: Option<String>,
    /// New destination port.
    #[serde(default)]
    pub destination_port: Option<u16>,
    /// New PROXY protocol flag.
    #[serde(default)]
    pub proxyprotocol: Option<bool>,
    /// Health check fields to change.
    #[serde(default)]
    pub health_check: Option<HealthCheckRequest>,
    /// HTTP fields to change.
    #[serde(default)]
    pub http: Option<ServiceHttpRequest>,
}

/// `delete_service_request` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteServiceRequest {
    /// Listen port of the service.
    pub listen_port: u16,
}

/// `load_balancer_add_target` / `remove_target_request` schemas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRequest {
    /// `server`, `ip` or `label_selector`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Server (type `server`).
    #[serde(default)]
    pub server: Option<ResourceId>,
    /// IP (type `ip`).
    #[serde(default)]
    pub ip: Option<TargetIp>,
    /// Selector (type `label_selector`).
    #[serde(default)]
    pub label_selector: Option<TargetLabelSelector>,
    /// Use the private IP (default false).
    #[serde(default)]
    pub use_private_ip: Option<bool>,
}

/// `create_load_balancer_request` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateLoadBalancerRequest {
    pub name: String,
    /// Type by name or id.
    pub load_balancer_type: IdOrName,
    /// Location name or id (this or `network_zone`).
    #[serde(default)]
    pub location: Option<IdOrName>,
    /// Network zone (this or `location`).
    #[serde(default)]
    pub network_zone: Option<String>,
    /// Algorithm (default round robin).
    #[serde(default)]
    pub algorithm: Option<AlgorithmRequest>,
    #[serde(default)]
    pub labels: Option<Labels>,
    /// Network to attach at creation.
    #[serde(default)]
    pub network: Option<u64>,
    /// Enable the public interface (default true).
    #[serde(default)]
    pub public_interface: Option<bool>,
    #[serde(default)]
    pub services: Option<Vec<ServiceRequest>>,
    #[serde(default)]
    pub targets: Option<Vec<TargetRequest>>,
}

/// `replace_*_request` schemas (name and labels).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateRequest {
    /// New name.
    #[serde(default)]
    pub name: Option<String>,
    /// New labels (replace all labels).
    #[serde(default)]
    pub labels: Option<Labels>,
}

/// `PUT /networks/{id}` body (`NetworkUpdateRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateNetworkRequest {
    /// New name.
    #[serde(default)]
    pub name: Option<String>,
    /// New labels (replace all labels).
    #[serde(default)]
    pub labels: Option<Labels>,
    /// Expose routes to the network's vSwitch.
    #[serde(default)]
    pub expose_routes_to_vswitch: Option<bool>,
}

/// `delete_subnet` and `change_ip_range` bodies (`DeleteSubnetRequest`, `ChangeIPRangeRequest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpRangeRequest {
    /// The subnet's range (`delete_subnet`) or the network's new range (`change_ip_range`).
    pub ip_range: String,
}

/// `change_protection` body of a server (`ChangeServerProtectionRequest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeServerProtectionRequest {
    /// Delete protection.
    #[serde(default)]
    pub delete: Option<bool>,
    /// Rebuild protection.
    #[serde(default)]
    pub rebuild: Option<bool>,
}

/// `attach_load_balancer_to_network_request` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachLoadBalancerToNetworkRequest {
    /// Network id.
    pub network: u64,
    /// Requested private IP.
    #[serde(default)]
    pub ip: Option<String>,
    /// Subnet range to take the IP from.
    #[serde(default)]
    pub ip_range: Option<String>,
}

/// `change_type_of_load_balancer_request` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeLoadBalancerTypeRequest {
    /// New type by name or id.
    pub load_balancer_type: IdOrName,
}

/// `change_reverse_dns_entry_for_this_load_balancer_request` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeDnsPtrRequest {
    /// Public IP of the load balancer.
    pub ip: String,
    /// New entry, `null` resets to the default. Required (it may be `null`).
    #[serde(deserialize_with = "Option::deserialize")]
    pub dns_ptr: Option<String>,
}

/// `change_*_protection_request` schemas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeProtectionRequest {
    /// Delete protection.
    #[serde(default)]
    pub delete: Option<bool>,
}

/// `create_primary_ip_request` schema (`assignee_type` optional since 2026-04-27).
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatePrimaryIpRequest {
    pub name: String,
    /// `ipv4` or `ipv6`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `server`; optional.
    #[serde(default)]
    pub assignee_type: Option<String>,
    /// Server to assign to at creation (not modelled by the fake).
    #[serde(default)]
    pub assignee_id: Option<u64>,
    /// Location by name or id (required when not assigned).
    #[serde(default)]
    pub location: Option<IdOrName>,
    /// Deleted with its server (default false).
    #[serde(default)]
    pub auto_delete: Option<bool>,
    #[serde(default)]
    pub labels: Option<Labels>,
}

/// `PUT /primary_ips/{id}` body (`PrimaryIPUpdateRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdatePrimaryIpRequest {
    /// New name.
    #[serde(default)]
    pub name: Option<String>,
    /// New labels (replace all labels).
    #[serde(default)]
    pub labels: Option<Labels>,
    /// Delete it with the server it is assigned to.
    #[serde(default)]
    pub auto_delete: Option<bool>,
}

/// `POST /primary_ips/{id}/actions/assign` body (`PrimaryIPActionsAssignRequest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignPrimaryIpRequest {
    /// The server to assign it to.
    pub assignee_id: u64,
    /// `server`, the only kind.
    pub assignee_type: String,
}

/// `create_certificate_request` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateCertificateRequest {
    pub name: String,
    /// `uploaded` (default) or `managed`.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// PEM certificate (uploaded).
    #[serde(default)]
    pub certificate: Option<String>,
    /// PEM private key (uploaded).
    #[serde(default)]
    pub private_key: Option<String>,
    /// Domain names (managed).
    #[serde(default)]
    pub domain_names: Option<Vec<String>>,
    #[serde(default)]
    pub labels: Option<Labels>,
}
