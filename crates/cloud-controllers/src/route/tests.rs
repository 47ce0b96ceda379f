//! Ports of upstream's `controllers/route/route_controller_test.go` (k8s.io/cloud-provider),
//! plus the behaviour this project adds.
//!
//! Upstream's `TestReconcile` runs `reconcile(nodes, routes)` against its fake cloud, then
//! reads the routes back and checks the `NetworkUnavailable` conditions the controller
//! wrote. In our terms ([`reconcile`]) that is `plan_routes` → `execute` against the port of
//! the fake ([`FakeRoutes`]), and for every node the execution reported, the exact status
//! patch the controller sends (`condition_patch`) applied as the API server applies it.
//!
//! Upstream's condition check looks for `update` actions while the controller PATCHes, so
//! its `expectedNetworkUnavailable` values are never compared; here they are: `true` means
//! the node ends with `NetworkUnavailable=False/RouteCreated`, `false` means the node gets
//! no `False` condition (for a node without pod CIDRs and routes: no condition at all).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_provider::AddressType::InternalIp;
use cloud_provider::{CloudError, NodeAddress, Route, Routes};
use controller_runtime::merge_patch::apply_merge_patch_to;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pretty_assertions::assert_eq;

use super::exec::{ExecutionReport, RouteSink, execute};
use super::plan::{
    NETWORK_UNAVAILABLE, PlannedCreate, RouteAction, condition_patch, is_responsible_for_route, parse_cidr_sloppy,
    plan_routes, plan_routes_matching, route_action, update_needs_reconcile,
};
use crate::testing::FakeRoutes;

const CLUSTER: &str = "my-k8s";

fn cidrs(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|c| parse_cidr_sloppy(c).expect("valid cidr")).collect()
}

fn internal(ip: &str) -> Vec<NodeAddress> {
    vec![NodeAddress::new(InternalIp, ip)]
}

/// A node as upstream's tables build it: name, UID, `spec.podCIDRs` and one InternalIP.
fn node(name: &str, uid: &str, pod_cidrs: &[&str], internal_ip: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.to_owned());
    n.metadata.uid = Some(uid.to_owned());
    n.spec = Some(NodeSpec {
        pod_cidr: pod_cidrs.first().map(|c| (*c).to_owned()),
        pod_cidrs: (!pod_cidrs.is_empty()).then(|| pod_cidrs.iter().map(|c| (*c).to_owned()).collect()),
        ..NodeSpec::default()
    });
    n.status = Some(NodeStatus {
        addresses: Some(vec![k8s_openapi::api::core::v1::NodeAddress {
            type_: "InternalIP".to_owned(),
            address: internal_ip.to_owned(),
        }]),
        ..NodeStatus::default()
    });
    n
}

/// `{Name, TargetNode, TargetNodeAddresses: [InternalIP ip] (none if ""), DestinationCIDR,
/// Blackhole, EnableNodeAddresses}`.
fn route(name: &str, target: &str, ip: &str, cidr: &str, blackhole: bool, enable: bool) -> Route {
    Route {
        name: format!("{CLUSTER}-{name}"),
        target_node: target.to_owned(),
        target_node_addresses: if ip.is_empty() { Vec::new() } else { internal(ip) },
        destination_cidr: cidr.to_owned(),
        blackhole,
        enable_node_addresses: enable,
        ..Route::default()
    }
}

/// Upstream `routeListEqual`: same length, every route of `a` has one in `b` with the same
/// target, destination and addresses (as sets).
fn route_list_equal(a: &[Route], b: &[Route]) -> bool {
    a.len() == b.len()
        && a.iter().all(|x| {
            b.iter().any(|y| {
                x.destination_cidr == y.destination_cidr
                    && x.target_node == y.target_node
                    && super::plan::equal_node_addrs(&x.target_node_addresses, &y.target_node_addresses)
            })
        })
}

/// Records what the execution reports, as the controller's sink would act on it.
#[derive(Default)]
struct Recorder {
    failed: Mutex<Vec<(String, String, String)>>,
    done: Mutex<BTreeMap<String, bool>>,
}

impl RouteSink for Recorder {
    async fn creation_failed(&self, node: &Node, create: &PlannedCreate, _elapsed: Duration, error: &CloudError) {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.failed.lock().expect("lock").push((name, create.route.destination_cidr.clone(), error.to_string()));
    }

    async fn node_done(&self, node: &Arc<Node>, routes_created: bool) {
        self.done.lock().expect("lock").insert(node.metadata.name.clone().unwrap_or_default(), routes_created);
    }
}

struct Outcome {
    report: ExecutionReport,
    routes: Vec<Route>,
    /// The nodes after the controller's condition writes.
    nodes: Vec<Node>,
    recorder: Recorder,
}

fn now() -> Time {
    Time(Timestamp::from_second(1_700_000_000).expect("valid"))
}

