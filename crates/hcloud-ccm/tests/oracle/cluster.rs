//! The Load Balancer cluster both the differential and the migration suites build: a network
//! with two subnets, servers and Nodes, an uploaded certificate, and one LoadBalancer Service
//! per annotation family of the official CCM; waits on what each step must reach.

use std::collections::BTreeMap;

use hcloud_fake::control::{SeedCertificate, SeedNetwork, SeedServer};
use hcloud_fake::wire::LoadBalancer;
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use test_harness::{ChildProcess, NodeBuilder, UNINITIALIZED_TAINT_KEY};

use super::subject::Subject;
use super::world::World;

/// The annotations' prefix.
pub const PREFIX: &str = "load-balancer.hetzner.cloud/";
/// The official CCM's identity label.
pub const UID_LABEL: &str = "hcloud-ccm/service-uid";
/// The private IP one case asks for: it stays literal in snapshots.
pub const FIXED_PRIVATE_IP: &str = "10.0.0.50";

/// One LoadBalancer Service of a scenario.
#[derive(Debug, Clone)]
pub struct Case {
    /// The Service's name.
    pub name: &'static str,
    /// Its annotations, without [`PREFIX`].
    pub annotations: Vec<(&'static str, &'static str)>,
    /// Its TCP ports.
    pub ports: Vec<i32>,
    /// `Some(label)`: only Nodes with this `role` label are targets (`node-selector`).
    pub role: Option<&'static str>,
    /// Whether the "port added" step adds port 8443.
    pub add_port: bool,
}

impl Case {
    fn new(name: &'static str, annotations: &[(&'static str, &'static str)]) -> Self {
        Case { name, annotations: annotations.to_vec(), ports: vec![80], role: None, add_port: true }
    }

    fn ports(mut self, ports: &[i32]) -> Self {
        self.ports = ports.to_vec();
        self
    }

    fn no_port_added(mut self) -> Self {
        self.add_port = false;
        self
    }

    /// The Service object.
    pub fn service(&self) -> Service {
        let annotations: Vec<(String, &str)> =
            self.annotations.iter().map(|(k, v)| (format!("{PREFIX}{k}"), *v)).collect();
        let annotations: Vec<(&str, &str)> = annotations.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        test_harness::load_balancer_service(self.name, &annotations, &self.ports)
    }
}

/// One Service per annotation family of the official CCM (in network `k8s`; every one but the
/// network-zone case pins `location: fsn1`).
pub fn annotation_families() -> Vec<Case> {
    let at = |name, annotations: &[(&'static str, &'static str)]| {
        let mut all = vec![("location", "fsn1")];
        all.extend_from_slice(annotations);
        Case::new(name, &all)
    };
    vec![
        at("plain", &[]),
        at("protocol-http", &[("protocol", "http")]).ports(&[80, 8080]),
        at("https-uploaded", &[("protocol", "https"), ("http-certificates", "uploaded-cert")]).ports(&[443]),
        at(
            "https-redirect",
            &[("protocol", "https"), ("http-certificates", "uploaded-cert"), ("http-redirect-http", "true")],
        )
        .ports(&[443])
        .no_port_added(),
        at(
            "https-managed",
            &[
                ("protocol", "https"),
                ("certificate-type", "managed"),
                ("http-managed-certificate-domains", "example.com,www.example.com"),
            ],
        )
        .ports(&[443]),
        at(
            "health-checks",
            &[
                ("health-check-protocol", "http"),
                ("health-check-port", "8081"),
                ("health-check-interval", "5s"),
                ("health-check-timeout", "3s"),
                ("health-check-retries", "2"),
                ("health-check-http-domain", "health.example.com"),
                ("health-check-http-path", "/healthz"),
                ("http-status-codes", "2??,3??"),
            ],
        ),
        at("algorithm", &[("algorithm-type", "least_connections")]),
        at("type", &[("type", "lb21")]),
        Case::new("network-zone", &[("network-zone", "eu-central")]),
        at("private-target", &[("use-private-ip", "true"), ("private-ipv4", FIXED_PRIVATE_IP)]),
        at("no-public", &[("disable-public-network", "true"), ("use-private-ip", "true")]),
        at("no-private-ingress", &[("disable-private-ingress", "true")]),
        at("subnet", &[("private-subnet-ip-range", "10.0.1.0/24")]),
        Case { role: Some("web"), ..at("node-selector", &[("node-selector", "role=web")]) },
        at("proxy-protocol", &[("uses-proxyprotocol", "true")]),
        at(
            "sticky",
            &[
                ("protocol", "http"),
                ("http-sticky-sessions", "true"),
                ("http-cookie-name", "SRV"),
                ("http-cookie-lifetime", "1h"),
            ],
        ),
        at("idle-timeout", &[("protocol", "http"), ("http-timeout-idle", "60s")]),
        at("hostname", &[("hostname", "lb.example.com")]),
        at("ipv6-off", &[("ipv6-disabled", "true")]),
        at("named", &[("name", "custom-lb-name")]),
        at("rdns", &[("ipv4-rdns", "lb4.example.com"), ("ipv6-rdns", "lb6.example.com")]),
    ]
}

