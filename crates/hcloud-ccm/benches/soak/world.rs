//! What the soak's churn did (the expected state), what the monitor saw deleted, and the final
//! check of Nodes, Load Balancers and routes against it.

use std::collections::{BTreeMap, BTreeSet};

use hcloud_fake::FakeHandle;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams};

/// The Service-UID label the CCM puts on its Load Balancers.
pub const LABEL_SERVICE_UID: &str = "hcloud-ccm/service-uid";
pub const ANN_ALGORITHM: &str = "load-balancer.hetzner.cloud/algorithm-type";
pub const ANN_HC_INTERVAL: &str = "load-balancer.hetzner.cloud/health-check-interval";

/// A Node the churn registered and has not made leave.
#[derive(Debug, Clone)]
pub struct LiveNode {
    pub server: u64,
    pub pod_cidr: String,
}

/// A Service the churn created and has not deleted.
#[derive(Debug, Clone)]
pub struct LiveService {
    pub uid: String,
    pub ports: Vec<i32>,
    /// `algorithm-type` annotation (`None`: unset, left as it is).
    pub algorithm: Option<String>,
    /// `health-check-interval` in seconds (`None`: unset, left as it is).
    pub hc_interval: Option<u64>,
}

/// The expected state and the tallies of the churn.
#[derive(Debug, Default, Clone)]
pub struct World {
    pub nodes: BTreeMap<String, LiveNode>,
    /// Nodes whose server was deleted (kubelet gone): the CCM must delete them.
    pub nodes_server_gone: BTreeMap<String, u64>,
    /// Nodes the churn deleted itself (drained), then their servers.
    pub nodes_drained: BTreeSet<String>,
    pub services: BTreeMap<String, LiveService>,
    /// UIDs of deleted Services.
    pub deleted_uids: BTreeSet<String>,
    /// Things that must never happen, seen while they happened.
    pub wrong: Vec<String>,
    /// Churn counts by kind.
    pub ops: BTreeMap<&'static str, u64>,
    /// Nodes the monitor saw deleted by the CCM (server gone).
    pub ccm_node_deletions: u64,
    /// Load Balancers the monitor saw deleted for deleted Services.
    pub lb_deletions: u64,
    /// Routes the monitor saw deleted that belonged to no live Node.
    pub route_deletions: u64,
}

impl World {
    pub fn count(&mut self, op: &'static str) {
        *self.ops.entry(op).or_insert(0) += 1;
    }
}