/// Upstream's `rc.reconcile(ctx, nodes, routes)` followed by `ListRoutes`, in our terms.
async fn reconcile(fake: &FakeRoutes, nodes: &[Node], initial: &[Route], cluster_cidrs: &[IpNet]) -> Outcome {
    let nodes: Vec<Arc<Node>> = nodes.iter().cloned().map(Arc::new).collect();
    let plan = plan_routes_matching(&nodes, initial, cluster_cidrs, &|p| fake.canonical_provider_id(p));
    let recorder = Recorder::default();
    let report = execute(fake, CLUSTER, &plan, &nodes, &recorder, 200).await;
    let done = recorder.done.lock().expect("lock").clone();
    let nodes = nodes
        .iter()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            match done.get(&name).and_then(|created| condition_patch(n, *created, &now())) {
                Some(patch) => apply_merge_patch_to(n.as_ref(), &patch).expect("patch applies"),
                None => n.as_ref().clone(),
            }
        })
        .collect();
    let routes = fake.list_routes(CLUSTER).await.expect("list");
    Outcome { report, routes, nodes, recorder }
}

fn condition(node: &Node) -> Option<&NodeCondition> {
    node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == NETWORK_UNAVAILABLE)
}

/// Go `TestIsResponsibleForRoute`.
#[test]
fn test_is_responsible_for_route() {
    let cases = [
        // Routes that belong to this cluster
        ("10.244.0.0/16", "10.244.0.0/24", true),
        ("10.244.0.0/16", "10.244.10.0/24", true),
        ("10.244.0.0/16", "10.244.255.0/24", true),
        ("10.244.0.0/14", "10.244.0.0/24", true),
        ("10.244.0.0/14", "10.247.255.0/24", true),
        ("a00:100::/10", "a00:100::/24", true),
        // Routes that match our naming/tagging scheme, but are outside our cidr
        ("10.244.0.0/16", "10.224.0.0/24", false),
        ("10.244.0.0/16", "10.0.10.0/24", false),
        ("10.244.0.0/16", "10.255.255.0/24", false),
        ("10.244.0.0/14", "10.248.0.0/24", false),
        ("10.244.0.0/14", "10.243.255.0/24", false),
        ("a00:100::/10", "b00:100::/24", false),
    ];
    for (i, (cluster_cidr, route_cidr, expected)) in cases.into_iter().enumerate() {
        let r = Route {
            name: "my-awesome-cluster-12345678-90ab-cdef-1234-567890abcdef".to_owned(),
            target_node: "doesnt-matter-for-this-test".to_owned(),
            destination_cidr: route_cidr.to_owned(),
            ..Route::default()
        };
        assert_eq!(is_responsible_for_route(&cidrs(&[cluster_cidr]), &r), expected, "{i}. {cluster_cidr} {route_cidr}");
    }
    // Unparsable destinations are never ours (upstream logs and skips them).
    let r = Route { destination_cidr: "not-a-cidr".to_owned(), ..Route::default() };
    assert!(!is_responsible_for_route(&cidrs(&["10.0.0.0/8"]), &r));
}

struct ReconcileCase {
    description: &'static str,
    nodes: Vec<Node>,
    initial_routes: Vec<Route>,
    expected_routes: Vec<Route>,
    expected_network_unavailable: Vec<bool>,
    dual_stack: bool,
}

