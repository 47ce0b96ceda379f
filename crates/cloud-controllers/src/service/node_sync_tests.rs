//! Ports of upstream's node-sync cases of `controllers/service/controller_test.go`
//! (`updateLoadBalancerHosts`, `syncNodes`): which load balancers get which hosts when nodes
//! change. The fake cloud records the calls; events go to the real kube-apiserver.

// The case tables mirror upstream's anonymous structs as tuples.
#![allow(clippy::type_complexity)]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use cloud_provider::well_known::{
    LABEL_EXCLUDE_FROM_EXTERNAL_LB as EXCLUDE, TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER as TO_BE_DELETED,
};
use controller_runtime::key_of;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::runtime::reflector::ObjectRef;
use pretty_assertions::assert_eq;

use super::fixtures::*;
use crate::testing::{Fake, FakeError, UpdateBalancerCall};

// ---------------------------------------------------------------------------------------------
// Node sync

/// Upstream `compareUpdateCalls`: the same calls, in any order.
#[track_caller]
fn compare_update_calls(desc: &str, expected: &[UpdateBalancerCall], actual: &[UpdateBalancerCall]) {
    assert_eq!(expected.len(), actual.len(), "{desc}: expect len(left) == len(right): {expected:#?} vs {actual:#?}");
    for l in expected {
        assert!(actual.contains(l), "{desc}: expected update calls to match, expected {expected:#?}, got {actual:#?}");
    }
}

fn call(service: &Service, hosts: &[&Arc<Node>]) -> UpdateBalancerCall {
    UpdateBalancerCall { service: service.clone(), hosts: hosts.iter().map(|n| Node::clone(n)).collect() }
}

fn some(services: &[Service]) -> Vec<Option<Arc<Service>>> {
    services.iter().map(|s| Some(Arc::new(s.clone()))).collect()
}

/// Go `TestUpdateNodesInExternalLoadBalancer`.
#[tokio::test]
async fn test_update_nodes_in_external_load_balancer() {
    let nodes = [named_node("node1"), named_node("node2"), named_node("node3")];
    let all: Vec<&Arc<Node>> = nodes.iter().collect();
    let lb = |name: &str| new_service(name, "LoadBalancer", vec![]);
    let table: Vec<(&str, Vec<Option<Arc<Service>>>, Vec<UpdateBalancerCall>, usize)> = vec![
        ("No services present: no calls should be made.", vec![], vec![], 1),
        (
            "Services do not have external load balancers: no calls should be made.",
            some(&[new_service("s0", "ClusterIP", vec![]), new_service("s1", "NodePort", vec![])]),
            vec![],
            2,
        ),
        (
            "Services does have an external load balancer: one call should be made.",
            some(&[lb("s0")]),
            vec![call(&lb("s0"), &all)],
            3,
        ),
        (
            "Three services have an external load balancer: three calls.",
            some(&[lb("s0"), lb("s1"), lb("s2")]),
            vec![call(&lb("s0"), &all), call(&lb("s1"), &all), call(&lb("s2"), &all)],
            4,
        ),
        (
            "Two services have an external load balancer and two don't: two calls.",
            some(&[new_service("s0", "NodePort", vec![]), lb("s1"), lb("s3"), new_service("s4", "ClusterIP", vec![])]),
            vec![call(&lb("s1"), &all), call(&lb("s3"), &all)],
            5,
        ),
        (
            "One service has an external load balancer and one is nil: one call.",
            vec![Some(Arc::new(lb("s0"))), None],
            vec![call(&lb("s0"), &all)],
            6,
        ),
        (
            "Four services have external load balancer with only 2 workers",
            some(&[lb("s0"), lb("s1"), lb("s3"), lb("s4")]),
            vec![call(&lb("s0"), &all), call(&lb("s1"), &all), call(&lb("s3"), &all), call(&lb("s4"), &all)],
            2,
        ),
    ];
    for (desc, services, expected, workers) in table {
        let c = TestController::new(Fake::default()).await;
        c.nodes.set(None, &nodes);
        let retry = c.syncer.update_load_balancer_hosts(&services, workers).await;
        assert!(retry.is_empty(), "for case {desc:?}, unexpected servicesToRetry: {retry:?}");
        compare_update_calls(desc, &expected, &c.cloud.lb().update_calls);
    }
}

