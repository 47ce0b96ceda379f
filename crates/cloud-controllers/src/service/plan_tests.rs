//! The planner's tests: the exact patches the controller sends, applied as the API server
//! applies them, and what an API server that drops or defaults fields does to them (servers
//! before 1.29 drop `status.loadBalancer.ingress[].ipMode`; 1.30+ default it to `VIP`).

use cloud_provider::well_known::FINALIZER_LOAD_BALANCER_CLEANUP as FINALIZER;
use controller_runtime::merge_patch::apply_merge_patch_to;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Service};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::fixtures::*;
use super::plan::{StatusEcho, add_finalizer_patch, remove_finalizer_patch, status_patch, to_kube_status};

// ---------------------------------------------------------------------------------------------
// The planner: the exact patches.

fn stored(mut svc: Service) -> Service {
    svc.metadata.uid = Some("uid-1".into());
    svc.metadata.resource_version = Some("42".into());
    svc
}

/// Upstream `Test_getPatchBytes` adds `bar` to `[foo]` with a strategic merge patch
/// (`{"metadata":{"$setElementOrder/finalizers":["foo","bar"],"finalizers":["bar"]}}`). This
/// controller sends a JSON merge patch of the whole list instead, guarded by the
/// `resourceVersion` it was computed from and the UID; this is that patch, exactly.
#[test]
fn test_get_patch_bytes() {
    let origin = stored(new_service("test-patch-bytes", "LoadBalancer", vec![tweak_add_finalizers(&["foo"])]));
    let patch = add_finalizer_patch(&origin).expect("a patch");
    assert_eq!(patch, json!({"metadata": {"finalizers": ["foo", FINALIZER], "resourceVersion": "42", "uid": "uid-1"}}));
    assert_eq!(
        patch.to_string(),
        format!(r#"{{"metadata":{{"finalizers":["foo","{FINALIZER}"],"resourceVersion":"42","uid":"uid-1"}}}}"#)
    );
}

#[test]
fn finalizer_patches_keep_other_finalizers_and_are_only_sent_when_needed() {
    let without = stored(new_service("s", "LoadBalancer", vec![tweak_add_finalizers(&["a", "b"])]));
    let added = apply_merge_patch_to(&without, &add_finalizer_patch(&without).expect("patch")).expect("applies");
    assert_eq!(added.metadata.finalizers, Some(vec!["a".into(), "b".into(), FINALIZER.into()]));
    assert_eq!(add_finalizer_patch(&added), None, "no-op add finalizer");

    let with = stored(new_service("s", "LoadBalancer", vec![tweak_add_finalizers(&["a", FINALIZER, "b"])]));
    let removed = apply_merge_patch_to(&with, &remove_finalizer_patch(&with).expect("patch")).expect("applies");
    assert_eq!(removed.metadata.finalizers, Some(vec!["a".into(), "b".into()]));
    assert_eq!(remove_finalizer_patch(&removed), None, "no-op remove finalizer");

    let only = stored(new_service("s", "LoadBalancer", vec![tweak_add_finalizers(&[FINALIZER])]));
    let patch = remove_finalizer_patch(&only).expect("patch");
    assert_eq!(patch, json!({"metadata": {"finalizers": null, "resourceVersion": "42", "uid": "uid-1"}}));
    let cleared = apply_merge_patch_to(&only, &patch).expect("applies");
    assert_eq!(cleared.metadata.finalizers, None);
}

fn kube_status(ips: &[(&str, Option<&str>)]) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(
            ips.iter()
                .map(|(ip, mode)| LoadBalancerIngress {
                    ip: Some(ip.to_string()),
                    ip_mode: mode.map(str::to_owned),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

#[test]
fn the_status_patch_replaces_the_ingress_and_carries_the_uid() {
    let svc = stored(default_external_service());
    let desired = to_kube_status(&cloud_provider::LoadBalancerStatus {
        ingress: vec![
            cloud_provider::LoadBalancerIngress {
                ip: Some("192.0.2.1".into()),
                hostname: None,
                ip_mode: Some(cloud_provider::IpMode::Proxy),
            },
            cloud_provider::LoadBalancerIngress { ip: None, hostname: Some("lb.example.com".into()), ip_mode: None },
        ],
    });
    let patch = status_patch(&svc, &desired, None).expect("differs");
    assert_eq!(
        patch,
        json!({
            "metadata": {"uid": "uid-1"},
            "status": {"loadBalancer": {"ingress": [
                {"ip": "192.0.2.1", "ipMode": "Proxy"},
                {"hostname": "lb.example.com"},
            ]}},
        })
    );
    let after = apply_merge_patch_to(&svc, &patch).expect("applies");
    assert_eq!(after.status.and_then(|s| s.load_balancer), Some(desired.clone()));
    // Clearing (the delete path): the ingress goes.
    let with_status = copy_service(&svc, vec![tweak_add_lb_ingress("8.8.8.8")]);
    let clear = status_patch(&with_status, &LoadBalancerStatus::default(), None).expect("differs");
    assert_eq!(clear, json!({"metadata": {"uid": "uid-1"}, "status": {"loadBalancer": {"ingress": null}}}));
    let cleared = apply_merge_patch_to(&with_status, &clear).expect("applies");
    assert_eq!(cleared.status.and_then(|s| s.load_balancer).and_then(|lb| lb.ingress), None);
}

/// The planner side of upstream `TestPatchStatus`: a patch exactly when the ingress differs.
#[test]
fn the_status_is_patched_only_when_the_ingress_differs() {
    let with_ip = copy_service(&stored(default_external_service()), vec![tweak_add_lb_ingress("8.8.8.8")]);
    let without = stored(default_external_service());
    let ip = kube_status(&[("8.8.8.8", None)]);
    assert_eq!(status_patch(&with_ip, &ip, None), None, "no-op add status");
    assert!(status_patch(&without, &ip, None).is_some(), "add status");
    assert_eq!(status_patch(&without, &LoadBalancerStatus::default(), None), None, "no-op clear status");
    assert!(status_patch(&with_ip, &LoadBalancerStatus::default(), None).is_some(), "clear status");
    assert!(status_patch(&with_ip, &kube_status(&[("8.8.8.8", Some("Proxy"))]), None).is_some(), "ipMode differs");
}

/// What the API server stores after patch `patch`, when it drops `ipMode` (servers before
/// 1.29) or defaults it to `VIP` for IPs sent without one (1.30+).
fn server_stores(svc: &Service, patch: &serde_json::Value, server: &str) -> Service {
    let mut after = apply_merge_patch_to(svc, patch).expect("applies");
    if let Some(ingress) =
        after.status.as_mut().and_then(|s| s.load_balancer.as_mut()).and_then(|lb| lb.ingress.as_mut())
    {
        for i in ingress {
            match server {
                "prunes ipMode" => i.ip_mode = None,
                "defaults ipMode" if i.ip.is_some() && i.ip_mode.is_none() => i.ip_mode = Some("VIP".into()),
                _ => {}
            }
        }
    }
    after
}

/// Upstream compares the provider's status with the stored one and patches whenever they
/// differ, so a server that drops or defaults `ipMode` gets the same patch on every sync.
/// With the echo of its last patch, the controller sends it once; a real change is sent again.
#[test]
fn a_status_the_server_normalised_is_not_sent_again() {
    for (server, desired) in [
        ("prunes ipMode", kube_status(&[("192.0.2.1", Some("Proxy"))])),
        ("defaults ipMode", kube_status(&[("192.0.2.1", None)])),
    ] {
        let svc = stored(default_external_service());
        let patch = status_patch(&svc, &desired, None).expect("first sync patches");
        let after = server_stores(&svc, &patch, server);
        assert!(status_patch(&after, &desired, None).is_some(), "{server}: upstream would patch again");
        let echo = StatusEcho::new(&svc, &desired, &after);
        assert_eq!(status_patch(&after, &desired, Some(&echo)), None, "{server}: not sent again");
        // A different status is sent.
        let moved = kube_status(&[("192.0.2.2", Some("Proxy"))]);
        assert!(status_patch(&after, &moved, Some(&echo)).is_some(), "{server}: a new IP is sent");
        // So is the same status for a new incarnation of the Service.
        let mut recreated = after.clone();
        recreated.metadata.uid = Some("uid-2".into());
        assert!(status_patch(&recreated, &desired, Some(&echo)).is_some(), "{server}: new UID");
        // And if someone changed the stored status meanwhile, it is corrected.
        let tampered = copy_service(&after, vec![tweak_add_lb_ingress("203.0.113.9")]);
        assert!(status_patch(&tampered, &desired, Some(&echo)).is_some(), "{server}: tampered");
    }
    // A server that keeps ipMode stores exactly what was sent: nothing to normalise.
    let svc = stored(default_external_service());
    let desired = kube_status(&[("192.0.2.1", Some("Proxy"))]);
    let after = server_stores(&svc, &status_patch(&svc, &desired, None).expect("patch"), "keeps ipMode");
    assert_eq!(status_patch(&after, &desired, None), None);
    assert_eq!(
        after.status.and_then(|s| s.load_balancer).and_then(|lb| lb.ingress).and_then(|i| i[0].ip_mode.clone()),
        Some("Proxy".into()),
        "ipMode: Proxy reaches the Service where the server keeps it"
    );
}