/// Go `TestReconcile`.
#[tokio::test]
async fn test_reconcile() {
    let node1 = node("node-1", "01", &["10.120.0.0/24"], "10.0.1.1");
    let node2 = node("node-2", "02", &["10.120.1.0/24"], "10.0.2.1");
    let node_no_cidr = node("node-2", "02", &[], "10.0.5.1");
    let node3 = node("node-3", "03", &["10.120.0.0/24", "a00:100::/24"], "10.0.3.1");
    let node4 = node("node-4", "04", &["10.120.1.0/24", "a00:200::/24"], "10.0.4.1");

    let cases = vec![
        ReconcileCase {
            description: "routes have no TargetNodeAddresses at the beginning",
            dual_stack: true,
            nodes: vec![node3.clone(), node4.clone()],
            initial_routes: vec![
                route("01", "node-3", "", "10.120.0.0/24", false, true),
                route("02", "node-4", "", "10.120.1.0/24", false, true),
                route("03", "node-3", "", "a00:100::/24", false, true),
                route("04", "node-4", "", "a00:200::/24", false, true),
            ],
            expected_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.0.0/24", false, true),
                route("02", "node-4", "10.0.4.1", "10.120.1.0/24", false, true),
                route("03", "node-3", "10.0.3.1", "a00:100::/24", false, true),
                route("04", "node-4", "10.0.4.1", "a00:200::/24", false, true),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "routes' TargetNodeAddresses changed",
            dual_stack: true,
            nodes: vec![node3.clone(), node4.clone()],
            initial_routes: vec![
                route("01", "node-3", "10.0.13.1", "10.120.0.0/24", false, true),
                route("02", "node-4", "10.0.14.1", "10.120.1.0/24", false, true),
                route("03", "node-3", "10.0.13.1", "a00:100::/24", false, true),
                route("04", "node-4", "10.0.14.1", "a00:200::/24", false, true),
            ],
            expected_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.0.0/24", false, true),
                route("02", "node-4", "10.0.4.1", "10.120.1.0/24", false, true),
                route("03", "node-3", "10.0.3.1", "a00:100::/24", false, true),
                route("04", "node-4", "10.0.4.1", "a00:200::/24", false, true),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "multicidr 2 nodes and no routes",
            dual_stack: true,
            nodes: vec![node3.clone(), node4.clone()],
            initial_routes: vec![],
            expected_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.0.0/24", false, false),
                route("02", "node-4", "10.0.4.1", "10.120.1.0/24", false, false),
                route("03", "node-3", "10.0.3.1", "a00:100::/24", false, false),
                route("04", "node-4", "10.0.4.1", "a00:200::/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "multicidr 2 nodes and all routes created",
            dual_stack: true,
            nodes: vec![node3.clone(), node4.clone()],
            initial_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.0.0/24", false, false),
                route("02", "node-4", "10.0.4.1", "10.120.1.0/24", false, false),
                route("03", "node-3", "10.0.3.1", "a00:100::/24", false, false),
                route("04", "node-4", "10.0.4.1", "a00:200::/24", false, false),
            ],
            expected_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.0.0/24", false, false),
                route("02", "node-4", "10.0.4.1", "10.120.1.0/24", false, false),
                route("03", "node-3", "10.0.3.1", "a00:100::/24", false, false),
                route("04", "node-4", "10.0.4.1", "a00:200::/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "multicidr 2 nodes and few wrong routes",
            dual_stack: true,
            nodes: vec![node3.clone(), node4.clone()],
            initial_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.1.0/24", false, false),
                route("02", "node-4", "10.0.4.1", "10.120.0.0/24", false, false),
                route("03", "node-3", "10.0.3.1", "a00:200::/24", false, false),
                route("04", "node-4", "10.0.4.1", "a00:100::/24", false, false),
            ],
            expected_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.0.0/24", false, false),
                route("02", "node-4", "10.0.4.1", "10.120.1.0/24", false, false),
                route("03", "node-3", "10.0.3.1", "a00:100::/24", false, false),
                route("04", "node-4", "10.0.4.1", "a00:200::/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "multicidr 2 nodes and some routes created",
            dual_stack: true,
            nodes: vec![node3.clone(), node4.clone()],
            initial_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.0.0/24", false, false),
                route("04", "node-4", "10.0.4.1", "a00:200::/24", false, false),
            ],
            expected_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.0.0/24", false, false),
                route("02", "node-4", "10.0.4.1", "10.120.1.0/24", false, false),
                route("03", "node-3", "10.0.3.1", "a00:100::/24", false, false),
                route("04", "node-4", "10.0.4.1", "a00:200::/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "multicidr 2 nodes and too many routes",
            dual_stack: true,
            nodes: vec![node3.clone(), node4.clone()],
            initial_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.0.0/24", false, false),
                route("02", "node-4", "10.0.4.1", "10.120.1.0/24", false, false),
                route("001", "node-x", "10.0.5.1", "10.120.2.0/24", false, false),
                route("03", "node-3", "10.0.3.1", "a00:100::/24", false, false),
                route("04", "node-4", "10.0.4.1", "a00:200::/24", false, false),
                route("0002", "node-y", "10.0.6.1", "a00:300::/24", false, false),
            ],
            expected_routes: vec![
                route("01", "node-3", "10.0.3.1", "10.120.0.0/24", false, false),
                route("02", "node-4", "10.0.4.1", "10.120.1.0/24", false, false),
                route("03", "node-3", "10.0.3.1", "a00:100::/24", false, false),
                route("04", "node-4", "10.0.4.1", "a00:200::/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "single cidr 2 nodes and routes created",
            dual_stack: false,
            nodes: vec![node1.clone(), node2.clone()],
            initial_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
            ],
            expected_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "single cidr node ips changed so routes should be updated",
            dual_stack: false,
            nodes: vec![node1.clone(), node2.clone()],
            initial_routes: vec![
                route("01", "node-1", "10.0.1.2", "10.120.0.0/24", false, true),
                route("02", "node-2", "10.0.2.2", "10.120.1.0/24", false, true),
            ],
            expected_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, true),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, true),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "single cidr 2 nodes and one route created",
            dual_stack: false,
            nodes: vec![node1.clone(), node2.clone()],
            initial_routes: vec![route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false)],
            expected_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "single cidr 2 nodes and no routes",
            dual_stack: false,
            nodes: vec![node1.clone(), node2.clone()],
            initial_routes: vec![],
            expected_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "single cidr 2 nodes and too many routes",
            dual_stack: false,
            nodes: vec![node1.clone(), node2.clone()],
            initial_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
                route("03", "node-3", "10.0.3.1", "10.120.2.0/24", false, false),
                route("04", "node-4", "10.0.4.1", "10.120.3.0/24", false, false),
            ],
            expected_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "single cidr 2 nodes and 2 routes with 1 incorrect",
            dual_stack: false,
            nodes: vec![node1.clone(), node2.clone()],
            initial_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("03", "node-3", "10.0.2.1", "10.120.2.0/24", false, false),
            ],
            expected_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "single cidr 2 nodes and one node without cidr assigned",
            dual_stack: false,
            nodes: vec![node1.clone(), node_no_cidr.clone()],
            initial_routes: vec![],
            expected_routes: vec![route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false)],
            expected_network_unavailable: vec![true, false],
        },
        ReconcileCase {
            description: "single cidr 2 nodes and an extra blackhole route in our range",
            dual_stack: false,
            nodes: vec![node1.clone(), node2.clone()],
            initial_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
                route("03", "", "10.0.100.1", "10.120.2.0/24", true, false),
            ],
            expected_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
        ReconcileCase {
            description: "single cidr 2 nodes and an extra blackhole route not in our range",
            dual_stack: false,
            nodes: vec![node1.clone(), node2.clone()],
            initial_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
                route("03", "", "10.0.100.1", "10.1.2.0/24", true, false),
            ],
            expected_routes: vec![
                route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false),
                route("02", "node-2", "10.0.2.1", "10.120.1.0/24", false, false),
                route("03", "", "10.0.100.1", "10.1.2.0/24", true, false),
            ],
            expected_network_unavailable: vec![true, true],
        },
    ];

    for case in cases {
        let fake = FakeRoutes::with_routes(CLUSTER, &case.initial_routes);
        let mut cluster_cidrs = vec!["10.120.0.0/16"];
        if case.dual_stack {
            cluster_cidrs.push("ace:cab:deca::/8");
        }
        let out = reconcile(&fake, &case.nodes, &case.initial_routes, &cidrs(&cluster_cidrs)).await;
        let name = case.description;
        assert!(out.report.complete(), "{name}: {:?} {:?}", out.report, out.recorder.failed.lock().expect("lock"));
        assert!(
            route_list_equal(&out.routes, &case.expected_routes),
            "{name}:\nfound routes:\n{:#?}\nexpected routes:\n{:#?}",
            out.routes,
            case.expected_routes
        );
        for (node, expected) in out.nodes.iter().zip(&case.expected_network_unavailable) {
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            let c = condition(node);
            if *expected {
                let c = c.unwrap_or_else(|| panic!("{name}: node {node_name} has no NetworkUnavailable condition"));
                assert_eq!(
                    (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
                    ("False", Some("RouteCreated"), Some("RouteController created a route")),
                    "{name}: node {node_name}"
                );
            } else {
                assert!(c.is_none(), "{name}: node {node_name} without pod CIDRs and routes is left alone: {c:?}");
            }
        }
    }
}