/// Go `TestNodeChangesForStableNodeSetEnabled`.
#[tokio::test]
async fn test_node_changes_for_stable_node_set_enabled() {
    let node = |name: &str| Arc::new(make_node().name(name).set_condition("Ready", "True"));
    let (node1, node2, node3) = (node("node1"), node("node2"), node("node3"));
    let node2_not_ready = Arc::new(make_node().name("node2").set_condition("Ready", "False"));
    let node2_tainted = Arc::new(make_node().name("node2").add_taint(TO_BE_DELETED).set_condition("Ready", "True"));
    let node2_spurious = Arc::new(make_node().name("node2").add_taint("Other").set_condition("Ready", "True"));
    let node2_exclude = Arc::new(make_node().name("node2").set_label(EXCLUDE, "").set_condition("Ready", "True"));
    let node2_deleted = Arc::new(make_node().name("node2").deleted());

    let etp_local1 = new_service("s0", "LoadBalancer", vec![tweak_add_etp("Local")]);
    let etp_local2 = new_service("s1", "LoadBalancer", vec![tweak_add_etp("Local")]);
    let service3 = default_external_service();
    let services = some(&[etp_local1.clone(), etp_local2.clone(), service3.clone()]);
    let every = |hosts: &[&Arc<Node>]| vec![call(&etp_local1, hosts), call(&etp_local2, hosts), call(&service3, hosts)];

    struct StateChange {
        nodes: Vec<Arc<Node>>,
        sync_call_err: bool,
    }
    let change = |nodes: &[&Arc<Node>]| StateChange {
        nodes: nodes.iter().map(|n| (*n).clone()).collect(),
        sync_call_err: false,
    };
    let failing = |nodes: &[&Arc<Node>]| StateChange { sync_call_err: true, ..change(nodes) };
    let cases: Vec<(&str, Vec<&Arc<Node>>, Vec<StateChange>, Vec<UpdateBalancerCall>)> = vec![
        ("No node changes", vec![&node1, &node2, &node3], vec![change(&[&node1, &node2, &node3])], vec![]),
        (
            "1 new node gets added",
            vec![&node1, &node2],
            vec![change(&[&node1, &node2, &node3])],
            every(&[&node1, &node2, &node3]),
        ),
        (
            "1 new node gets added - with retries",
            vec![&node1, &node2],
            vec![failing(&[&node1, &node2, &node3]), change(&[&node1, &node2, &node3])],
            every(&[&node1, &node2, &node3]),
        ),
        (
            "1 node goes NotReady",
            vec![&node1, &node2, &node3],
            vec![change(&[&node1, &node2_not_ready, &node3])],
            vec![],
        ),
        (
            "1 node gets Tainted",
            vec![&node1, &node2, &node3],
            vec![change(&[&node1, &node2_tainted, &node3])],
            every(&[&node1, &node3]),
        ),
        ("1 node goes Ready", vec![&node1, &node2_not_ready, &node3], vec![change(&[&node1, &node2, &node3])], vec![]),
        (
            "1 node get excluded",
            vec![&node1, &node2, &node3],
            vec![change(&[&node1, &node2_exclude, &node3])],
            every(&[&node1, &node3]),
        ),
        (
            "1 old node gets deleted",
            vec![&node1, &node2, &node3],
            vec![change(&[&node1, &node2])],
            every(&[&node1, &node2]),
        ),
        (
            "1 node marked for deletion",
            vec![&node1, &node2, &node3],
            vec![change(&[&node1, &node2_deleted, &node3])],
            every(&[&node1, &node3]),
        ),
        (
            "1 spurious node update",
            vec![&node1, &node2, &node3],
            vec![change(&[&node1, &node2_spurious, &node3])],
            vec![],
        ),
    ];
    for (desc, initial, changes, expected) in cases {
        let c = TestController::new(Fake::default()).await;
        for svc in services.iter().flatten() {
            c.syncer.store_last_synced_nodes(&key_of(svc), initial.iter().map(|n| (*n).clone()).collect());
        }
        for state in changes {
            c.nodes.set(None, &state.nodes);
            if state.sync_call_err {
                c.cloud.lb().err = Some(FakeError::Msg("error please"));
            }
            c.syncer.update_load_balancer_hosts(&services, 3).await;
            c.cloud.lb().err = None;
        }
        compare_update_calls(desc, &expected, &c.cloud.lb().update_calls);
    }
}

