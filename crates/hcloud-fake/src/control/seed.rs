//! Seed data: resources created instantly (no actions) for tests and the sandbox.
//!
//! A seed file for `hcloud-fake --seed FILE` is one JSON [`Seed`] object:
//!
//! ```json
//! {
//!   "networks": [{"name": "k8s", "ip_range": "10.0.0.0/8",
//!                 "subnets": [{"ip_range": "10.0.0.0/24", "network_zone": "eu-central"}],
//!                 "labels": {"env": "dev"}}],
//!   "servers": [{"name": "cp-1", "server_type": "cpx11", "location": "fsn1",
//!                "labels": {"role": "control-plane"},
//!                "networks": [{"network": "k8s", "ip": "10.0.0.2"}]}],
//!   "server_batches": [{"prefix": "worker-", "count": 3, "server_type": "cx23",
//!                       "networks": ["k8s"]}],
//!   "certificates": [{"name": "web", "type": "uploaded", "domain_names": ["example.com"]}],
//!   "load_balancers": [{"name": "lb-1", "load_balancer_type": "lb11", "location": "fsn1",
//!                       "network": "k8s",
//!                       "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080}],
//!                       "targets": [{"type": "server", "server": {"id": 10000001}, "use_private_ip": true}]}]
//! }
//! ```
//!
//! They are applied in the order networks, servers, server batches, certificates, load
//! balancers. Networks are referenced by id or by name. All fields except names (and the
//! network `ip_range`, batch `prefix`/`count`) have defaults: server type `cx23`, location
//! `fsn1`, image `ubuntu-24.04`, status `running`, public IPv4 and IPv6 enabled, subnet
//! type `cloud` in `eu-central`, load balancer type `lb11`, algorithm `round_robin`.

use serde::{Deserialize, Serialize};

use crate::wire::request::{ServiceRequest, TargetRequest};
use crate::wire::{Labels, Route, ServerStatus};

/// A network by id or by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NetworkRef {
    /// By id.
    Id(u64),
    /// By name.
    Name(String),
}

impl From<u64> for NetworkRef {
    fn from(id: u64) -> Self {
        Self::Id(id)
    }
}

impl From<&str> for NetworkRef {
    fn from(name: &str) -> Self {
        Self::Name(name.to_owned())
    }
}

fn cloud() -> String {
    "cloud".to_owned()
}
fn eu_central() -> String {
    "eu-central".to_owned()
}
fn cx23() -> String {
    "cx23".to_owned()
}
fn fsn1() -> String {
    "fsn1".to_owned()
}
fn ubuntu() -> String {
    "ubuntu-24.04".to_owned()
}
fn lb11() -> String {
    "lb11".to_owned()
}
fn round_robin() -> String {
    "round_robin".to_owned()
}
fn uploaded() -> String {
    "uploaded".to_owned()
}
fn running() -> ServerStatus {
    ServerStatus::Running
}
fn yes() -> bool {
    true
}
fn one() -> u32 {
    1
}

/// A subnet of a seeded network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedSubnet {
    /// `cloud` (default), `server` or `vswitch`.
    #[serde(rename = "type", default = "cloud")]
    pub kind: String,
    /// Subnet range (CIDR) inside the network range.
    pub ip_range: String,
    /// Network zone (default `eu-central`).
    #[serde(default = "eu_central")]
    pub network_zone: String,
}

/// A seeded network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedNetwork {
    /// Name (unique).
    pub name: String,
    /// IP range (CIDR, RFC 1918).
    pub ip_range: String,
    /// Subnets, validated like `POST /networks` does (each a /30 or larger inside `ip_range`,
    /// no overlaps).
    #[serde(default)]
    pub subnets: Vec<SeedSubnet>,
    /// Routes (gateway must be inside the range; not checked against servers).
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Hetzner labels (key → value) the network is created with; list calls filter on them
    /// with `label_selector`.
    #[serde(default)]
    pub labels: Labels,
    /// Delete protection.
    #[serde(default)]
    pub protection_delete: bool,
}

impl SeedNetwork {
    /// A network without subnets.
    pub fn new(name: &str, ip_range: &str) -> Self {
        Self {
            name: name.to_owned(),
            ip_range: ip_range.to_owned(),
            subnets: Vec::new(),
            routes: Vec::new(),
            labels: Labels::new(),
            protection_delete: false,
        }
    }

    /// Adds a `cloud` subnet.
    #[must_use]
    pub fn subnet(mut self, ip_range: &str, network_zone: &str) -> Self {
        self.subnets.push(SeedSubnet {
            kind: cloud(),
            ip_range: ip_range.to_owned(),
            network_zone: network_zone.to_owned(),
        });
        self
    }

