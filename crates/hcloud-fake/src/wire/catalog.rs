//! Catalogue shapes: locations, server types, load balancer types, images.

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use serde::{Deserialize, Serialize};

use super::common::{DeprecationInfo, Labels, PricePerTime, Protection};

/// `location` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    /// Location id.
    pub id: u64,
    /// Name, e.g. `fsn1`.
    pub name: String,
    pub description: String,
    /// ISO 3166-1 alpha-2 country code.
    pub country: String,
    pub city: String,
    pub latitude: f64,
    pub longitude: f64,
    /// Network zone, e.g. `eu-central`.
    pub network_zone: String,
}

/// CPU architecture (`architecture` schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Architecture {
    /// x86-64.
    X86,
    /// ARM64.
    Arm,
}

/// `server_type_location` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerTypeLocation {
    /// Location id.
    pub id: u64,
    /// Location name.
    pub name: String,
    /// Deprecation of the type in this location, or `null`.
    pub deprecation: Option<DeprecationInfo>,
    /// Whether the type can be ordered in this location now (API change of 2026-04-01;
    /// not in the OpenAPI file).
    pub available: bool,
    /// Whether the type is recommended in this location (API change of 2026-04-01).
    pub recommended: bool,
}

/// `server_type` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerType {
    /// Server type id.
    pub id: u64,
    /// Name, e.g. `cpx11`.
    pub name: String,
    pub description: String,
    /// Category, e.g. `cost_optimized`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Number of cores.
    pub cores: u32,
    /// Memory in GB.
    pub memory: f64,
    /// Disk size in GB. An integer on the wire, as the API sends it (the OpenAPI file only says
    /// `number`; hcloud-go decodes it into an `int` and fails on `40.0`).
    pub disk: u64,
    /// `shared` or `dedicated`.
    pub cpu_type: String,
    /// `local` or `network`.
    pub storage_type: String,
    /// CPU architecture.
    pub architecture: Architecture,
    /// Whether the type is deprecated.
    pub deprecated: Option<bool>,
    /// Deprecation details, `null` if not deprecated.
    pub deprecation: Option<DeprecationInfo>,
    /// Prices per location.
    pub prices: Vec<PricePerTime>,
    /// Locations the type is offered in.
    pub locations: Vec<ServerTypeLocation>,
}

/// `load_balancer_type` schema.
///
/// The schema calls the deprecation timestamp `deprecated`; the fake also serves a
/// `deprecation` object (`null` unless deprecated) like the server types do.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerType {
    /// Type id.
    pub id: u64,
    /// Name, e.g. `lb11`.
    pub name: String,
    pub description: String,
    /// Maximum number of simultaneous open connections.
    pub max_connections: u64,
    /// Maximum number of services.
    pub max_services: u64,
    /// Maximum number of targets.
    pub max_targets: u64,
    /// Maximum number of certificates assigned to one load balancer.
    pub max_assigned_certificates: u64,
    /// Deprecation timestamp (RFC 3339) or `null`.
    pub deprecated: Option<String>,
    /// Deprecation details or `null`.
    #[serde(default)]
    pub deprecation: Option<DeprecationInfo>,
    /// Prices per location.
    pub prices: Vec<PricePerTime>,
}

/// `image` schema (only system images are served, embedded in servers).
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// Image id.
    pub id: u64,
    /// `system`, `snapshot`, `backup` or `app`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `available`, `creating` or `unavailable`.
    pub status: String,
    /// Name, e.g. `ubuntu-24.04`.
    pub name: Option<String>,
    pub description: String,
    /// Size in GB (snapshots only).
    pub image_size: Option<f64>,
    /// Disk size in GB.
    pub disk_size: f64,
    /// Creation time (RFC 3339).
    pub created: String,
    /// Source server, `null` for system images.
    pub created_from: Option<serde_json::Value>,
    /// Server the image is bound to, `null` for system images.
    pub bound_to: Option<u64>,
    /// `alma`, `centos`, `debian`, `fedora`, `opensuse`, `rocky`, `ubuntu` or `unknown`.
    pub os_flavor: String,
    /// Operating system version, e.g. `24.04`, or `null`.
    pub os_version: Option<String>,
    /// Whether rapid deploy is available.
    pub rapid_deploy: bool,
    pub protection: Protection,
    /// Deprecation timestamp or `null`.
    pub deprecated: Option<String>,
    /// Deletion timestamp or `null`.
    pub deleted: Option<String>,
    pub labels: Labels,
    pub architecture: Architecture,
}
