//! The watch for deletions that must not happen: every second the Nodes, the Load Balancers and
//! the network's routes are compared with the previous look; whatever disappeared is judged
//! against the expected state (the churn updates it before it acts, so its own deletions are
//! known). Wrong ones are kept in [`World::wrong`] for the report and the verdict.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hcloud_fake::FakeHandle;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

use super::world::{LABEL_SERVICE_UID, World};

/// One look at what exists.
#[derive(Debug, Default, Clone)]
pub struct Observed {
    /// Node names; `None` when listing them failed (nothing is judged then).
    pub nodes: Option<BTreeSet<String>>,
    /// Load Balancer id → its Service-UID label.
    pub lbs: BTreeMap<u64, Option<String>>,
    /// Route destination → gateway.
    pub routes: BTreeMap<String, String>,
}

/// The previous look.
#[derive(Debug, Default)]
pub struct Seen {
    nodes: BTreeSet<String>,
    lbs: BTreeMap<u64, Option<String>>,
    routes: BTreeMap<String, String>,
}

impl Seen {
    /// Judges what disappeared since the previous look; `server_alive` says whether a server
    /// still exists.
    pub fn judge(&mut self, w: &mut World, now: Observed, server_alive: impl Fn(u64) -> bool) {
        if let Some(nodes) = now.nodes {
            for gone in self.nodes.difference(&nodes) {
                if w.nodes_server_gone.contains_key(gone) {
                    w.ccm_node_deletions += 1;
                } else if !w.nodes_drained.contains(gone) {
                    let server = w.nodes.get(gone).map(|n| n.server);
                    let alive = server.is_some_and(&server_alive);
                    w.wrong.push(format!("Node {gone} was deleted (its server {server:?} exists: {alive})"));
                }
            }
            self.nodes = nodes;
        }
        for (id, uid) in &self.lbs {
            if now.lbs.contains_key(id) {
                continue;
            }
            match uid {
                Some(uid) if w.deleted_uids.contains(uid) => w.lb_deletions += 1,
                _ => {
                    let live = w.services.iter().find(|(_, s)| Some(&s.uid) == uid.as_ref()).map(|(n, _)| n.clone());
                    w.wrong.push(format!("Load Balancer {id} (uid {uid:?}, live Service {live:?}) was deleted"));
                }
            }
        }
        self.lbs = now.lbs;
        for (destination, gateway) in &self.routes {
            if now.routes.contains_key(destination) {
                continue;
            }
            match w.nodes.iter().find(|(_, n)| &n.pod_cidr == destination) {
                Some((name, _)) => {
                    w.wrong.push(format!("route {destination} via {gateway} of the live Node {name} was deleted"))
                }
                None => w.route_deletions += 1,
            }
        }
        self.routes = now.routes;
    }
}

async fn observe(h: &FakeHandle, nodes: &Api<Node>, net: u64) -> Observed {
    let names = nodes
        .list(&ListParams::default())
        .await
        .ok()
        .map(|list| list.items.iter().filter_map(|n| n.metadata.name.clone()).collect());
    let snapshot = h.snapshot();
    Observed {
        nodes: names,
        lbs: snapshot.load_balancers.iter().map(|lb| (lb.id, lb.labels.get(LABEL_SERVICE_UID).cloned())).collect(),
        routes: snapshot
            .networks
            .iter()
            .filter(|n| n.id == net)
            .flat_map(|n| n.routes.iter().map(|r| (r.destination.clone(), r.gateway.clone())))
            .collect(),
    }
}

