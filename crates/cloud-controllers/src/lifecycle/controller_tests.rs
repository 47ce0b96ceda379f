//! The lifecycle controller as it runs: its periodic pass over the nodes of a real
//! kube-apiserver (`test-harness`), seen through a label-selected informer so it only ever
//! touches this test's nodes.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use controller_runtime::{ControllerIo, Informer, RuntimeMetrics};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use kube::runtime::watcher;
use test_harness::{ControlPlane, NodeBuilder, Ready, unique_name, wait_for};
use tokio_util::sync::CancellationToken;

use super::{CONTROLLER_NAME, CloudNodeLifecycleController, NodeLifecycleConfig};
use crate::testing::{Fake, FakeCloud};

const WAIT: Duration = Duration::from_secs(30);

/// A pass that panics (a provider bug) is one failed pass: it is counted, and the next pass
/// comes after a backoff, long before the next period.
#[tokio::test]
async fn a_pass_that_panics_is_counted_and_retried_with_backoff() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("lifecycle-panic");
    let name = unique_name("lifecycle-panic");
    // NotReady, and its server is gone: the lifecycle controller deletes it.
    NodeBuilder::new(&name)
        .without_uninitialized_taint()
        .provider_id(format!("fake://{name}"))
        .ready(Ready::False)
        .label("lifecycle-test", &group)
        .register(&client)
        .await
        .expect("node registers");

    let cloud = FakeCloud::from(Fake {
        enable_instances_v2: true,
        exists_by_provider_id: false,
        exists_panics: AtomicU32::new(1),
        ..Fake::default()
    });
    let metrics = RuntimeMetrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let token = CancellationToken::new();
    let informer = Informer::new(nodes.clone(), watcher::Config::default().labels(&format!("lifecycle-test={group}")));
    let io = ControllerIo { client: client.clone(), field_manager: "lifecycle-test".to_owned(), metrics };
    // The period is an hour: only a retry brings a second pass within the test.
    let controller = CloudNodeLifecycleController::new(
        cloud.clone().into(),
        &informer,
        io,
        NodeLifecycleConfig { monitor_period: Duration::from_secs(3600), ..NodeLifecycleConfig::default() },
        token.clone(),
    );
    tokio::spawn(informer.run(token.clone()));
    let running = tokio::spawn(controller.run());

    let deleted = wait_for(&nodes, &name, WAIT, "the node of the gone server to be deleted", |n| n.is_none()).await;
    let finished = running.is_finished();
    token.cancel();
    if deleted.is_err() {
        let _ = nodes.delete(&name, &DeleteParams::default()).await;
    }
    deleted.unwrap_or_else(|e| panic!("{e}; the controller's task ended: {finished}; calls: {:?}", cloud.calls()));
    assert_eq!(cloud.calls().iter().filter(|c| *c == "instance-exists").count(), 2, "{:?}", cloud.calls());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    for needle in [
        format!("controller_reconcile_panics_total{{controller=\"{CONTROLLER_NAME}\"}} 1\n"),
        format!("controller_reconcile_total{{controller=\"{CONTROLLER_NAME}\",result=\"error\"}} 1\n"),
        format!("workqueue_retries_total{{name=\"{CONTROLLER_NAME}\"}} 1\n"),
    ] {
        assert!(text.contains(&needle), "{needle} missing in\n{text}");
    }
    running.await.expect("the controller stops without a panic");
}