/// Go `TestNodeChangesInExternalLoadBalancer` (one controller across the cases).
#[tokio::test]
async fn test_node_changes_in_external_load_balancer() {
    let (node1, node2, node3, node4) =
        (named_node("node1"), named_node("node2"), named_node("node3"), named_node("node4"));
    let lb = |name: &str| new_service(name, "LoadBalancer", vec![]);
    let services = some(&[lb("s0"), lb("s1"), lb("s3"), lb("s4")]);
    let service_names: HashSet<ObjectRef<Service>> = services.iter().flatten().map(|s| key_of(s.as_ref())).collect();
    let every = |hosts: &[&Arc<Node>]| {
        vec![call(&lb("s0"), hosts), call(&lb("s1"), hosts), call(&lb("s3"), hosts), call(&lb("s4"), hosts)]
    };
    let c = TestController::new(Fake::default()).await;
    let cases: Vec<(&str, Vec<&Arc<Node>>, Vec<UpdateBalancerCall>, usize, Option<&str>, HashSet<ObjectRef<Service>>)> = vec![
        ("only 1 node", vec![&node1], every(&[&node1]), 3, None, HashSet::new()),
        ("2 nodes", vec![&node1, &node2], every(&[&node1, &node2]), 1, None, HashSet::new()),
        (
            "4 nodes",
            vec![&node1, &node2, &node3, &node4],
            every(&[&node1, &node2, &node3, &node4]),
            3,
            None,
            HashSet::new(),
        ),
        (
            "error occur during sync",
            vec![&node1, &node2, &node3, &node4],
            vec![],
            3,
            Some("random error"),
            service_names.clone(),
        ),
        (
            "error occur during sync with 1 workers",
            vec![&node1, &node2, &node3, &node4],
            vec![],
            1,
            Some("random error"),
            service_names.clone(),
        ),
    ];
    for (desc, nodes, expected, workers, lister_err, expected_retry) in cases {
        let nodes: Vec<Arc<Node>> = nodes.into_iter().cloned().collect();
        c.nodes.set(lister_err, &nodes);
        let retry = c.syncer.update_load_balancer_hosts(&services, workers).await;
        assert_eq!(retry, expected_retry, "{desc}: Services to retry are not expected");
        compare_update_calls(desc, &expected, &c.cloud.lb().update_calls);
        c.cloud.lb().update_calls.clear();
    }
}

/// Go `TestNodesNotEqual` (one controller across the cases).
#[tokio::test]
async fn test_nodes_not_equal() {
    let c = TestController::new(Fake::default()).await;
    let services = some(&[new_service("s0", "LoadBalancer", vec![]), new_service("s1", "LoadBalancer", vec![])]);
    let (node1, node2, node3) = (named_node("node1"), named_node("node2"), named_node("node3"));
    let node1_pid = Arc::new(make_node().name("node1").provider_id("cumulus/1"));
    let node2_pid = Arc::new(make_node().name("node2").provider_id("cumulus/2"));
    let both = |hosts: &[&Arc<Node>]| {
        vec![
            call(&new_service("s0", "LoadBalancer", vec![]), hosts),
            call(&new_service("s1", "LoadBalancer", vec![]), hosts),
        ]
    };
    let cases: Vec<(&str, Vec<&Arc<Node>>, Vec<&Arc<Node>>, Vec<UpdateBalancerCall>)> = vec![
        (
            "Nodes with updated providerID",
            vec![&node1, &node2],
            vec![&node1_pid, &node2_pid],
            both(&[&node1_pid, &node2_pid]),
        ),
        ("Nodes unchanged", vec![&node1_pid, &node2], vec![&node1_pid, &node2], vec![]),
        (
            "Change node with empty providerID",
            vec![&node1_pid, &node2],
            vec![&node1_pid, &node3],
            both(&[&node1_pid, &node3]),
        ),
    ];
    for (desc, last_sync, new_nodes, expected) in cases {
        let new_nodes: Vec<Arc<Node>> = new_nodes.into_iter().cloned().collect();
        c.nodes.set(None, &new_nodes);
        for svc in services.iter().flatten() {
            c.syncer.store_last_synced_nodes(&key_of(svc), last_sync.iter().map(|n| (*n).clone()).collect());
        }
        c.syncer.update_load_balancer_hosts(&services, 5).await;
        compare_update_calls(desc, &expected, &c.cloud.lb().update_calls);
        c.cloud.lb().update_calls.clear();
    }
}