    /// Adds a label.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }
}

/// A network attachment of a seeded server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedServerNetwork {
    /// The network to attach to, by id or name; it must be seeded before the server.
    pub network: NetworkRef,
    /// Fixed private IP (otherwise the next free one).
    #[serde(default)]
    pub ip: Option<String>,
    /// Extra private IPv4s of the server in that network, besides `ip` (empty: none).
    #[serde(default)]
    pub alias_ips: Vec<String>,
}

/// A seeded server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedServer {
    /// Name (unique).
    pub name: String,
    /// Server type (default `cx23`).
    #[serde(default = "cx23")]
    pub server_type: String,
    /// Location (default `fsn1`).
    #[serde(default = "fsn1")]
    pub location: String,
    /// Image (default `ubuntu-24.04`).
    #[serde(default = "ubuntu")]
    pub image: String,
    /// Status (default `running`).
    #[serde(default = "running")]
    pub status: ServerStatus,
    /// Hetzner labels (key → value) the server is created with; list calls filter on them
    /// with `label_selector`.
    #[serde(default)]
    pub labels: Labels,
    /// Assign a public IPv4 (default true).
    #[serde(default = "yes")]
    pub enable_ipv4: bool,
    /// Assign a public IPv6 /64 (default true).
    #[serde(default = "yes")]
    pub enable_ipv6: bool,
    /// Fixed public IPv4 (otherwise allocated from 198.18.0.0/15).
    #[serde(default)]
    pub public_ipv4: Option<String>,
    /// Fixed public IPv6 /64, e.g. `2001:db8:ff::/64` (otherwise allocated from 2001:db8::/32).
    #[serde(default)]
    pub public_ipv6: Option<String>,
    /// Private networks.
    #[serde(default)]
    pub networks: Vec<SeedServerNetwork>,
    /// Delete protection.
    #[serde(default)]
    pub protection_delete: bool,
}

impl SeedServer {
    /// A running `cx23` in `fsn1` with public IPv4 and IPv6.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            server_type: cx23(),
            location: fsn1(),
            image: ubuntu(),
            status: ServerStatus::Running,
            labels: Labels::new(),
            enable_ipv4: true,
            enable_ipv6: true,
            public_ipv4: None,
            public_ipv6: None,
            networks: Vec::new(),
            protection_delete: false,
        }
    }

    /// Attaches to a network with the next free IP.
    #[must_use]
    pub fn network(mut self, network: impl Into<NetworkRef>) -> Self {
        self.networks.push(SeedServerNetwork { network: network.into(), ip: None, alias_ips: Vec::new() });
        self
    }

    /// Attaches to a network with a fixed IP.
    #[must_use]
    pub fn network_ip(mut self, network: impl Into<NetworkRef>, ip: &str) -> Self {
        self.networks.push(SeedServerNetwork {
            network: network.into(),
            ip: Some(ip.to_owned()),
            alias_ips: Vec::new(),
        });
        self
    }

    /// Sets the status.
    #[must_use]
    pub fn status(mut self, status: ServerStatus) -> Self {
        self.status = status;
        self
    }

    /// Sets the server type.
    #[must_use]
    pub fn server_type(mut self, server_type: &str) -> Self {
        self.server_type = server_type.to_owned();
        self
    }

    /// Sets the location.
    #[must_use]
    pub fn location(mut self, location: &str) -> Self {
        self.location = location.to_owned();
        self
    }

    /// Adds a label.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }
}

/// Many servers named `{prefix}{start}` .. `{prefix}{start+count-1}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedServerBatch {
    /// Name prefix, e.g. `worker-`.
    pub prefix: String,
    /// Number of servers.
    pub count: u32,
    /// First index (default 1).
    #[serde(default = "one")]
    pub start: u32,
    /// Server type (default `cx23`).
    #[serde(default = "cx23")]
    pub server_type: String,
    /// Location (default `fsn1`).
    #[serde(default = "fsn1")]
    pub location: String,
    /// Image (default `ubuntu-24.04`).
    #[serde(default = "ubuntu")]
    pub image: String,
    /// Status (default `running`).
    #[serde(default = "running")]
    pub status: ServerStatus,
    /// Labels of every server.
    #[serde(default)]
    pub labels: Labels,
    /// Networks every server is attached to (next free IP).
    #[serde(default)]
    pub networks: Vec<NetworkRef>,
}

