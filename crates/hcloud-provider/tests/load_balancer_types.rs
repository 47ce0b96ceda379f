//! Load Balancer types against the fake: the official CCM's `LoadBalancerTypeUnconfigured` and
//! `LoadBalancerTypeDeprecated` Warnings at each sync, a type that can no longer be ordered is
//! never ordered (nothing is sent), a Load Balancer keeps a type it has, and what the type list
//! costs. Types are deprecated in the fake before a provider first reads the list (it is cached
//! for an hour); a new provider on the same fake stands for a restart.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::lb_support;

use std::time::Duration;

use cloud_provider::LoadBalancer as _;
use cloud_provider::events::EventKind;
use hcloud_fake::wire::DeprecationInfo;
use hcloud_provider::HcloudLoadBalancers;
use hcloud_provider::load_balancers::LbDefaults;
use hcloud_provider::load_balancers::annotations as a;
use lb_support::*;

/// Orderable for decades still.
const LATER: &str = "2099-01-01T00:00:00+00:00";
/// Past: the type can no longer be ordered.
const PAST: &str = "2026-01-01T00:00:00+00:00";

const UNCONFIGURED: &str = "Load Balancer Type unconfigured: this will be required in the future, set it with the \
                            annotation \"load-balancer.hetzner.cloud/type\" or cluster-wide with the environment \
                            variable \"HCLOUD_LOAD_BALANCERS_TYPE\"";

/// Deprecates `name` in the fake, orderable until `unavailable_after`. The catalogue's own
/// deprecated type is made current, so the accepted names do not change with the date.
fn deprecate(s: &Setup, name: &str, unavailable_after: &str) {
    s.h.set_load_balancer_type_deprecation("lb-legacy", None).expect("lb-legacy current");
    let d =
        DeprecationInfo { announced: "2025-10-01T00:00:00+00:00".into(), unavailable_after: unavailable_after.into() };
    s.h.set_load_balancer_type_deprecation(name, Some(d)).expect("deprecated");
}

/// A new provider on the same fake and event sink: nothing cached.
fn restart(s: &Setup) -> HcloudLoadBalancers {
    let defaults = LbDefaults { location: Some("fsn1".into()), ..Default::default() };
    let lbs =
        HcloudLoadBalancers::with_policy(client(&s.fake), defaults, None, Duration::from_secs(300), fast_policy());
    lbs.set_events(s.events.clone());
    lbs
}

fn messages(s: &Setup, reason: &str) -> Vec<String> {
    let events = s.events.with_reason(reason);
    assert!(events.iter().all(|e| e.kind == EventKind::Warning && e.object.name == "web"), "{events:?}");
    events.into_iter().map(|e| e.message).collect()
}

#[tokio::test]
async fn a_deprecated_type_is_ordered_with_hcloud_gos_warning_at_each_sync() {
    let s = setup().await;
    deprecate(&s, "lb21", LATER);
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[(a::TYPE, "lb21")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    assert_eq!(only_lb(&s.h).load_balancer_type.name, "lb21", "still orderable");
    settle(&s).await;
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure again");
    assert_eq!(sent(&s.h), Vec::<String>::new(), "the type list is cached: nothing sent");
    let warning =
        "Load Balancer Type \"lb21\" is deprecated and will no longer be available for order as of 2099-01-01";
    assert_eq!(messages(&s, "LoadBalancerTypeDeprecated"), vec![warning, warning], "one per sync");
    assert_eq!(messages(&s, "LoadBalancerTypeUnconfigured"), Vec::<String>::new(), "a type is configured");
}

#[tokio::test]
async fn a_type_that_can_no_longer_be_ordered_is_refused_before_anything_is_created() {
    let s = setup().await;
    deprecate(&s, "lb31", PAST);
    s.h.reset_requests();
    // A managed certificate would be created before the Load Balancer: not even that.
    let svc = service(
        &[
            (a::TYPE, "lb31"),
            (a::PROTOCOL, "https"),
            (a::CERTIFICATE_TYPE, "managed"),
            (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "shop.example.com"),
        ],
        &[(443, "TCP", 30443)],
    );
    let err = s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        "InvalidLoadBalancerConfiguration: Service shop/web cannot get a new Load Balancer, nothing was created: \
         annotation load-balancer.hetzner.cloud/type (or HCLOUD_LOAD_BALANCERS_TYPE): \"lb31\" is invalid; Load \
         Balancer Type \"lb31\" is unavailable and can no longer be ordered; accepted: lb11, lb21, lb-legacy"
    );
    assert_eq!(sent(&s.h), vec!["GET /v1/load_balancers", "GET /v1/load_balancer_types"], "two reads, no write");
    let state = s.h.snapshot();
    assert_eq!((state.load_balancers.len(), state.certificates.len()), (0, 0));
    assert_eq!(messages(&s, "LoadBalancerTypeDeprecated"), Vec::<String>::new(), "the error says it");
}

