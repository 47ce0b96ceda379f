//! End to end: Load Balancer types as the official CCM's next release warns about them
//! (`LoadBalancerTypeDeprecated`, `LoadBalancerTypeUnconfigured`, a type that can no longer be
//! ordered refused with nothing created), and the `hcloud-ccm/service-uid` label of a Load
//! Balancer left behind by a Service that was recreated under the same name.
//!
//! Types are deprecated in the fake before the CCM starts: it reads the type list once an hour.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use common::lb::{UID_LABEL, annotate, create, ensured, fresh_namespace, lb_service, server_nodes, wait_lb};
use common::{Env, REACT};
use hcloud_fake::control::SeedLoadBalancer;
use hcloud_fake::wire::DeprecationInfo;
use hcloud_fake::{FakeConfig, FakeHandle};
use test_harness::{events_for, wait_for_event, wait_until};

const LOCATION: (&str, &str) = ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1");

/// Deprecates `name`, orderable until `unavailable_after`; the catalogue's own deprecated type
/// is made current, so the accepted names do not change with the date.
fn deprecate(h: &FakeHandle, name: &str, unavailable_after: &str) {
    h.set_load_balancer_type_deprecation("lb-legacy", None).expect("lb-legacy current");
    let d =
        DeprecationInfo { announced: "2025-10-01T00:00:00+00:00".into(), unavailable_after: unavailable_after.into() };
    h.set_load_balancer_type_deprecation(name, Some(d)).expect("deprecated");
}

/// A deprecated type, configured cluster-wide: the Load Balancer gets it, and the Service gets
/// hcloud-go's Warning (no `LoadBalancerTypeUnconfigured`: a type is configured).
#[tokio::test]
async fn a_deprecated_type_gets_the_warning() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    deprecate(&h, "lb21", "2099-01-01T00:00:00+00:00");
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION, ("HCLOUD_LOAD_BALANCERS_TYPE", "lb21")], &[]).await;
    create(&api, &lb_service("old-type", &[], &[80])).await;
    let svc = ensured(&api, "old-type").await;
    let lb = wait_lb(&h, &svc, "the Load Balancer with its target", |l| l.targets.len() == 1).await;
    assert_eq!(lb.load_balancer_type.name, "lb21");
    let e =
        wait_for_event(&env.client, "Service", "old-type", "LoadBalancerTypeDeprecated", REACT).await.expect("event");
    assert_eq!(e.type_, "Warning");
    assert_eq!(
        e.message,
        "Load Balancer Type \"lb21\" is deprecated and will no longer be available for order as of 2099-01-01"
    );
    let events = events_for(&env.client, "Service", "old-type").await.expect("events");
    assert!(!events.iter().any(|e| e.reason == "LoadBalancerTypeUnconfigured"), "{events:#?}");
}

/// A type past its `unavailable_after`: a Warning naming the annotation, the value, why and the
/// types that can be ordered; no Load Balancer is created.
#[tokio::test]
async fn an_unavailable_type_gets_a_clear_error_and_no_load_balancer() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    deprecate(&h, "lb31", "2026-01-01T00:00:00+00:00");
    let (ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("gone-type", &[("load-balancer.hetzner.cloud/type", "lb31")], &[80])).await;
    let e =
        wait_for_event(&env.client, "Service", "gone-type", "SyncLoadBalancerFailed", REACT).await.expect("warning");
    assert_eq!(e.type_, "Warning");
    assert_eq!(
        e.message,
        format!(
            "Error syncing load balancer: failed to ensure load balancer: InvalidLoadBalancerConfiguration: Service \
             {ns}/gone-type cannot get a new Load Balancer, nothing was created: annotation \
             load-balancer.hetzner.cloud/type (or HCLOUD_LOAD_BALANCERS_TYPE): \"lb31\" is invalid; Load Balancer \
             Type \"lb31\" is unavailable and can no longer be ordered; accepted: lb11, lb21, lb-legacy"
        )
    );
    assert!(h.snapshot().load_balancers.is_empty(), "no Load Balancer");
    assert_eq!(h.request_count("POST /v1/load_balancers"), 0, "not even tried");
}