/// Go `TestReconcile`, case "duplicate pod cidr": a node listing the same pod CIDR twice.
///
/// Upstream creates the route twice; its fake fails the second creation and from then on
/// fails every call (`f.Err` stays set), so its expected route list (empty) is only "met"
/// because `ListRoutes` errors and `expectError` skips the comparison. The real outcome the
/// case describes: the reconcile succeeds, the one route exists and the node is marked
/// routed. This planner de-duplicates pod CIDRs, so no creation fails at all.
#[tokio::test]
async fn test_reconcile_duplicate_pod_cidr() {
    let node_duplicate_cidr = node("node-4", "04", &["10.120.1.0/24", "10.120.1.0/24"], "10.0.4.1");
    let fake = FakeRoutes::default();
    let out = reconcile(&fake, &[node_duplicate_cidr], &[], &cidrs(&["10.120.0.0/16"])).await;
    assert!(out.report.complete(), "{:?}", out.report);
    assert_eq!(fake.calls().iter().filter(|c| *c == "create-route").count(), 1, "{:?}", fake.calls());
    assert!(route_list_equal(&out.routes, &[route("01", "node-4", "10.0.4.1", "10.120.1.0/24", false, false)]));
    let c = condition(&out.nodes[0]).expect("condition");
    assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", Some("RouteCreated")));
}

fn with_rv(mut n: Node, rv: &str) -> Node {
    n.metadata.resource_version = Some(rv.to_owned());
    n
}

/// Go `TestHandleNodeUpdate` (watch-based mode). Upstream asserts only the two enqueueing
/// cases; its other two cases compare objects with the same (empty) `resourceVersion`, which
/// its own rule treats as an informer resync. Here the objects carry the versions a real
/// watch delivers and every case asserts.
#[test]
fn test_handle_node_update() {
    let node1 = with_rv(node("node-1", "01", &["10.120.0.0/24"], "10.0.1.1"), "1");
    let cases: Vec<(&str, Node, bool)> = vec![
        ("internal IP updated", with_rv(node("node-1", "01", &["10.120.0.0/24"], "10.0.1.2"), "2"), true),
        ("pod CIDR updated", with_rv(node("node-1", "01", &["10.121.0.0/24"], "10.0.1.1"), "2"), true),
        // The informer's periodic resync replays the same object: a full reconcile (KEP-5237).
        ("node object not updated", node1.clone(), true),
        (
            "unrelated node update",
            {
                let mut n = with_rv(node("node-1", "01", &["10.120.0.0/24"], "10.0.1.1"), "2");
                n.status.get_or_insert_with(NodeStatus::default).images =
                    Some(vec![k8s_openapi::api::core::v1::ContainerImage {
                        names: Some(vec!["registry.k8s.io/pause:latest".to_owned()]),
                        size_bytes: Some(239840),
                    }]);
                n
            },
            false,
        ),
        (
            "provider ID set",
            {
                let mut n = with_rv(node1.clone(), "2");
                n.spec.get_or_insert_with(NodeSpec::default).provider_id = Some("fake://1".to_owned());
                n
            },
            true,
        ),
    ];
    for (name, updated, expected) in cases {
        assert_eq!(update_needs_reconcile(&node1, &updated), expected, "{name}");
    }
}