#[tokio::test]
async fn an_existing_load_balancer_is_not_changed_to_an_unavailable_type_and_keeps_one_it_has() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 2, None);
    let svc = service(&[(a::TYPE, "lb21")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes[..1]).await.expect("ensure");
    settle(&s).await;
    let id = only_lb(&s.h).id;
    // lb21 and lb31 can no longer be ordered, seen after a restart.
    deprecate(&s, "lb21", PAST);
    deprecate(&s, "lb31", PAST);
    let lbs = restart(&s);
    s.h.reset_requests();

    let to_lb31 = service(&[(a::TYPE, "lb31")], &[(80, "TCP", 30080)]);
    let err = lbs.ensure_load_balancer("k", &to_lb31, &nodes).await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        "InvalidLoadBalancerConfiguration: Service shop/web has an invalid load balancer configuration, so its Load \
         Balancer is left unchanged: annotation load-balancer.hetzner.cloud/type (or HCLOUD_LOAD_BALANCERS_TYPE): \
         \"lb31\" is invalid; Load Balancer Type \"lb31\" is unavailable and can no longer be ordered; accepted: lb11, \
         lb-legacy"
    );
    assert_eq!(mutating(&s.h), Vec::<String>::new(), "nothing changed, not even the new Node");

    // Its own type can no longer be ordered: nothing to order, so the sync goes on.
    lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("kept");
    assert_eq!(mutating(&s.h), vec!["POST /v1/load_balancers/{id}/actions/add_target"], "the new Node only");
    assert_eq!(s.h.load_balancer(id).expect("lb").load_balancer_type.name, "lb21");
    assert_eq!(
        messages(&s, "LoadBalancerTypeDeprecated"),
        vec!["Load Balancer Type \"lb21\" is unavailable and can no longer be ordered; the Load Balancer keeps it"]
    );
}

#[tokio::test]
async fn without_a_configured_type_each_sync_warns_and_a_new_load_balancer_needs_an_orderable_default() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 2, None);
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &nodes[..1]).await.expect("ensure");
    assert_eq!(sent(&s.h), vec!["GET /v1/load_balancers", "GET /v1/load_balancer_types", "POST /v1/load_balancers"]);
    assert_eq!(only_lb(&s.h).load_balancer_type.name, "lb11");
    settle(&s).await;

    // lb11 can no longer be ordered, seen after a restart. The existing Load Balancer keeps its
    // type and is synced without the type list; it is warned about, as is the missing setting.
    deprecate(&s, "lb11", PAST);
    let lbs = restart(&s);
    s.h.reset_requests();
    lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("the existing one is synced");
    assert_eq!(
        sent(&s.h),
        vec!["GET /v1/load_balancers", "POST /v1/load_balancers/{id}/actions/add_target"],
        "no type list for a Load Balancer that keeps its type"
    );
    assert_eq!(messages(&s, "LoadBalancerTypeUnconfigured"), vec![UNCONFIGURED, UNCONFIGURED], "one per sync");
    assert_eq!(
        messages(&s, "LoadBalancerTypeDeprecated"),
        vec!["Load Balancer Type \"lb11\" is unavailable and can no longer be ordered; the Load Balancer keeps it"]
    );

    // A new one cannot get the default.
    let mut other = service(&[], &[(80, "TCP", 30081)]);
    other.metadata.name = Some("api".into());
    other.metadata.uid = Some("0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5".into());
    let err = lbs.ensure_load_balancer("k", &other, &nodes).await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        "InvalidLoadBalancerConfiguration: Service shop/api cannot get a new Load Balancer, nothing was created: the \
         default Load Balancer type (neither annotation load-balancer.hetzner.cloud/type nor \
         HCLOUD_LOAD_BALANCERS_TYPE is set): \"lb11\" is invalid; Load Balancer Type \"lb11\" is unavailable and can \
         no longer be ordered; set one of them; accepted: lb21, lb31, lb-legacy"
    );
    assert_eq!(s.h.snapshot().load_balancers.len(), 1, "nothing created");
}
