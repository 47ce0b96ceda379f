//! The records the state keeps per resource (the served shapes are rendered from them).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

use crate::label_selector::LabelSelector;
use crate::wire::{
    ActionError, Image, Labels, LoadBalancerType, Location, Protection, ServerProtection, ServerStatus, ServerType,
    Service,
};

/// What a Primary IP carries besides its address (`PUT /primary_ips/{id}` changes it).
#[derive(Debug, Clone)]
pub(crate) struct PrimaryIpMeta {
    pub name: String,
    pub labels: Labels,
    pub auto_delete: bool,
}

impl PrimaryIpMeta {
    /// The Primary IP the API creates with a server: `primary_ip-<id>`, no labels, deleted
    /// with the server.
    pub fn of_server(id: u64) -> Self {
        Self { name: format!("primary_ip-{id}"), labels: Labels::new(), auto_delete: true }
    }
}

/// A server's public IPv4 (its Primary IP).
#[derive(Debug, Clone)]
pub(crate) struct PublicV4 {
    pub id: u64,
    pub ip: Ipv4Addr,
    pub dns_ptr: String,
    pub meta: PrimaryIpMeta,
}

/// A server's public IPv6 network (its Primary IP).
#[derive(Debug, Clone)]
pub(crate) struct PublicV6 {
    pub id: u64,
    pub net: Ipv6Net,
    pub meta: PrimaryIpMeta,
    /// Reverse DNS entries of addresses in the network (none by default).
    pub dns_ptrs: BTreeMap<Ipv6Addr, String>,
}

/// A server's private interface.
#[derive(Debug, Clone)]
pub(crate) struct PrivateNic {
    pub network: u64,
    pub ip: Ipv4Addr,
    pub alias_ips: Vec<Ipv4Addr>,
    pub mac: String,
}

/// A server.
#[derive(Debug, Clone)]
pub(crate) struct ServerRecord {
    pub id: u64,
    pub name: String,
    pub status: ServerStatus,
    pub created: i64,
    pub server_type: &'static ServerType,
    pub location: &'static Location,
    pub image: Option<&'static Image>,
    pub labels: Labels,
    pub ipv4: Option<PublicV4>,
    pub ipv6: Option<PublicV6>,
    pub private_net: Vec<PrivateNic>,
    pub protection: ServerProtection,
}

/// What holds a private IP of a network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Member {
    /// A server's primary private IP.
    Server(u64),
    /// A server's alias IP.
    Alias(u64),
    /// A load balancer's private IP.
    LoadBalancer(u64),
    /// Reserved by a running attach action.
    Reserved(u64),
}

/// A subnet.
#[derive(Debug, Clone)]
pub(crate) struct SubnetRecord {
    pub kind: String,
    pub ip_range: Ipv4Net,
    pub zone: String,
    pub vswitch_id: Option<u64>,
}

/// A route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RouteRecord {
    pub destination: Ipv4Net,
    pub gateway: Ipv4Addr,
}

/// A network.
#[derive(Debug, Clone)]
pub(crate) struct NetworkRecord {
    pub id: u64,
    pub name: String,
    pub ip_range: Ipv4Net,
    pub subnets: Vec<SubnetRecord>,
    pub routes: Vec<RouteRecord>,
    pub labels: Labels,
    pub protection: Protection,
    pub created: i64,
    pub expose_routes_to_vswitch: bool,
    /// Private IPs in use.
    pub members: BTreeMap<Ipv4Addr, Member>,
}

/// A load balancer.
#[derive(Debug, Clone)]
pub(crate) struct LoadBalancerRecord {
    pub id: u64,
    pub name: String,
    pub lb_type: &'static LoadBalancerType,
    pub location: &'static Location,
    pub labels: Labels,
    pub created: i64,
    pub algorithm: String,
    pub public_enabled: bool,
    pub ipv4: Ipv4Addr,
    pub ipv4_dns_ptr: String,
    pub ipv6_net: Ipv6Net,
    pub ipv6: Ipv6Addr,
    pub ipv6_dns_ptr: String,
    pub private_net: Vec<(u64, Ipv4Addr)>,
    pub services: Vec<Service>,
    pub targets: Vec<TargetRecord>,
    pub protection: Protection,
}

/// Issuance status of a managed certificate.
#[derive(Debug, Clone)]
pub(crate) struct CertStatus {
    pub issuance: String,
    pub renewal: String,
    pub error: Option<ActionError>,
}

/// A certificate.
#[derive(Debug, Clone)]
pub(crate) struct CertificateRecord {
    pub id: u64,
    pub name: String,
    pub managed: bool,
    pub certificate: Option<String>,
    /// The private key (PEM) of an uploaded or issued certificate: never rendered, used by the
    /// data plane to terminate TLS for `https` services.
    pub private_key: Option<String>,
    pub domain_names: Vec<String>,
    pub fingerprint: Option<String>,
    pub not_valid_before: Option<i64>,
    pub not_valid_after: Option<i64>,
    pub status: Option<CertStatus>,
    pub labels: Labels,
    pub created: i64,
}

/// A target of a load balancer.
#[derive(Debug, Clone)]
pub(crate) enum TargetRecord {
    /// A server.
    Server { id: u64, use_private_ip: bool },
    /// An IP address.
    Ip { ip: String },
    /// All servers matching a selector.
    LabelSelector { selector: LabelSelector, use_private_ip: bool },
}

impl TargetRecord {
    /// Whether both describe the same target (ignoring `use_private_ip`).
    pub fn same_target(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Server { id: a, .. }, Self::Server { id: b, .. }) => a == b,
            (Self::Ip { ip: a }, Self::Ip { ip: b }) => a == b,
            (Self::LabelSelector { selector: a, .. }, Self::LabelSelector { selector: b, .. }) => {
                a.to_string() == b.to_string()
            }
            _ => false,
        }
    }
}

/// A target whose health a test can set: a server (also when selected by a label selector)
/// or an IP.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum HealthKey {
    /// A server.
    Server(u64),
    /// An IP target.
    Ip(String),
}

impl HealthKey {
    /// `(server, ip)` as the control surface shows a target: one of them set.
    pub(crate) fn server_and_ip(&self) -> (Option<u64>, Option<String>) {
        match self {
            HealthKey::Server(id) => (Some(*id), None),
            HealthKey::Ip(ip) => (None, Some(ip.clone())),
        }
    }
}

/// The address of an unassigned Primary IP.
#[derive(Debug, Clone)]
pub(crate) enum PrimaryIpAddr {
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// An IPv6 /64.
    V6(Ipv6Net),
}

/// An unassigned Primary IP (those of servers are derived from the servers).
#[derive(Debug, Clone)]
pub(crate) struct PrimaryIpRecord {
    pub id: u64,
    pub addr: PrimaryIpAddr,
    pub location: Location,
    pub created: i64,
    pub meta: PrimaryIpMeta,
}
