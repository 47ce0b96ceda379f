//! Ports of upstream's `controllers/service/controller_test.go` cases that exercise the sync
//! itself (`syncLoadBalancerIfNeeded`, `processServiceCreateOrUpdate`, `syncService`, the node
//! sync, the finalizer and status writes). Upstream runs them against a fake clientset; here
//! every write goes to the real kube-apiserver (test-harness) as the CCM's RBAC-restricted
//! user, and PATCH requests are counted on the wire. Each test uses a namespace of its own
//! where upstream uses `default`.

// The case tables mirror upstream's anonymous structs as tuples.
#![allow(clippy::type_complexity)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use cloud_provider::LoadBalancer;
use cloud_provider::well_known::{
    FINALIZER_LOAD_BALANCER_CLEANUP as FINALIZER, LABEL_EXCLUDE_FROM_EXTERNAL_LB as EXCLUDE,
    TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER as TO_BE_DELETED,
};
use controller_runtime::{ReconcileError, WorkQueue};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};
use kube::api::{Api, DeleteParams, PatchParams};
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use super::SERVICE_BACKOFF;
use super::fixtures::*;
use super::plan::{Operation, to_kube_status};
use super::sync::{SyncError, service_key};
use crate::testing::{Fake, FakeError, UpdateBalancerCall};

const PATIENCE: Duration = Duration::from_secs(30);

/// `s` in namespace `ns`.
fn in_ns(mut s: Service, ns: &str) -> Service {
    s.metadata.namespace = Some(ns.to_owned());
    s
}

// ---------------------------------------------------------------------------------------------
// TestSyncLoadBalancerIfNeeded

struct SyncCase {
    desc: &'static str,
    service: Service,
    lb_exists: bool,
    expect_op: Operation,
    expect_create_attempt: bool,
    expect_delete_attempt: bool,
    expect_patch_status: bool,
    expect_patch_finalizer: bool,
}

