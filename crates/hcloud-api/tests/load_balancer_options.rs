//! Load balancer settings the CCM needs beyond the basics, against `hcloud-fake` over HTTP:
//! partial updates of a service's HTTP options, label-selector targets, and deletion as the
//! API answers it today (`200` with an action).
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use common::*;
use hcloud_api::models::{
    CertificateId, CreateLoadBalancerRequest, HttpOptions, IdRef, LbProtocol, LbService, LoadBalancerId, TargetKind,
    TargetSpec, UpdateHttpOptions, UpdateServiceRequest,
};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::{NetworkRef, SeedCertificate, SeedLoadBalancer, SeedNetwork, SeedServer};
use pretty_assertions::assert_eq;

async fn service(env: &Env, lb: LoadBalancerId, port: u16) -> LbService {
    let lb = env.client.load_balancers().get(lb).await.unwrap();
    lb.services.into_iter().find(|s| s.listen_port == port).expect("service exists")
}

#[tokio::test]
async fn http_options_update_clears_certificates_and_leaves_redirect_and_sticky_unchanged() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let c = &env.client;
    let cert = CertificateId(
        i64::try_from(env.h.seed_certificate(&SeedCertificate::uploaded("tls", &["example.com"])).unwrap()).unwrap(),
    );
    let https = LbService {
        protocol: LbProtocol::Https,
        listen_port: 443,
        destination_port: 30443,
        proxyprotocol: false,
        health_check: None,
        http: Some(HttpOptions {
            cookie_name: Some("SRV".to_owned()),
            cookie_lifetime: Some(600),
            certificates: vec![cert],
            redirect_http: true,
            sticky_sessions: true,
            timeout_idle: None,
        }),
    };
    let created = c
        .load_balancers()
        .create(&CreateLoadBalancerRequest {
            name: "web".to_owned(),
            load_balancer_type: "lb11".to_owned(),
            location: Some("fsn1".to_owned()),
            services: vec![https],
            ..Default::default()
        })
        .await
        .unwrap();
    let lb = created.resource.id;
    c.wait_for_action(&created.action.unwrap(), WAIT).await.unwrap();

    // Only the cookie lifetime: redirect, sticky sessions and certificates stay.
    let a = c
        .load_balancers()
        .update_service(
            lb,
            &UpdateServiceRequest {
                listen_port: 443,
                http: Some(UpdateHttpOptions { cookie_lifetime: Some(900), ..Default::default() }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    c.wait_for_action(&a, WAIT).await.unwrap();
    let http = service(&env, lb, 443).await.http.unwrap();
    assert_eq!(http.cookie_lifetime, Some(900));
    assert_eq!((http.redirect_http, http.sticky_sessions), (true, true));
    assert_eq!(http.certificates, vec![cert]);
    assert_eq!(http.cookie_name.as_deref(), Some("SRV"));

    // https -> http: the certificates are cleared, sticky sessions stay.
    let a = c
        .load_balancers()
        .update_service(
            lb,
            &UpdateServiceRequest {
                listen_port: 443,
                protocol: Some(LbProtocol::Http),
                http: Some(UpdateHttpOptions {
                    certificates: Some(Vec::new()),
                    redirect_http: Some(false),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    c.wait_for_action(&a, WAIT).await.unwrap();
    let svc = service(&env, lb, 443).await;
    assert_eq!(svc.protocol, LbProtocol::Http);
    let http = svc.http.unwrap();
    assert!(http.certificates.is_empty(), "{http:?}");
    assert_eq!((http.redirect_http, http.sticky_sessions, http.cookie_lifetime), (false, true, Some(900)));

    // The request body carries only what was given.
    let body = serde_json::to_value(UpdateServiceRequest {
        listen_port: 443,
        http: Some(UpdateHttpOptions { certificates: Some(Vec::new()), ..Default::default() }),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(body, serde_json::json!({"listen_port": 443, "http": {"certificates": []}}));
}

#[tokio::test]
async fn label_selector_targets_are_listed_and_removed() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let h = &env.h;
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let workers: Vec<u64> = (1..=2)
        .map(|i| {
            h.seed_server(
                &SeedServer::new(&format!("worker-{i}"))
                    .network_ip(net, &format!("10.0.0.1{i}"))
                    .label("role", "worker"),
            )
            .unwrap()
        })
        .collect();
    h.seed_server(&SeedServer::new("db").network_ip(net, "10.0.0.20").label("role", "db")).unwrap();
    let mut seed = SeedLoadBalancer::new("ingress");
    seed.network = Some(NetworkRef::from(net));
    let lb = lbid(h.seed_load_balancer(&seed).unwrap());
    let c = &env.client;

    let selector = TargetSpec::LabelSelector { selector: "role=worker".to_owned(), use_private_ip: true };
    let a = c.load_balancers().add_target(lb, &selector).await.unwrap();
    assert_eq!(a.command, "add_target");
    c.wait_for_action(&a, WAIT).await.unwrap();

    let targets = c.load_balancers().get(lb).await.unwrap().targets;
    assert_eq!(targets.len(), 1, "{targets:?}");
    let t = &targets[0];
    assert_eq!(t.kind, TargetKind::LabelSelector);
    assert_eq!(t.label_selector.as_ref().map(|s| s.selector.as_str()), Some("role=worker"));
    assert!(t.use_private_ip);
    let mut matched: Vec<IdRef<_>> = t.targets.iter().filter_map(|s| s.server).collect();
    matched.sort_by_key(|r| r.id);
    assert_eq!(matched, workers.iter().map(|w| IdRef { id: sid(*w) }).collect::<Vec<_>>());
    assert!(t.targets.iter().all(|s| s.use_private_ip));

    // The same selector again is already defined; removing it empties the list.
    let err = c.load_balancers().add_target(lb, &selector).await.unwrap_err();
    assert_eq!(err.code(), Some(&hcloud_api::ErrorCode::TargetAlreadyDefined));
    let a = c.load_balancers().remove_target(lb, &selector).await.unwrap();
    assert_eq!(a.command, "remove_target");
    c.wait_for_action(&a, WAIT).await.unwrap();
    assert!(c.load_balancers().get(lb).await.unwrap().targets.is_empty());
}

#[tokio::test]
async fn deleting_a_load_balancer_waits_for_its_delete_action() {
    let env = Env::start(FakeConfig::default().with_action_delay(FOREVER)).await;
    let lb = lbid(env.h.seed_load_balancer(&SeedLoadBalancer::new("old")).unwrap());

    let client = env.client.clone();
    let task = tokio::spawn(async move { client.load_balancers().delete(lb).await });
    let h = env.h.clone();
    until("the delete action is polled", || h.request_count("GET /v1/actions") >= 2).await;
    assert!(!task.is_finished(), "the deletion is still running");
    assert_eq!(env.statuses("DELETE /v1/load_balancers/{id}"), [200], "today's answer: 200 with an action");
    let running = env.h.snapshot().actions;
    assert_eq!(running.iter().map(|a| a.command.as_str()).collect::<Vec<_>>(), ["delete_load_balancer"]);

    env.h.finish_all_actions();
    task.await.unwrap().unwrap();
    assert!(env.h.snapshot().load_balancers.is_empty());
    assert!(env.client.load_balancers().get(lb).await.unwrap_err().is_not_found());
}