/// No type configured: the official CCM's Warning at each sync, the one that created the Load
/// Balancer and the one after a Node joined (the API server counts the repeats).
#[tokio::test]
async fn an_unconfigured_type_gets_the_unconfigured_warning_at_each_sync() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("no-type", &[], &[80])).await;
    let svc = ensured(&api, "no-type").await;
    let lb = wait_lb(&h, &svc, "the Load Balancer with its target", |l| l.targets.len() == 1).await;
    assert_eq!(lb.load_balancer_type.name, "lb11", "the default");
    let e =
        wait_for_event(&env.client, "Service", "no-type", "LoadBalancerTypeUnconfigured", REACT).await.expect("event");
    assert_eq!(e.type_, "Warning");
    assert_eq!(
        e.message,
        "Load Balancer Type unconfigured: this will be required in the future, set it with the annotation \
         \"load-balancer.hetzner.cloud/type\" or cluster-wide with the environment variable \
         \"HCLOUD_LOAD_BALANCERS_TYPE\""
    );

    let added = server_nodes(&env, &["lb-n2"], None, &[]).await;
    wait_lb(&h, &svc, "the new Node is a target", |l| {
        l.targets.iter().any(|t| t.server.is_some_and(|s| s.id == added[0].0))
    })
    .await;
    wait_until(REACT, "the warning again, at the update", async || {
        events_for(&env.client, "Service", "no-type")
            .await
            .is_ok_and(|events| events.iter().any(|e| e.reason == "LoadBalancerTypeUnconfigured" && e.count >= 2))
    })
    .await
    .expect("a second warning");
    assert_eq!(h.snapshot().load_balancers[0].load_balancer_type.name, "lb11", "never changed");
}

/// The official CCM's fix #1325: a Service recreated under the same name (a new UID) finds the
/// Load Balancer its predecessor left (kept by delete protection, or another cluster's) through
/// the `name` annotation. The official CCM adopts it and now replaces the stale
/// `hcloud-ccm/service-uid`; hcloud-ccm adopts no Load Balancer labelled for someone else
/// (`LoadBalancerOwnedElsewhere`, nothing written). Once the label is removed (the documented
/// hand-over) it is adopted at a sync after the Load Balancer list is read again (every second
/// here: `HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE=1s`): labelled with the new UID, other labels kept.
#[tokio::test]
async fn a_load_balancer_left_with_a_stale_service_uid_is_adopted_only_once_handed_over() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let mut seed = SeedLoadBalancer::new("shop-lb");
    seed.labels =
        [(UID_LABEL, "the-deleted-service"), ("team", "shop")].map(|(k, v)| (k.to_owned(), v.to_owned())).into();
    let id = h.seed_load_balancer(&seed).expect("lb");
    let (ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION, ("HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE", "1s")], &[]).await;
    create(&api, &lb_service("recreated", &[("load-balancer.hetzner.cloud/name", "shop-lb")], &[80])).await;
    let e =
        wait_for_event(&env.client, "Service", "recreated", "SyncLoadBalancerFailed", REACT).await.expect("warning");
    let lead = format!(
        "Error syncing load balancer: failed to ensure load balancer: LoadBalancerOwnedElsewhere: Service \
         {ns}/recreated: Load Balancer shop-lb ({id}) carries the label hcloud-ccm/service-uid=the-deleted-service"
    );
    assert!(e.message.starts_with(&lead), "{}", e.message);
    let writes = |h: &FakeHandle| h.request_log().into_iter().filter(|r| r.method != "GET").count();
    assert_eq!(writes(&h), 0, "nothing written");

    // Handed over: the label removed outside the CCM, then the Service is touched.
    let client = hcloud_api::Client::builder(hcloud_api::SecretString::from(common::TOKEN.to_owned()))
        .endpoint(env.fake.base_url())
        .build()
        .expect("client");
    let others = [("team".to_owned(), "shop".to_owned())].into_iter().collect();
    let update = hcloud_api::models::UpdateLoadBalancerRequest { name: None, labels: Some(others) };
    client.load_balancers().update(hcloud_api::models::LoadBalancerId(id as i64), &update).await.expect("unlabelled");
    annotate(&api, "recreated", serde_json::json!({"example.com/handed-over": "yes"})).await;
    let svc = ensured(&api, "recreated").await;
    let uid = svc.metadata.uid.clone().expect("uid");
    let lb = wait_lb(&h, &svc, "adopted, with its target", |l| l.targets.len() == 1).await;
    assert_eq!(lb.id, id, "adopted, not created");
    let labels: Vec<(&str, &str)> = lb.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(labels, vec![(UID_LABEL, uid.as_str()), ("team", "shop")]);
    assert_eq!(h.snapshot().load_balancers.len(), 1);
}
