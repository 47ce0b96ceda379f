//! The cloud-node controller as it runs: its periodic address refresh against a real
//! kube-apiserver (`test-harness`), seen through a label-selected informer so it only ever
//! touches this test's nodes.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use cloud_provider::AddressType;
use controller_runtime::{ControllerIo, Informer, RuntimeMetrics};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use kube::runtime::watcher;
use test_harness::{ControlPlane, NodeBuilder, unique_name, wait_for};
use tokio_util::sync::CancellationToken;

use super::{CloudNodeController, NodeControllerConfig, STATUS_UPDATE_NAME};
use crate::testing::{Fake, FakeCloud, addr};

const WAIT: Duration = Duration::from_secs(30);
const CLOUD_IP: &str = "192.0.2.77";

fn has_cloud_ip(node: Option<&Node>) -> bool {
    let addresses = node.and_then(|n| n.status.as_ref()).and_then(|s| s.addresses.as_ref());
    addresses.is_some_and(|a| a.iter().any(|a| a.type_ == "InternalIP" && a.address == CLOUD_IP))
}

/// A refresh that panics (a provider bug) is one failed pass: it is counted, and the next
/// refresh comes after a backoff, long before the next period.
#[tokio::test]
async fn an_address_refresh_that_panics_is_counted_and_retried_with_backoff() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("refresh-panic");
    let name = unique_name("refresh-panic");
    // Initialized: only the address refresh asks the provider about it.
    NodeBuilder::new(&name)
        .without_uninitialized_taint()
        .provider_id(format!("fake://{name}"))
        .label("refresh-test", &group)
        .register(&client)
        .await
        .expect("node registers");

    let cloud = FakeCloud::from(Fake {
        addresses: vec![addr(AddressType::InternalIp, CLOUD_IP)],
        addresses_panics: AtomicU32::new(1),
        ..Fake::default()
    });
    let metrics = RuntimeMetrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let token = CancellationToken::new();
    let mut informer =
        Informer::new(nodes.clone(), watcher::Config::default().labels(&format!("refresh-test={group}")));
    let io = ControllerIo { client: client.clone(), field_manager: "refresh-test".to_owned(), metrics };
    // The period is an hour: only a retry brings a second refresh within the test.
    let config = NodeControllerConfig { status_update_frequency: Duration::from_secs(3600), ..Default::default() };
    let controller = CloudNodeController::new(cloud.clone().into(), &mut informer, io, config, token.clone());
    tokio::spawn(informer.run(token.clone()));
    let running = tokio::spawn(controller.run());

    let refreshed = wait_for(&nodes, &name, WAIT, "the cloud's address in the node's status", has_cloud_ip).await;
    let finished = running.is_finished();
    token.cancel();
    let _ = nodes.delete(&name, &DeleteParams::default()).await;
    refreshed.unwrap_or_else(|e| panic!("{e}; the controller's task ended: {finished}; calls: {:?}", cloud.calls()));
    let lookups = cloud.calls().iter().filter(|c| *c == "node-addresses-by-provider-id").count();
    assert_eq!(lookups, 2, "{:?}", cloud.calls());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    for needle in [
        format!("controller_reconcile_panics_total{{controller=\"{STATUS_UPDATE_NAME}\"}} 1\n"),
        format!("controller_reconcile_total{{controller=\"{STATUS_UPDATE_NAME}\",result=\"error\"}} 1\n"),
        format!("workqueue_retries_total{{name=\"{STATUS_UPDATE_NAME}\"}} 1\n"),
    ] {
        assert!(text.contains(&needle), "{needle} missing in\n{text}");
    }
    running.await.expect("the controller stops without a panic");
}

/// `cloud_node_controller_uninitialized_nodes` follows the informer: Nodes added with the
/// uninitialized taint count, losing the taint or being deleted uncounts them, initialized
/// Nodes never count. (Only the informer runs: the count is the handler's, not a reconcile's.)
#[tokio::test]
async fn the_uninitialized_nodes_gauge_follows_adds_updates_and_deletes() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("uninit-gauge");
    let names: Vec<String> = (0..3).map(|i| format!("{group}-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let mut b = NodeBuilder::new(name).label("uninit-test", &group);
        if i == 2 {
            b = b.without_uninitialized_taint();
        }
        b.register(&client).await.expect("node registers");
    }
    let token = CancellationToken::new();
    let mut informer = Informer::new(nodes.clone(), watcher::Config::default().labels(&format!("uninit-test={group}")));
    let io = ControllerIo {
        client: client.clone(),
        field_manager: "uninit-test".to_owned(),
        metrics: RuntimeMetrics::default(),
    };
    let controller = CloudNodeController::new(
        FakeCloud::from(Fake::default()).into(),
        &mut informer,
        io,
        NodeControllerConfig::default(),
        token.clone(),
    );
    let gauge = controller.metrics();
    tokio::spawn(informer.run(token.clone()));
    let wait = |want: i64, what: &'static str| {
        let gauge = gauge.clone();
        async move {
            test_harness::wait_until(WAIT, what, async || gauge.uninitialized() == want)
                .await
                .unwrap_or_else(|e| panic!("{e}: the gauge is {}", gauge.uninitialized()));
        }
    };
    wait(2, "two Nodes wait for initialization").await;
    let untaint = serde_json::json!({"spec": {"taints": null}});
    nodes
        .patch(&names[0], &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&untaint))
        .await
        .expect("patch");
    wait(1, "one left after the other lost its taint").await;
    nodes.delete(&names[1], &DeleteParams::default()).await.expect("delete");
    wait(0, "none left after the other was deleted").await;
    token.cancel();
    for name in [&names[0], &names[2]] {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
}
