//! What the route controller does beyond upstream's tests: condition patches, route matching
//! by provider ID, refusals, and nodes still waiting for initialization.

use super::conditions::node_with_condition;
use super::*;
use pretty_assertions::assert_eq;

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
    let watch = crate::route::ReconcileMode::Watch { resync: Duration::from_secs(240) };
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
    let outcome = crate::route::reconcile_outcome(watch, 2, &out.report);
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
    let outcome = crate::route::reconcile_outcome(watch, 2, &out.report);
    assert!(
        matches!(&outcome, Err(crate::route::RouteError::Incomplete { failed: 2, total: 2, transient: true })),
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

/// With node IPAM's cloud allocator, a node's IPv6 pod CIDR lies in its own prefix: no route
/// is planned for it, the IPv4 one is, and the node counts as done once that exists.
#[test]
fn node_local_ipv6_pod_cidrs_need_no_route() {
    let n = Arc::new(node("node-1", "01", &["10.120.0.0/24", "2001:db8:a:0:1::/80"], "10.0.1.1"));
    let scope = RouteScope { cluster_cidrs: &cidrs(&["10.120.0.0/16"]), node_local_ipv6: true };
    let plan = plan_routes_matching(std::slice::from_ref(&n), &[], scope, &|p| std::borrow::Cow::Borrowed(p));
    let created: Vec<&str> = plan.nodes["node-1"].creations.iter().map(|c| c.route.destination_cidr.as_str()).collect();
    assert_eq!(created, ["10.120.0.0/24"]);
    assert_eq!(plan.nodes["node-1"].actions.keys().collect::<Vec<_>>(), ["10.120.0.0/24"]);
    let kept = route("01", "node-1", "10.0.1.1", "10.120.0.0/24", false, false);
    let plan = plan_routes_matching(std::slice::from_ref(&n), std::slice::from_ref(&kept), scope, &|p| {
        std::borrow::Cow::Borrowed(p)
    });
    assert_eq!(plan.creations(), 0);
    assert!(plan.nodes["node-1"].all_created(&[]), "NetworkUnavailable=False with the IPv4 route alone");
    // Without the cloud allocator the IPv6 CIDR is routed like any other (and a cloud that
    // cannot route it refuses it).
    let plan = plan_routes(&[n], &[kept], &cidrs(&["10.120.0.0/16"]));
    assert_eq!(plan.creations(), 1);
}
