//! A panic inside an informer handler, through the whole manager against a real kube-apiserver:
//! the service controller's node handler asks the provider which node labels it reads, and the
//! provider panics. The panic is counted like a reconcile panic, the watch goes on (a node
//! registered afterwards still reaches the load balancer) and the probes, which supervise the
//! watches, stay green.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use cloud_controller_manager::Manager;
use cloud_provider::default_load_balancer_name;
use controller_serving::Probe;
use k8s_openapi::api::core::v1::{Namespace, Node, Service, ServicePort, ServiceSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use test_harness::{ControlPlane, NodeBuilder, unique_name, wait_until};
use tokio_util::sync::CancellationToken;

use common::{Balancers, IDENTITY, LbOnly, PATIENCE};

/// The service controller's panics (its node handler's among them).
const HANDLER_PANICS: &str = "controller_reconcile_panics_total{controller=\"service-lb-controller\"}";
const HANDLER_ERRORS: &str = "controller_reconcile_total{controller=\"service-lb-controller\",result=\"error\"}";

/// The value of `series` in the text exposition `metrics`.
fn counter(metrics: &str, series: &str) -> Option<u64> {
    metrics.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test]
async fn a_handler_panic_is_counted_and_the_informer_keeps_delivering() {
    // The manager watches every Node and Service of its cluster: a control plane of the
    // binary's pool for this test alone.
    let turn = ControlPlane::exclusive().await.expect("control plane");
    let cp = turn.control_plane();
    let admin = cp.admin_client().await.expect("admin");
    let manager = Manager::new(IDENTITY, common::options(cp, &[]));
    let (health, registry) = (manager.health(), manager.metrics());
    let balancers = Arc::new(Balancers::default());
    let shutdown = CancellationToken::new();
    let nodes: Api<Node> = Api::all(admin.clone());
    let first = unique_name("panic-node");
    NodeBuilder::new(&first).without_uninitialized_taint().register(&admin).await.expect("node");
    let run = tokio::spawn(manager.run(Arc::new(LbOnly(balancers.clone())), shutdown.clone()));

    let ns = unique_name("panic");
    let namespace =
        Namespace { metadata: ObjectMeta { name: Some(ns.clone()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &namespace).await.expect("namespace");
    let svc = Service {
        metadata: ObjectMeta { name: Some("web".to_owned()), ..Default::default() },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            ports: Some(vec![ServicePort { port: 80, ..Default::default() }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let created = Api::<Service>::namespaced(admin.clone(), &ns).create(&PostParams::default(), &svc).await;
    let lb = default_load_balancer_name(&created.expect("service"));
    let backs = |node: &str| balancers.get().get(&lb).is_some_and(|hosts| hosts.iter().any(|h| h == node));
    wait_until(PATIENCE, "the load balancer with the first node", async || backs(&first)).await.expect("ensured");

    // A label change makes the node handler ask the provider, which panics. The service
    // controller's node-sync passes ask it too, and one may be running: the provider panics on
    // every call until the handler's panic is counted, so the handler surely hits one.
    balancers.label_keys_panics.store(u32::MAX, Ordering::Relaxed);
    let relabel = serde_json::json!({"metadata": {"labels": {"role": "edge"}}});
    nodes.patch(&first, &PatchParams::default(), &Patch::Merge(&relabel)).await.expect("relabel");
    let handler_panics = HANDLER_PANICS;
    wait_until(PATIENCE, "the handler's panic to be counted", async || {
        counter(&registry.encode().unwrap_or_default(), handler_panics).is_some_and(|n| n >= 1)
    })
    .await
    .expect("panicked");
    balancers.label_keys_panics.store(0, Ordering::Relaxed);

    // The watch goes on: a node registered after the panic reaches the load balancer.
    let second = unique_name("panic-node");
    NodeBuilder::new(&second).without_uninitialized_taint().register(&admin).await.expect("node 2");
    let delivered =
        wait_until(PATIENCE, "the node registered after the panic to back the load balancer", async || backs(&second))
            .await;
    let metrics = registry.encode().expect("metrics");
    let (healthz, readyz) = (health.run(Probe::Healthz, &[]), health.run(Probe::Readyz, &[]));
    shutdown.cancel();
    let stopped = tokio::time::timeout(PATIENCE, run).await;
    for n in [&first, &second] {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
    delivered.expect("the informer still delivers");
    // Counted like a reconcile panic (also as an error) of the handler's controller.
    for series in [HANDLER_PANICS, HANDLER_ERRORS] {
        assert!(counter(&metrics, series).is_some_and(|n| n >= 1), "{series} missing in\n{metrics}");
    }
    assert!(healthz.passed(), "{}", healthz.failure_details());
    assert!(readyz.passed(), "{}", readyz.failure_details());
    // The watches and the event queue are supervised: one that stops would turn both red.
    for probe in [Probe::Healthz, Probe::Readyz] {
        let names = health.names(probe);
        for check in ["provider-events", "node-informer", "service-informer"] {
            assert!(names.iter().any(|n| n == check), "{check} missing from {probe}: {names:?}");
        }
    }
    stopped.expect("stops in time").expect("joins").expect("clean stop");
}