struct ConditionCase {
    description: &'static str,
    existing: Option<(&'static str, &'static str, &'static str)>,
    routes_created: bool,
    expected_update: bool,
    expected: (&'static str, &'static str, &'static str),
}

fn node_with_condition(existing: Option<(&str, &str, &str)>) -> Node {
    let mut n = node("test-node", "test-uid", &["10.244.0.0/24"], "10.0.0.1");
    n.status = Some(NodeStatus::default());
    if let Some((status, reason, message)) = existing {
        n.status.as_mut().expect("status").conditions = Some(vec![NodeCondition {
            type_: NETWORK_UNAVAILABLE.to_owned(),
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            ..NodeCondition::default()
        }]);
    }
    n
}

/// Go `TestUpdateNetworkingCondition`.
#[test]
fn test_update_networking_condition() {
    let created = ("False", "RouteCreated", "RouteController created a route");
    let not_created = ("True", "NoRouteCreated", "RouteController failed to create a route");
    let cases = [
        ConditionCase {
            description: "No existing condition, routes created - should update",
            existing: None,
            routes_created: true,
            expected_update: true,
            expected: created,
        },
        ConditionCase {
            description: "No existing condition, routes not created - should update",
            existing: None,
            routes_created: false,
            expected_update: true,
            expected: not_created,
        },
        ConditionCase {
            description: "Existing condition with same status and reason (RouteCreated) - should not update",
            existing: Some(created),
            routes_created: true,
            expected_update: false,
            expected: created,
        },
        ConditionCase {
            description: "Existing condition with same status but different reason (CalicoIsUp) - should update",
            existing: Some(("False", "CalicoIsUp", "Calico is running on this node")),
            routes_created: true,
            expected_update: true,
            expected: created,
        },
        ConditionCase {
            description: "Existing condition with Status=False but different reason - should update when routes created",
            existing: Some(("False", "ExternalCNI", "External CNI configured")),
            routes_created: true,
            expected_update: true,
            expected: created,
        },
        ConditionCase {
            description: "Existing condition with Status=True and different reason - should update when routes not created",
            existing: Some(("True", "SomeOtherReason", "Some other message")),
            routes_created: false,
            expected_update: true,
            expected: not_created,
        },
        ConditionCase {
            description: "Existing condition with Status=False, transitioning to routes not created - should update",
            existing: Some(created),
            routes_created: false,
            expected_update: true,
            expected: not_created,
        },
        ConditionCase {
            description: "Existing condition with Status=True and NoRouteCreated reason - should not update",
            existing: Some(not_created),
            routes_created: false,
            expected_update: false,
            expected: not_created,
        },
    ];
    for case in cases {
        let n = node_with_condition(case.existing);
        let patch = condition_patch(&n, case.routes_created, &now());
        assert_eq!(patch.is_some(), case.expected_update, "{}", case.description);
        let updated = match patch {
            Some(p) => apply_merge_patch_to(&n, &p).expect("applies"),
            None => n.clone(),
        };
        let c = condition(&updated).expect("condition exists");
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref().unwrap_or_default(), c.message.as_deref().unwrap_or_default()),
            case.expected,
            "{}",
            case.description
        );
        let conditions = updated.status.as_ref().and_then(|s| s.conditions.as_ref()).expect("conditions");
        assert_eq!(conditions.len(), 1, "{}: exactly one NetworkUnavailable condition", case.description);
    }
}

/// Go `TestUpdateNetworkingConditionWithCalicoScenario`.
#[test]
fn test_update_networking_condition_with_calico_scenario() {
    let n = node_with_condition(Some(("False", "CalicoIsUp", "Calico is running on this node")));
    let patch = condition_patch(&n, true, &now()).expect("a patch is sent");
    let updated = apply_merge_patch_to(&n, &patch).expect("applies");
    let c = condition(&updated).expect("condition");
    assert_eq!(c.status, "False", "Expected Status to remain False");
    assert_eq!(c.reason.as_deref(), Some("RouteCreated"), "Expected Reason to be updated to RouteCreated");
    assert_eq!(c.message.as_deref(), Some("RouteController created a route"), "Expected Message to be updated");
}

