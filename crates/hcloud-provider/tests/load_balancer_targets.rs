//! HcloudLoadBalancers against the Hetzner fake for issue 20's target and health features
//! (`externalTrafficPolicy: Local` health checks, unhealthy-target warnings, foreign targets
//! and services): what each step sends, and that a sync where nothing changed sends nothing.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod lb_support;

use cloud_provider::LoadBalancer as _;
use hcloud_provider::load_balancers::annotations as a;
use k8s_openapi::api::core::v1::Service;
use lb_support::*;

fn local(svc: &mut Service) {
    let spec = svc.spec.as_mut().unwrap();
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(32100);
}

/// (destination port, health protocol, health port, health path) of every LB service, sorted.
fn checks(lb: &hcloud_fake::wire::LoadBalancer) -> Vec<(u16, String, u16, Option<String>)> {
    let mut c: Vec<_> = lb
        .services
        .iter()
        .map(|s| {
            let h = &s.health_check;
            (s.destination_port, h.protocol.clone(), h.port, h.http.as_ref().map(|h| h.path.clone()))
        })
        .collect();
    c.sort();
    c
}

#[tokio::test]
async fn local_traffic_policy_checks_kube_proxy_and_costs_nothing_when_unchanged() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 2, None);
    let ports = [(80, "TCP", 30080), (443, "TCP", 30443)];
    let mut svc = service(&[(a::TYPE, "lb11"), (a::HEALTH_CHECK_LOCAL_ENDPOINTS, "true")], &ports);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    let tcp = |p: u16| (p, "tcp".to_owned(), p, None);
    assert_eq!(checks(&only_lb(&s.h)), vec![tcp(30080), tcp(30443)], "Cluster policy: the official check");

    // The Service switches to Local: one update_service per port, then nothing.
    settle(&s).await;
    local(&mut svc);
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure local");
    assert_eq!(
        mutating(&s.h),
        vec!["POST /v1/load_balancers/{id}/actions/update_service"; 2],
        "the health check of each port, nothing else"
    );
    settle(&s).await;
    let http = |p: u16| (p, "http".to_owned(), 32100, Some("/healthz".to_owned()));
    assert_eq!(checks(&only_lb(&s.h)), vec![http(30080), http(30443)]);

    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure again");
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(s.h.request_counts().total, 0, "nothing changed: no request at all");
}
