//! The service controller end to end: real informers and writes against a real kube-apiserver
//! (test-harness), upstream's fake cloud as the provider. Each test watches only its own
//! namespace and its own labelled nodes, so tests in this binary run side by side.

use std::time::Duration;

use cloud_provider::well_known::{FINALIZER_LOAD_BALANCER_CLEANUP, LABEL_EXCLUDE_FROM_EXTERNAL_LB};
use controller_runtime::{ControllerIo, Informer, KeyName, RuntimeMetrics, key_of};
use k8s_openapi::api::core::v1::{Namespace, Node, Service, ServicePort, ServiceSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use test_harness::{ControlPlane, NodeBuilder, Ready, set_ready, unique_name, wait_for, wait_until};
use tokio_util::sync::CancellationToken;

use super::{ServiceController, ServiceControllerConfig};
use crate::testing::{Fake, FakeCloud, FakeError};

const PATIENCE: Duration = Duration::from_secs(30);
const EXTERNAL_IP: &str = "192.0.2.10";

/// A namespace of its own, nodes labelled for this test only, and a running controller.
pub(crate) struct Env {
    pub client: kube::Client,
    /// Every request the controller's client sent.
    pub requests: super::fixtures::RequestLog,
    pub admin: kube::Client,
    pub namespace: String,
    pub group: String,
    pub cloud: FakeCloud,
    stop: CancellationToken,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Env {
    /// A namespace and node group for a test, with a cloud for `fake` (no controller yet).
    pub async fn new(fake: Fake) -> Env {
        let cp = ControlPlane::shared().await.expect("control plane");
        let admin = cp.admin_client().await.expect("admin client");
        let (client, requests) = super::fixtures::recording_client().await;
        let namespace = unique_name("svc");
        let ns = Namespace {
            metadata: ObjectMeta { name: Some(namespace.clone()), ..Default::default() },
            ..Default::default()
        };
        Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &ns).await.expect("namespace");
        let group = unique_name("grp");
        {
            let mut lb = fake.lb();
            lb.exists = true;
            lb.external_ip = Some(EXTERNAL_IP.to_owned());
        }
        let cloud = FakeCloud::from(fake);
        Env { client, requests, admin, namespace, group, cloud, stop: CancellationToken::new() }
    }

    /// Starts a controller (as the CCM's RBAC-restricted user) with `config`.
    pub fn run_controller(&self, config: ServiceControllerConfig) {
        let (client, namespace, group, stop) = (&self.client, &self.namespace, &self.group, &self.stop);
        let mut services =
            Informer::new(Api::<Service>::namespaced(client.clone(), namespace), watcher::Config::default());
        let mut nodes = Informer::new(
            Api::<Node>::all(client.clone()),
            watcher::Config::default().labels(&format!("svc-test={group}")),
        );
        let io = ControllerIo {
            client: client.clone(),
            field_manager: "service-test".to_owned(),
            metrics: RuntimeMetrics::default(),
        };
        let balancer = cloud_provider::Cloud::load_balancer(&self.cloud).expect("load balancers");
        let controller = ServiceController::new(balancer, &mut services, &mut nodes, io, config, stop.clone());
        tokio::spawn(services.run(stop.clone()));
        tokio::spawn(nodes.run(stop.clone()));
        tokio::spawn(controller.run());
    }

    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.admin.clone(), &self.namespace)
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.admin.clone())
    }

    /// Registers a node of this test (initialized, with a provider ID).
    pub async fn add_node(&self, name: &str) {
        NodeBuilder::new(name)
            .label("svc-test", &self.group)
            .without_uninitialized_taint()
            .provider_id(format!("fake://{name}"))
            .register(&self.admin)
            .await
            .expect("node");
    }

    /// Creates a LoadBalancer Service with one TCP port.
    pub async fn create_lb_service(&self, name: &str, class: Option<&str>) -> Service {
        let svc = Service {
            metadata: ObjectMeta { name: Some(name.to_owned()), ..Default::default() },
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".to_owned()),
                load_balancer_class: class.map(str::to_owned),
                ports: Some(vec![ServicePort { port: 80, protocol: Some("TCP".to_owned()), ..Default::default() }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.services().create(&PostParams::default(), &svc).await.expect("service")
    }

    /// The names of the hosts of every `UpdateLoadBalancer` call so far.
    pub fn update_hosts(&self) -> Vec<Vec<String>> {
        self.cloud.lb().update_calls.iter().map(|c| host_names(&c.hosts)).collect()
    }

    /// The names of the hosts of every `EnsureLoadBalancer` call so far.
    pub fn ensure_hosts(&self) -> Vec<Vec<String>> {
        self.cloud.lb().ensure_calls.iter().map(|c| host_names(&c.hosts)).collect()
    }

    /// The reasons of the events about Service `name` in this namespace, oldest first.
    pub async fn event_reasons(&self, name: &str) -> Vec<String> {
        let mut events = test_harness::events_for(&self.admin, "Service", name).await.expect("events");
        events.retain(|e| e.namespace == self.namespace);
        events.into_iter().map(|e| e.reason).collect()
    }

    /// Waits until the events about Service `name` include every reason in `reasons`.
    pub async fn wait_for_events(&self, name: &str, reasons: &[&str]) {
        let description = format!("events {reasons:?} about service {name}");
        let res = wait_until(PATIENCE, &description, async || {
            let seen = self.event_reasons(name).await;
            reasons.iter().all(|r| seen.iter().any(|s| s == r))
        })
        .await;
        if let Err(e) = res {
            panic!("{e}; seen: {:?}", self.event_reasons(name).await);
        }
    }

    pub async fn wait_service(
        &self,
        name: &str,
        what: &str,
        pred: impl Fn(Option<&Service>) -> bool,
    ) -> Option<Service> {
        wait_for(&self.services(), name, PATIENCE, what, pred).await.expect(what)
    }

    pub async fn cleanup_nodes(&self, names: &[&str]) {
        for n in names {
            let _ = self.nodes().delete(n, &DeleteParams::default()).await;
        }
    }
}

/// A merge patch turning a LoadBalancer Service into a ClusterIP one (node port and external
/// traffic policy are only valid for the former).
pub(crate) fn to_cluster_ip() -> serde_json::Value {
    serde_json::json!({"spec": {
        "type": "ClusterIP",
        "ports": [{"port": 80, "protocol": "TCP"}],
        "externalTrafficPolicy": null,
    }})
}

fn host_names(nodes: &[Node]) -> Vec<String> {
    let mut names: Vec<String> = nodes.iter().map(|n| n.metadata.name.clone().unwrap_or_default()).collect();
    names.sort();
    names
}

pub(crate) fn has_finalizer(svc: Option<&Service>) -> bool {
    svc.and_then(|s| s.metadata.finalizers.as_ref())
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER_LOAD_BALANCER_CLEANUP))
}

