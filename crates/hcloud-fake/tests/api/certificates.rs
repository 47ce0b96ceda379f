use std::time::Duration;

use hcloud_fake::control::{SeedCertificate, SeedLoadBalancer};
use hcloud_fake::{FakeConfig, FakeError};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::Fx;

const PEM: &str = include_str!("../fixtures/test-only-cert.pem");
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
    // Read from the PEM, like `openssl x509 -fingerprint -sha256 -dates -ext subjectAltName`.
    assert_eq!(
        r.body["certificate"]["domain_names"],
        json!(["fake.example.com", "www.fake.example.com", "*.apps.fake.example.com"])
    );
    assert_eq!(
        r.body["certificate"]["fingerprint"],
        "59:6c:9f:41:8a:91:19:bf:75:64:bd:0c:ab:ef:fe:05:d1:b5:f2:36:37:35:c3:b7:13:ef:e6:25:cd:a6:15:c2"
    );
    assert_eq!(r.body["certificate"]["not_valid_before"], "2026-11-23T17:14:53+00:00");
    assert_eq!(r.body["certificate"]["not_valid_after"], "2036-11-20T17:14:53+00:00");

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
    // The issued certificate is a real one for the requested names: uploading it again
    // reads the same names and fingerprint.
    let issued = c.body["certificate"]["certificate"].as_str().unwrap().to_owned();
    let again = fx.post("/certificates", json!({"name": "reupload", "certificate": issued, "private_key": KEY})).await;
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(again.body["certificate"]["domain_names"], json!(["example.com"]));
    assert_eq!(again.body["certificate"]["fingerprint"], c.body["certificate"]["fingerprint"]);

    let r = fx.get("/certificates?type=managed").await;
    assert_eq!(r.body["certificates"].as_array().unwrap().len(), 1);
    let r = fx.get("/certificates?label_selector=k%3Dv").await;
    assert_eq!(r.body["certificates"][0]["name"], "up");

    for (body, field) in [
        (json!({"name": "x", "certificate": "nope", "private_key": KEY}), "certificate"),
        (
            json!({"name": "x", "certificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
                   "private_key": KEY}),
            "certificate",
        ),
        (json!({"name": "x", "certificate": PEM}), "private_key"),
        (json!({"name": "x", "type": "managed"}), "domain_names"),
        // A dNSName is ASCII: internationalized names go in punycode.
        (json!({"name": "x", "type": "managed", "domain_names": ["bücher.example"]}), "domain_names"),
    ] {
        let r = fx.post("/certificates", body).await;
        assert_eq!(r.code(), "invalid_input");
        assert_eq!(r.body["error"]["details"]["fields"][0]["name"], field);
    }
    let r = fx.post("/certificates", json!({"name": "up", "certificate": PEM, "private_key": KEY})).await;
    assert_eq!(r.code(), "uniqueness_error");
    // Seeds without a PEM are issued, so the same rule holds for them.
    match fx.h.seed_certificate(&SeedCertificate::uploaded("idn", &["bücher.example"])) {
        Err(FakeError::Api(e)) => {
            assert_eq!((e.code.as_str(), &e.details["fields"][0]["name"]), ("invalid_input", &json!("domain_names")));
        }
        other => panic!("a non-ASCII domain name was seeded: {other:?}"),
    }
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
    let r = fx.delete(&format!("/load_balancers/{lb}")).await;
    assert_eq!((r.status, r.body["action"]["command"].as_str()), (200, Some("delete_load_balancer")));
    assert_eq!(fx.delete(&format!("/certificates/{cert}")).await.status, 204);
    assert_eq!(fx.get(&format!("/certificates/{cert}")).await.status, 404);
}

/// `hcloud certificate add-label/update` answered `method not allowed`: no `PUT /certificates/{id}`.
#[tokio::test]
async fn put_renames_and_relabels_a_certificate() {
    let fx = Fx::instant().await;
    let id = fx.h.seed_certificate(&SeedCertificate::uploaded("web", &["a.example"])).unwrap();
    fx.h.seed_certificate(&SeedCertificate::uploaded("other", &["b.example"])).unwrap();
    let path = format!("/certificates/{id}");

    let r = fx.put(&path, json!({"name": "web-2", "labels": {"team": "web"}})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["certificate"]["name"].as_str(), r.body["certificate"]["labels"].clone()),
        (Some("web-2"), json!({"team": "web"}))
    );
    let r = fx.get("/certificates?label_selector=team%3Dweb").await;
    assert_eq!(r.body["certificates"][0]["id"], id);
    let r = fx.put(&path, json!({"labels": {}})).await;
    assert_eq!(
        (r.body["certificate"]["name"].as_str(), r.body["certificate"]["labels"].clone()),
        (Some("web-2"), json!({}))
    );
    assert_eq!(fx.put(&path, json!({"name": "other"})).await.code(), "uniqueness_error");
    assert_eq!(fx.put(&path, json!({"name": "has space"})).await.code(), "invalid_input");
    assert_eq!(fx.put("/certificates/1", json!({})).await.status, 404);
}
