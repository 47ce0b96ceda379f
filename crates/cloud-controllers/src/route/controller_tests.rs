//! The route controller as it runs: against the real kube-apiserver of `test-harness` (its
//! informer, condition writes and events) and the port of upstream's fake routes.
//!
//! One test drives one controller through a node's whole life, because a controller
//! reconciles every Node of the shared API server.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use controller_runtime::{ControllerIo, Informer, RuntimeMetrics};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use kube::runtime::watcher;
use test_harness::{ControlPlane, NodeBuilder, unique_name, wait_for, wait_for_event, wait_until};
use tokio_util::sync::CancellationToken;

use super::metrics::{SyncOutcome, SyncTrigger};
use super::plan::{NETWORK_UNAVAILABLE, parse_cidr_sloppy};
use super::{ReconcileMode, RouteController, RouteControllerConfig};
use crate::testing::FakeRoutes;

const WAIT: Duration = Duration::from_secs(30);

fn network_unavailable(n: &Node) -> Option<(String, String)> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == NETWORK_UNAVAILABLE)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

fn routes_to(fake: &FakeRoutes, node: &str) -> Vec<String> {
    fake.routes("test-cluster").into_iter().filter(|r| r.target_node == node).map(|r| r.destination_cidr).collect()
}

#[tokio::test]
async fn failed_creations_are_retried_with_backoff_in_watch_mode_without_node_events() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let name = unique_name("route-ctl");

    let fake = Arc::new(FakeRoutes::default());
    // The network is busy for the first two attempts.
    *fake.fail_creates.lock().expect("lock") = 2;
    let token = CancellationToken::new();
    // Only this test's node: other tests add and delete nodes on the shared control plane,
    // and each of those would be a reason to reconcile.
    let selector = format!("route-test={name}");
    let mut informer = Informer::new(Api::<Node>::all(client.clone()), watcher::Config::default().labels(&selector));
    let io = ControllerIo {
        client: client.clone(),
        field_manager: "route-test".to_owned(),
        metrics: RuntimeMetrics::default(),
    };
    let config = RouteControllerConfig {
        cluster_name: "test-cluster".to_owned(),
        cluster_cidrs: vec![parse_cidr_sloppy("10.120.0.0/16").expect("cidr")],
        node_local_ipv6: false,
        mode: ReconcileMode::Watch { resync: Duration::from_secs(3600) },
        min_interval: Duration::from_millis(200),
    };
    let controller = RouteController::new(fake.clone(), &mut informer, io, config, token.clone());
    let metrics = controller.metrics();
    tokio::spawn(informer.run(token.clone()));
    tokio::spawn(controller.run());

    // An initialized node (the uninitialized ones are left for later).
    NodeBuilder::new(name.clone())
        .label("route-test", name.clone())
        .without_uninitialized_taint()
        .pod_cidrs(["10.120.7.0/24"])
        .register(&client)
        .await
        .expect("node registers");

    // Two failures, each published on the node; then the retry (no node event in between:
    // the controller's own condition writes do not trigger reconciles) creates the route.
    let event = wait_for_event(&client, "Node", &name, "FailedToCreateRoute", WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}; calls: {:?}", fake.calls()));
    assert_eq!(event.type_, "Warning");
    assert!(
        event.message.contains("10.120.7.0/24") && event.message.contains("the network is busy"),
        "{}",
        event.message
    );
    let node = wait_for(&nodes, &name, WAIT, "NetworkUnavailable=False/RouteCreated", |n| {
        n.and_then(network_unavailable) == Some(("False".to_owned(), "RouteCreated".to_owned()))
    })
    .await
    .expect("condition")
    .expect("node");
    assert_eq!(routes_to(&fake, &name), vec!["10.120.7.0/24".to_owned()]);
    let creates = fake.calls().iter().filter(|c| *c == "create-route").count();
    assert_eq!(creates, 3, "two failed attempts and the successful retry: {:?}", fake.calls());
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(conditions.iter().any(|c| c.type_ == "Ready"), "the kubelet's conditions are kept: {conditions:?}");

    // Steady: nothing more happens while nothing changes.
    let calls = fake.calls().len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(fake.calls().len(), calls, "no reconcile without a reason: {:?}", &fake.calls()[calls..]);

    // The node goes: its route goes.
    nodes.delete(&name, &DeleteParams::default()).await.expect("delete");
    wait_until(WAIT, "the route of the deleted node is gone", async || routes_to(&fake, &name).is_empty())
        .await
        .expect("route deleted");
    token.cancel();

    // route_controller_route_sync_total: the failed attempts are `noop` (a failed creation is
    // no `error` upstream) and their retries keep the `node_change` trigger; the creation and
    // the deletion are `changed`. No reconcile here is `periodic` (no resync ran) or failed
    // to list the routes.
    assert!(metrics.count(SyncOutcome::Noop, SyncTrigger::NodeChange) >= 2);
    assert!(metrics.count(SyncOutcome::Changed, SyncTrigger::NodeChange) >= 2);
    for outcome in [SyncOutcome::Changed, SyncOutcome::Noop, SyncOutcome::Error] {
        assert_eq!(metrics.count(outcome, SyncTrigger::Periodic), 0, "{outcome:?}");
    }
    assert_eq!(metrics.count(SyncOutcome::Error, SyncTrigger::NodeChange), 0);
}

/// A condition write that meets a `resourceVersion` conflict is re-planned from a GET of the
/// Node, with the CCM's identity: neither the shipped ClusterRole nor the official one grants
/// `get` on `nodes/status` (the re-read was one, and was refused).
#[tokio::test]
async fn a_conflicting_condition_write_rereads_the_node_as_the_ccm_may() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let admin = cp.admin_client().await.expect("client");
    let ccm = cp.ccm_client().await.expect("client");
    let nodes: Api<Node> = Api::all(admin.clone());
    let name = unique_name("route-cond");
    NodeBuilder::new(name.clone())
        .label("route-test", name.clone())
        .without_uninitialized_taint()
        .pod_cidrs(["10.121.7.0/24"])
        .register(&admin)
        .await
        .expect("node registers");
    let stale = nodes.get(&name).await.expect("node");
    // Someone else's write after that read: the copy's resourceVersion is stale.
    let label = serde_json::json!({"metadata": {"labels": {"example.com/touched": "yes"}}});
    nodes.patch(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&label)).await.expect("patch");

    let token = CancellationToken::new();
    let selector = format!("route-test={name}");
    let mut informer = Informer::new(Api::<Node>::all(ccm.clone()), watcher::Config::default().labels(&selector));
    let io = ControllerIo { client: ccm, field_manager: "route-test".to_owned(), metrics: RuntimeMetrics::default() };
    let config = RouteControllerConfig {
        cluster_name: "test-cluster".to_owned(),
        cluster_cidrs: vec![parse_cidr_sloppy("10.121.0.0/16").expect("cidr")],
        node_local_ipv6: false,
        mode: ReconcileMode::Watch { resync: Duration::from_secs(3600) },
        min_interval: Duration::from_millis(200),
    };
    let controller = RouteController::new(Arc::new(FakeRoutes::default()), &mut informer, io, config, token.clone());
    controller.reconciler.write_condition(&stale, true).await.expect("re-planned from a fresh read after the conflict");
    let node = nodes.get(&name).await.expect("node");
    assert_eq!(network_unavailable(&node), Some(("False".to_owned(), "RouteCreated".to_owned())));
    assert_eq!(node.metadata.labels.unwrap_or_default().get("example.com/touched").map(String::as_str), Some("yes"));
    token.cancel();
    nodes.delete(&name, &DeleteParams::default()).await.expect("delete");
}
