//! End to end: per-port annotations (`load-balancer.hetzner.cloud/port.<port>.<option>`) on one
//! Service: 80 → http, 443 → https with a certificate, 22 → tcp without PROXY protocol; the
//! Warning for a bad per-port value (naming the per-port annotation, also for a certificate
//! name that does not exist); and a sync where nothing changed sends nothing.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use common::lb::{
    annotate, fresh_namespace, ingress, lb_of, lb_service, requests_of_an_unchanged_sync, server_nodes, wait_lb,
};
use common::{Env, REACT};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::SeedCertificate;
use kube::api::PostParams;
use test_harness::{events_for, wait_for, wait_for_event, wait_until};

const LOCATION: (&str, &str) = ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1");

#[tokio::test]
async fn per_port_protocol_certificate_and_proxy_protocol() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let cert = h.seed_certificate(&SeedCertificate::uploaded("shop-tls", &["shop.example.com"])).expect("cert");
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    let svc = lb_service(
        "web",
        &[
            ("load-balancer.hetzner.cloud/protocol", "http"),
            ("load-balancer.hetzner.cloud/uses-proxyprotocol", "true"),
            ("load-balancer.hetzner.cloud/port.443.protocol", "https"),
            ("load-balancer.hetzner.cloud/port.443.http-certificates", "shop-tls"),
            ("load-balancer.hetzner.cloud/port.443.health-check-protocol", "http"),
            ("load-balancer.hetzner.cloud/port.443.health-check-http-path", "/healthz"),
            ("load-balancer.hetzner.cloud/port.22.protocol", "tcp"),
            ("load-balancer.hetzner.cloud/port.22.uses-proxyprotocol", "false"),
        ],
        &[80, 443, 22],
    );
    api.create(&PostParams::default(), &svc).await.expect("create service");
    let svc = wait_for(&api, "web", REACT, "ingress", |s| s.is_some_and(|s| !ingress(s).is_empty()))
        .await
        .expect("ingress")
        .expect("service");
    let lb = wait_lb(&h, &svc, "LB with its target", |l| l.targets.len() == 1).await;
    let mut services: Vec<_> = lb
        .services
        .iter()
        .map(|s| {
            (
                s.listen_port,
                s.protocol.clone(),
                s.proxyprotocol,
                s.http.as_ref().map(|h| h.certificates.clone()).unwrap_or_default(),
                s.health_check.protocol.clone(),
                s.health_check.http.as_ref().map(|h| h.path.clone()),
            )
        })
        .collect();
    services.sort();
    assert_eq!(
        services,
        vec![
            (22, "tcp".into(), false, vec![], "tcp".into(), None),
            (80, "http".into(), true, vec![], "tcp".into(), None),
            (443, "https".into(), true, vec![cert], "http".into(), Some("/healthz".into())),
        ]
    );
    let modes: Vec<Option<String>> = ingress(&svc).into_iter().map(|(_, m)| m).collect();
    assert!(modes.iter().all(|m| m.as_deref() == Some("Proxy")), "a PROXY port makes the status Proxy: {modes:?}");
    assert_eq!(h.request_count("POST /v1/load_balancers/{id}/actions/add_service"), 0, "all in the create");

    // A sync where nothing changed (an unrelated annotation) sends no request at all.
    assert_eq!(requests_of_an_unchanged_sync(&env, &api, "web").await, Vec::<String>::new());

    // A bad per-port value: a Warning naming the annotation, the port and what is accepted;
    // nothing is sent.
    let mutations = |h: &hcloud_fake::FakeHandle| h.request_log().into_iter().filter(|r| r.method != "GET").count();
    let sent = mutations(&h);
    annotate(&api, "web", serde_json::json!({"load-balancer.hetzner.cloud/port.22.protocol": "ssh"})).await;
    let e = wait_for_event(&env.client, "Service", "web", "SyncLoadBalancerFailed", REACT).await.expect("warning");
    assert_eq!(e.type_, "Warning");
    assert!(
        e.message.contains(
            "annotation load-balancer.hetzner.cloud/port.22.protocol: \"ssh\" is invalid; accepted: tcp, http, https"
        ),
        "{}",
        e.message
    );
    annotate(&api, "web", serde_json::json!({"load-balancer.hetzner.cloud/port.2222.protocol": "tcp"})).await;
    wait_until(REACT, "the unknown port is reported", async || {
        events_for(&env.client, "Service", "web").await.is_ok_and(|events| {
            events
                .iter()
                .any(|e| e.message.contains("port 2222 is not a TCP port of this Service; accepted ports: 80, 443, 22"))
        })
    })
    .await
    .unwrap();
    // A per-port certificate name that does not exist: the Warning names the per-port
    // annotation the user wrote, not the Service-wide one (issue 27 item 11).
    annotate(
        &api,
        "web",
        serde_json::json!({
            "load-balancer.hetzner.cloud/port.22.protocol": "tcp",
            "load-balancer.hetzner.cloud/port.2222.protocol": null,
            "load-balancer.hetzner.cloud/port.443.http-certificates": "nope",
        }),
    )
    .await;
    wait_until(REACT, "the unknown per-port certificate is reported", async || {
        events_for(&env.client, "Service", "web").await.is_ok_and(|events| {
            events.iter().any(|e| {
                e.type_ == "Warning"
                    && e.message.contains(
                        "annotation load-balancer.hetzner.cloud/port.443.http-certificates: \"nope\" is invalid; no \
                         certificate with this name exists in the project",
                    )
            })
        })
    })
    .await
    .unwrap();
    assert_eq!(mutations(&h), sent, "nothing was changed");
    assert_eq!(lb_of(&h, &svc).expect("still there").services.len(), 3);
}