/// A label the provider reads for the backends (`node_label_keys`) changes on a node: the
/// load balancers are updated with the relabelled node; a change of any other label, or a
/// provider that reads no labels, updates nothing (upstream's behaviour).
#[tokio::test]
async fn a_label_the_provider_reads_updates_the_backends() {
    let node1 = named_node("node1");
    let plain = Arc::new(make_node().name("node2"));
    let edge = Arc::new(make_node().name("node2").set_label("role", "edge"));
    let edge_other = Arc::new(make_node().name("node2").set_label("role", "edge").set_label("team", "a"));
    let svc = new_service("s0", "LoadBalancer", vec![]);
    let services = some(std::slice::from_ref(&svc));
    let cases: Vec<(&str, Vec<String>, &Arc<Node>, &Arc<Node>, Vec<UpdateBalancerCall>)> = vec![
        ("read label added", vec!["role".into()], &plain, &edge, vec![call(&svc, &[&node1, &edge])]),
        ("read label removed", vec!["role".into()], &edge, &plain, vec![call(&svc, &[&node1, &plain])]),
        ("another label changed", vec!["role".into()], &edge, &edge_other, vec![]),
        ("provider reads no labels", vec![], &plain, &edge, vec![]),
    ];
    for (desc, keys, before, after, expected) in cases {
        let c = TestController::new(Fake { node_label_keys: keys, ..Fake::default() }).await;
        c.syncer.store_last_synced_nodes(&key_of(&svc), vec![node1.clone(), before.clone()]);
        c.nodes.set(None, &[node1.clone(), after.clone()]);
        c.syncer.update_load_balancer_hosts(&services, 1).await;
        compare_update_calls(desc, &expected, &c.cloud.lb().update_calls);
    }
}

/// The node informer's trigger: only a change of a label some cached load-balanced Service's
/// provider reads starts a node sync.
#[tokio::test]
async fn only_labels_the_provider_reads_trigger_a_node_sync() {
    let plain = make_node().name("node1");
    let edge = make_node().name("node1").set_label("role", "edge");
    let team = make_node().name("node1").set_label("team", "a");
    let cached = |c: &TestController, svc: &Service| {
        c.syncer.cache.set(&key_of(svc), super::CachedService { state: Some(Arc::new(svc.clone())) })
    };

    let c = TestController::new(Fake { node_label_keys: vec!["role".into()], ..Fake::default() }).await;
    assert!(!c.syncer.reads_changed_labels(&plain, &edge), "no cached Service: nobody reads labels");
    cached(&c, &new_service("np", "NodePort", vec![]));
    assert!(!c.syncer.reads_changed_labels(&plain, &edge), "a Service without a load balancer reads nothing");
    cached(&c, &new_service("s0", "LoadBalancer", vec![]));
    assert!(c.syncer.reads_changed_labels(&plain, &edge), "role added");
    assert!(c.syncer.reads_changed_labels(&edge, &plain), "role removed");
    assert!(!c.syncer.reads_changed_labels(&plain, &team), "team is read by nobody");
    assert!(!c.syncer.reads_changed_labels(&edge, &edge), "nothing changed");
}

/// Upstream's `lockedUpdateLoadBalancerHosts`: its events, and a failed update counts (the
/// Service is retried) only while the load balancer still exists.
#[tokio::test]
async fn a_failed_host_update_counts_only_while_the_load_balancer_exists() {
    let ns = test_namespace().await;
    let c = TestController::new(Fake::default()).await;
    let svc = c.create(&ns, &new_service("web", "LoadBalancer", vec![])).await;
    let services = vec![Some(Arc::new(svc.clone()))];

    c.nodes.set(None, &[named_node("node1")]);
    c.cloud.lb().exists = true;
    c.cloud.lb().update_err = Some(FakeError::Msg("boom"));
    let retry = c.syncer.update_load_balancer_hosts(&services, 1).await;
    assert_eq!(retry, HashSet::from([key_of(&svc)]), "the load balancer exists: retry");
    let event = wait_for_event_in(&c, &ns, "web", "UpdateLoadBalancerFailed").await;
    assert_eq!(
        event.message,
        "Error updating load balancer with new hosts [node1] [node names limited, total number of nodes: 1], error: boom"
    );
    assert_eq!(event.type_, "Warning");

    c.nodes.set(None, &[named_node("node1"), named_node("node2")]);
    c.cloud.lb().exists = false;
    let retry = c.syncer.update_load_balancer_hosts(&services, 1).await;
    assert!(retry.is_empty(), "the load balancer is gone: nothing to retry");

    c.cloud.lb().update_err = None;
    c.nodes.set(None, &[named_node("node3")]);
    assert!(c.syncer.update_load_balancer_hosts(&services, 1).await.is_empty());
    let event = wait_for_event_in(&c, &ns, "web", "UpdatedLoadBalancer").await;
    assert_eq!((event.type_.as_str(), event.message.as_str()), ("Normal", "Updated load balancer with new hosts"));

    c.nodes.set(None, &[]);
    assert!(c.syncer.update_load_balancer_hosts(&services, 1).await.is_empty());
    let event = wait_for_event_in(&c, &ns, "web", "UnAvailableLoadBalancer").await;
    assert_eq!(
        (event.type_.as_str(), event.message.as_str()),
        ("Warning", "There are no available nodes for LoadBalancer")
    );
    assert_eq!(c.cloud.lb().update_calls.len(), 4);
}