pub(crate) fn ingress_ips(svc: Option<&Service>) -> Vec<String> {
    svc.and_then(|s| s.status.as_ref())
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|i| i.iter().filter_map(|i| i.ip.clone()).collect())
        .unwrap_or_default()
}

/// A LoadBalancer Service gets the finalizer, a load balancer on the stable node set and its
/// status; node changes that alter the set of (name, providerID) reach the load balancer,
/// readiness does not; a type change deletes the load balancer and the finalizer, a change
/// back creates it again, and deleting the Service deletes it for good.
#[tokio::test]
async fn service_lifecycle_end_to_end() {
    let env = Env::new(Fake::default()).await;
    let (n1, n2, n3, n4) = (unique_name("n1"), unique_name("n2"), unique_name("n3"), unique_name("n4"));
    env.add_node(&n1).await;
    env.add_node(&n2).await;
    env.run_controller(ServiceControllerConfig { workers: 2, ..Default::default() });

    env.create_lb_service("web", None).await;
    let svc =
        env.wait_service("web", "finalizer and status", |s| has_finalizer(s) && ingress_ips(s) == [EXTERNAL_IP]).await;
    assert!(svc.is_some());
    let mut first = vec![n1.clone(), n2.clone()];
    first.sort();
    assert_eq!(env.ensure_hosts(), vec![first], "one ensure with the two nodes");
    env.wait_for_events("web", &["EnsuringLoadBalancer", "EnsuredLoadBalancer"]).await;

    // A new node reaches the load balancer through a node sync.
    env.add_node(&n3).await;
    let mut three = vec![n1.clone(), n2.clone(), n3.clone()];
    three.sort();
    wait_until(PATIENCE, "an update with three nodes", async || env.update_hosts().last() == Some(&three))
        .await
        .expect("node added");
    env.wait_for_events("web", &["UpdatedLoadBalancer"]).await;

    // Readiness is not part of the stable node set; excluding a node is.
    set_ready(&env.admin, &n1, Ready::False).await.expect("not ready");
    env.nodes()
        .patch(
            &n3,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {LABEL_EXCLUDE_FROM_EXTERNAL_LB: ""}}})),
        )
        .await
        .expect("exclude");
    let mut without_n3 = vec![n1.clone(), n2.clone()];
    without_n3.sort();
    wait_until(PATIENCE, "an update without the excluded node", async || {
        env.update_hosts().last() == Some(&without_n3)
    })
    .await
    .expect("node excluded");
    assert_eq!(env.update_hosts(), vec![three.clone(), without_n3.clone()], "the readiness change caused no update");

    // A deleted node leaves; a new one joins.
    env.nodes().delete(&n2, &DeleteParams::default()).await.expect("delete n2");
    env.add_node(&n4).await;
    let mut last = vec![n1.clone(), n4.clone()];
    last.sort();
    wait_until(PATIENCE, "an update with n1 and n4", async || env.update_hosts().last() == Some(&last))
        .await
        .expect("nodes replaced");

    // Type change away from LoadBalancer: the load balancer goes, then the finalizer and status.
    env.services().patch("web", &PatchParams::default(), &Patch::Merge(to_cluster_ip())).await.expect("to ClusterIP");
    env.wait_service("web", "finalizer and status gone", |s| !has_finalizer(s) && ingress_ips(s).is_empty()).await;
    assert!(env.cloud.calls().contains(&"delete".to_owned()), "{:?}", env.cloud.calls());
    env.wait_for_events("web", &["DeletingLoadBalancer", "DeletedLoadBalancer"]).await;

    // Back to LoadBalancer: ensured again.
    let ensures = env.ensure_hosts().len();
    env.services()
        .patch("web", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"type": "LoadBalancer"}})))
        .await
        .expect("to LoadBalancer");
    env.wait_service("web", "ensured again", |s| has_finalizer(s) && ingress_ips(s) == [EXTERNAL_IP]).await;
    assert_eq!(env.ensure_hosts().len(), ensures + 1);
    assert_eq!(env.ensure_hosts().last(), Some(&last), "the current stable node set");

    // Deleting the Service deletes the load balancer before the Service goes away.
    let deletes = env.cloud.calls().iter().filter(|c| *c == "delete").count();
    env.services().delete("web", &DeleteParams::default()).await.expect("delete service");
    env.wait_service("web", "the service to be gone", |s| s.is_none()).await;
    assert_eq!(env.cloud.calls().iter().filter(|c| *c == "delete").count(), deletes + 1);
    env.cleanup_nodes(&[&n1, &n3, &n4]).await;
}

