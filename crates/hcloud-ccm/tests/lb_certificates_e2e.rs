//! End to end: changing `load-balancer.hetzner.cloud/http-managed-certificate-domains` issues a
//! new managed certificate, switches the HTTPS port to it once it is issued (never to a pending
//! or failed one while an issued one exists), deletes the old one, and reports a failed
//! issuance (the fake fails the `create_certificate` action) while keeping the old one; and
//! refuses a managed certificate name held by a certificate not labelled for the Service.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::lb::{
    annotate, fresh_namespace, ingress, lb_of, lb_service, requests_of_an_unchanged_sync, server_nodes, wait_lb,
};
use common::{Env, REACT};
use hcloud_fake::control::ActionFailure;
use hcloud_fake::{FakeConfig, FakeHandle};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, PostParams};
use test_harness::{wait_for, wait_for_event, wait_until};

const LOCATION: (&str, &str) = ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1");
const DOMAINS: &str = "load-balancer.hetzner.cloud/http-managed-certificate-domains";

/// The Service's managed certificates: (id, domains, issuance).
fn certificates(h: &FakeHandle, uid: &str) -> Vec<(u64, Vec<String>, String)> {
    h.snapshot()
        .certificates
        .into_iter()
        .filter(|c| c.labels.get("hcloud-ccm/service-uid").map(String::as_str) == Some(uid))
        .map(|c| (c.id, c.domain_names, c.status.map(|s| s.issuance).unwrap_or_default()))
        .collect()
}

/// The certificates of the Load Balancer's port 443.
fn in_use(h: &FakeHandle, svc: &Service) -> Vec<u64> {
    lb_of(h, svc)
        .and_then(|lb| lb.services.into_iter().find(|s| s.listen_port == 443))
        .and_then(|s| s.http)
        .map(|h| h.certificates)
        .unwrap_or_default()
}

/// Whether every certificate port 443 uses exists and is issued.
fn serving_issued(h: &FakeHandle, svc: &Service) -> bool {
    let certs = h.snapshot().certificates;
    let used = in_use(h, svc);
    !used.is_empty()
        && used
            .iter()
            .all(|id| certs.iter().any(|c| c.id == *id && c.status.as_ref().is_some_and(|s| s.issuance == "completed")))
}

async fn set_domains(api: &Api<Service>, name: &str, domains: &str) {
    annotate(api, name, serde_json::json!({DOMAINS: domains})).await;
}