/// Network `k8s` (10.0.0.0/8, subnets 10.0.0.0/24 and 10.0.1.0/24), servers `node-1`..`node-4`
/// in it, the certificate `uploaded-cert`; Nodes for `node-1`..`node-3` ([`register`]).
/// Returns the server ids by name.
pub async fn seed(world: &World) -> BTreeMap<String, u64> {
    let h = world.h();
    let net = h
        .seed_network(
            &SeedNetwork::new("k8s", "10.0.0.0/8")
                .subnet("10.0.0.0/24", "eu-central")
                .subnet("10.0.1.0/24", "eu-central"),
        )
        .expect("network");
    let mut ids = BTreeMap::new();
    for i in 1..=4 {
        let name = format!("node-{i}");
        let id = h.seed_server(&SeedServer::new(&name).network_ip(net, &format!("10.0.0.{}", 10 + i))).expect("server");
        ids.insert(name, id);
    }
    h.seed_certificate(&SeedCertificate::uploaded("uploaded-cert", &["example.com", "www.example.com"])).expect("cert");
    for i in 1..=3 {
        register(world, i).await;
    }
    ids
}

/// Registers Node `node-<i>` as a kubelet with `--cloud-provider=external` does (the
/// uninitialized taint, a `Hostname` address; `role=web` for 1, 2 and 4; pod CIDR
/// `10.244.<i>.0/24` as kube-controller-manager assigns it): the CCM initializes it.
pub async fn register(world: &World, i: u32) {
    let name = format!("node-{i}");
    let mut b = NodeBuilder::new(&name).kubelet_hostname_address(true).pod_cidrs([format!("10.244.{i}.0/24")]);
    if i != 3 {
        b = b.label("role", "web");
    }
    b.register(&world.client).await.expect("node registers");
}

/// Whether the CCM has initialized the Node.
pub fn initialized(n: &k8s_openapi::api::core::v1::Node) -> bool {
    let spec = n.spec.clone().unwrap_or_default();
    spec.provider_id.is_some() && !spec.taints.unwrap_or_default().iter().any(|t| t.key == UNINITIALIZED_TAINT_KEY)
}

/// Creates the Services of `cases`.
pub async fn create(world: &World, cases: &[Case]) {
    for c in cases {
        world.services.create(&PostParams::default(), &c.service()).await.expect("create service");
    }
}

/// The fake's Load Balancer labelled for `svc`.
pub fn lb_of<'a>(lbs: &'a [LoadBalancer], svc: &Service) -> Option<&'a LoadBalancer> {
    let uid = svc.metadata.uid.as_deref()?;
    lbs.iter().find(|l| l.labels.get(UID_LABEL).map(String::as_str) == Some(uid))
}

/// Whether every Node is initialized and every Service of `cases` has an ingress and a Load
/// Balancer with a service per port and a server target per matching Node.
pub async fn converged(world: &World, cases: &[Case]) -> bool {
    let Ok(services) = world.services.list(&ListParams::default()).await else { return false };
    let Ok(nodes) = world.nodes.list(&ListParams::default()).await else { return false };
    let lbs = world.h().snapshot().load_balancers;
    cases.iter().all(|c| {
        let Some(svc) = services.items.iter().find(|s| s.metadata.name.as_deref() == Some(c.name)) else {
            return false;
        };
        let ingress = svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|l| l.ingress.as_ref());
        let ports = svc.spec.as_ref().and_then(|s| s.ports.as_ref()).map_or(0, Vec::len);
        let want_targets = nodes
            .items
            .iter()
            .filter(|n| initialized(n))
            .filter(|n| {
                c.role.is_none_or(|r| {
                    n.metadata.labels.as_ref().and_then(|l| l.get("role")).map(String::as_str) == Some(r)
                })
            })
            .count();
        nodes.items.iter().all(initialized)
            && ingress.is_some_and(|i| !i.is_empty())
            && lb_of(&lbs, svc).is_some_and(|lb| {
                lb.services.len() == ports && lb.targets.iter().filter(|t| t.kind == "server").count() == want_targets
            })
    })
}

/// Adds port 8443 to every case that takes one (returns the updated cases).
pub async fn add_port(world: &World, cases: &mut [Case]) {
    for c in cases.iter_mut().filter(|c| c.add_port) {
        c.ports.push(8443);
        let ports: Vec<serde_json::Value> = c
            .ports
            .iter()
            .map(|p| serde_json::json!({"name": format!("p{p}"), "port": p, "protocol": "TCP"}))
            .collect();
        let current = world.services.get(c.name).await.expect("service");
        // Keep the allocated node ports of the existing ports.
        let existing = current.spec.and_then(|s| s.ports).unwrap_or_default();
        let ports: Vec<serde_json::Value> = ports
            .into_iter()
            .map(|mut p| {
                if let Some(e) = existing.iter().find(|e| serde_json::json!(e.port) == p["port"]) {
                    p["nodePort"] = serde_json::json!(e.node_port);
                }
                p
            })
            .collect();
        let patch = serde_json::json!({"spec": {"ports": ports}});
        world.services.patch(c.name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("add port");
    }
}

/// Deletes every Service of `cases` and waits until they and their Load Balancers are gone.
pub async fn delete_all(world: &World, subject: Subject, ccm: &ChildProcess, cases: &[Case]) {
    for c in cases {
        world.services.delete(c.name, &DeleteParams::default()).await.expect("delete service");
    }
    world
        .settle(subject, ccm, "every Service and its Load Balancer are gone", async || {
            let gone = world.services.list(&ListParams::default()).await.is_ok_and(|l| l.items.is_empty());
            gone && world.h().snapshot().load_balancers.is_empty()
        })
        .await;
}