// ---------------------------------------------------------------------------------------------
// TestSlowNodeSync

/// Go `TestSlowNodeSync`: while a node sync is stuck in `UpdateLoadBalancer` for one Service
/// with hosts {1,2}, node3 appears and the other Service is synced (ensure with {1,2,3}); the
/// node sync then must not push its stale set to that Service: exactly one update ({1,2})
/// and one ensure ({1,2,3}).
#[tokio::test]
async fn test_slow_node_sync() {
    let ns = test_namespace().await;
    let (node1, node2, node3) = (named_node("node1"), named_node("node2"), named_node("node3"));
    let (sync_service_tx, mut sync_service_rx) = tokio::sync::mpsc::channel::<ObjectRef<Service>>(1);
    let (done_tx, done_rx) = tokio::sync::mpsc::channel::<String>(1);
    let done_rx = Arc::new(tokio::sync::Mutex::new(done_rx));
    let keys: Vec<ObjectRef<Service>> = ["service1", "service2"].map(|n| ObjectRef::new(n).within(&ns)).into();
    let fake = Fake {
        update_call_cb: Some(Box::new({
            let keys = keys.clone();
            move |update: UpdateBalancerCall| {
                let impacted = keys.iter().find(|k| **k != key_of(&update.service)).cloned().expect("the other one");
                let (tx, rx) = (sync_service_tx.clone(), done_rx.clone());
                Box::pin(async move {
                    tx.send(impacted).await.expect("send");
                    rx.lock().await.recv().await;
                })
            }
        })),
        ensure_call_cb: Some(Box::new(move |ensure: UpdateBalancerCall| {
            let tx = done_tx.clone();
            Box::pin(async move {
                tx.send(ensure.service.metadata.name.unwrap_or_default()).await.expect("send");
            })
        })),
        ..Fake::default()
    };
    let mut c = TestController::new(fake).await;
    c.nodes.set(None, &[node1.clone(), node2.clone()]);
    for name in ["service1", "service2"] {
        let svc = c.create(&ns, &new_service(name, "LoadBalancer", vec![])).await;
        c.cache_service(&svc);
        c.syncer.cache.set(&key_of(&svc), super::CachedService { state: Some(Arc::new(svc)) });
    }
    let syncer = c.syncer.clone();
    let node_sync = tokio::spawn(async move { syncer.sync_nodes(1).await });

    let key = sync_service_rx.recv().await.expect("a node sync reached UpdateLoadBalancer");
    // node3 reaches the node cache.
    c.nodes.set(None, &[node1.clone(), node2.clone(), node3.clone()]);
    c.syncer.sync_service(&key).await.expect("unexpected service sync error");
    node_sync.await.expect("node sync joins");

    let lb = c.cloud.lb();
    let names = |calls: &[UpdateBalancerCall]| -> Vec<Vec<String>> {
        calls.iter().map(|c| c.hosts.iter().map(|n| n.metadata.name.clone().unwrap_or_default()).collect()).collect()
    };
    assert_eq!(names(&lb.update_calls), vec![vec!["node1", "node2"]], "unexpected update calls");
    assert_eq!(names(&lb.ensure_calls), vec![vec!["node1", "node2", "node3"]], "unexpected ensure calls");
    assert_eq!(key_of(&lb.ensure_calls[0].service), key, "the impacted service was ensured");
}

// ---------------------------------------------------------------------------------------------
// One Service at a time

