//! Types of the control surface.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::TokenPolicy;
use crate::rate_limit::RateLimitConfig;
use crate::wire::{Action, Certificate, Labels, LoadBalancer, Network, Server, ServerStatus};

/// Kinds of resources that can be locked and that actions refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// A server.
    Server,
    /// A network.
    Network,
    /// A load balancer.
    LoadBalancer,
    /// A certificate.
    Certificate,
    /// A Primary IP.
    PrimaryIp,
}

impl ResourceKind {
    /// The wire name (`server`, `network`, `load_balancer`, `certificate`, `primary_ip`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Server => "server",
            Self::Network => "network",
            Self::LoadBalancer => "load_balancer",
            Self::Certificate => "certificate",
            Self::PrimaryIp => "primary_ip",
        }
    }
}

/// A resource by kind and id: `{"type":"server","id":10000001}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceRef {
    /// Which collection the id belongs to (the JSON `type`, e.g. `server`).
    #[serde(rename = "type")]
    pub kind: ResourceKind,
    /// The resource's id within that collection.
    pub id: u64,
}

impl ResourceRef {
    /// A server.
    pub fn server(id: u64) -> Self {
        Self { kind: ResourceKind::Server, id }
    }
    /// A network.
    pub fn network(id: u64) -> Self {
        Self { kind: ResourceKind::Network, id }
    }
    /// A load balancer.
    pub fn load_balancer(id: u64) -> Self {
        Self { kind: ResourceKind::LoadBalancer, id }
    }
    /// A certificate.
    pub fn certificate(id: u64) -> Self {
        Self { kind: ResourceKind::Certificate, id }
    }
    /// A Primary IP.
    pub fn primary_ip(id: u64) -> Self {
        Self { kind: ResourceKind::PrimaryIp, id }
    }
}

fn one() -> u32 {
    1
}

fn default_failure_code() -> String {
    "action_failed".to_owned()
}

/// Makes the next `count` actions (optionally only those with `command`) end in `error`.
///
/// JSON: `{"count":1,"command":"add_target","code":"action_failed","message":"..."}`;
/// all fields but none are required (`count` 1, any command, code `action_failed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionFailure {
    /// How many actions fail (default 1).
    #[serde(default = "one")]
    pub count: u32,
    /// Only actions with this command (e.g. `add_target`); `None` = any.
    #[serde(default)]
    pub command: Option<String>,
    /// Error code of the failed action (default `action_failed`).
    #[serde(default = "default_failure_code")]
    pub code: String,
    /// Error message.
    #[serde(default)]
    pub message: String,
}

impl ActionFailure {
    /// The next `count` actions with `command` (or any) fail with `code`.
    pub fn new(count: u32, command: Option<&str>, code: &str) -> Self {
        Self {
            count,
            command: command.map(str::to_owned),
            code: code.to_owned(),
            message: format!("injected action failure: {code}"),
        }
    }
}

/// Instant changes to a server (`PATCH /_fake/servers/{id}`). Absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPatch {
    /// New name.
    #[serde(default)]
    pub name: Option<String>,
    /// New status.
    #[serde(default)]
    pub status: Option<ServerStatus>,
    /// New labels (replace all).
    #[serde(default)]
    pub labels: Option<Labels>,
    /// A different public IPv6 network (or none), as unassigning the server's IPv6 Primary IP
    /// and assigning another would do; the fake records the `unassign_primary_ip` and
    /// `assign_primary_ip` actions the API shows for that, finished at once.
    #[serde(default)]
    pub public_ipv6: Option<PublicIpv6Change>,
}

/// How [`ServerPatch::public_ipv6`] changes a server's public IPv6 network. Each change gives
/// the server a new IPv6 Primary IP (new id, no rDNS entries); the old network is released (as
/// if its Primary IP were deleted) and handed out again later.
///
/// JSON: `"next"`, `"remove"` or `{"net": "2001:db8:ff::/64"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PublicIpv6Change {
    /// The pool's next free /64, never the server's current one (a server without IPv6 gets one).
    Next,
    /// No public IPv6 any more (`public_net.ipv6` becomes `null`).
    Remove,
    /// This /64 (a bare address means its /64); `ip_not_available` if another resource has it.
    Net(String),
}

