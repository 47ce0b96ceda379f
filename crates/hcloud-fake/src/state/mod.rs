//! The in-memory state of one fake: resources, actions, locks and id counters.
//!
//! All mutations go through [`State`] methods, which validate like the API and return
//! [`ApiError`]s. Each resource kind lives in its own submodule. Actions are settled lazily:
//! [`State::settle`] finishes every action whose due time has passed and applies (or, on an
//! injected failure, discards) its effect; it runs at the start of every request and every
//! library call, so no background timer exists.
//!
//! Locking: a resource is locked while it is the *first* resource of a running action (the
//! resource the action was started on) or while a test locked it explicitly. Mutations of a
//! locked resource (POST actions, PUT, DELETE) answer `423 locked`; GETs always work.
//!
//! Referenced resources: a missing resource in the path answers `404 not_found`; a missing
//! resource referenced in the body (e.g. `network` of `attach_to_network`) answers
//! `400 invalid_input` naming the field.

mod actions;
mod certificates;
mod ipam;
mod load_balancers;
mod networks;
mod servers;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use ipnet::{Ipv4Net, Ipv6Net};

pub(crate) use actions::Effect;
pub(crate) use load_balancers::TargetRecord;

use crate::control::{ActionFailure, ResourceKind, ResourceRef, StateSnapshot};
use crate::error::ApiError;
use crate::label_selector::LabelSelector;
use crate::wire::{
    ActionError, ActionStatus, Image, Labels, LoadBalancerType, Location, Protection, ServerProtection, ServerStatus,
    ServerType, Service,
};

/// First ids of each kind (distinct ranges catch id mix-ups).
pub(crate) mod first_id {
    /// Servers.
    pub const SERVER: u64 = 10_000_001;
    /// Networks.
    pub const NETWORK: u64 = 20_001;
    /// Load balancers.
    pub const LOAD_BALANCER: u64 = 30_001;
    /// Certificates.
    pub const CERTIFICATE: u64 = 40_001;
    /// Primary IPs (ids of public IPv4/IPv6 objects).
    pub const PRIMARY_IP: u64 = 50_000_001;
    /// Actions.
    pub const ACTION: u64 = 1_000_001;
}

#[derive(Debug)]
struct Ids {
    server: u64,
    network: u64,
    load_balancer: u64,
    certificate: u64,
    primary_ip: u64,
    action: u64,
    mac: u64,
}

impl Default for Ids {
    fn default() -> Self {
        Self {
            server: first_id::SERVER,
            network: first_id::NETWORK,
            load_balancer: first_id::LOAD_BALANCER,
            certificate: first_id::CERTIFICATE,
            primary_ip: first_id::PRIMARY_IP,
            action: first_id::ACTION,
            mac: 1,
        }
    }
}

fn bump(counter: &mut u64) -> u64 {
    let id = *counter;
    *counter += 1;
    id
}

/// A server's public IPv4.
#[derive(Debug, Clone)]
pub(crate) struct PublicV4 {
    pub id: u64,
    pub ip: Ipv4Addr,
    pub dns_ptr: String,
}

/// A server's public IPv6 network.
#[derive(Debug, Clone)]
pub(crate) struct PublicV6 {
    pub id: u64,
    pub net: Ipv6Net,
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
    pub domain_names: Vec<String>,
    pub fingerprint: Option<String>,
    pub not_valid_before: Option<i64>,
    pub not_valid_after: Option<i64>,
    pub status: Option<CertStatus>,
    pub labels: Labels,
    pub created: i64,
}

/// An action.
#[derive(Debug, Clone)]
pub(crate) struct ActionRecord {
    pub id: u64,
    pub command: String,
    pub status: ActionStatus,
    pub progress: u8,
    pub started: i64,
    pub finished: Option<i64>,
    pub resources: Vec<ResourceRef>,
    pub error: Option<ActionError>,
    pub due: Instant,
    pub effect: Option<Effect>,
    pub fail: Option<ActionError>,
}

/// The whole state of a fake.
#[derive(Debug)]
pub(crate) struct State {
    pub action_delay: Duration,
    ids: Ids,
    pub servers: BTreeMap<u64, ServerRecord>,
    pub networks: BTreeMap<u64, NetworkRecord>,
    pub load_balancers: BTreeMap<u64, LoadBalancerRecord>,
    pub certificates: BTreeMap<u64, CertificateRecord>,
    pub actions: BTreeMap<u64, ActionRecord>,
    running: BTreeSet<u64>,
    manual_locks: BTreeSet<ResourceRef>,
    action_failures: Vec<ActionFailure>,
    public_ips: ipam::PublicIps,
}