/// Everything that differs from the expected state (empty: all is as it should be). The wrong
/// deletions seen by the monitor are not repeated here.
pub async fn check(world: &World, h: &FakeHandle, nodes: &Api<Node>, svcs: &Api<Service>, net: u64) -> Vec<String> {
    let mut problems = Vec::new();
    let Ok(node_list) = nodes.list(&ListParams::default()).await else {
        return vec!["listing Nodes failed".into()];
    };
    let Ok(svc_list) = svcs.list(&ListParams::default()).await else {
        return vec!["listing Services failed".into()];
    };
    let k8s_nodes: BTreeMap<String, &Node> =
        node_list.items.iter().map(|n| (n.metadata.name.clone().unwrap_or_default(), n)).collect();

    // Nodes: every live one initialized with its providerID, every left one gone.
    for (name, live) in &world.nodes {
        let Some(node) = k8s_nodes.get(name) else {
            problems.push(format!("live Node {name} (server {}) is missing", live.server));
            continue;
        };
        let spec = node.spec.clone().unwrap_or_default();
        let want = format!("hcloud://{}", live.server);
        if spec.provider_id.as_deref() != Some(want.as_str()) {
            problems.push(format!("Node {name}: providerID {:?}, want {want}", spec.provider_id));
        }
        if spec.taints.unwrap_or_default().iter().any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized") {
            problems.push(format!("Node {name} is still uninitialized"));
        }
    }
    for name in world.nodes_server_gone.keys().chain(world.nodes_drained.iter()) {
        if k8s_nodes.contains_key(name) {
            problems.push(format!("Node {name} left (server deleted) but still exists"));
        }
    }
    for name in k8s_nodes.keys() {
        if !world.nodes.contains_key(name)
            && !world.nodes_server_gone.contains_key(name)
            && !world.nodes_drained.contains(name)
        {
            problems.push(format!("unexpected Node {name}"));
        }
    }

    // Load Balancers: each live Service exactly its own, right ports and targets; no other.
    let snapshot = h.snapshot();
    let mut by_uid: BTreeMap<String, Vec<&hcloud_fake::wire::LoadBalancer>> = BTreeMap::new();
    for lb in &snapshot.load_balancers {
        match lb.labels.get(LABEL_SERVICE_UID) {
            Some(uid) => by_uid.entry(uid.clone()).or_default().push(lb),
            None => problems.push(format!("Load Balancer {} ({}) has no Service-UID label", lb.id, lb.name)),
        }
    }
    let want_targets: BTreeSet<u64> = world.nodes.values().map(|n| n.server).collect();
    for (name, live) in &world.services {
        let Some(svc) = svc_list.items.iter().find(|s| s.metadata.name.as_deref() == Some(name.as_str())) else {
            problems.push(format!("live Service {name} is missing in Kubernetes"));
            continue;
        };
        let lbs = by_uid.get(&live.uid).cloned().unwrap_or_default();
        let [lb] = lbs.as_slice() else {
            problems.push(format!("Service {name} has {} Load Balancers, want 1", lbs.len()));
            continue;
        };
        let spec = svc.spec.clone().unwrap_or_default();
        let want_ports: BTreeSet<(u16, u16)> =
            spec.ports.unwrap_or_default().iter().map(|p| (p.port as u16, p.node_port.unwrap_or(0) as u16)).collect();
        let got_ports: BTreeSet<(u16, u16)> = lb.services.iter().map(|s| (s.listen_port, s.destination_port)).collect();
        if want_ports != got_ports {
            problems.push(format!("Service {name}: LB {} ports {got_ports:?}, want {want_ports:?}", lb.id));
        }
        let got_targets: BTreeSet<u64> = lb.targets.iter().filter_map(|t| t.server.as_ref().map(|s| s.id)).collect();
        if got_targets != want_targets || lb.targets.len() != want_targets.len() {
            let missing: Vec<_> = want_targets.difference(&got_targets).collect();
            let extra: Vec<_> = got_targets.difference(&want_targets).collect();
            problems.push(format!(
                "Service {name}: LB {} targets: missing servers {missing:?}, extra {extra:?} ({} targets)",
                lb.id,
                lb.targets.len()
            ));
        }
        // An unset annotation leaves the value as it is (the official CCM's behaviour).
        if let Some(want_alg) = &live.algorithm
            && &lb.algorithm.kind != want_alg
        {
            problems.push(format!("Service {name}: LB {} algorithm {}, want {want_alg}", lb.id, lb.algorithm.kind));
        }
        for s in &lb.services {
            if let Some(want_interval) = live.hc_interval
                && s.health_check.interval != want_interval
            {
                problems.push(format!(
                    "Service {name}: LB {} port {} health-check interval {}, want {want_interval}",
                    lb.id, s.listen_port, s.health_check.interval
                ));
            }
        }
        let ingress = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|l| l.ingress.clone())
            .unwrap_or_default();
        let ip = lb.public_net.ipv4.ip.clone();
        if ip.is_none() || !ingress.iter().any(|i| i.ip == ip) {
            problems.push(format!("Service {name}: status ingress {ingress:?} lacks the LB's {ip:?}"));
        }
    }
    for svc in &svc_list.items {
        let name = svc.metadata.name.clone().unwrap_or_default();
        let lb_type = svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
        if lb_type && !world.services.contains_key(&name) {
            problems.push(format!(
                "deleted Service {name} still exists (finalizers {:?})",
                svc.metadata.finalizers.clone().unwrap_or_default()
            ));
        }
    }
    let live_uids: BTreeSet<&String> = world.services.values().map(|s| &s.uid).collect();
    for (uid, lbs) in &by_uid {
        if live_uids.contains(uid) {
            continue;
        }
        let what = if world.deleted_uids.contains(uid) { "deleted" } else { "unknown" };
        for lb in lbs {
            problems.push(format!("Load Balancer {} of a {what} Service (uid {uid}) still exists", lb.id));
        }
    }

    // Routes: exactly the live Nodes' pod CIDRs, each via its server's private IP.
    let want_routes: BTreeMap<String, String> = world
        .nodes
        .values()
        .filter_map(|n| {
            let server = snapshot.servers.iter().find(|s| s.id == n.server)?;
            let ip = server.private_net.iter().find(|p| p.network == net)?.ip.clone();
            Some((n.pod_cidr.clone(), ip))
        })
        .collect();
    let got_routes: BTreeMap<String, String> = snapshot
        .networks
        .iter()
        .find(|n| n.id == net)
        .map(|n| n.routes.iter().map(|r| (r.destination.clone(), r.gateway.clone())).collect())
        .unwrap_or_default();
    if want_routes != got_routes {
        let missing: Vec<_> = want_routes.iter().filter(|(d, g)| got_routes.get(*d) != Some(g)).collect();
        let extra: Vec<_> = got_routes.iter().filter(|(d, g)| want_routes.get(*d) != Some(g)).collect();
        problems.push(format!("routes: missing/wrong {missing:?}, extra {extra:?}"));
    }
    problems
}
