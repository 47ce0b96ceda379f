//! The `sort` parameter of the lists: `hcloud server list --sort name:asc` (and every list the
//! CLI runs, which sends `sort=id:asc` by default) got the fake's id order whatever it asked.

use hcloud_fake::control::{SeedCertificate, SeedLoadBalancer, SeedNetwork, SeedServer};
use pretty_assertions::assert_eq;
use serde_json::Value;

use super::common::Fx;

fn field(body: &Value, key: &str, field: &str) -> Vec<String> {
    body[key].as_array().unwrap().iter().map(|o| o[field].to_string().trim_matches('"').to_owned()).collect()
}

#[tokio::test]
async fn every_list_sorts_by_the_sort_parameter() {
    let fx = Fx::instant().await;
    for name in ["web-1", "web-2", "db-1"] {
        fx.h.seed_server(&SeedServer::new(name)).unwrap();
        fx.h.seed_network(&SeedNetwork::new(&format!("net-{name}"), "10.0.0.0/16")).unwrap();
        fx.h.seed_load_balancer(&SeedLoadBalancer::new(&format!("lb-{name}"))).unwrap();
        fx.h.seed_certificate(&SeedCertificate::uploaded(&format!("cert-{name}"), &["a.example"])).unwrap();
    }
    let by_name = ["db-1", "web-1", "web-2"];
    let r = fx.get("/servers?sort=name:asc").await;
    assert_eq!(field(&r.body, "servers", "name"), by_name);
    let r = fx.get("/servers?sort=name").await;
    assert_eq!(field(&r.body, "servers", "name"), by_name);
    let r = fx.get("/servers?sort=name:desc").await;
    assert_eq!(field(&r.body, "servers", "name"), ["web-2", "web-1", "db-1"]);
    let r = fx.get("/servers?sort=id:desc&per_page=1&page=1").await;
    assert_eq!(field(&r.body, "servers", "name"), ["db-1"]);
    // Equal creation times keep the id order; the next key breaks the tie.
    let r = fx.get("/servers?sort=created:desc&sort=name:asc").await;
    assert_eq!(field(&r.body, "servers", "name"), by_name);
    let r = fx.get("/servers?sort=id:asc").await;
    assert_eq!(field(&r.body, "servers", "name"), ["web-1", "web-2", "db-1"]);

    for (path, key, names) in [
        ("/networks?sort=name:desc", "networks", ["net-web-2", "net-web-1", "net-db-1"]),
        ("/load_balancers?sort=name:asc", "load_balancers", ["lb-db-1", "lb-web-1", "lb-web-2"]),
        ("/certificates?sort=name:asc", "certificates", ["cert-db-1", "cert-web-1", "cert-web-2"]),
    ] {
        assert_eq!(field(&fx.get(path).await.body, key, "name"), names, "{path}");
    }
    let ids = field(&fx.get("/primary_ips?sort=id:desc").await.body, "primary_ips", "id");
    let mut sorted = ids.clone();
    sorted.sort_by_key(|id| std::cmp::Reverse(id.parse::<u64>().unwrap()));
    assert_eq!((ids.len(), &ids), (6, &sorted));
    let r = fx.get("/locations?sort=name:asc").await;
    assert_eq!(field(&r.body, "locations", "name"), ["ash", "fsn1", "hel1", "hil", "nbg1", "sin"]);

    // Fields a list does not sort by, and unknown directions, are refused.
    for bad in ["/servers?sort=status", "/servers?sort=name:up", "/primary_ips?sort=name", "/locations?sort=created"] {
        let r = fx.get(bad).await;
        assert_eq!((r.status, r.code()), (400, "invalid_input"), "{bad}: {}", r.body);
        assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "sort", "{bad}");
    }
}