// ---------------------------------------------------------------------------------------------
// Beyond upstream.

#[test]
fn condition_patch_keeps_other_conditions_guards_the_version_and_keeps_the_transition_time() {
    let mut n = node_with_condition(Some(("False", "CalicoIsUp", "Calico is running on this node")));
    n.metadata.resource_version = Some("42".to_owned());
    let earlier = Time(Timestamp::from_second(1_600_000_000).expect("valid"));
    let conditions = n.status.as_mut().and_then(|s| s.conditions.as_mut()).expect("conditions");
    conditions[0].last_transition_time = Some(earlier.clone());
    conditions
        .insert(0, NodeCondition { type_: "Ready".to_owned(), status: "True".to_owned(), ..NodeCondition::default() });
    let patch = condition_patch(&n, true, &now()).expect("patch");
    assert_eq!(patch["metadata"]["resourceVersion"], "42");
    let updated = apply_merge_patch_to(&n, &patch).expect("applies");
    let conditions = updated.status.as_ref().and_then(|s| s.conditions.as_ref()).expect("conditions");
    assert_eq!(conditions.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(), ["Ready", NETWORK_UNAVAILABLE]);
    let c = &conditions[1];
    assert_eq!(c.last_transition_time, Some(earlier), "status unchanged (False): the transition time stays");
    assert_eq!(c.last_heartbeat_time, Some(now()));
    // A status change moves the transition time.
    let patch = condition_patch(&updated, false, &now()).expect("patch");
    let flipped = apply_merge_patch_to(&updated, &patch).expect("applies");
    assert_eq!(condition(&flipped).and_then(|c| c.last_transition_time.clone()), Some(now()));
}

#[test]
fn a_route_whose_gateway_left_the_node_is_replaced_and_deletions_come_first() {
    let n = node("node-1", "01", &["10.120.0.0/24"], "10.0.1.2");
    let mut r = route("01", "node-1", "", "10.120.0.0/24", false, false);
    r.gateway = Some("10.0.1.1".to_owned());
    assert_eq!(route_action(&[&r], "10.120.0.0/24", &internal("10.0.1.2")), RouteAction::Update);
    assert_eq!(route_action(&[&r], "10.120.0.0/24", &internal("10.0.1.1")), RouteAction::Keep);
    // Spelling of the address does not matter.
    assert_eq!(route_action(&[&r], "10.120.0.0/24", &internal("010.0.1.1")), RouteAction::Keep);
    let plan = plan_routes(&[Arc::new(n)], &[r.clone()], &cidrs(&["10.120.0.0/16"]));
    assert_eq!(plan.deletions, vec![r]);
    assert_eq!(plan.creations(), 1);
    assert!(plan.deletions_first, "the old route goes before the new one is created");
}

#[test]
fn routes_are_matched_to_nodes_by_provider_id_first() {
    let mut n = node("k8s-worker-1", "01", &["10.120.0.0/24"], "10.0.1.1");
    n.spec.as_mut().expect("spec").provider_id = Some("fake://7".to_owned());
    let n = Arc::new(n);
    // The cloud names the instance differently from the node: matched by provider ID.
    let mut r = route("01", "server-7", "10.0.1.1", "10.120.0.0/24", false, false);
    r.target_provider_id = "fake://7".to_owned();
    let plan = plan_routes(std::slice::from_ref(&n), std::slice::from_ref(&r), &cidrs(&["10.120.0.0/16"]));
    assert!(plan.deletions.is_empty() && plan.creations() == 0, "{plan:?}");
    assert_eq!(plan.nodes["k8s-worker-1"].actions["10.120.0.0/24"], RouteAction::Keep);

    // A route naming the node but another instance belongs to nobody: replaced.
    let mut stale = route("01", "k8s-worker-1", "10.0.1.1", "10.120.0.0/24", false, false);
    stale.target_provider_id = "fake://6".to_owned();
    let plan = plan_routes(std::slice::from_ref(&n), std::slice::from_ref(&stale), &cidrs(&["10.120.0.0/16"]));
    assert_eq!(plan.deletions, vec![stale]);
    assert_eq!(plan.creations(), 1);
    let created = &plan.nodes["k8s-worker-1"].creations[0];
    assert_eq!(created.name_hint, "01");
    assert_eq!(created.route.target_provider_id, "fake://7", "creations carry the node's provider ID");
    assert_eq!(created.route.target_node_addresses, internal("10.0.1.1"));

    // Without a provider ID on either side the name decides, as upstream.
    let unnamed = Arc::new(node("k8s-worker-1", "01", &["10.120.0.0/24"], "10.0.1.1"));
    let mut r = route("01", "k8s-worker-1", "10.0.1.1", "10.120.0.0/24", false, false);
    r.target_provider_id = "fake://7".to_owned();
    let plan = plan_routes(&[unnamed], &[r], &cidrs(&["10.120.0.0/16"]));
    assert!(plan.deletions.is_empty() && plan.creations() == 0, "{plan:?}");
}