#[tokio::test]
async fn managed_certificate_domains_change() {
    // Issuing takes 3 s in the fake, long enough to see the port keep the old certificate.
    let env = Env::start(FakeConfig::default().with_action_delay(Duration::from_secs(3))).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    let svc = lb_service(
        "shop",
        &[
            ("load-balancer.hetzner.cloud/protocol", "https"),
            ("load-balancer.hetzner.cloud/certificate-type", "managed"),
            (DOMAINS, "old.example.com"),
        ],
        &[443],
    );
    api.create(&PostParams::default(), &svc).await.expect("create service");
    let svc = wait_for(&api, "shop", REACT, "ingress", |s| s.is_some_and(|s| !ingress(s).is_empty()))
        .await
        .expect("ingress")
        .expect("service");
    let uid = svc.metadata.uid.clone().unwrap();
    wait_lb(&h, &svc, "LB with its target", |l| l.targets.len() == 1).await;
    wait_until(REACT, "the first certificate is issued and served", async || serving_issued(&h, &svc)).await.unwrap();
    let [(old, _, _)] = certificates(&h, &uid)[..] else { panic!("{:?}", certificates(&h, &uid)) };

    // New domains: a new certificate is issued; port 443 keeps an issued certificate at every
    // moment and switches once the new one is issued; the old one is deleted.
    let log_start = h.request_log().len();
    set_domains(&api, "shop", "new.example.com").await;
    let mut samples = 0;
    let mut saw_pending = false;
    wait_until(REACT, "port 443 serves the new certificate and the old one is gone", async || {
        samples += 1;
        let certs = certificates(&h, &uid);
        saw_pending |= certs.iter().any(|(_, d, s)| d == &["new.example.com"] && s == "pending");
        assert!(
            serving_issued(&h, &svc),
            "port 443 without an issued certificate: {:?} uses {:?}",
            certs,
            in_use(&h, &svc)
        );
        let new = certs.iter().find(|(_, d, s)| d == &["new.example.com"] && s == "completed").map(|c| c.0);
        new.is_some_and(|n| in_use(&h, &svc) == [n]) && certs.len() == 1
    })
    .await
    .unwrap();
    assert!(saw_pending && samples > 1, "the switch waited for the issuance ({samples} samples)");
    let [(new, _, _)] = certificates(&h, &uid)[..] else { panic!() };
    // What the change cost: one create, one update_service, the old one's delete (twice when
    // the first met the running update), and at most one certificate list per sync.
    let sent: Vec<String> = h.request_log().into_iter().skip(log_start).map(|r| r.endpoint).collect();
    let count = |e: &str| sent.iter().filter(|s| *s == e).count();
    assert_eq!(count("POST /v1/certificates"), 1, "{sent:?}");
    assert_eq!(count("POST /v1/load_balancers/{id}/actions/update_service"), 1, "{sent:?}");
    assert!((1..=2).contains(&count("DELETE /v1/certificates/{id}")), "{sent:?}");
    assert!(count("GET /v1/certificates") <= 2, "{sent:?}");
    assert_ne!(new, old);
    let e = wait_for_event(&env.client, "Service", "shop", "ManagedCertificateIssuing", REACT).await.expect("event");
    assert_eq!(e.type_, "Normal");
    assert!(e.message.contains("new.example.com") && e.message.contains("old.example.com"), "{}", e.message);

    // A sync where nothing changed costs no request.
    assert_eq!(requests_of_an_unchanged_sync(&env, &api, "shop").await, Vec::<String>::new());

    // A failed issuance: a Warning naming the domain and Hetzner's error; the port keeps the
    // issued certificate, which is not deleted.
    h.fail_next_actions(ActionFailure {
        count: 1,
        command: Some("create_certificate".into()),
        code: "dns_validation_failed".into(),
        message: "DNS of bad.example.com does not point to the Load Balancer".into(),
    });
    set_domains(&api, "shop", "bad.example.com").await;
    let e = wait_for_event(&env.client, "Service", "shop", "ManagedCertificateIssuanceFailed", REACT)
        .await
        .expect("warning");
    assert_eq!(e.type_, "Warning");
    assert!(
        e.message.contains(
            "for bad.example.com could not be issued: dns_validation_failed: DNS of bad.example.com does \
             not point to the Load Balancer; the Load Balancer keeps certificate"
        ),
        "{}",
        e.message
    );
    assert_eq!(in_use(&h, &svc), [new]);
    assert!(serving_issued(&h, &svc));
    assert!(certificates(&h, &uid).iter().any(|c| c.0 == new), "the issued certificate is kept");
}

/// A managed certificate name held by a certificate not labelled for the Service (here a
/// managed one of another cluster) is refused with a Warning whose text names the reason
/// `ManagedCertificateConflict` and the way out; nothing is created under another name. With
/// its own name the Service gets its certificate and Load Balancer (issue 27 item 4).
#[tokio::test]
async fn a_managed_certificate_name_of_someone_else_is_refused() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let seed = hcloud_fake::control::SeedCertificate::managed("shop-cert", &["other.example.com"]);
    let foreign = h.seed_certificate(&seed).expect("certificate of someone else");
    let (ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    let name = "load-balancer.hetzner.cloud/http-managed-certificate-name";
    let svc = lb_service(
        "shop",
        &[
            ("load-balancer.hetzner.cloud/protocol", "https"),
            ("load-balancer.hetzner.cloud/certificate-type", "managed"),
            (DOMAINS, "shop.example.com"),
            (name, "shop-cert"),
        ],
        &[443],
    );
    let svc = api.create(&PostParams::default(), &svc).await.expect("create service");
    let uid = svc.metadata.uid.clone().unwrap();
    let e = wait_for_event(&env.client, "Service", "shop", "SyncLoadBalancerFailed", REACT).await.expect("warning");
    assert_eq!(e.type_, "Warning");
    assert_eq!(
        e.message,
        format!(
            "Error syncing load balancer: failed to ensure load balancer: ManagedCertificateConflict: Service \
             {ns}/shop: a certificate named shop-cert exists but does not carry the label \
             hcloud-ccm/service-uid={uid} of this Service; set {name} to another name or delete that certificate"
        )
    );
    let ids: Vec<u64> = h.snapshot().certificates.iter().map(|c| c.id).collect();
    assert_eq!(ids, vec![foreign], "nothing created under another name");
    assert!(h.snapshot().load_balancers.is_empty());

    annotate(&api, "shop", serde_json::json!({name: "shop-cert-ours"})).await;
    wait_lb(&h, &svc, "the Load Balancer with its target", |l| l.targets.len() == 1).await;
    let mine: Vec<String> = h
        .snapshot()
        .certificates
        .into_iter()
        .filter(|c| c.labels.get("hcloud-ccm/service-uid") == Some(&uid))
        .map(|c| c.name)
        .collect();
    assert_eq!(mine, vec!["shop-cert-ours".to_owned()]);
}
