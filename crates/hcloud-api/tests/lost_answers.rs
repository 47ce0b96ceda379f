//! Lost answers and broken connections, against `hcloud-fake`'s fault kinds over HTTP: a
//! change that took effect while the client saw an HTML 502 or a reset, HTML pages instead of
//! the API's JSON, resets in the middle of a body, and `locked`/`conflict` anywhere.
//!
//! What the client must do: never repeat a create that may have been applied (the caller looks
//! it up by its labels), treat a retried DELETE that finds the resource gone as done, retry
//! reads, and never take a 404 page that is not the API's own error for "absent".
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::*;
use hcloud_api::models::{CertificateId, CreateCertificateRequest, CreateLoadBalancerRequest, Route, ServerListParams};
use hcloud_api::{Error, ErrorCode, RetryPolicy};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::{SeedCertificate, SeedLoadBalancer, SeedNetwork, SeedServer};
use hcloud_fake::faults::{FaultRule, HtmlError};
use pretty_assertions::assert_eq;

fn lb_request(name: &str, lb_labels: &hcloud_api::models::Labels) -> CreateLoadBalancerRequest {
    CreateLoadBalancerRequest {
        name: name.to_owned(),
        load_balancer_type: "lb11".to_owned(),
        location: Some("fsn1".to_owned()),
        labels: lb_labels.clone(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_create_whose_answer_is_lost_is_not_repeated_and_is_found_by_its_labels() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let c = &env.client;
    let lb_labels = labels(&[("k8s-service-uid", "0b5e7c1d"), ("k8s-cluster", "prod")]);

    // Applied, but the proxy in front of the API answered with an HTML 502.
    env.h.inject_fault(FaultRule::html(Some("POST"), "/load_balancers", 502).applied());
    let err = c.load_balancers().create(&lb_request("ingress", &lb_labels)).await.unwrap_err();
    match &err {
        Error::OutcomeUnknown { request, source } => {
            assert_eq!(request, "POST /load_balancers");
            let api = source.api().expect("the 502 answer");
            assert_eq!((api.status, &api.code), (502, &ErrorCode::BadGateway));
            assert!(api.message.contains("502 Bad Gateway"), "{}", api.message);
        }
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    assert!(err.is_outcome_unknown() && err.is_transient());
    assert!(err.to_string().contains("outcome unknown"), "{err}");
    assert_eq!(env.count("POST /v1/load_balancers"), 1, "never repeated");

    // It did take effect: the caller finds it by the labels it set, and creates nothing.
    let found = c.load_balancers().list_by_labels(&lb_labels).await.unwrap();
    assert_eq!(found.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["ingress"]);
    assert_eq!(found[0].labels, lb_labels);
    assert_eq!(env.h.snapshot().load_balancers.len(), 1);

    // Rejected by the proxy before reaching the API: same answer, same uncertainty; the
    // lookup finds nothing, so the caller creates it.
    let other = labels(&[("k8s-service-uid", "77aa01"), ("k8s-cluster", "prod")]);
    env.h.inject_fault(FaultRule::html(Some("POST"), "/load_balancers", 502));
    let err = c.load_balancers().create(&lb_request("api", &other)).await.unwrap_err();
    assert!(err.is_outcome_unknown(), "{err:?}");
    assert!(c.load_balancers().list_by_labels(&other).await.unwrap().is_empty());
    c.load_balancers().create(&lb_request("api", &other)).await.unwrap();
    assert_eq!(c.load_balancers().list_by_labels(&other).await.unwrap().len(), 1);

    // A reset after the certificate was stored: a transport error, outcome unknown.
    let cert_labels = labels(&[("k8s-secret", "ingress-tls")]);
    env.h.inject_fault(FaultRule::reset(Some("POST"), "/certificates").applied());
    let err = c
        .certificates()
        .create(&CreateCertificateRequest::Managed {
            name: "managed".to_owned(),
            domain_names: vec!["example.com".to_owned()],
            labels: cert_labels.clone(),
        })
        .await
        .unwrap_err();
    match &err {
        Error::OutcomeUnknown { source, .. } => assert!(matches!(**source, Error::Transport { .. }), "{source:?}"),
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    assert_eq!(env.count("POST /v1/certificates"), 1);
    assert_eq!(c.certificates().list_by_labels(&cert_labels).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_delete_retried_after_a_lost_answer_that_finds_the_resource_gone_succeeds() {
    // The deletion runs as a 1 s action and the load balancer is locked meanwhile; the first
    // retry comes after 50-100 ms, the next ones after up to 0.2, 0.4, 0.8 and 1 s.
    let policy =
        RetryPolicy { max_retries: 5, base_delay: Duration::from_millis(100), max_delay: Duration::from_secs(1) };
    let env =
        Env::with(FakeConfig::default().with_action_delay(Duration::from_secs(1)), |b| b.retry_policy(policy)).await;
    let c = &env.client;
    let lb = lbid(env.h.seed_load_balancer(&SeedLoadBalancer::new("gone-soon")).unwrap());
    env.h.inject_fault(FaultRule::html(Some("DELETE"), "/load_balancers/{id}", 502).applied());

    c.load_balancers().delete(lb).await.unwrap();
    assert!(env.h.snapshot().load_balancers.is_empty());
    let statuses = env.statuses("DELETE /v1/load_balancers/{id}");
    let (first, rest) = statuses.split_first().unwrap();
    let (last, between) = rest.split_last().unwrap();
    assert_eq!((*first, *last), (502, 404), "{statuses:?}");
    assert!(!between.is_empty(), "the retry met the running deletion: {statuses:?}");
    assert!(between.iter().all(|s| *s == 423), "only its own deletion's lock in between: {statuses:?}");

    // The same after a reset.
    let cert = env.h.seed_certificate(&SeedCertificate::uploaded("old", &["example.com"])).unwrap();
    env.h.inject_fault(FaultRule::reset(Some("DELETE"), "/certificates/{id}").applied());
    c.certificates().delete(CertificateId(i64::try_from(cert).unwrap())).await.unwrap();
    assert!(env.h.snapshot().certificates.is_empty());
    assert_eq!(env.count("DELETE /v1/certificates/{id}"), 2);

    // A first attempt that gets not_found is an error: nothing says it was ever there.
    let err = c.load_balancers().delete(lb).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

#[tokio::test]
async fn reads_are_retried_after_html_pages_and_resets_mid_body_but_actions_are_not() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let c = &env.client;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();

    env.h.inject_fault(FaultRule::reset_mid_body(Some("GET"), "/servers"));
    env.h.inject_fault(FaultRule::html(Some("GET"), "/servers", 503));
    let all = c.servers().list_all(&ServerListParams::default()).await.unwrap();
    assert_eq!(all.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["node-1"]);
    let statuses: Vec<Option<u16>> = env.rec.take().iter().map(|s| s.3).collect();
    assert_eq!(statuses, [None, Some(503), Some(200)], "reset mid-body, HTML 503, then the list");

    // A POST whose answer broke off mid-body may have been applied: not sent again.
    env.h.inject_fault(FaultRule::reset_mid_body(Some("POST"), "/servers/{id}/actions/poweroff"));
    let err = c.servers().poweroff(sid(server)).await.unwrap_err();
    assert!(matches!(err, Error::Transport { .. }), "{err:?}");
    assert!(err.is_transient());
    assert_eq!(env.count("POST /v1/servers/{id}/actions/poweroff"), 1);
    assert_eq!(env.h.snapshot().actions.len(), 1, "the power-off ran, once");
}

#[tokio::test]
async fn a_404_page_that_is_not_the_apis_error_is_not_absent() {
    let env = Env::start(FakeConfig::default()).await;
    let c = &env.client;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    // A proxy's (or a wrong HCLOUD_ENDPOINT's) "404 Not Found" page. The fake's `html` answer
    // is documented for 5xx; built by hand it renders any status.
    let mut page_404 = FaultRule::html(Some("GET"), "/servers/{id}", 502).times(0);
    page_404.html = Some(HtmlError { status: 404 });
    env.h.inject_fault(page_404);

    let err = c.servers().get(sid(server)).await.unwrap_err();
    assert!(!err.is_not_found(), "{err:?}");
    let api = api_err(&err);
    assert_eq!(api.status, 404);
    assert_eq!(api.code, ErrorCode::Unknown("http_404".to_owned()));
    assert!(api.message.contains("404 Not Found"), "{}", api.message);
    assert!(!err.is_transient());
    // `find` says "error", never "no such server".
    let err = c.servers().find(sid(server)).await.unwrap_err();
    assert!(!err.is_not_found(), "{err:?}");
    assert_eq!(env.count("GET /v1/servers/{id}"), 2, "a 404 is not retried");

    // The API's own not_found still means absent.
    env.h.clear_faults();
    assert_eq!(c.servers().find(hcloud_api::models::ServerId(424_242)).await.unwrap(), None);
}

#[tokio::test]
async fn conflict_anywhere_is_retried_and_locked_is_reported() {
    let policy =
        RetryPolicy { max_retries: 3, base_delay: Duration::from_millis(10), max_delay: Duration::from_millis(40) };
    let env = Env::with(FakeConfig::default().with_action_delay(SHORT_ACTION), |b| b.retry_policy(policy)).await;
    let c = &env.client;
    let net =
        nid(env.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap());
    env.h.seed_server(&SeedServer::new("node-1").network_ip(raw(net.0), "10.0.0.2")).unwrap();
    let route = Route { destination: "10.244.1.0/24".parse().unwrap(), gateway: "10.0.0.2".parse().unwrap() };

    env.h.inject_fault(FaultRule::conflict(Some("POST"), "/networks/{id}/actions/add_route").times(2));
    let a = c.networks().add_route(net, &route).await.unwrap();
    assert_eq!(env.statuses("POST /v1/networks/{id}/actions/add_route"), [409, 409, 201]);
    c.wait_for_action(&a, WAIT).await.unwrap();
    assert_eq!(c.networks().get(net).await.unwrap().routes, vec![route], "the route was added once");

    env.h.inject_fault(FaultRule::locked(Some("POST"), "/networks/{id}/actions/delete_route"));
    let err = c.networks().delete_route(net, &route).await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::Locked));
    assert!(err.is_transient());
    assert_eq!(env.count("POST /v1/networks/{id}/actions/delete_route"), 1, "locked is reported, not retried");
}