/// The provider says when two provider IDs name one instance (the fake: `fake://007` is
/// `fake://7`); a route is matched to its node through that, not by the raw strings.
#[tokio::test]
async fn provider_ids_naming_the_same_instance_match_without_deleting_and_recreating_the_route() {
    let mut n = node("k8s-worker-1", "01", &["10.120.0.0/24"], "10.0.1.1");
    n.spec.as_mut().expect("spec").provider_id = Some("fake://007".to_owned());
    // The cloud reports the instance's canonical ID and its own name for it.
    let mut r = route("01", "server-7", "10.0.1.1", "10.120.0.0/24", false, false);
    r.target_provider_id = "fake://7".to_owned();
    let fake = FakeRoutes::with_routes(CLUSTER, std::slice::from_ref(&r));
    let out = reconcile(&fake, &[n], std::slice::from_ref(&r), &cidrs(&["10.120.0.0/16"])).await;
    assert_eq!(out.report, ExecutionReport::default(), "nothing deleted, nothing created: {:?}", fake.calls());
    assert_eq!(fake.calls(), vec!["list-routes".to_owned()], "only the read-back");
    assert_eq!(out.routes.len(), 1);
    assert_eq!(condition(&out.nodes[0]).map(|c| c.status.as_str()), Some("False"), "the node's route exists");
}

#[test]
fn routes_outside_the_cluster_cidrs_are_never_deleted() {
    let n = Arc::new(node("node-1", "01", &["10.120.0.0/24"], "10.0.1.1"));
    let foreign = vec![
        route("a", "node-9", "10.0.9.1", "192.168.0.0/24", false, false),
        route("b", "", "10.0.9.1", "10.121.0.0/24", true, false),
        route("c", "node-1", "10.0.1.1", "10.119.255.0/24", false, false),
    ];
    let plan = plan_routes(&[n], &foreign, &cidrs(&["10.120.0.0/16"]));
    assert!(plan.deletions.is_empty(), "{:?}", plan.deletions);
    assert_eq!(plan.creations(), 1);
}

#[test]
fn nodes_with_routes_but_no_pod_cidrs_lose_them_and_are_marked_unavailable() {
    let n = Arc::new(node("node-1", "01", &[], "10.0.1.1"));
    let r = route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false);
    let plan = plan_routes(&[n], std::slice::from_ref(&r), &cidrs(&["10.120.0.0/16"]));
    assert_eq!(plan.deletions, vec![r]);
    let entry = &plan.nodes["node-1"];
    assert!(entry.actions.is_empty());
    assert!(!entry.all_created(&[]), "NetworkUnavailable=True/NoRouteCreated, as upstream");
}

#[tokio::test]
async fn failed_creations_are_reported_per_node_and_mark_only_that_node_unavailable() {
    let fake = FakeRoutes::default();
    *fake.fail_creates.lock().expect("lock") = 1;
    let nodes = [node("node-1", "01", &["10.120.0.0/24"], "10.0.1.1")];
    let out = reconcile(&fake, &nodes, &[], &cidrs(&["10.120.0.0/16"])).await;
    assert_eq!((out.report.created, out.report.create_failures, out.report.transient), (0, 1, true));
    assert!(!out.report.complete());
    let failed = out.recorder.failed.lock().expect("lock").clone();
    assert_eq!(failed.len(), 1);
    assert_eq!((failed[0].0.as_str(), failed[0].1.as_str()), ("node-1", "10.120.0.0/24"));
    let c = condition(&out.nodes[0]).expect("condition");
    assert_eq!((c.status.as_str(), c.reason.as_deref()), ("True", Some("NoRouteCreated")));

    // The retry succeeds and flips the condition.
    let out2 = reconcile(&fake, &out.nodes, &[], &cidrs(&["10.120.0.0/16"])).await;
    assert!(out2.report.complete());
    let c = condition(&out2.nodes[0]).expect("condition");
    assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", Some("RouteCreated")));
}

