//! Ports of upstream's `controllers/service/controller_test.go` cases that exercise the sync
//! itself (`syncLoadBalancerIfNeeded`, `processServiceCreateOrUpdate`, `syncService`, the
//! finalizer and status writes). Upstream runs them against a fake clientset; here
//! every write goes to the real kube-apiserver (test-harness) as the CCM's RBAC-restricted
//! user, and PATCH requests are counted on the wire. Each test uses a namespace of its own
//! where upstream uses `default`.

// The case tables mirror upstream's anonymous structs as tuples.
#![allow(clippy::type_complexity)]

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::LoadBalancer;
use cloud_provider::well_known::FINALIZER_LOAD_BALANCER_CLEANUP as FINALIZER;
use controller_runtime::{ReconcileError, RuntimeMetrics, WorkQueue, WorkerConfig, Workers, key_of};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Service};
use kube::api::{Api, DeleteParams, PatchParams};
use kube::runtime::reflector::ObjectRef;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use super::SERVICE_BACKOFF;
use super::fixtures::*;
use super::plan::{Operation, to_kube_status};
use super::sync::SyncError;
use crate::testing::{Fake, FakeError};

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
            // Upstream's fake clientset keeps the ingress of a Service turned ClusterIP; a real
            // API server clears it on the type change (`TestController::create` gets there that
            // way), so there is no status left to clear.
            expect_patch_status: false,
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
        let stored_class = svc.spec.as_ref().and_then(|s| s.load_balancer_class.clone());
        assert_eq!(stored_class, class, "{}: the API server keeps spec.loadBalancerClass", tc.desc);
        c.take_service_patches();
        let key = key_of(&svc);

        let op = c.syncer.sync_load_balancer_if_needed(&svc, &key).await.unwrap_or_else(|e| {
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
// processServiceCreateOrUpdate, syncService, processServiceDeletion

/// Go `TestProcessServiceCreateOrUpdate` (one controller across the cases).
#[tokio::test]
async fn test_process_service_create_or_update() {
    let ns = test_namespace().await;
    let mut c = TestController::new(Fake::default()).await;
    let (old_ip, new_ip) = ("192.168.1.1", "192.168.1.11");

    // "If updating a valid service"
    let svc = in_ns(default_external_service(), &ns);
    let valid_key = ObjectRef::new("validKey");
    c.syncer.cache.get_or_create(&valid_key);
    c.create(&ns, &svc).await;
    let stored = Arc::new(c.create_read(&ns, "external-balancer").await);
    c.syncer.process_service_create_or_update(stored, &valid_key).await.expect("If updating a valid service");

    // "If Updating Loadbalancer IP"
    let mut svc = in_ns(new_service("sync-test-name", "LoadBalancer", vec![]), &ns);
    svc.spec.as_mut().expect("spec").load_balancer_ip = Some(old_ip.into());
    let key_expected = key_of(&svc);
    let queue = WorkQueue::new("service", SERVICE_BACKOFF, CancellationToken::new());
    queue.add(key_of(&svc));
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
        let key = key_of(&stale);
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

/// Go `TestSyncService`. Its case "if an invalid service name is synced" has no port: keys
/// are typed (`ObjectRef<Service>`), so a malformed key cannot be queued.
#[tokio::test]
async fn test_sync_service() {
    // "if valid service": not in the informer's cache, but in the controller's: its load
    // balancer is deleted and the entry dropped.
    let c = TestController::new(Fake::default()).await;
    let key = ObjectRef::new("external-balancer");
    c.syncer.cache.set(&key, super::CachedService { state: Some(Arc::new(default_external_service())) });
    c.syncer.sync_service(&key).await.expect("Expected=nil");
    assert!(c.syncer.cache.get(&key).is_none(), "working Queue should be empty");
    assert_eq!(c.cloud.calls(), vec!["delete"]);
}

/// Go `TestProcessServiceDeletion`.
#[tokio::test]
async fn test_process_service_deletion() {
    let key = &ObjectRef::new("external-balancer");
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
// TestServiceQueueDelay

/// Go `TestServiceQueueDelay`: a success is not requeued, a regular error is requeued with
/// backoff (one rate-limited requeue), a `RetryError` is requeued after exactly its delay
/// without a rate-limited requeue. The Service's key goes through the controller's real
/// worker loop (`controller_runtime::Workers`, whose own tests prove that the delay is waited
/// exactly); its outcome is read from the loop's reconcile metric.
#[tokio::test]
async fn test_service_queue_delay() {
    let cases: [(&str, Option<FakeError>, &str, Option<Duration>); 3] = [
        ("processing successful", None, "success", None),
        ("regular error", Some(FakeError::Msg("something went wrong")), "error", None),
        (
            "retry error",
            Some(FakeError::Retry("LB create in progress", Duration::from_secs(42))),
            "requeue_after",
            Some(Duration::from_secs(42)),
        ),
    ];
    for (name, err, outcome, want_retry_delay) in cases {
        let ns = test_namespace().await;
        let mut c = TestController::new(Fake::default()).await;
        c.cloud.lb().err = err.clone();
        let svc = c.create(&ns, &default_external_service()).await;
        c.cache_service(&svc);
        let key = key_of(&svc);

        let stop = CancellationToken::new();
        let queue = WorkQueue::new("test-service-queue-delay", SERVICE_BACKOFF, stop.clone());
        let metrics = RuntimeMetrics::default();
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let workers =
            Workers::new(c.syncer.clone(), queue.clone(), WorkerConfig::new("svc-queue-delay", 1)).metrics(metrics);
        tokio::spawn(workers.run());
        queue.add(key.clone());
        let counted = format!("controller_reconcile_total{{controller=\"svc-queue-delay\",result=\"{outcome}\"}} 1");
        test_harness::wait_until(PATIENCE, &counted, async || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).is_ok() && text.contains(&counted)
        })
        .await
        .expect("processed once");
        let want_requeues = u32::from(err.is_some() && want_retry_delay.is_none());
        assert_eq!(queue.failures(&key), want_requeues, "{name}: got requeues, want {want_requeues}");
        stop.cancel();

        // The delay a RetryError asks for is what the loop waits.
        let result = c.syncer.sync_service(&key).await;
        assert_eq!(result.as_ref().err().and_then(|e| e.retry_after()), want_retry_delay, "{name}: retry delay");
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
    // With `ipMode` as the API server (1.30+) stores an IP sent without one: upstream's fake
    // clientset does not default it, a real server does, and that default is a difference
    // `LoadBalancerStatusEqual` sees.
    let ip = || LoadBalancerStatus {
        ingress: Some(vec![k8s_openapi::api::core::v1::LoadBalancerIngress {
            ip: Some("8.8.8.8".into()),
            ip_mode: Some("VIP".into()),
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
        c.syncer.patch_status(&svc, &key_of(&svc), &new_status).await.expect("patchStatus() = nil");
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
    // The re-read after the conflict is a list by name: the CCM identity has no `get` on
    // Services (the official ClusterRole grants only list and watch).
    assert_eq!(
        c.requests_of("GET"),
        vec![format!("/api/v1/namespaces/{ns}/services")],
        "one re-read, through the collection"
    );
    let status = to_kube_status(&cloud_provider::LoadBalancerStatus {
        ingress: vec![cloud_provider::LoadBalancerIngress {
            ip: Some("8.8.8.8".into()),
            ip_mode: Some(cloud_provider::IpMode::Vip),
            ..Default::default()
        }],
    });
    c.syncer.patch_status(&origin, &key_of(&origin), &status).await.expect("status");
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
    let op = c.syncer.sync_load_balancer_if_needed(&svc, &key_of(&svc)).await.expect("no error");
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
    let op = c.syncer.sync_load_balancer_if_needed(&gone, &key_of(&gone)).await.expect("no error");
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
    let key = key_of(&old);
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