/// Looks every second until `stop`, and once more after it: a deletion up to the moment the
/// caller stopped it is judged.
pub async fn run(h: FakeHandle, nodes: Api<Node>, net: u64, world: Arc<Mutex<World>>, stop: Arc<AtomicBool>) {
    let mut seen = Seen::default();
    loop {
        let last = stop.load(Ordering::Relaxed);
        let now = observe(&h, &nodes, net).await;
        seen.judge(&mut world.lock().unwrap(), now, |id| h.server(id).is_some());
        if last {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::world::{LiveNode, LiveService};
    use super::*;

    fn world() -> World {
        let mut w = World::default();
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            w.nodes.insert(name.to_string(), LiveNode { server: i as u64 + 1, pod_cidr: format!("10.240.{i}.0/24") });
        }
        w.services.insert(
            "web".into(),
            LiveService { uid: "u-web".into(), ports: vec![80], algorithm: None, hc_interval: None },
        );
        w
    }

    fn observed(nodes: &[&str], lbs: &[(u64, &str)], routes: &[&str]) -> Observed {
        Observed {
            nodes: Some(nodes.iter().map(|n| n.to_string()).collect()),
            lbs: lbs.iter().map(|(id, uid)| (*id, Some(uid.to_string()))).collect(),
            routes: routes.iter().map(|r| (r.to_string(), "10.0.0.2".to_owned())).collect(),
        }
    }

    const ALL_ROUTES: [&str; 3] = ["10.240.0.0/24", "10.240.1.0/24", "10.240.2.0/24"];

    #[test]
    fn the_churns_own_deletions_and_the_ccms_expected_ones_are_not_wrong() {
        let mut w = world();
        let mut seen = Seen::default();
        seen.judge(&mut w, observed(&["a", "b", "c"], &[(7, "u-web"), (8, "u-old")], &ALL_ROUTES), |_| true);
        // The churn: Node b's server deleted (the CCM must delete b), c drained, Service old
        // deleted before; then the CCM deletes b, c's route and old's Load Balancer.
        w.nodes.remove("b");
        w.nodes_server_gone.insert("b".into(), 2);
        w.nodes.remove("c");
        w.nodes_drained.insert("c".into());
        w.deleted_uids.insert("u-old".into());
        seen.judge(&mut w, observed(&["a"], &[(7, "u-web")], &ALL_ROUTES[..1]), |id| id == 1);
        assert!(w.wrong.is_empty(), "{:?}", w.wrong);
        assert_eq!((w.ccm_node_deletions, w.lb_deletions, w.route_deletions), (1, 1, 2));
    }

    #[test]
    fn a_live_nodes_deletion_is_wrong() {
        let mut w = world();
        let mut seen = Seen::default();
        seen.judge(&mut w, observed(&["a", "b", "c"], &[], &[]), |_| true);
        // A failed list judges nothing; the next look still sees b gone.
        seen.judge(&mut w, Observed { nodes: None, ..Observed::default() }, |_| true);
        assert!(w.wrong.is_empty());
        seen.judge(&mut w, observed(&["a", "c"], &[], &[]), |_| true);
        assert_eq!(w.wrong, vec!["Node b was deleted (its server Some(2) exists: true)"]);
    }

    #[test]
    fn a_live_services_load_balancer_deletion_is_wrong() {
        let mut w = world();
        let mut seen = Seen::default();
        seen.judge(&mut w, observed(&["a"], &[(7, "u-web"), (9, "u-unknown")], &[]), |_| true);
        seen.judge(&mut w, observed(&["a"], &[], &[]), |_| true);
        assert_eq!(
            w.wrong,
            vec![
                "Load Balancer 7 (uid Some(\"u-web\"), live Service Some(\"web\")) was deleted",
                "Load Balancer 9 (uid Some(\"u-unknown\"), live Service None) was deleted",
            ]
        );
        assert_eq!(w.lb_deletions, 0);
    }

    #[test]
    fn a_live_nodes_route_deletion_is_wrong() {
        let mut w = world();
        let mut seen = Seen::default();
        seen.judge(&mut w, observed(&["a", "b", "c"], &[], &ALL_ROUTES), |_| true);
        seen.judge(&mut w, observed(&["a", "b", "c"], &[], &ALL_ROUTES[1..]), |_| true);
        assert_eq!(w.wrong, vec!["route 10.240.0.0/24 via 10.0.0.2 of the live Node a was deleted"]);
    }
}
