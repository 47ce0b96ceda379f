//! Server shapes (`server` schema and parts).
//!
//! `datacenter` is intentionally absent: the API removed it from servers in 2026.
//! The server's `location` is served instead.

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use serde::{Deserialize, Serialize};

use super::catalog::{Image, Location, ServerType};
use super::common::Labels;

/// Server status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerStatus {
    /// Running.
    Running,
    /// Being created.
    Initializing,
    /// Starting.
    Starting,
    /// Stopping.
    Stopping,
    /// Powered off.
    Off,
    /// Being deleted.
    Deleting,
    /// Being migrated.
    Migrating,
    /// Being rebuilt.
    Rebuilding,
    /// Unknown.
    Unknown,
}

impl ServerStatus {
    /// The wire name, e.g. `running`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Initializing => "initializing",
            Self::Starting => "starting",
            Self::Stopping => "stopping",
            Self::Off => "off",
            Self::Deleting => "deleting",
            Self::Migrating => "migrating",
            Self::Rebuilding => "rebuilding",
            Self::Unknown => "unknown",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => Self::Running,
            "initializing" => Self::Initializing,
            "starting" => Self::Starting,
            "stopping" => Self::Stopping,
            "off" => Self::Off,
            "deleting" => Self::Deleting,
            "migrating" => Self::Migrating,
            "rebuilding" => Self::Rebuilding,
            "unknown" => Self::Unknown,
            _ => return None,
        })
    }
}

/// `ipv4` schema (server public IPv4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ipv4 {
    /// Primary IP id.
    pub id: u64,
    /// Address.
    pub ip: String,
    /// Whether the IP is blocked.
    pub blocked: bool,
    /// Reverse DNS entry.
    pub dns_ptr: String,
}

/// `dns_ptr` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsPtr {
    /// Address.
    pub ip: String,
    /// Reverse DNS entry.
    pub dns_ptr: String,
}

/// `ipv6` schema (server public IPv6 network).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ipv6 {
    /// Primary IP id.
    pub id: u64,
    /// The /64 network in CIDR notation, e.g. `2001:db8:0:1::/64`.
    pub ip: String,
    /// Whether the IP is blocked.
    pub blocked: bool,
    /// Reverse DNS entries.
    pub dns_ptr: Option<Vec<DnsPtr>>,
}

/// `server_public_net` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPublicNet {
    /// Public IPv4, `null` when disabled.
    pub ipv4: Option<Ipv4>,
    /// Public IPv6 network, `null` when disabled.
    pub ipv6: Option<Ipv6>,
    /// Assigned floating IP ids.
    pub floating_ips: Vec<u64>,
    /// Firewalls applied to the public interface.
    #[serde(default)]
    pub firewalls: Vec<serde_json::Value>,
}

/// `server_private_net` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPrivateNet {
    /// Network id.
    pub network: u64,
    /// Primary private IP.
    pub ip: String,
    /// Additional alias IPs.
    pub alias_ips: Vec<String>,
    /// MAC address of the private interface.
    pub mac_address: String,
}

/// `server_protection` schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerProtection {
    /// Delete protection.
    pub delete: bool,
    /// Rebuild protection.
    pub rebuild: bool,
}

/// `server` schema (without the removed `datacenter`).
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Server {
    /// Server id.
    pub id: u64,
    pub name: String,
    pub status: ServerStatus,
    /// Creation time (RFC 3339).
    pub created: String,
    /// Public network configuration.
    pub public_net: ServerPublicNet,
    /// Private networks.
    pub private_net: Vec<ServerPrivateNet>,
    pub server_type: ServerType,
    pub location: Location,
    /// Image, `null` if unknown.
    pub image: Option<Image>,
    /// Attached ISO (always `null`).
    pub iso: Option<serde_json::Value>,
    /// Rescue mode.
    pub rescue_enabled: bool,
    /// Whether a running action locks the server.
    pub locked: bool,
    /// Backup window, `null` if backups are disabled.
    pub backup_window: Option<String>,
    /// Outbound traffic this month in bytes.
    pub outgoing_traffic: Option<u64>,
    /// Inbound traffic this month in bytes.
    pub ingoing_traffic: Option<u64>,
    /// Included traffic in bytes.
    pub included_traffic: Option<u64>,
    pub protection: ServerProtection,
    pub labels: Labels,
    /// Attached volume ids.
    pub volumes: Vec<u64>,
    /// Load balancers targeting this server.
    pub load_balancers: Vec<u64>,
    /// Primary disk size in GB.
    pub primary_disk_size: u64,
    /// Placement group (always `null`).
    pub placement_group: Option<serde_json::Value>,
}