/// Sets (or clears) the health a load balancer reports for one target
/// (`PUT /_fake/load_balancers/{id}/target_health`).
///
/// JSON: `{"server": 10000001, "listen_port": 443, "status": "unhealthy"}` or
/// `{"ip": "203.0.113.5", "status": "healthy"}`; exactly one of `server` and `ip`. Without
/// `listen_port` it applies to every service; `status` `null` (or absent) removes what was
/// set, so the target reports its default again (`healthy` while its server runs,
/// `unhealthy` otherwise, `unknown` for IP targets). A server selected by a label selector
/// target is addressed by its `server` id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetHealthOverride {
    /// A server target (or a server selected by a label selector).
    #[serde(default)]
    pub server: Option<u64>,
    /// An IP target.
    #[serde(default)]
    pub ip: Option<String>,
    /// One service's listen port; `None` for all services.
    #[serde(default)]
    pub listen_port: Option<u16>,
    /// `healthy`, `unhealthy` or `unknown`; `None` clears.
    #[serde(default)]
    pub status: Option<String>,
}

impl TargetHealthOverride {
    /// `status` for a server on every service.
    pub fn server(id: u64, status: &str) -> Self {
        Self { server: Some(id), status: Some(status.to_owned()), ..Self::default() }
    }

    /// Only for the service listening on `port`.
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.listen_port = Some(port);
        self
    }
}

/// Everything the fake holds, as the API would serve it. Sorted by id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateSnapshot {
    /// Servers (with public and private networks), as `GET /servers` would serve them.
    pub servers: Vec<Server>,
    /// Networks (with routes).
    pub networks: Vec<Network>,
    /// Load balancers (with services, targets, private networks).
    pub load_balancers: Vec<LoadBalancer>,
    /// Certificates (uploaded and managed), as `GET /certificates` would serve them.
    pub certificates: Vec<Certificate>,
    /// All actions ever started.
    pub actions: Vec<Action>,
}

/// Request counters of `/v1`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestCounts {
    /// All counted requests.
    pub total: u64,
    /// Per endpoint: `"<METHOD> <path template>"`, e.g. `"GET /v1/servers/{id}"`.
    pub by_endpoint: BTreeMap<String, u64>,
}

impl RequestCounts {
    /// The count of one endpoint key (0 if never called).
    pub fn get(&self, endpoint: &str) -> u64 {
        self.by_endpoint.get(endpoint).copied().unwrap_or(0)
    }
}

/// One logged `/v1` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Method, e.g. `GET`.
    pub method: String,
    /// Path as requested, e.g. `/v1/servers/10000001`.
    pub path: String,
    /// Counter key, e.g. `GET /v1/servers/{id}`.
    pub endpoint: String,
    /// Raw query string, if any.
    pub query: Option<String>,
    /// Response status.
    pub status: u16,
    /// Error code if the response was an error envelope produced by the fake.
    pub error_code: Option<String>,
    /// Arrival time (RFC 3339 with milliseconds, UTC).
    pub timestamp: String,
    /// Arrival time in unix milliseconds.
    pub unix_ms: i64,
    /// Time to answer, in milliseconds.
    pub latency_ms: f64,
    /// The `X-Correlation-Id` of the response.
    pub correlation_id: String,
    /// Whose request it was: [`token_fingerprint`] of the bearer token (`None` without one).
    /// Never the token itself.
    #[serde(default)]
    pub token_fingerprint: Option<String>,
    /// The injected fault that answered, e.g. `error locked`, `html 502`,
    /// `reset before_response`, `reset mid_body`, `latency`; `None` if no fault matched.
    /// For a reset before the response `status` is 0 (the client got no status).
    #[serde(default)]
    pub fault: Option<String>,
    /// When a fault ran the handler and then answered something else ("applied, but the
    /// answer was lost"): the status the handler produced (its change took effect).
    #[serde(default)]
    pub handler_status: Option<u16>,
}

/// A short, stable, non-reversible name for a bearer token: `tok-` and the first 8 hex
/// digits of its SHA-256, e.g. `tok-1a2b3c4d`. Tests running several clients with different
/// tokens compute it for their token and filter the request log by it.
pub fn token_fingerprint(token: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    let prefix: String = digest.as_ref()[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("tok-{prefix}")
}

/// Current runtime settings (`GET /_fake/config`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Action delay in milliseconds.
    pub action_delay_ms: u64,
    /// How long finished actions are kept, in milliseconds.
    pub action_retention_ms: u64,
    /// The API's rate-limit token bucket (capacity, refill per second).
    pub rate_limit: RateLimitConfig,
    /// Which bearer tokens `/v1` accepts (all non-empty ones by default).
    pub token_policy: TokenPolicy,
}

#[cfg(test)]
mod tests {
    use super::token_fingerprint;

    #[test]
    fn token_fingerprint_is_the_sha256_prefix() {
        // SHA-256("abc") = ba7816bf 8f01cfea ... (FIPS 180-2, appendix B.1).
        assert_eq!(token_fingerprint("abc"), "tok-ba7816bf");
        // SHA-256("") = e3b0c442 98fc1c14 ...
        assert_eq!(token_fingerprint(""), "tok-e3b0c442");
    }
}
