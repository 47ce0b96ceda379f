//! The manager runs the service controller when the provider offers load balancers: flags
//! from `ManagerArgs`, the registry's `service-lb-controller` arm, the Service informer (and
//! its readiness check), against a real kube-apiserver as the CCM's RBAC-restricted user. The
//! provider is a minimal in-memory double (load balancers only, no instances).

use crate::common;

use std::sync::Arc;

use cloud_controller_manager::Manager;
use cloud_provider::default_load_balancer_name;
use controller_serving::{Outcome, Probe};
use k8s_openapi::api::core::v1::{Namespace, Node, Service, ServicePort, ServiceSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use test_harness::{ControlPlane, NodeBuilder, unique_name, wait_for, wait_until};
use tokio_util::sync::CancellationToken;

use common::{Balancers, IDENTITY, IP, LbOnly, PATIENCE};

#[tokio::test]
async fn the_manager_runs_the_service_controller() {
    // The manager watches every Node and Service of its cluster: a control plane of the
    // binary's pool for this test alone.
    let turn = ControlPlane::exclusive().await.expect("control plane");
    let cp = turn.control_plane();
    let admin = cp.admin_client().await.expect("admin");
    let options = common::options(cp, &["--concurrent-service-syncs=2"]);
    let manager = Manager::new(IDENTITY, options);
    let health = manager.health();
    let registry = manager.metrics();
    let balancers = Arc::new(Balancers::default());
    let shutdown = CancellationToken::new();
    // Registered before the manager starts: its controllers start once the first list is in.
    let node = unique_name("mgr-node");
    NodeBuilder::new(&node).without_uninitialized_taint().register(&admin).await.expect("node");
    let run = tokio::spawn(manager.run(Arc::new(LbOnly(balancers.clone())), shutdown.clone()));
    let ns = unique_name("mgr");
    let namespace =
        Namespace { metadata: ObjectMeta { name: Some(ns.clone()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &namespace).await.expect("namespace");
    let services: Api<Service> = Api::namespaced(admin.clone(), &ns);
    let svc = Service {
        metadata: ObjectMeta { name: Some("web".to_owned()), ..Default::default() },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            ports: Some(vec![ServicePort { port: 80, ..Default::default() }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let created = services.create(&PostParams::default(), &svc).await.expect("service");

    let ingress_ip = |s: Option<&Service>| {
        s.and_then(|s| s.status.as_ref())
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .and_then(|i| i.first())
            .and_then(|i| i.ip.clone())
    };
    wait_for(&services, "web", PATIENCE, "the load balancer's IP in the status", |s| {
        ingress_ip(s).as_deref() == Some(IP)
    })
    .await
    .expect("status");
    let name = default_load_balancer_name(&created);
    assert!(balancers.get().get(&name).is_some_and(|hosts| hosts.contains(&node)), "{:?}", balancers.get());

    // A new node reaches the load balancer through a node sync, counted in upstream's metrics.
    let node2 = unique_name("mgr-node");
    NodeBuilder::new(&node2).without_uninitialized_taint().register(&admin).await.expect("node 2");
    wait_until(PATIENCE, "the new node to back the load balancer", async || {
        balancers.get().get(&name).is_some_and(|hosts| hosts.contains(&node2))
    })
    .await
    .expect("updated");
    let text = registry.encode().expect("metrics");
    for needle in [
        "service_controller_loadbalancer_sync_total 1",
        "service_controller_update_loadbalancer_host_latency_seconds_count 1",
        "service_controller_nodesync_error_total 0",
        "workqueue_adds_total{name=\"service\"}",
        "controller_reconcile_total{controller=\"service-lb-controller\",result=\"success\"}",
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }

    // Readiness covers the Service informer too.
    wait_until(PATIENCE, "informer-sync to pass", async || {
        health.run_one(Probe::Readyz, "informer-sync") == Some(Outcome::Passed)
    })
    .await
    .expect("ready");
    assert!(
        health.names(Probe::Healthz).contains(&"service-lb-controller".to_owned()),
        "{:?}",
        health.names(Probe::Healthz)
    );

    services.delete("web", &DeleteParams::default()).await.expect("delete");
    wait_for(&services, "web", PATIENCE, "the Service to be gone", |s| s.is_none()).await.expect("gone");
    assert!(!balancers.get().contains_key(&name), "the load balancer went before the Service");

    shutdown.cancel();
    tokio::time::timeout(PATIENCE, run).await.expect("stops in time").expect("joins").expect("clean stop");
    for n in [&node, &node2] {
        let _ = Api::<Node>::all(admin.clone()).delete(n, &DeleteParams::default()).await;
    }
}