/// A creation the provider refuses until the node changes is reported (the node's Warning,
/// `NetworkUnavailable`) but not retried with backoff: the reconcile is done, and the next
/// one comes with a change of the node or the resync.
#[tokio::test]
async fn a_refusal_until_the_node_changes_is_reported_but_not_retried_with_backoff() {
    let watch = super::ReconcileMode::Watch { resync: Duration::from_secs(240) };
    let n = node("node-1", "01", &["10.120.0.0/24", "10.120.9.0/24"], "10.0.1.1");
    let fake = FakeRoutes::default();
    fake.refuse_destinations.lock().expect("lock").push("10.120.9.0/24".to_owned());
    let out = reconcile(&fake, std::slice::from_ref(&n), &[], &cidrs(&["10.120.0.0/16"])).await;
    assert_eq!(
        out.report,
        ExecutionReport { created: 1, create_failures: 1, awaiting_change: 1, ..ExecutionReport::default() }
    );
    let failed = out.recorder.failed.lock().expect("lock").clone();
    assert_eq!(failed.len(), 1);
    assert_eq!((failed[0].0.as_str(), failed[0].1.as_str()), ("node-1", "10.120.9.0/24"));
    assert_eq!(condition(&out.nodes[0]).map(|c| c.status.as_str()), Some("True"), "not every route exists");
    let outcome = super::reconcile_outcome(watch, 2, &out.report);
    assert!(
        matches!(outcome, Ok(r) if r.requeue_after.is_none()),
        "done, no backoff: {:?}",
        outcome.map_err(|e| e.to_string())
    );

    // Next to a failure a retry may fix, the reconcile is retried with backoff as before.
    *fake.fail_creates.lock().expect("lock") = 1;
    let other = node("node-2", "02", &["10.120.2.0/24"], "10.0.2.1");
    let out = reconcile(&fake, &[n, other], &fake.routes(CLUSTER), &cidrs(&["10.120.0.0/16"])).await;
    assert_eq!(
        out.report,
        ExecutionReport { create_failures: 2, transient: true, awaiting_change: 1, ..ExecutionReport::default() }
    );
    let outcome = super::reconcile_outcome(watch, 2, &out.report);
    assert!(
        matches!(&outcome, Err(super::RouteError::Incomplete { failed: 2, total: 2, transient: true })),
        "{:?}",
        outcome.map_err(|e| e.to_string())
    );
}

#[test]
fn cidrs_parse_like_go() {
    assert_eq!(parse_cidr_sloppy("10.244.1.7/16"), Some("10.244.0.0/16".parse().expect("net")));
    assert_eq!(parse_cidr_sloppy("010.244.000.000/16"), Some("10.244.0.0/16".parse().expect("net")));
    assert_eq!(parse_cidr_sloppy("fd00::1/64"), Some("fd00::/64".parse().expect("net")));
    for bad in ["", "10.0.0.0", "10.0.0.0/33", "10.0.0.0/-1", "x/8", "10.0.0.0/ 8"] {
        assert_eq!(parse_cidr_sloppy(bad), None, "{bad:?}");
    }
}

#[test]
fn nodes_waiting_for_initialization_are_left_for_later() {
    let mut n = node("node-1", "01", &["10.120.0.0/24", "10.120.9.0/24"], "10.0.1.1");
    n.spec.as_mut().expect("spec").taints = Some(vec![k8s_openapi::api::core::v1::Taint {
        key: cloud_provider::well_known::TAINT_EXTERNAL_CLOUD_PROVIDER.to_owned(),
        value: Some("true".to_owned()),
        effect: "NoSchedule".to_owned(),
        time_added: None,
    }]);
    // Its existing (outdated) route stays; nothing is created; its condition is untouched.
    let r = route("01", "node-1", "10.0.1.1", "10.120.5.0/24", false, false);
    let plan = plan_routes(&[Arc::new(n)], &[r], &cidrs(&["10.120.0.0/16"]));
    assert!(plan.deletions.is_empty() && plan.creations() == 0 && plan.nodes.is_empty(), "{plan:?}");
}

mod pacing {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use controller_runtime::{ExponentialBackoff, WorkQueue};
    use tokio::time::Instant;
    use tokio_util::sync::CancellationToken;

    use super::super::enqueue_paced;

    const SLOT: Duration = Duration::from_secs(10);

    fn queue() -> WorkQueue<String> {
        WorkQueue::new("test", ExponentialBackoff::CONTROLLER_DEFAULT, CancellationToken::new())
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn events_wait_for_the_next_slot_and_one_reconcile_covers_a_burst() {
        let q = queue();
        let last = Arc::new(Mutex::new(None));
        // Never reconciled, or long ago: at once.
        enqueue_paced(&q, &last, SLOT);
        assert_eq!(q.len(), 1);
        let key = q.get().await.expect("key");
        *last.lock().expect("lock") = Some(Instant::now());
        q.done(&key);
        // A burst right after a reconcile started: nothing before the slot, one key then.
        for _ in 0..50 {
            enqueue_paced(&q, &last, SLOT);
            tokio::time::advance(Duration::from_millis(20)).await;
        }
        settle().await;
        assert!(q.is_empty(), "not before the slot");
        tokio::time::advance(SLOT).await;
        settle().await;
        assert_eq!(q.len(), 1, "one reconcile for the burst");
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_a_later_reconcile_already_saw_is_dropped() {
        let q = queue();
        let last = Arc::new(Mutex::new(Some(Instant::now())));
        tokio::time::advance(Duration::from_secs(1)).await;
        enqueue_paced(&q, &last, SLOT);
        // Another trigger (a backoff retry) starts a reconcile before the slot.
        tokio::time::advance(Duration::from_secs(4)).await;
        *last.lock().expect("lock") = Some(Instant::now());
        tokio::time::advance(Duration::from_secs(6)).await;
        settle().await;
        assert!(q.is_empty(), "the reconcile at +5 s read the cache with the event in it");
        // An event during that reconcile is not covered by it: it gets the next slot.
        enqueue_paced(&q, &last, SLOT);
        tokio::time::advance(SLOT).await;
        settle().await;
        assert_eq!(q.len(), 1);
    }
}
