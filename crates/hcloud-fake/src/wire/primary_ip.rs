//! Primary IP shapes (`primary_ip` schema, as the API serves it today).
//!
//! `datacenter` is absent (removed from the API on 2026-07-01; `location` is served) and
//! `assignee_type` reads `unassigned` for a Primary IP that is not assigned (2026-08-01).

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use serde::{Deserialize, Serialize};

use super::catalog::Location;
use super::common::{Labels, Protection};
use super::server::DnsPtr;

/// `primary_ip` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrimaryIp {
    /// Primary IP id.
    pub id: u64,
    pub name: String,
    /// The address (IPv4) or the /64 network (IPv6).
    pub ip: String,
    /// `ipv4` or `ipv6`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The server it is assigned to, `null` if unassigned.
    pub assignee_id: Option<u64>,
    /// `server`, or `unassigned`.
    pub assignee_type: String,
    /// Deleted together with its server.
    pub auto_delete: bool,
    /// Whether the IP is blocked.
    pub blocked: bool,
    /// Creation time (RFC 3339).
    pub created: String,
    /// Reverse DNS entries.
    pub dns_ptr: Vec<DnsPtr>,
    pub labels: Labels,
    pub location: Location,
    pub protection: Protection,
}
