//! The API as it is today (the changes since the OpenAPI file, see `docs/hcloud-fake.md`),
//! and the behaviours issue 9 asked of the fake: progressing and pruned actions, reused IPs,
//! `conflict` on busy networks, blackhole routes, unhealthy targets.

use std::time::{Duration, Instant};

use hcloud_fake::FakeConfig;
use hcloud_fake::control::{SeedLoadBalancer, SeedNetwork, SeedServer, TargetHealthOverride};
use pretty_assertions::assert_eq;
use reqwest::Method;
use serde_json::json;

use super::common::Fx;

#[tokio::test]
async fn catalogue_and_removed_endpoints() {
    let fx = Fx::instant().await;
    for path in ["/datacenters", "/datacenters/2"] {
        let r = fx.get(path).await;
        assert_eq!((r.status, r.code()), (410, "deprecated_api_endpoint"), "{path}");
        assert!(r.body["error"]["details"]["announcement"].as_str().unwrap().contains("datacenters"));
    }
    let types = fx.get("/server_types?per_page=50").await.body;
    for t in types["server_types"].as_array().unwrap() {
        for l in t["locations"].as_array().unwrap() {
            assert!(l["available"].is_boolean() && l["recommended"].is_boolean(), "{t}");
        }
    }
    // cx22 is deprecated, orderable until its `unavailable_after` (2026-12-31, as on Hetzner),
    // never recommended.
    let cx22 = fx.get("/server_types?name=cx22").await.body["server_types"][0].clone();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let orderable = now < 1_798_675_200;
    assert_eq!(
        (cx22["locations"][0]["available"].clone(), cx22["locations"][0]["recommended"].clone()),
        (json!(orderable), json!(false))
    );
    let lb11 = fx.get("/load_balancer_types?name=lb11").await.body["load_balancer_types"][0].clone();
    assert_eq!(lb11["deprecation"], json!(null));
    assert!(lb11.as_object().unwrap().contains_key("deprecation"));
}

/// The hcloud CLI's plain `server-type describe` and `load-balancer-type describe` failed with
/// "failed to get prices": they read `GET /pricing`, which the fake did not serve.
#[tokio::test]
async fn pricing_has_the_prices_of_every_type() {
    let fx = Fx::instant().await;
    let r = fx.get("/pricing").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let p = &r.body["pricing"];
    assert_eq!((p["currency"].as_str(), p["vat_rate"].as_str()), (Some("EUR"), Some("19.00")));
    let types = fx.get("/server_types?per_page=50").await.body["server_types"].clone();
    assert_eq!(p["server_types"].as_array().unwrap().len(), types.as_array().unwrap().len());
    for t in types.as_array().unwrap() {
        let priced = p["server_types"].as_array().unwrap().iter().find(|x| x["id"] == t["id"]).unwrap();
        assert_eq!((&priced["name"], &priced["prices"]), (&t["name"], &t["prices"]), "{}", t["name"]);
    }
    let lb11 = fx.get("/load_balancer_types?name=lb11").await.body["load_balancer_types"][0].clone();
    let priced = p["load_balancer_types"].as_array().unwrap().iter().find(|x| x["name"] == "lb11").unwrap();
    assert_eq!((&priced["id"], &priced["prices"]), (&lb11["id"], &lb11["prices"]));
    let ipv4 = p["primary_ips"].as_array().unwrap().iter().find(|x| x["type"] == "ipv4").unwrap();
    assert_eq!(ipv4["prices"].as_array().unwrap().len(), 6, "every location");
    assert!(ipv4["prices"][0]["price_monthly"]["gross"].is_string());
    for key in ["image", "volume"] {
        assert!(p[key]["price_per_gb_month"]["net"].is_string(), "{key}");
    }
}

