//! Nodes → the servers (and Robot IPs) that should be targets, pure.
//!
//! The service controller passes the Nodes that pass upstream's stable node-set predicates;
//! here the `node-selector` annotation filters them, and each Node's providerID names its
//! server. A Node that cannot be a target is skipped (never fails the whole Load Balancer):
//! - no providerID yet (not initialized): skipped quietly, it is added once it has one;
//! - a Robot providerID (`hrobot://`, `hcloud://bm-`) becomes an IP target (official CCM):
//!   the Robot server's public IPv4 from the Robot list, or with `use-private-ip` the Node's
//!   InternalIP (Warning `InternalIPNotConfigured` and the public IP when it has none);
//!   without Robot credentials only the InternalIP can be used. A Robot Node without a usable
//!   IP gets a Warning `ServerNotFound`. With Robot off, Robot Nodes are skipped;
//! - an unknown prefix: Warning `UnknownProviderIDPrefix` on the Node (official CCM);
//! - a malformed `hcloud://` id: Warning `InvalidProviderID` on the Node.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};

use cloud_provider::events::{EventObject, ProviderEvent};
use cloud_provider::helpers::label_selector::LabelSelector;
use hcloud_api::models::ServerId;
use k8s_openapi::api::core::v1::{Node, Service};
use tracing::debug;

use super::annotations::NODE_SELECTOR;
use crate::provider_id::{ProviderId, ProviderIdError};

/// What a target points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetRef {
    /// A cloud server (a `server` target).
    Server(ServerId),
    /// A Robot server's IP (an `ip` target).
    Ip(IpAddr),
}

/// What the Robot side contributes to the targets (with `ROBOT_ENABLED=true`).
#[derive(Debug, Clone, Copy)]
pub struct RobotTargets<'a> {
    /// Server number → public IPv4, from the Robot list; `None` without credentials
    /// (Load Balancer-only mode: only InternalIPs can be used).
    pub public_ips: Option<&'a HashMap<u64, Option<Ipv4Addr>>>,
    /// `use-private-ip`: the Node's InternalIP instead of the public IP.
    pub use_private_ip: bool,
    /// The Service, for `InternalIPNotConfigured` events (raised on the Service, as upstream).
    pub service: &'a EventObject,
}

/// A server (or Robot IP) that should be a target, with its Node (for events and logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTarget {
    /// The cloud server (from the Node's providerID) or Robot IP the Node is reached at.
    pub target: TargetRef,
    /// The Node's name.
    pub node: String,
    /// The Node, for events about it.
    pub object: EventObject,
}

fn internal_ip(node: &Node) -> Option<IpAddr> {
    node.status.as_ref()?.addresses.as_ref()?.iter().find(|a| a.type_ == "InternalIP")?.address.parse().ok()
}

/// The IP of a Robot Node's target, or the events saying why it has none.
fn robot_ip(
    node: &Node,
    number: u64,
    robot: &RobotTargets<'_>,
    service: &str,
    events: &mut Vec<ProviderEvent>,
) -> Option<IpAddr> {
    let public = robot.public_ips.map(|ips| ips.get(&number).copied().flatten());
    let internal = internal_ip(node);
    let no_internal = || {
        ProviderEvent::warning(
            robot.service.clone(),
            "InternalIPNotConfigured",
            format!(
                "Robot Node {} has no InternalIP for the Load Balancer (use-private-ip){}",
                node.metadata.name.as_deref().unwrap_or_default(),
                if robot.public_ips.is_some() { "; its public IP is used" } else { "" }
            ),
        )
    };
    let ip = match (robot.use_private_ip, internal, public) {
        (true, Some(ip), _) => Some(ip),
        (true, None, Some(public)) => {
            events.push(no_internal());
            public.map(IpAddr::V4)
        }
        (true, None, None) => {
            events.push(no_internal());
            return None;
        }
        (false, _, Some(public)) => public.map(IpAddr::V4),
        (false, _, None) => None,
    };
    if ip.is_none() {
        events.push(ProviderEvent::warning(
            EventObject::node(node),
            "ServerNotFound",
            match public {
                Some(_) => format!(
                    "Robot server {number} has no public IPv4; Node could not be added to Load Balancer for service \
                     {service}"
                ),
                None if robot.public_ips.is_some() => format!(
                    "Robot server {number} is not in the Robot account; Node could not be added to Load Balancer for \
                     service {service}"
                ),
                None => format!(
                    "no Robot credentials (ROBOT_USER/ROBOT_PASSWORD) to find the IP of Robot server {number}; set \
                     use-private-ip to use the Node's InternalIP for Load Balancer of service {service}"
                ),
            },
        ));
    }
    ip
}

