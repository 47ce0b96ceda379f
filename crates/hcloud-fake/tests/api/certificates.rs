use std::time::Duration;

use hcloud_fake::FakeConfig;
use hcloud_fake::control::{SeedCertificate, SeedLoadBalancer};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::Fx;

const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

#[tokio::test]
async fn uploaded_and_managed_certificates() {
    let fx = Fx::new(FakeConfig::default().with_action_delay(Duration::from_millis(100))).await;
    let r = fx
        .post("/certificates", json!({"name": "up", "certificate": PEM, "private_key": KEY, "labels": {"k": "v"}}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["action"], json!(null));
    assert_eq!(r.body["certificate"]["id"], 40_001);
    assert_eq!(r.body["certificate"]["type"], "uploaded");
    assert!(r.body["certificate"]["fingerprint"].is_string());

    let r =
        fx.post("/certificates", json!({"name": "managed", "type": "managed", "domain_names": ["example.com"]})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.id("certificate");
    assert_eq!(r.body["certificate"]["status"]["issuance"], "pending");
    assert_eq!(r.body["certificate"]["status"]["renewal"], "unavailable");
    assert_eq!(r.body["certificate"]["certificate"], json!(null));
    let a = fx.wait_action(r.body["action"]["id"].as_u64().unwrap()).await;
    assert_eq!(a["status"], "success");
    let c = fx.get(&format!("/certificates/{id}")).await;
    assert_eq!(c.body["certificate"]["status"]["issuance"], "completed");
    assert!(c.body["certificate"]["certificate"].is_string());

    let r = fx.get("/certificates?type=managed").await;
    assert_eq!(r.body["certificates"].as_array().unwrap().len(), 1);
    let r = fx.get("/certificates?label_selector=k%3Dv").await;
    assert_eq!(r.body["certificates"][0]["name"], "up");

    for (body, field) in [
        (json!({"name": "x", "certificate": "nope", "private_key": KEY}), "certificate"),
        (json!({"name": "x", "certificate": PEM}), "private_key"),
        (json!({"name": "x", "type": "managed"}), "domain_names"),
    ] {
        let r = fx.post("/certificates", body).await;
        assert_eq!(r.code(), "invalid_input");
        assert_eq!(r.body["error"]["details"]["fields"][0]["name"], field);
    }
    let r = fx.post("/certificates", json!({"name": "up", "certificate": PEM, "private_key": KEY})).await;
    assert_eq!(r.code(), "uniqueness_error");
}

#[tokio::test]
async fn certificates_in_use_cannot_be_deleted() {
    let fx = Fx::instant().await;
    let cert = fx.h.seed_certificate(&SeedCertificate::uploaded("c", &["example.com"])).unwrap();
    let mut lb = SeedLoadBalancer::new("lb");
    lb.services.push(serde_json::from_value(json!({"protocol": "https", "http": {"certificates": [cert]}})).unwrap());
    let lb = fx.h.seed_load_balancer(&lb).unwrap();
    let c = fx.get(&format!("/certificates/{cert}")).await;
    assert_eq!(c.body["certificate"]["used_by"], json!([{"id": lb, "type": "load_balancer"}]));
    let r = fx.delete(&format!("/certificates/{cert}")).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.code(), "resource_in_use");
    assert_eq!(fx.delete(&format!("/load_balancers/{lb}")).await.status, 204);
    assert_eq!(fx.delete(&format!("/certificates/{cert}")).await.status, 204);
    assert_eq!(fx.get(&format!("/certificates/{cert}")).await.status, 404);
}