/// The per-Service lock that keeps a node sync from calling the provider while the Service's
/// own sync does is kept only while a sync holds or waits for it: nothing stays behind for a
/// Service that was synced, node-synced or deleted.
#[tokio::test]
async fn no_lock_is_kept_for_a_service_after_its_syncs() {
    let ns = test_namespace().await;
    let mut c = TestController::new(Fake::default()).await;
    c.nodes.set(None, &[named_node("node1")]);
    let svc = c.create(&ns, &new_service("web", "LoadBalancer", vec![])).await;
    let key = key_of(&svc);
    c.cache_service(&svc);
    c.syncer.sync_service(&key).await.expect("ensure");
    assert_eq!(c.cloud.calls(), vec!["create"]);
    assert_eq!(c.syncer.locked_keys(), 0, "after the Service's sync");

    c.nodes.set(None, &[named_node("node1"), named_node("node2")]);
    assert!(c.syncer.update_load_balancer_hosts(&some(std::slice::from_ref(&svc)), 1).await.is_empty());
    assert_eq!(c.cloud.lb().update_calls.len(), 1);
    assert_eq!(c.syncer.locked_keys(), 0, "after the node sync");

    // Gone from the informer's cache: its load balancer is deleted.
    c.services.apply_watcher_event(&kube::runtime::watcher::Event::Delete(svc.clone()));
    c.syncer.sync_service(&key).await.expect("delete");
    assert_eq!(c.cloud.calls(), vec!["create", "update", "delete"]);
    assert!(c.syncer.cache.get(&key).is_none());
    assert_eq!(c.syncer.locked_keys(), 0, "after the deleted Service's sync");
}

/// While a Service's sync is stuck in `EnsureLoadBalancer`, a node sync that changes that
/// Service's hosts waits for it when the provider says calls for one Service must not overlap
/// (the default), and updates the load balancer alongside it when they may (upstream's
/// behaviour).
#[tokio::test]
async fn a_node_sync_waits_for_the_services_own_sync_unless_the_provider_takes_overlaps() {
    for may_overlap in [false, true] {
        let ns = test_namespace().await;
        let log = Arc::new(std::sync::Mutex::new(Vec::<&str>::new()));
        let (entered_tx, mut entered) = tokio::sync::mpsc::channel::<()>(1);
        let release = Arc::new(tokio::sync::Semaphore::new(0));
        let fake = Fake {
            calls_for_one_service_may_overlap: may_overlap,
            ensure_call_cb: Some(Box::new({
                let (log, release) = (log.clone(), release.clone());
                move |_| {
                    let (log, release, entered) = (log.clone(), release.clone(), entered_tx.clone());
                    Box::pin(async move {
                        log.lock().expect("log").push("ensure starts");
                        entered.send(()).await.expect("send");
                        drop(release.acquire().await.expect("released"));
                        log.lock().expect("log").push("ensure ends");
                    })
                }
            })),
            update_call_cb: Some(Box::new({
                let log = log.clone();
                move |_| {
                    log.lock().expect("log").push("update");
                    Box::pin(async {})
                }
            })),
            ..Fake::default()
        };
        let mut c = TestController::new(fake).await;
        c.nodes.set(None, &[named_node("node1")]);
        let svc = c.create(&ns, &new_service("web", "LoadBalancer", vec![])).await;
        let key = key_of(&svc);
        c.cache_service(&svc);
        let service_sync = tokio::spawn({
            let (syncer, key) = (c.syncer.clone(), key.clone());
            async move { syncer.sync_service(&key).await }
        });
        entered.recv().await.expect("the Service's sync reached EnsureLoadBalancer");
        // node2 joins while the ensure (with node1) runs.
        c.nodes.set(None, &[named_node("node1"), named_node("node2")]);
        let mut node_sync = tokio::spawn({
            let (syncer, svc) = (c.syncer.clone(), svc.clone());
            async move { syncer.node_sync_service(&svc).await }
        });
        let retry = if may_overlap {
            let alongside = tokio::time::timeout(Duration::from_secs(10), &mut node_sync).await;
            let retry = alongside.expect("the node sync finished while the ensure ran").expect("joins");
            release.add_permits(1);
            retry
        } else {
            let waited = tokio::time::timeout(Duration::from_secs(1), &mut node_sync).await;
            assert!(waited.is_err(), "the node sync waits for the Service's sync: {waited:?}");
            release.add_permits(1);
            node_sync.await.expect("joins")
        };
        service_sync.await.expect("joins").expect("service sync");
        assert!(!retry, "no retry");
        let expected = if may_overlap {
            ["ensure starts", "update", "ensure ends"]
        } else {
            ["ensure starts", "ensure ends", "update"]
        };
        assert_eq!(*log.lock().expect("log"), expected, "may_overlap={may_overlap}");
        assert_eq!(c.syncer.locked_keys(), 0, "may_overlap={may_overlap}");
    }
}