/// The class selector end to end: a controller for class `example.com/cloud-lb` manages exactly
/// that class and leaves class-less Services and Services of another class alone.
#[tokio::test]
async fn the_class_selector_end_to_end() {
    let env = Env::new(Fake::default()).await;
    let node = unique_name("n");
    env.add_node(&node).await;
    // One worker: keys are handled in the order they were queued.
    env.run_controller(ServiceControllerConfig {
        workers: 1,
        load_balancer_class: Some("example.com/cloud-lb".to_owned()),
        ..Default::default()
    });
    let ours = env.create_lb_service("ours", Some("example.com/cloud-lb")).await;
    env.create_lb_service("classless", None).await;
    env.create_lb_service("foreign", Some("example.com/other-lb")).await;
    // Ours being managed shows the informer has seen all three: from here on, new Services
    // are queued after them. (Created before the informer's first list, they would all come in
    // the list's name order, where a barrier would sort first.)
    env.wait_service("ours", "ours managed", |s| has_finalizer(s) && ingress_ips(s) == [EXTERNAL_IP]).await;
    // A barrier every controller handles, whatever its class: a ClusterIP Service carrying the
    // cleanup finalizer is cleaned up (finalizer removed). Once that happened, the two
    // Services above were handled or skipped.
    let barrier = Service {
        metadata: ObjectMeta {
            name: Some("barrier".to_owned()),
            finalizers: Some(vec![FINALIZER_LOAD_BALANCER_CLEANUP.to_owned()]),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            ports: Some(vec![ServicePort { port: 80, ..Default::default() }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    env.services().create(&PostParams::default(), &barrier).await.expect("barrier");
    env.wait_service("barrier", "the barrier cleaned up", |s| !has_finalizer(s)).await;

    let stored_class = ours.spec.as_ref().and_then(|s| s.load_balancer_class.as_deref());
    assert_eq!(stored_class, Some("example.com/cloud-lb"), "the API server keeps spec.loadBalancerClass");
    let ensured: Vec<String> =
        env.cloud.lb().ensure_calls.iter().map(|c| KeyName(&key_of(&c.service)).to_string()).collect();
    for name in ["classless", "foreign"] {
        let other = env.services().get(name).await.expect("get");
        assert!(!has_finalizer(Some(&other)), "{name} is left to another implementation");
    }
    assert_eq!(ensured, vec![format!("{}/ours", env.namespace)], "exactly our class was ensured");
    env.cleanup_nodes(&[&node]).await;
}

/// A Service whose cleanup finalizer someone removed can vanish at once; the controller still
/// remembers it and deletes its load balancer (upstream ignores such deletions).
#[tokio::test]
async fn a_service_deleted_without_the_finalizer_still_loses_its_load_balancer() {
    let env = Env::new(Fake::default()).await;
    env.run_controller(ServiceControllerConfig::default());
    env.create_lb_service("web", None).await;
    env.wait_service("web", "managed", |s| has_finalizer(s) && ingress_ips(s) == [EXTERNAL_IP]).await;
    env.services()
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("finalizer removed by hand");
    assert!(!env.cloud.calls().contains(&"delete".to_owned()));
    env.services().delete("web", &DeleteParams::default()).await.expect("delete");
    env.wait_service("web", "gone", |s| s.is_none()).await;
    wait_until(PATIENCE, "the load balancer to be deleted", async || env.cloud.calls().contains(&"delete".to_owned()))
        .await
        .expect("deleted");
    env.wait_for_events("web", &["DeletingLoadBalancer", "DeletedLoadBalancer"]).await;
}

/// A provider outage: the sync fails with upstream's event and is retried with backoff; once
/// the provider answers again, the Service converges. A provider's `Retry` error is retried
/// after its own delay.
#[tokio::test]
async fn failures_are_reported_and_retried_until_the_provider_recovers() {
    let env = Env::new(Fake::default()).await;
    env.cloud.lb().err = Some(FakeError::Transient("the cloud is down"));
    env.run_controller(ServiceControllerConfig::default());
    env.create_lb_service("web", None).await;
    env.wait_for_events("web", &["EnsuringLoadBalancer", "SyncLoadBalancerFailed"]).await;
    let events = test_harness::events_for(&env.admin, "Service", "web").await.expect("events");
    let failed = events.iter().find(|e| e.reason == "SyncLoadBalancerFailed").expect("failed event");
    assert_eq!(failed.type_, "Warning");
    assert_eq!(failed.message, "Error syncing load balancer: failed to ensure load balancer: the cloud is down");
    let svc = env.services().get("web").await.expect("get");
    assert!(has_finalizer(Some(&svc)), "the finalizer went on before the provider was asked");
    assert!(ingress_ips(Some(&svc)).is_empty());

    // "Pending" for a second, then fine: retried after the requested delay.
    env.cloud.lb().err = Some(FakeError::Retry("load balancer is being created", Duration::from_secs(1)));
    let attempts = env.ensure_hosts().len();
    wait_until(PATIENCE, "a retry after the requested delay", async || env.ensure_hosts().len() > attempts + 1)
        .await
        .expect("retried");
    env.cloud.lb().err = None;
    env.wait_service("web", "converged", |s| ingress_ips(s) == [EXTERNAL_IP]).await;
    env.wait_for_events("web", &["EnsuredLoadBalancer"]).await;
}

/// Several Services with several workers: each gets its load balancer, one ensure each.
#[tokio::test]
async fn several_services_with_several_workers() {
    let env = Env::new(Fake::default()).await;
    let node = unique_name("n");
    env.add_node(&node).await;
    env.run_controller(ServiceControllerConfig { workers: 3, ..Default::default() });
    let names: Vec<String> = (0..6).map(|i| format!("svc-{i}")).collect();
    for name in &names {
        env.create_lb_service(name, None).await;
    }
    for name in &names {
        env.wait_service(name, "managed", |s| has_finalizer(s) && ingress_ips(s) == [EXTERNAL_IP]).await;
    }
    let mut ensured: Vec<String> =
        env.cloud.lb().ensure_calls.iter().map(|c| KeyName(&key_of(&c.service)).to_string()).collect();
    ensured.sort();
    let mut expected: Vec<String> = names.iter().map(|n| format!("{}/{n}", env.namespace)).collect();
    expected.sort();
    assert_eq!(ensured, expected, "exactly one ensure per Service");
    env.cleanup_nodes(&[&node]).await;
}

/// `ipMode` end to end: the provider reports `ipMode: Proxy`, the API server (1.30+) stores it,
/// and the status is written once: a second sync with the same answer sends no status patch.
#[tokio::test]
async fn ip_mode_is_stored_and_written_once() {
    let env = Env::new(Fake::default()).await;
    env.cloud.lb().ip_mode = Some(cloud_provider::IpMode::Proxy);
    env.run_controller(ServiceControllerConfig::default());
    env.create_lb_service("web", None).await;
    let svc = env.wait_service("web", "status", |s| ingress_ips(s) == [EXTERNAL_IP]).await;
    let ip_mode = |s: Option<&Service>| {
        s.and_then(|s| s.status.as_ref())
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .and_then(|i| i.first())
            .and_then(|i| i.ip_mode.clone())
    };
    let stored = ip_mode(svc.as_ref());
    assert_eq!(stored.as_deref(), Some("Proxy"), "the API server keeps ingress[].ipMode");

    // A second sync (an annotation change is one of needsUpdate's triggers).
    env.services()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"resync": "1"}}})),
        )
        .await
        .expect("annotate");
    let ensured_twice = async || {
        let events = test_harness::events_for(&env.admin, "Service", "web").await.unwrap_or_default();
        events.iter().any(|e| e.namespace == env.namespace && e.reason == "EnsuredLoadBalancer" && e.count >= 2)
    };
    wait_until(PATIENCE, "a second EnsuredLoadBalancer", ensured_twice).await.expect("second sync");
    // One worker handles keys one after the other: once another Service is done, the second
    // sync of this one is complete (its status write, if any, included).
    env.create_lb_service("barrier", None).await;
    env.wait_service("barrier", "the barrier's status", |s| ingress_ips(s) == [EXTERNAL_IP]).await;
    assert_eq!(env.ensure_hosts().len(), 3);
    let status_patches = env
        .requests
        .lock()
        .expect("lock")
        .iter()
        .filter(|(m, p)| m == "PATCH" && p.ends_with("/services/web/status"))
        .count();
    assert_eq!(status_patches, 2, "one finalizer patch and one status patch, nothing on the second sync");
    let svc = env.services().get("web").await.expect("get");
    assert_eq!(ip_mode(Some(&svc)), stored, "unchanged");
}