impl SeedServerBatch {
    /// `count` running `cx23` servers in `fsn1`.
    pub fn new(prefix: &str, count: u32) -> Self {
        Self {
            prefix: prefix.to_owned(),
            count,
            start: 1,
            server_type: cx23(),
            location: fsn1(),
            image: ubuntu(),
            status: ServerStatus::Running,
            labels: Labels::new(),
            networks: Vec::new(),
        }
    }
}

/// A seeded load balancer (services and targets are validated like the API does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedLoadBalancer {
    /// Name (unique).
    pub name: String,
    /// Type (default `lb11`).
    #[serde(default = "lb11")]
    pub load_balancer_type: String,
    /// Location (default `fsn1`).
    #[serde(default = "fsn1")]
    pub location: String,
    /// Hetzner labels (key → value) the load balancer is created with (e.g. the CCM's
    /// `hcloud-ccm/service-uid` ownership label).
    #[serde(default)]
    pub labels: Labels,
    /// Algorithm (default `round_robin`).
    #[serde(default = "round_robin")]
    pub algorithm: String,
    /// Network to attach.
    #[serde(default)]
    pub network: Option<NetworkRef>,
    /// Fixed private IP in that network.
    #[serde(default)]
    pub ip: Option<String>,
    /// Public interface enabled (default true).
    #[serde(default = "yes")]
    pub public_interface: bool,
    /// Services (listen port → destination port, health check, ...), as the `add_service`
    /// action takes them.
    #[serde(default)]
    pub services: Vec<ServiceRequest>,
    /// Targets (servers, label selectors, IPs), as the `add_target` action takes them.
    #[serde(default)]
    pub targets: Vec<TargetRequest>,
    /// Delete protection.
    #[serde(default)]
    pub protection_delete: bool,
}

impl SeedLoadBalancer {
    /// An `lb11` in `fsn1` without services or targets.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            load_balancer_type: lb11(),
            location: fsn1(),
            labels: Labels::new(),
            algorithm: round_robin(),
            network: None,
            ip: None,
            public_interface: true,
            services: Vec::new(),
            targets: Vec::new(),
            protection_delete: false,
        }
    }
}

/// A seeded certificate (managed ones are already issued).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedCertificate {
    /// Name (unique).
    pub name: String,
    /// `uploaded` (default) or `managed`.
    #[serde(rename = "type", default = "uploaded")]
    pub kind: String,
    /// Domain names the certificate covers; ignored when `certificate` is given (the PEM's
    /// names are used then).
    #[serde(default)]
    pub domain_names: Vec<String>,
    /// Hetzner labels (key → value) the certificate is created with.
    #[serde(default)]
    pub labels: Labels,
    /// PEM text (a placeholder is generated if absent).
    #[serde(default)]
    pub certificate: Option<String>,
    /// The PEM private key of `certificate`, for the data plane's TLS termination (a generated
    /// placeholder has its own key).
    #[serde(default)]
    pub private_key: Option<String>,
}

impl SeedCertificate {
    /// An uploaded certificate for `domains`.
    pub fn uploaded(name: &str, domains: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            kind: uploaded(),
            domain_names: domains.iter().map(|d| (*d).to_owned()).collect(),
            labels: Labels::new(),
            certificate: None,
            private_key: None,
        }
    }

    /// An issued managed certificate for `domains`.
    pub fn managed(name: &str, domains: &[&str]) -> Self {
        Self { kind: "managed".to_owned(), ..Self::uploaded(name, domains) }
    }
}

/// A whole seed (the `--seed` file format).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seed {
    /// Networks, created first (servers and load balancers may name them).
    #[serde(default)]
    pub networks: Vec<SeedNetwork>,
    /// Servers, created after the networks, one by one.
    #[serde(default)]
    pub servers: Vec<SeedServer>,
    /// Groups of alike servers, created after `servers`.
    #[serde(default)]
    pub server_batches: Vec<SeedServerBatch>,
    /// Certificates, created before the load balancers.
    #[serde(default)]
    pub certificates: Vec<SeedCertificate>,
    /// Load balancers, created last (their targets may name seeded servers).
    #[serde(default)]
    pub load_balancers: Vec<SeedLoadBalancer>,
    /// Dedicated (Robot) servers, served under `/robot`.
    #[serde(default)]
    pub robot_servers: Vec<crate::robot::SeedRobotServer>,
}

/// Ids created by a [`Seed`], in seed order (batches appended to `servers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedResult {
    /// Network ids.
    pub networks: Vec<u64>,
    /// Server ids.
    pub servers: Vec<u64>,
    /// Certificate ids.
    pub certificates: Vec<u64>,
    /// Load balancer ids.
    pub load_balancers: Vec<u64>,
    /// Robot server numbers (left out when none were seeded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub robot_servers: Vec<u64>,
}