/// Go `TestSyncLoadBalancerIfNeeded`.
#[tokio::test]
async fn test_sync_load_balancer_if_needed() {
    let cases = vec![
        SyncCase {
            desc: "service doesn't want LB",
            service: new_service("no-external-balancer", "ClusterIP", vec![]),
            lb_exists: false,
            expect_op: Operation::Delete,
            expect_create_attempt: false,
            expect_delete_attempt: false,
            expect_patch_status: false,
            expect_patch_finalizer: false,
        },
        SyncCase {
            desc: "udp service that wants LB",
            service: new_service("udp-service", "LoadBalancer", vec![tweak_add_ports("UDP", 0)]),
            lb_exists: false,
            expect_op: Operation::Ensure,
            expect_create_attempt: true,
            expect_delete_attempt: false,
            expect_patch_status: true,
            expect_patch_finalizer: true,
        },
        SyncCase {
            desc: "tcp service that wants LB",
            service: new_service("basic-service1", "LoadBalancer", vec![]),
            lb_exists: false,
            expect_op: Operation::Ensure,
            expect_create_attempt: true,
            expect_delete_attempt: false,
            expect_patch_status: true,
            expect_patch_finalizer: true,
        },
        SyncCase {
            desc: "sctp service that wants LB",
            service: new_service("sctp-service", "LoadBalancer", vec![tweak_add_ports("SCTP", 0)]),
            lb_exists: false,
            expect_op: Operation::Ensure,
            expect_create_attempt: true,
            expect_delete_attempt: false,
            expect_patch_status: true,
            expect_patch_finalizer: true,
        },
        SyncCase {
            desc: "service specifies loadBalancerClass",
            service: new_service(
                "with-external-balancer",
                "LoadBalancer",
                vec![tweak_add_lb_class("custom-loadbalancer")],
            ),
            lb_exists: false,
            expect_op: Operation::Delete,
            expect_create_attempt: false,
            expect_delete_attempt: false,
            expect_patch_status: false,
            expect_patch_finalizer: false,
        },
        SyncCase {
            desc: "service with finalizer that no longer wants LB",
            service: new_service(
                "no-external-balancer",
                "ClusterIP",
                vec![tweak_add_lb_ingress("8.8.8.8"), tweak_add_finalizers(&[FINALIZER])],
            ),
            lb_exists: true,
            expect_op: Operation::Delete,
            expect_create_attempt: false,
            expect_delete_attempt: true,
            expect_patch_status: true,
            expect_patch_finalizer: true,
        },
        SyncCase {
            desc: "service that needs cleanup",
            service: new_service(
                "basic-service1",
                "LoadBalancer",
                vec![
                    tweak_add_lb_ingress("8.8.8.8"),
                    tweak_add_finalizers(&[FINALIZER]),
                    tweak_add_deletion_timestamp(),
                ],
            ),
            lb_exists: true,
            expect_op: Operation::Delete,
            expect_create_attempt: false,
            expect_delete_attempt: true,
            expect_patch_status: true,
            expect_patch_finalizer: true,
        },
        SyncCase {
            desc: "service with finalizer that wants LB",
            service: new_service("basic-service1", "LoadBalancer", vec![tweak_add_finalizers(&[FINALIZER])]),
            lb_exists: false,
            expect_op: Operation::Ensure,
            expect_create_attempt: true,
            expect_delete_attempt: false,
            expect_patch_status: true,
            expect_patch_finalizer: false,
        },
    ];
    for tc in cases {
        let ns = test_namespace().await;
        let c = TestController::new(Fake::default()).await;
        c.cloud.lb().exists = tc.lb_exists;
        let mut svc = c.create(&ns, &tc.service).await;
        if tc.service.metadata.deletion_timestamp.is_some() {
            // The real way to a deletion timestamp: delete a Service that has a finalizer.
            let api: Api<Service> = Api::namespaced(c.admin.clone(), &ns);
            let name = svc.metadata.name.clone().unwrap_or_default();
            api.delete(&name, &DeleteParams::default()).await.expect("delete");
            svc = api.get(&name).await.expect("still there, finalizing");
            assert!(svc.metadata.deletion_timestamp.is_some(), "{}", tc.desc);
        }
        let class = tc.service.spec.as_ref().and_then(|s| s.load_balancer_class.clone());
        if class.is_some() && svc.spec.as_ref().and_then(|s| s.load_balancer_class.as_ref()).is_none() {
            // An API server before 1.21 (like the local 1.20 one) prunes the class; sync the
            // Service as a server that keeps the field stores it.
            svc.spec.get_or_insert_with(Default::default).load_balancer_class = class;
        }
        c.take_service_patches();
        let key = service_key(&svc);

        let (op, _) = c.syncer.sync_load_balancer_if_needed(&svc, &key).await.unwrap_or_else(|e| {
            panic!("{}: Got error: {e}, want nil", tc.desc);
        });
        assert_eq!(op, tc.expect_op, "{}", tc.desc);
        let patches = c.take_service_patches();
        let calls = c.cloud.calls();
        if !tc.expect_create_attempt && !tc.expect_delete_attempt {
            assert!(calls.is_empty(), "{}: Unexpected cloud provider calls: {calls:?}", tc.desc);
        }
        if tc.expect_create_attempt {
            assert!(calls.contains(&"create".to_owned()), "{}: Got no create call for load balancer", tc.desc);
            let balancers = c.cloud.lb().balancers.clone();
            assert!(!balancers.is_empty(), "{}: Got no load balancer", tc.desc);
            for b in balancers.values() {
                assert_eq!(b.name, c.syncer.balancer.get_load_balancer_name("", &svc), "{}", tc.desc);
                assert_eq!(b.region, REGION, "{}", tc.desc);
                assert_eq!(
                    b.ports[0].port,
                    tc.service.spec.as_ref().and_then(|s| s.ports.as_ref()).expect("ports")[0].port
                );
            }
        }
        if tc.expect_delete_attempt {
            assert!(calls.contains(&"delete".to_owned()), "{}: Got no delete call for load balancer", tc.desc);
        }
        let expected = usize::from(tc.expect_patch_status) + usize::from(tc.expect_patch_finalizer);
        assert_eq!(patches, expected, "{}: Got {patches} patches, expect {expected}", tc.desc);
    }
}

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
            c.syncer.store_last_synced_nodes(&service_key(svc), initial.iter().map(|n| (*n).clone()).collect());
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
    let service_names: BTreeSet<String> = services.iter().flatten().map(|s| service_key(s)).collect();
    let every = |hosts: &[&Arc<Node>]| {
        vec![call(&lb("s0"), hosts), call(&lb("s1"), hosts), call(&lb("s3"), hosts), call(&lb("s4"), hosts)]
    };
    let c = TestController::new(Fake::default()).await;
    let cases: Vec<(&str, Vec<&Arc<Node>>, Vec<UpdateBalancerCall>, usize, Option<&str>, BTreeSet<String>)> = vec![
        ("only 1 node", vec![&node1], every(&[&node1]), 3, None, BTreeSet::new()),
        ("2 nodes", vec![&node1, &node2], every(&[&node1, &node2]), 1, None, BTreeSet::new()),
        (
            "4 nodes",
            vec![&node1, &node2, &node3, &node4],
            every(&[&node1, &node2, &node3, &node4]),
            3,
            None,
            BTreeSet::new(),
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
            c.syncer.store_last_synced_nodes(&service_key(svc), last_sync.iter().map(|n| (*n).clone()).collect());
        }
        c.syncer.update_load_balancer_hosts(&services, 5).await;
        compare_update_calls(desc, &expected, &c.cloud.lb().update_calls);
        c.cloud.lb().update_calls.clear();
    }
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
    assert_eq!(retry, BTreeSet::from([service_key(&svc)]), "the load balancer exists: retry");
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
// processServiceCreateOrUpdate, syncService, processServiceDeletion