/// The Node label keys the Service's `node-selector` annotation looks at, sorted (none when it
/// is absent or does not parse).
pub fn node_selector_keys(service: &Service) -> Vec<String> {
    let raw = service.metadata.annotations.as_ref().and_then(|a| a.get(NODE_SELECTOR));
    raw.and_then(|v| LabelSelector::parse(v).ok()).map(|s| s.keys()).unwrap_or_default()
}

/// The targets for the Nodes `selector` selects, sorted by Node name, one per server or IP;
/// plus the events about Nodes that were skipped. `robot` is `None` with Robot off.
pub fn desired_targets(
    nodes: &[Node],
    selector: &LabelSelector,
    service: &str,
    robot: Option<&RobotTargets<'_>>,
) -> (Vec<ServerTarget>, Vec<ProviderEvent>) {
    let empty = BTreeMap::new();
    let mut by_server: BTreeMap<TargetRef, ServerTarget> = BTreeMap::new();
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
        let target = match ProviderId::parse(pid) {
            Ok(ProviderId::Cloud(id)) => Some(TargetRef::Server(id)),
            Ok(ProviderId::Robot(n) | ProviderId::LegacyRobot(n)) => match robot {
                Some(robot) => robot_ip(node, n, robot, service, &mut events).map(TargetRef::Ip),
                None => {
                    debug!(node = %name, service, "Robot Node with ROBOT_ENABLED off; not a target");
                    None
                }
            },
            Err(ProviderIdError::UnknownPrefix(_)) => {
                events.push(ProviderEvent::warning(
                    EventObject::node(node),
                    "UnknownProviderIDPrefix",
                    format!(
                        "Node could not be added to Load Balancer for service {service} because the provider ID does \
                         not match any known format"
                    ),
                ));
                None
            }
            Err(e @ ProviderIdError::InvalidId(_)) => {
                events.push(ProviderEvent::warning(
                    EventObject::node(node),
                    "InvalidProviderID",
                    format!("Node could not be added to Load Balancer for service {service}: {e}"),
                ));
                None
            }
        };
        if let Some(target) = target {
            let candidate = ServerTarget { target, node: name, object: EventObject::node(node) };
            match by_server.get(&target) {
                Some(existing) if existing.node <= candidate.node => {}
                _ => {
                    by_server.insert(target, candidate);
                }
            }
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
        t.iter()
            .map(|t| match t.target {
                TargetRef::Server(id) => (id.0, t.node.as_str()),
                TargetRef::Ip(_) => (-1, t.node.as_str()),
            })
            .collect()
    }

    #[test]
    fn cloud_nodes_become_targets_sorted_by_name() {
        let nodes = [node("b", Some("hcloud://2"), &[]), node("a", Some("hcloud://7"), &[])];
        let (t, ev) = desired_targets(&nodes, &LabelSelector::default(), "ns/svc", None);
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
        let (t, ev) = desired_targets(&nodes, &LabelSelector::default(), "ns/svc", None);
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
            desired_targets(&nodes, &sel, "s", None).0.iter().map(|t| t.node.clone()).collect::<Vec<_>>()
        };
        assert_eq!(pick(""), vec!["n1", "n2", "n3"]);
        assert_eq!(pick("zone"), vec!["n1", "n2", "n3"]);
        assert_eq!(pick("role=worker"), vec!["n1", "n2"]);
        assert_eq!(pick("role in (worker,edge),zone"), vec!["n1", "n2", "n3"]);
        assert_eq!(pick("role!=worker,zone=a"), vec!["n3"]);
    }

    /// The keys the service controller watches on Nodes for this Service: those the selector
    /// looks at; none without a selector or with one that does not parse.
    #[test]
    fn node_selector_keys_are_what_the_selector_looks_at() {
        let svc = |sel: Option<&str>| {
            let mut s = Service::default();
            s.metadata.annotations = sel.map(|v| [(NODE_SELECTOR.to_owned(), v.to_owned())].into());
            s
        };
        assert_eq!(node_selector_keys(&svc(Some("role in (worker),!gpu,zone!=b"))), ["gpu", "role", "zone"]);
        assert!(node_selector_keys(&svc(None)).is_empty());
        assert!(node_selector_keys(&svc(Some("role in ()"))).is_empty());
    }

    #[test]
    fn two_nodes_naming_one_server_give_one_target() {
        let nodes = [node("z", Some("hcloud://5"), &[]), node("y", Some("hcloud://5"), &[])];
        assert_eq!(ids(&desired_targets(&nodes, &LabelSelector::default(), "s", None).0), vec![(5, "y")]);
    }

    fn with_internal_ip(mut n: Node, ip: &str) -> Node {
        n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            addresses: Some(vec![k8s_openapi::api::core::v1::NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            }]),
            ..Default::default()
        });
        n
    }

    fn targets_of(t: &[ServerTarget]) -> Vec<(String, TargetRef)> {
        t.iter().map(|t| (t.node.clone(), t.target)).collect()
    }

    fn reasons(ev: &[ProviderEvent]) -> Vec<(&str, &str)> {
        ev.iter()
            .map(|e| match e.object.kind {
                "Service" => (e.message.split(' ').nth(2).unwrap_or_default(), e.reason.as_ref()),
                _ => (e.object.name.as_str(), e.reason.as_ref()),
            })
            .collect()
    }

    fn svc() -> EventObject {
        EventObject { kind: "Service", api_version: "v1", namespace: Some("ns".into()), name: "svc".into(), uid: None }
    }

    /// Official ReconcileHCLBTargets Robot cases: public IPs from the Robot list, InternalIPs
    /// with use-private-ip (public IP and `InternalIPNotConfigured` without one), the
    /// credential-less mode, and `ServerNotFound` for a Robot Node without a usable IP.
    #[test]
    fn robot_nodes_become_ip_targets() {
        let ip = |s: &str| TargetRef::Ip(s.parse().expect("ip"));
        let ips: HashMap<u64, Option<Ipv4Addr>> =
            [(1, Some(Ipv4Addr::new(198, 19, 0, 1))), (2, Some(Ipv4Addr::new(198, 19, 0, 2))), (3, None)].into();
        let nodes = [
            node("cloud", Some("hcloud://9"), &[]),
            with_internal_ip(node("r1", Some("hrobot://1"), &[]), "10.1.0.1"),
            node("r2", Some("hcloud://bm-2"), &[]),
            node("r3", Some("hrobot://3"), &[]),
            node("r4", Some("hrobot://4"), &[]),
        ];
        let sel = LabelSelector::default();
        let svc = svc();
        let public = RobotTargets { public_ips: Some(&ips), use_private_ip: false, service: &svc };
        let (t, ev) = desired_targets(&nodes, &sel, "ns/svc", Some(&public));
        assert_eq!(
            targets_of(&t),
            vec![
                ("cloud".into(), TargetRef::Server(ServerId(9))),
                ("r1".into(), ip("198.19.0.1")),
                ("r2".into(), ip("198.19.0.2"))
            ]
        );
        assert_eq!(reasons(&ev), vec![("r3", "ServerNotFound"), ("r4", "ServerNotFound")]);

        let private = RobotTargets { public_ips: Some(&ips), use_private_ip: true, service: &svc };
        let (t, ev) = desired_targets(&nodes, &sel, "ns/svc", Some(&private));
        assert_eq!(targets_of(&t)[1..], [("r1".into(), ip("10.1.0.1")), ("r2".into(), ip("198.19.0.2"))]);
        assert_eq!(
            reasons(&ev),
            vec![
                ("r2", "InternalIPNotConfigured"),
                ("r3", "InternalIPNotConfigured"),
                ("r3", "ServerNotFound"),
                ("r4", "InternalIPNotConfigured"),
                ("r4", "ServerNotFound")
            ]
        );

        let lb_only = RobotTargets { public_ips: None, use_private_ip: true, service: &svc };
        let (t, ev) = desired_targets(&nodes, &sel, "ns/svc", Some(&lb_only));
        assert_eq!(targets_of(&t)[1..], [("r1".into(), ip("10.1.0.1"))]);
        assert_eq!(reasons(&ev).iter().filter(|(_, r)| *r == "InternalIPNotConfigured").count(), 3);
        assert!(ev.iter().filter(|e| e.reason == "InternalIPNotConfigured").all(|e| e.object == svc), "on the Service");
        let lb_only_public = RobotTargets { public_ips: None, use_private_ip: false, service: &svc };
        let (t, ev) = desired_targets(&nodes, &sel, "ns/svc", Some(&lb_only_public));
        assert_eq!(t.len(), 1, "only the cloud node");
        assert!(ev.iter().all(|e| e.reason == "ServerNotFound" && e.message.contains("use-private-ip")));

        let (t, ev) = desired_targets(&nodes, &sel, "ns/svc", None);
        assert_eq!(t.len(), 1, "Robot off: Robot Nodes are no targets");
        assert!(ev.is_empty());
    }
}
