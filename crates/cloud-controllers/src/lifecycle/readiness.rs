//! Which nodes a lifecycle pass asks the provider about afresh: readiness of the previous
//! pass in, the nodes that turned NotReady out. Pure; the controller keeps the map between
//! passes.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::decide::is_ready;
use crate::node::plan::is_uninitialized;

/// Readiness of each node by UID (the name when a node has none), as one pass saw it.
pub type Readiness = HashMap<String, bool>;

/// The initialized nodes that are not Ready now and were Ready in `previous` (they turned
/// NotReady), and this pass's readiness, for the next pass. In the first pass (`previous` is
/// `None`) every initialized NotReady node counts: nothing older is known.
///
/// Left out: nodes still waiting for initialization (the node controller is looking their
/// servers up anyway), nodes that were NotReady already, and nodes the previous pass did not
/// see — they are new, with no Ready past to turn from: initialized moments ago, their
/// servers just looked up, or registered initialized. The regular lifecycle lookups cover
/// them, and an absence there is still confirmed with a direct request before a deletion.
pub fn turned_not_ready(previous: Option<&Readiness>, nodes: &[Arc<Node>]) -> (Vec<Arc<Node>>, Readiness) {
    let mut now = Readiness::with_capacity(nodes.len());
    let mut turned = Vec::new();
    for node in nodes {
        let key = node.metadata.uid.clone().unwrap_or_else(|| node.name_any());
        let ready = is_ready(node);
        let was_ready = previous.is_none_or(|p| p.get(&key) == Some(&true));
        if !ready && was_ready && !is_uninitialized(node) {
            turned.push(node.clone());
        }
        now.insert(key, ready);
    }
    (turned, now)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;
    use crate::testing::node;

    fn n(name: &str, ready: bool, initialized: bool) -> Arc<Node> {
        let mut b = node(name).ready(if ready { "True" } else { "False" });
        if !initialized {
            b = b.cloud_taint();
        }
        let mut node = b.build();
        node.metadata.uid = Some(name.to_owned());
        Arc::new(node)
    }

    fn names(nodes: &[Arc<Node>]) -> Vec<String> {
        nodes.iter().map(|n| n.name_any()).collect()
    }

    #[test]
    fn the_first_pass_rechecks_every_initialized_not_ready_node() {
        let nodes = [n("ready", true, true), n("down", false, true), n("new", false, false)];
        let (turned, now) = turned_not_ready(None, &nodes);
        assert_eq!(names(&turned), ["down"]);
        assert_eq!(now, Readiness::from([("ready".into(), true), ("down".into(), false), ("new".into(), false)]));
    }

    #[test]
    fn later_passes_recheck_only_nodes_that_were_ready() {
        let previous =
            Readiness::from([("was-ready".into(), true), ("was-down".into(), false), ("waiting".into(), false)]);
        let nodes = [
            n("was-ready", false, true),
            n("was-down", false, true),
            // Registered NotReady, initialized since the last pass: not a turn.
            n("waiting", false, true),
            // Registered and initialized between two passes: new, not a turn.
            n("unseen", false, true),
        ];
        let (turned, now) = turned_not_ready(Some(&previous), &nodes);
        assert_eq!(names(&turned), ["was-ready"]);
        assert_eq!(now.len(), 4, "every node is remembered, the unseen one too: {now:?}");
        let (again, _) = turned_not_ready(Some(&now), &nodes);
        assert!(again.is_empty(), "a node is rechecked once per turn: {again:?}");
    }

    #[test]
    fn a_node_without_uid_is_remembered_by_name() {
        let mut node = (*n("nameless", true, true)).clone();
        node.metadata.uid = None;
        let (_, now) = turned_not_ready(None, &[Arc::new(node)]);
        assert_eq!(now.get("nameless"), Some(&true));
    }
}