/// Go `TestProcessServiceCreateOrUpdate` (one controller across the cases).
#[tokio::test]
async fn test_process_service_create_or_update() {
    let ns = test_namespace().await;
    let mut c = TestController::new(Fake::default()).await;
    let (old_ip, new_ip) = ("192.168.1.1", "192.168.1.11");

    // "If updating a valid service"
    let svc = in_ns(default_external_service(), &ns);
    c.syncer.cache.get_or_create("validKey");
    c.create(&ns, &svc).await;
    let stored = Arc::new(c.create_read(&ns, "external-balancer").await);
    c.syncer.process_service_create_or_update(stored, "validKey").await.expect("If updating a valid service");

    // "If Updating Loadbalancer IP"
    let mut svc = in_ns(new_service("sync-test-name", "LoadBalancer", vec![]), &ns);
    svc.spec.as_mut().expect("spec").load_balancer_ip = Some(old_ip.into());
    let key_expected = service_key(&svc);
    let queue = WorkQueue::new("service", SERVICE_BACKOFF, CancellationToken::new());
    queue.add(service_key(&svc));
    c.syncer.cache.set(&key_expected, super::CachedService { state: Some(Arc::new(svc.clone())) });
    let key_got = queue.get().await.expect("get no queue element");
    assert_eq!(key_got, key_expected, "get service key error");
    c.create(&ns, &svc).await;
    let mut new_svc = c.create_read(&ns, "sync-test-name").await;
    new_svc.spec.as_mut().expect("spec").load_balancer_ip = Some(new_ip.into());
    c.cache_service(&new_svc);
    c.syncer
        .process_service_create_or_update(Arc::new(new_svc), &key_expected)
        .await
        .expect("If Updating Loadbalancer IP");
    let cached = c.syncer.cache.get(&key_expected).expect("update service error, queue should contain service");
    let cached_ip = cached.state.and_then(|s| s.spec.clone()).and_then(|s| s.load_balancer_ip);
    assert_eq!(cached_ip.as_deref(), Some(new_ip), "update LoadBalancerIP error");
}