#[tokio::test]
async fn primary_ips_and_released_addresses() {
    let fx = Fx::instant().await;
    let server = fx.h.seed_server(&SeedServer::new("s")).unwrap();
    let ipv4 = fx.h.server(server).unwrap().public_net.ipv4.unwrap();
    let r = fx.get(&format!("/primary_ips/{}", ipv4.id)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let p = &r.body["primary_ip"];
    assert_eq!(
        (p["ip"].as_str(), p["type"].as_str(), p["assignee_id"].as_u64()),
        (Some(ipv4.ip.as_str()), Some("ipv4"), Some(server))
    );
    assert_eq!((p["assignee_type"].as_str(), p["location"]["name"].as_str()), (Some("server"), Some("fsn1")));
    assert!(p.get("datacenter").is_none());
    let r = fx.get(&format!("/primary_ips?ip={}", ipv4.ip)).await;
    assert_eq!(r.body["primary_ips"].as_array().unwrap().len(), 1);

    let r = fx.post("/primary_ips", json!({"name": "spare", "type": "ipv4", "location": "nbg1"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let spare = r.id("primary_ip");
    let spare_ip = r.body["primary_ip"]["ip"].as_str().unwrap().to_owned();
    assert_eq!(
        (r.body["primary_ip"]["assignee_type"].as_str(), r.body["primary_ip"]["assignee_id"].clone()),
        (Some("unassigned"), json!(null))
    );
    assert!(r.body.get("action").is_none());
    let r = fx.post("/primary_ips", json!({"name": "x", "type": "ipv4"})).await;
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "location");
    let r = fx.delete(&format!("/primary_ips/{}", ipv4.id)).await;
    assert_eq!((r.status, r.code()), (422, "must_be_unassigned"));
    assert_eq!(fx.delete(&format!("/primary_ips/{spare}")).await.status, 204);

    fx.h.delete_server(server).unwrap();
    // Released addresses come back oldest release first: the spare's, then the server's.
    let next = fx.h.seed_server(&SeedServer::new("next")).unwrap();
    assert_eq!(fx.h.server(next).unwrap().public_net.ipv4.unwrap().ip, spare_ip);
    let again = fx.h.seed_server(&SeedServer::new("again")).unwrap();
    assert_eq!(fx.h.server(again).unwrap().public_net.ipv4.unwrap().ip, ipv4.ip);
}

/// `hcloud primary-ip add-label/update` answered `method not allowed`: no `PUT /primary_ips/{id}`.
/// A server's Primary IPs can be renamed and labelled too, and keep that while assigned.
#[tokio::test]
async fn put_changes_name_labels_and_auto_delete_of_primary_ips() {
    let fx = Fx::instant().await;
    let server = fx.h.seed_server(&SeedServer::new("s")).unwrap();
    let ipv4 = fx.h.server(server).unwrap().public_net.ipv4.unwrap().id;
    let ipv6 = fx.h.server(server).unwrap().public_net.ipv6.unwrap().id;
    let r = fx.get(&format!("/primary_ips/{ipv4}")).await;
    assert_eq!(r.body["primary_ip"]["name"], format!("primary_ip-{ipv4}"));
    assert_eq!(r.body["primary_ip"]["auto_delete"], true);

    let r = fx
        .put(&format!("/primary_ips/{ipv4}"), json!({"name": "web-v4", "labels": {"a": "b"}, "auto_delete": false}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let p = &r.body["primary_ip"];
    assert_eq!(
        (p["name"].as_str(), p["labels"].clone(), p["auto_delete"].as_bool()),
        (Some("web-v4"), json!({"a": "b"}), Some(false))
    );
    assert_eq!(p["assignee_id"], server);
    let r = fx.get("/primary_ips?label_selector=a%3Db").await;
    assert_eq!(r.body["primary_ips"].as_array().unwrap().len(), 1);
    let r = fx.put(&format!("/primary_ips/{ipv6}"), json!({"name": "web-v6"})).await;
    assert_eq!(
        (r.body["primary_ip"]["name"].as_str(), r.body["primary_ip"]["type"].as_str()),
        (Some("web-v6"), Some("ipv6"))
    );

    let spare =
        fx.post("/primary_ips", json!({"name": "spare", "type": "ipv6", "location": "fsn1"})).await.id("primary_ip");
    let r = fx.put(&format!("/primary_ips/{spare}"), json!({"labels": {"use": "later"}, "auto_delete": true})).await;
    assert_eq!(
        (r.body["primary_ip"]["labels"].clone(), r.body["primary_ip"]["auto_delete"].as_bool()),
        (json!({"use": "later"}), Some(true))
    );
    assert_eq!(r.body["primary_ip"]["name"], "spare");

    let r = fx.put(&format!("/primary_ips/{spare}"), json!({"name": "web-v4"})).await;
    assert_eq!((r.status, r.code()), (409, "uniqueness_error"));
    assert_eq!(fx.put(&format!("/primary_ips/{spare}"), json!({"labels": {"!": "x"}})).await.code(), "invalid_input");
    assert_eq!(fx.put("/primary_ips/1", json!({})).await.status, 404);
}

#[tokio::test]
async fn actions_progress_over_time_and_are_pruned() {
    let fx = Fx::new(FakeConfig::default().with_action_delay(Duration::from_millis(600))).await;
    let server = fx.h.seed_server(&SeedServer::new("s")).unwrap();
    let r = fx.post(&format!("/servers/{server}/actions/poweroff"), json!({})).await;
    let id = r.id("action");
    let mut seen = vec![r.body["action"]["progress"].as_u64().unwrap()];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let a = fx.get(&format!("/actions/{id}")).await.body["action"].clone();
        seen.push(a["progress"].as_u64().unwrap());
        if a["status"] != "running" {
            break;
        }
        assert!(Instant::now() < deadline, "the action did not finish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "never goes back: {seen:?}");
    assert!(seen.iter().any(|p| (1..100).contains(p)), "moves while running: {seen:?}");
    assert_eq!(seen.last(), Some(&100));

    fx.h.set_action_retention(Duration::ZERO);
    assert_eq!(fx.get(&format!("/actions/{id}")).await.code(), "not_found", "pruned");
    assert_eq!(fx.get(&format!("/servers/{server}/actions")).await.body["actions"], json!([]));
    let r = fx.control(Method::PUT, "/config/action_retention", Some(json!({"ms": 3_600_000}))).await;
    assert_eq!(r.status, 204);
    assert_eq!(fx.h.settings().action_retention_ms, 3_600_000);
}

#[tokio::test]
async fn busy_networks_answer_conflict_and_blackholes_stay() {
    let fx = Fx::new(FakeConfig::default().with_action_delay(Duration::from_secs(3600))).await;
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let server = fx.h.seed_server(&SeedServer::new("node").network(net)).unwrap();
    let gw = fx.h.server(server).unwrap().private_net[0].ip.clone();
    let add = format!("/networks/{net}/actions/add_route");
    assert_eq!(fx.post(&add, json!({"destination": "10.244.0.0/24", "gateway": gw})).await.status, 201);
    let r = fx.post(&add, json!({"destination": "10.244.1.0/24", "gateway": gw})).await;
    assert_eq!((r.status, r.code()), (409, "conflict"));
    let r = fx
        .post(&format!("/networks/{net}/actions/delete_route"), json!({"destination": "10.244.0.0/24", "gateway": gw}))
        .await;
    assert_eq!((r.status, r.code()), (409, "conflict"), "{}", r.body);
    fx.h.finish_all_actions();

    // The route outlives its server: a blackhole, as in a real network.
    fx.h.delete_server(server).unwrap();
    let routes = fx.h.network(net).unwrap().routes;
    assert_eq!(routes.len(), 1);
    assert_eq!((routes[0].destination.as_str(), routes[0].gateway.as_str()), ("10.244.0.0/24", gw.as_str()));
}

#[tokio::test]
async fn services_targets_and_health() {
    let fx = Fx::instant().await;
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let server = fx.h.seed_server(&SeedServer::new("node").network(net)).unwrap();
    let mut seed = SeedLoadBalancer::new("lb");
    seed.network = Some(net.into());
    let lb = fx.h.seed_load_balancer(&seed).unwrap();
    let act = |name: &str| format!("/load_balancers/{lb}/actions/{name}");

    let r = fx
        .post(
            &act("add_service"),
            json!({"protocol": "http", "listen_port": 80, "destination_port": 30080,
                   "health_check": {"protocol": "https", "http": {"path": "/ready"}}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let svc = fx.h.load_balancer(lb).unwrap().services[0].clone();
    assert_eq!(svc.http.unwrap().timeout_idle, Some(60), "every HTTP service carries timeout_idle");
    let hc = svc.health_check.http.unwrap();
    assert_eq!((svc.health_check.protocol.as_str(), hc.tls, hc.path.as_str()), ("http", true, "/ready"));
    fx.post(&act("add_service"), json!({"protocol": "tcp", "listen_port": 443, "destination_port": 30443})).await;

    assert_eq!(
        fx.post(&act("add_target"), json!({"type": "server", "server": {"id": server}, "use_private_ip": true}))
            .await
            .status,
        201
    );
    let health = |fx: &Fx| {
        let lb = fx.h.load_balancer(lb).unwrap();
        lb.targets[0].health_status.clone().unwrap().into_iter().map(|h| (h.listen_port, h.status)).collect::<Vec<_>>()
    };
    assert_eq!(health(&fx), vec![(80, "healthy".to_owned()), (443, "healthy".to_owned())]);
    fx.h.set_target_health(lb, &TargetHealthOverride::server(server, "unhealthy").port(443)).unwrap();
    assert_eq!(health(&fx), vec![(80, "healthy".to_owned()), (443, "unhealthy".to_owned())]);
    let path = format!("/load_balancers/{lb}/target_health");
    let r = fx.control(Method::PUT, &path, Some(json!({"server": server, "status": "unhealthy"}))).await;
    assert_eq!(r.status, 204);
    assert_eq!(health(&fx), vec![(80, "unhealthy".to_owned()), (443, "unhealthy".to_owned())]);
    fx.control(Method::PUT, &path, Some(json!({"server": server, "status": null}))).await;
    fx.control(Method::PUT, &path, Some(json!({"server": server, "listen_port": 443}))).await;
    assert_eq!(health(&fx), vec![(80, "healthy".to_owned()), (443, "healthy".to_owned())], "cleared");
    for bad in [json!({"server": server, "status": "sick"}), json!({"status": "healthy"})] {
        assert_eq!(fx.control(Method::PUT, &path, Some(bad)).await.code(), "invalid_input");
    }
    assert_eq!(
        fx.control(Method::PUT, "/load_balancers/1/target_health", Some(json!({"server": server}))).await.status,
        404
    );

    // Detaching from the network drops the targets that used it.
    assert_eq!(fx.post(&act("detach_from_network"), json!({"network": net})).await.status, 201);
    assert!(fx.h.load_balancer(lb).unwrap().targets.is_empty());
}
