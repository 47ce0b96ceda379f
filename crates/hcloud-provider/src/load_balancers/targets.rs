//! Nodes → the servers that should be targets, pure.
//!
//! The service controller passes the Nodes that pass upstream's stable node-set predicates;
//! here the `node-selector` annotation filters them, and each Node's providerID names its
//! server. A Node that cannot be a target is skipped (never fails the whole Load Balancer):
//! - no providerID yet (not initialized): skipped quietly, it is added once it has one;
//! - a Robot providerID (`hrobot://`, `hcloud://bm-`): Robot is not supported, skipped;
//! - an unknown prefix: Warning `UnknownProviderIDPrefix` on the Node (official CCM);
//! - a malformed `hcloud://` id: Warning `InvalidProviderID` on the Node.

use std::collections::BTreeMap;

use cloud_provider::events::{EventObject, ProviderEvent};
use cloud_provider::helpers::label_selector::LabelSelector;
use hcloud_api::models::ServerId;
use k8s_openapi::api::core::v1::Node;
use tracing::debug;

use crate::provider_id::{ProviderId, ProviderIdError};

/// A server that should be a target, with its Node (for events and logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTarget {
    /// The server.
    pub id: ServerId,
    /// The Node's name.
    pub node: String,
    /// The Node, for events about it.
    pub object: EventObject,
}

/// The servers `nodes` name that `selector` selects, sorted by Node name, one per server;
/// plus the events about Nodes that were skipped.
pub fn desired_targets(
    nodes: &[Node],
    selector: &LabelSelector,
    service: &str,
) -> (Vec<ServerTarget>, Vec<ProviderEvent>) {
    let empty = BTreeMap::new();
    let mut by_server: BTreeMap<ServerId, ServerTarget> = BTreeMap::new();
    let mut events = Vec::new();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        if !selector.matches(node.metadata.labels.as_ref().unwrap_or(&empty)) {
            continue;
        }
        let pid = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default();
        if pid.is_empty() {
            debug!(node = %name, service, "node has no providerID yet; not a target until it is initialized");
            continue;
        }
        match ProviderId::parse(pid) {
            Ok(ProviderId::Cloud(id)) => {
                let candidate = ServerTarget { id, node: name, object: EventObject::node(node) };
                match by_server.get(&id) {
                    Some(existing) if existing.node <= candidate.node => {}
                    _ => {
                        by_server.insert(id, candidate);
                    }
                }
            }
            Ok(ProviderId::Robot(_) | ProviderId::LegacyRobot(_)) => {
                debug!(node = %name, service, "Robot (dedicated) servers are not supported; not a target");
            }
            Err(ProviderIdError::UnknownPrefix(_)) => events.push(ProviderEvent::warning(
                EventObject::node(node),
                "UnknownProviderIDPrefix",
                format!(
                    "Node could not be added to Load Balancer for service {service} because the provider ID does not \
                     match any known format"
                ),
            )),
            Err(e @ ProviderIdError::InvalidId(_)) => events.push(ProviderEvent::warning(
                EventObject::node(node),
                "InvalidProviderID",
                format!("Node could not be added to Load Balancer for service {service}: {e}"),
            )),
        }
    }
    let mut targets: Vec<ServerTarget> = by_server.into_values().collect();
    targets.sort_by(|a, b| a.node.cmp(&b.node));
    (targets, events)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NodeSpec;

    use super::*;

    fn node(name: &str, pid: Option<&str>, labels: &[(&str, &str)]) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        n.spec = Some(NodeSpec { provider_id: pid.map(str::to_owned), ..Default::default() });
        n
    }

    fn ids(t: &[ServerTarget]) -> Vec<(i64, &str)> {
        t.iter().map(|t| (t.id.0, t.node.as_str())).collect()
    }

    #[test]
    fn cloud_nodes_become_targets_sorted_by_name() {
        let nodes = [node("b", Some("hcloud://2"), &[]), node("a", Some("hcloud://7"), &[])];
        let (t, ev) = desired_targets(&nodes, &LabelSelector::default(), "ns/svc");
        assert_eq!(ids(&t), vec![(7, "a"), (2, "b")]);
        assert!(ev.is_empty());
    }

    /// Official `provider id does not have one of the the expected prefixes`: the node is
    /// skipped with an `UnknownProviderIDPrefix` event, the others still become targets.
    #[test]
    fn provider_id_does_not_have_one_of_the_expected_prefixes() {
        let nodes = [
            node("aws", Some("aws:///eu-central-1a/i-1"), &[]),
            node("bad", Some("hcloud://abc"), &[]),
            node("robot", Some("hrobot://3"), &[]),
            node("new", None, &[]),
            node("ok", Some("hcloud://1"), &[]),
        ];
        let (t, ev) = desired_targets(&nodes, &LabelSelector::default(), "ns/svc");
        assert_eq!(ids(&t), vec![(1, "ok")]);
        let reasons: Vec<(&str, &str)> = ev.iter().map(|e| (e.object.name.as_str(), e.reason.as_ref())).collect();
        assert_eq!(reasons, vec![("aws", "UnknownProviderIDPrefix"), ("bad", "InvalidProviderID")]);
        assert!(ev[0].message.contains("for service ns/svc"), "{}", ev[0].message);
        assert_eq!(ev[0].object.kind, "Node");
    }

    /// Official `matchNodeSelector` cases: no selector, empty selector, one selecting all, one
    /// selecting some, several selecting all.
    #[test]
    fn node_selector() {
        let nodes = [
            node("n1", Some("hcloud://1"), &[("role", "worker"), ("zone", "a")]),
            node("n2", Some("hcloud://2"), &[("role", "worker"), ("zone", "b")]),
            node("n3", Some("hcloud://3"), &[("role", "edge"), ("zone", "a")]),
        ];
        let pick = |s: &str| {
            let sel = LabelSelector::parse(s).expect("selector");
            desired_targets(&nodes, &sel, "s").0.iter().map(|t| t.node.clone()).collect::<Vec<_>>()
        };
        assert_eq!(pick(""), vec!["n1", "n2", "n3"]);
        assert_eq!(pick("zone"), vec!["n1", "n2", "n3"]);
        assert_eq!(pick("role=worker"), vec!["n1", "n2"]);
        assert_eq!(pick("role in (worker,edge),zone"), vec!["n1", "n2", "n3"]);
        assert_eq!(pick("role!=worker,zone=a"), vec!["n3"]);
    }

    #[test]
    fn two_nodes_naming_one_server_give_one_target() {
        let nodes = [node("z", Some("hcloud://5"), &[]), node("y", Some("hcloud://5"), &[])];
        assert_eq!(ids(&desired_targets(&nodes, &LabelSelector::default(), "s").0), vec![(5, "y")]);
    }
}