/// Go `TestProcessServiceCreateOrUpdateK8sError`. Upstream makes its fake clientset answer
/// every Service patch with an error; here the API server refuses the status write for real:
/// "conflict error" writes for a Service that was deleted and re-created under the same name
/// since it was read (the write carries the old UID and is refused), "not found error" for a
/// Service that is gone.
#[tokio::test]
async fn test_process_service_create_or_update_k8s_error() {
    for desc in ["conflict error", "not found error"] {
        let ns = test_namespace().await;
        let c = TestController::new(Fake::default()).await;
        // Preset finalizer so the API error happens only when patching status.
        let svc = new_service("svc-k8s-err", "LoadBalancer", vec![tweak_add_finalizers(&[FINALIZER])]);
        let stale = c.create(&ns, &svc).await;
        let api: Api<Service> = Api::namespaced(c.admin.clone(), &ns);
        api.patch_status(
            "svc-k8s-err",
            &PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("drop finalizer");
        api.delete("svc-k8s-err", &DeleteParams::default()).await.expect("delete");
        test_harness::wait_for(&api, "svc-k8s-err", PATIENCE, "gone", |s| s.is_none()).await.expect("gone");
        if desc == "conflict error" {
            c.create(&ns, &new_service("svc-k8s-err", "LoadBalancer", vec![])).await;
        }
        let key = service_key(&stale);
        let result = c.syncer.process_service_create_or_update(Arc::new(stale.clone()), &key).await;
        match desc {
            "not found error" => assert!(result.is_ok(), "{desc}: {result:?}"),
            _ => {
                let err = result.expect_err(desc);
                assert!(matches!(err, SyncError::UpdateStatus(_)), "{desc}: {err:?}");
                assert!(err.to_string().starts_with("failed to update load balancer status: "), "{err}");
                let event = wait_for_event_in(&c, &ns, "svc-k8s-err", "SyncLoadBalancerFailed").await;
                assert!(event.message.contains("Error syncing load balancer"), "{event}");
                assert_eq!(event.message, format!("Error syncing load balancer: {err}"));
            }
        }
    }
}

async fn wait_for_event_in(c: &TestController, ns: &str, name: &str, reason: &str) -> test_harness::ObservedEvent {
    let description = format!("{reason} about {ns}/{name}");
    test_harness::wait_for_value(PATIENCE, &description, async || {
        let events = test_harness::events_for(&c.admin, "Service", name).await.ok()?;
        events.into_iter().find(|e| e.namespace == ns && e.reason == reason)
    })
    .await
    .expect("event")
}

/// Go `TestSyncService`.
#[tokio::test]
async fn test_sync_service() {
    // "if an invalid service name is synced"
    let c = TestController::new(Fake::default()).await;
    let err = c.syncer.sync_service("invalid/key/string").await.expect_err("invalid key");
    assert_eq!(err.to_string(), "unexpected key format: \"invalid/key/string\"");
    assert!(c.syncer.cache.get("invalid/key/string").is_none());

    // "if valid service": not in the informer's cache, but in the controller's: its load
    // balancer is deleted and the entry dropped.
    let c = TestController::new(Fake::default()).await;
    c.syncer.cache.set("external-balancer", super::CachedService { state: Some(Arc::new(default_external_service())) });
    c.syncer.sync_service("external-balancer").await.expect("Expected=nil");
    assert!(c.syncer.cache.get("external-balancer").is_none(), "working Queue should be empty");
    assert_eq!(c.cloud.calls(), vec!["delete"]);
}

/// Go `TestProcessServiceDeletion`.
#[tokio::test]
async fn test_process_service_deletion() {
    let key = "external-balancer";
    // "If a non-existent service is deleted"
    let c = TestController::new(Fake::default()).await;
    c.syncer.process_service_deletion(key).await.expect("If a non-existent service is deleted");
    assert!(c.cloud.calls().is_empty());

    // "If cloudprovided failed to delete the service"
    let c = TestController::new(Fake::default()).await;
    c.syncer.cache.set(key, super::CachedService { state: Some(Arc::new(default_external_service())) });
    c.cloud.lb().err = Some(FakeError::Msg("error Deleting the Loadbalancer"));
    let err = c.syncer.process_service_deletion(key).await.expect_err("delete fails");
    assert_eq!(err.to_string(), "error Deleting the Loadbalancer");
    assert!(c.syncer.cache.get(key).is_some(), "kept for the retry");

    // "If delete was successful"
    let c = TestController::new(Fake::default()).await;
    c.syncer.cache.set(key, super::CachedService { state: Some(Arc::new(default_external_service())) });
    c.syncer.process_service_deletion(key).await.expect("If delete was successful");
    assert!(c.syncer.cache.get(key).is_none(), "delete service error, queue should not contain service any more");
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
    let (sync_service_tx, mut sync_service_rx) = tokio::sync::mpsc::channel::<String>(1);
    let (done_tx, done_rx) = tokio::sync::mpsc::channel::<String>(1);
    let done_rx = Arc::new(tokio::sync::Mutex::new(done_rx));
    let keys: BTreeSet<String> = [format!("{ns}/service1"), format!("{ns}/service2")].into();
    let fake = Fake {
        update_call_cb: Some(Box::new({
            let keys = keys.clone();
            move |update: UpdateBalancerCall| {
                let impacted = keys.iter().find(|k| **k != service_key(&update.service)).cloned().unwrap_or_default();
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
        c.syncer.cache.set(&service_key(&svc), super::CachedService { state: Some(Arc::new(svc)) });
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
    assert_eq!(service_key(&lb.ensure_calls[0].service), key, "the impacted service was ensured");
}

// ---------------------------------------------------------------------------------------------
// TestServiceQueueDelay

/// Go `TestServiceQueueDelay`: a success is not requeued, a regular error is requeued with
/// backoff (one failure counted), a `RetryError` is requeued after exactly its delay without
/// counting a failure. The sync runs against the API server; what the worker loop does with
/// the outcome is `controller_runtime::Workers` (its own tests prove `retry_after` is waited
/// exactly), so the port checks the outcome's classification and the queue's bookkeeping.
#[tokio::test]
async fn test_service_queue_delay() {
    let cases: [(&str, Option<FakeError>, Option<Duration>); 3] = [
        ("processing successful", None, None),
        ("regular error", Some(FakeError::Msg("something went wrong")), None),
        (
            "retry error",
            Some(FakeError::Retry("LB create in progress", Duration::from_secs(42))),
            Some(Duration::from_secs(42)),
        ),
    ];
    for (name, err, want_retry_delay) in cases {
        let ns = test_namespace().await;
        let mut c = TestController::new(Fake::default()).await;
        c.cloud.lb().err = err.clone();
        let svc = c.create(&ns, &default_external_service()).await;
        c.cache_service(&svc);
        let key = service_key(&svc);
        let queue = WorkQueue::new("test-service-queue-delay", SERVICE_BACKOFF, CancellationToken::new());
        let result = c.syncer.sync_service(&key).await;
        // What processNextServiceItem does with the result.
        match &result {
            Ok(_) => queue.forget(&key),
            Err(e) => match e.retry_after() {
                Some(delay) => queue.add_after(key.clone(), delay),
                None => {
                    queue.add_rate_limited(key.clone());
                }
            },
        }
        let want_requeues = u32::from(err.is_some() && want_retry_delay.is_none());
        assert_eq!(queue.failures(&key), want_requeues, "{name}: requeues");
        assert_eq!(result.as_ref().err().and_then(|e| e.retry_after()), want_retry_delay, "{name}: retry delay");
        assert_eq!(result.is_ok(), err.is_none(), "{name}: {result:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// TestAddFinalizer, TestRemoveFinalizer, TestPatchStatus, TestPatchService

/// Go `TestAddFinalizer`.
#[tokio::test]
async fn test_add_finalizer() {
    for (desc, finalizers, expect_patch) in
        [("no-op add finalizer", Some(&[FINALIZER][..]), false), ("add finalizer", None, true)]
    {
        let ns = test_namespace().await;
        let c = TestController::new(Fake::default()).await;
        let mut svc = new_service("test-patch-finalizer", "ClusterIP", vec![]);
        svc.metadata.finalizers = finalizers.map(|f| f.iter().map(|s| s.to_string()).collect());
        let svc = c.create(&ns, &svc).await;
        c.take_service_patches();
        c.syncer.add_finalizer(&svc).await.expect("addFinalizer() = nil");
        assert_eq!(c.take_service_patches() > 0, expect_patch, "{desc}");
        let live = Api::<Service>::namespaced(c.admin.clone(), &ns).get("test-patch-finalizer").await.expect("get");
        assert_eq!(live.metadata.finalizers, Some(vec![FINALIZER.to_owned()]), "{desc}");
        cleanup(&c, &ns, "test-patch-finalizer").await;
    }
}

/// Go `TestRemoveFinalizer`.
#[tokio::test]
async fn test_remove_finalizer() {
    for (desc, finalizers, expect_patch) in
        [("no-op remove finalizer", None, false), ("remove finalizer", Some(&[FINALIZER][..]), true)]
    {
        let ns = test_namespace().await;
        let c = TestController::new(Fake::default()).await;
        let mut svc = new_service("test-patch-finalizer", "ClusterIP", vec![]);
        svc.metadata.finalizers = finalizers.map(|f| f.iter().map(|s| s.to_string()).collect());
        let svc = c.create(&ns, &svc).await;
        c.take_service_patches();
        c.syncer.remove_finalizer(&svc).await.expect("removeFinalizer() = nil");
        assert_eq!(c.take_service_patches() > 0, expect_patch, "{desc}");
        let live = Api::<Service>::namespaced(c.admin.clone(), &ns).get("test-patch-finalizer").await.expect("get");
        assert_eq!(live.metadata.finalizers, None, "{desc}");
    }
}

/// Go `TestPatchStatus`.
#[tokio::test]
async fn test_patch_status() {
    let ip = || LoadBalancerStatus {
        ingress: Some(vec![k8s_openapi::api::core::v1::LoadBalancerIngress {
            ip: Some("8.8.8.8".into()),
            ..Default::default()
        }]),
    };
    let cases = [
        ("no-op add status", true, ip(), false),
        ("add status", false, ip(), true),
        ("no-op clear status", false, LoadBalancerStatus::default(), false),
        ("clear status", true, LoadBalancerStatus::default(), true),
    ];
    for (desc, has_status, new_status, expect_patch) in cases {
        let ns = test_namespace().await;
        let c = TestController::new(Fake::default()).await;
        let tweaks = if has_status { vec![tweak_add_lb_ingress("8.8.8.8")] } else { vec![] };
        let svc = c.create(&ns, &new_service("test-patch-status", "LoadBalancer", tweaks)).await;
        c.take_service_patches();
        c.syncer.patch_status(&svc, &service_key(&svc), &new_status).await.expect("patchStatus() = nil");
        assert_eq!(c.take_service_patches() > 0, expect_patch, "{desc}");
        let live = Api::<Service>::namespaced(c.admin.clone(), &ns).get("test-patch-status").await.expect("get");
        let live_ingress = live.status.and_then(|s| s.load_balancer).and_then(|lb| lb.ingress).unwrap_or_default();
        assert_eq!(live_ingress, new_status.ingress.unwrap_or_default(), "{desc}");
    }
}

/// Upstream `TestPatchService` (service/helpers): writes planned from a Service read before an
/// unrelated update still apply, keep that update, set finalizers and status, and never touch
/// the spec. Here the finalizer write meets a `resourceVersion` conflict and is re-planned from
/// a fresh read, then the status write (no version guard) applies.
#[tokio::test]
async fn test_patch_service() {
    let ns = test_namespace().await;
    let c = TestController::new(Fake::default()).await;
    let mut origin = new_service("test-patch", "LoadBalancer", vec![]);
    origin.metadata.annotations = Some(Default::default());
    let origin = c.create(&ns, &origin).await;
    // A separate update.
    let api: Api<Service> = Api::namespaced(c.admin.clone(), &ns);
    api.patch(
        "test-patch",
        &PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"annotations": {"foo": "bar"}}})),
    )
    .await
    .expect("separate update");
    c.take_service_patches();
    c.syncer.add_finalizer(&origin).await.expect("patch based on the original");
    let status = to_kube_status(&cloud_provider::LoadBalancerStatus {
        ingress: vec![cloud_provider::LoadBalancerIngress { ip: Some("8.8.8.8".into()), ..Default::default() }],
    });
    c.syncer.patch_status(&origin, &service_key(&origin), &status).await.expect("status");
    assert_eq!(c.take_service_patches(), 3, "finalizer (409), finalizer again, status");
    let patched = api.get("test-patch").await.expect("get");
    assert_eq!(
        patched.metadata.annotations,
        Some([("foo".to_owned(), "bar".to_owned())].into()),
        "the separate update is kept"
    );
    assert_eq!(patched.metadata.finalizers, Some(vec![FINALIZER.to_owned()]));
    assert_eq!(patched.status.and_then(|s| s.load_balancer), Some(status));
    assert_eq!(patched.spec, origin.spec, "spec unchanged");
    cleanup(&c, &ns, "test-patch").await;
}

async fn cleanup(c: &TestController, ns: &str, name: &str) {
    let api: Api<Service> = Api::namespaced(c.admin.clone(), ns);
    let _ = api
        .patch_status(
            name,
            &PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await;
    let _ = api.delete(name, &DeleteParams::default()).await;
}

impl TestController {
    /// The Service as the API server has it now.
    pub(crate) async fn create_read(&self, ns: &str, name: &str) -> Service {
        Api::<Service>::namespaced(self.admin.clone(), ns).get(name).await.expect("get")
    }
}

/// Upstream: a provider answering `ImplementedElsewhere` from `EnsureLoadBalancer` ends the
/// sync successfully with nothing more done (finalizer kept, no status, no
/// `EnsuredLoadBalancer`); from `EnsureLoadBalancerDeleted` it is ignored and the finalizer
/// goes.
#[tokio::test]
async fn implemented_elsewhere_is_a_successful_no_op() {
    let ns = test_namespace().await;
    let c = TestController::new(Fake::default()).await;
    c.cloud.lb().err = Some(FakeError::ImplementedElsewhere);
    let svc = c.create(&ns, &new_service("elsewhere", "LoadBalancer", vec![])).await;
    c.take_service_patches();
    let (op, _) = c.syncer.sync_load_balancer_if_needed(&svc, &service_key(&svc)).await.expect("no error");
    assert_eq!(op, Operation::Ensure);
    assert_eq!(c.take_service_patches(), 1, "the finalizer only");
    let live = c.create_read(&ns, "elsewhere").await;
    assert_eq!(live.metadata.finalizers, Some(vec![FINALIZER.to_owned()]));
    assert_eq!(live.status.and_then(|s| s.load_balancer).and_then(|lb| lb.ingress), None);
    wait_for_event_in(&c, &ns, "elsewhere", "EnsuringLoadBalancer").await;
    let reasons: Vec<String> = test_harness::events_for(&c.admin, "Service", "elsewhere")
        .await
        .expect("events")
        .into_iter()
        .filter(|e| e.namespace == ns)
        .map(|e| e.reason)
        .collect();
    assert!(!reasons.contains(&"EnsuredLoadBalancer".to_owned()), "{reasons:?}");

    // The delete path: the load balancer exists, EnsureLoadBalancerDeleted says
    // ImplementedElsewhere.
    let mut gone = c.create_read(&ns, "elsewhere").await;
    gone.spec.as_mut().expect("spec").type_ = Some("ClusterIP".into());
    c.cloud.lb().err = None;
    c.cloud.lb().exists = true;
    c.cloud.lb().delete_err = Some(FakeError::ImplementedElsewhere);
    c.cloud.clear_calls();
    c.take_service_patches();
    let (op, _) = c.syncer.sync_load_balancer_if_needed(&gone, &service_key(&gone)).await.expect("no error");
    assert_eq!(op, Operation::Delete);
    assert_eq!(c.cloud.calls(), vec!["delete"]);
    assert_eq!(c.take_service_patches(), 1, "the finalizer removal; no status to clear");
    assert_eq!(c.create_read(&ns, "elsewhere").await.metadata.finalizers, None);
}

/// Upstream `processServiceCreateOrUpdate`: a Service re-created under the same name (new UID,
/// possible only without the finalizer) first has the old one's load balancer deleted.
#[tokio::test]
async fn a_recreated_service_first_loses_the_old_load_balancer() {
    let ns = test_namespace().await;
    let mut c = TestController::new(Fake::default()).await;
    let mut old = in_ns(default_external_service(), &ns);
    old.metadata.uid = Some("the-old-uid".into());
    let key = service_key(&old);
    c.syncer.cache.set(&key, super::CachedService { state: Some(Arc::new(old)) });
    let new = c.create(&ns, &default_external_service()).await;
    c.cache_service(&new);
    c.cloud.clear_calls();
    c.syncer.sync_service(&key).await.expect("sync");
    assert_eq!(c.cloud.calls(), vec!["delete", "create"], "the old load balancer goes first");
    let cached = c.syncer.cache.get(&key).and_then(|c| c.state).expect("cached");
    assert_eq!(cached.metadata.uid, new.metadata.uid, "the new Service is remembered");
    let live = c.create_read(&ns, "external-balancer").await;
    assert_eq!(live.metadata.finalizers, Some(vec![FINALIZER.to_owned()]));
}