impl State {
    /// An empty state.
    pub fn new(action_delay: Duration) -> Self {
        Self {
            action_delay,
            ids: Ids::default(),
            servers: BTreeMap::new(),
            networks: BTreeMap::new(),
            load_balancers: BTreeMap::new(),
            certificates: BTreeMap::new(),
            actions: BTreeMap::new(),
            running: BTreeSet::new(),
            manual_locks: BTreeSet::new(),
            action_failures: Vec::new(),
            public_ips: ipam::PublicIps::default(),
        }
    }

    /// Locks a resource for tests.
    pub fn lock(&mut self, r: ResourceRef) {
        self.manual_locks.insert(r);
    }

    /// Removes a test lock.
    pub fn unlock(&mut self, r: ResourceRef) {
        self.manual_locks.remove(&r);
    }

    /// Whether mutations of the resource answer `locked`.
    pub fn is_locked(&self, kind: ResourceKind, id: u64) -> bool {
        let r = ResourceRef { kind, id };
        self.manual_locks.contains(&r)
            || self
                .running
                .iter()
                .any(|a| self.actions.get(a).and_then(|a| a.resources.first()).is_some_and(|first| *first == r))
    }

    /// `Err(locked)` if the resource is locked.
    pub fn ensure_unlocked(&self, kind: ResourceKind, id: u64) -> Result<(), ApiError> {
        if self.is_locked(kind, id) { Err(ApiError::locked(kind.as_str(), id)) } else { Ok(()) }
    }

    /// A snapshot of everything.
    pub fn snapshot(&self) -> StateSnapshot {
        StateSnapshot {
            servers: self.servers.values().map(|s| self.render_server(s)).collect(),
            networks: self.networks.values().map(|n| self.render_network(n)).collect(),
            load_balancers: self.load_balancers.values().map(|l| self.render_load_balancer(l)).collect(),
            certificates: self.certificates.values().map(|c| self.render_certificate(c)).collect(),
            actions: self.actions.values().map(render_action).collect(),
        }
    }

    fn next_primary_ip_id(&mut self) -> u64 {
        bump(&mut self.ids.primary_ip)
    }

    fn next_mac(&mut self) -> String {
        let n = bump(&mut self.ids.mac);
        format!("86:00:00:{:02x}:{:02x}:{:02x}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
    }
}

pub(crate) use actions::render_action;

/// Validates labels like the API (`labels` schema patterns).
pub(crate) fn validate_labels(labels: &Labels) -> Result<(), ApiError> {
    for (k, v) in labels {
        let probe = format!("{k}={v}");
        if LabelSelector::parse(&probe).is_err() || k.contains(['=', '!', ' ', ',']) {
            return Err(ApiError::invalid_input("labels", format!("invalid label '{k}': '{v}'")));
        }
    }
    Ok(())
}

/// Checks a resource name: non-empty, at most 63 characters, no whitespace.
pub(crate) fn validate_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty() || name.len() > 63 || name.contains(char::is_whitespace) {
        return Err(ApiError::invalid_input("name", "name must be 1-63 characters without whitespace"));
    }
    Ok(())
}

/// Parses an IPv4 address or answers `invalid_input` naming `field`.
pub(crate) fn parse_ipv4(field: &str, s: &str) -> Result<Ipv4Addr, ApiError> {
    s.parse().map_err(|_| ApiError::invalid_input(field, format!("'{s}' is not a valid IPv4 address")))
}

/// Parses an IPv4 CIDR (host bits must be zero) or answers `invalid_input` naming `field`.
pub(crate) fn parse_ipv4_net(field: &str, s: &str) -> Result<Ipv4Net, ApiError> {
    let net: Ipv4Net =
        s.parse().map_err(|_| ApiError::invalid_input(field, format!("'{s}' is not a valid IPv4 CIDR")))?;
    if net.trunc() != net {
        return Err(ApiError::invalid_input(field, format!("'{s}' has host bits set; expected '{}'", net.trunc())));
    }
    Ok(net)
}

pub(crate) use certificates::CertificateFilter;
pub(crate) use load_balancers::LoadBalancerFilter;
pub(crate) use networks::NetworkFilter;
pub(crate) use servers::ServerFilter;
