use std::time::Duration;

use hcloud_fake::FakeConfig;
use hcloud_fake::control::{ActionFailure, SeedLoadBalancer, SeedNetwork, SeedServer, SeedServerBatch};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::Fx;

fn tcp(port: u16) -> serde_json::Value {
    json!({"protocol": "tcp", "listen_port": port, "destination_port": 30000 + port})
}

#[tokio::test]
async fn create_locks_until_the_action_finishes() {
    let fx = Fx::new(FakeConfig::default().with_action_delay(Duration::from_secs(1))).await;
    let r = fx
        .post(
            "/load_balancers",
            json!({"name": "lb", "load_balancer_type": "lb11", "location": "nbg1",
                   "labels": {"svc": "a"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let lb = &r.body["load_balancer"];
    let id = lb["id"].as_u64().unwrap();
    assert_eq!(id, 30_001);
    assert_eq!(lb["algorithm"], json!({"type": "round_robin"}));
    assert_eq!(lb["public_net"]["enabled"], true);
    assert!(lb["public_net"]["ipv4"]["ip"].as_str().unwrap().starts_with("198.18."));
    assert!(!lb["public_net"]["ipv6"]["ip"].as_str().unwrap().contains('/'));
    assert_eq!(lb["load_balancer_type"]["max_services"], 5);
    assert_eq!(lb["location"]["name"], "nbg1");
    assert_eq!(r.body["action"]["command"], "create_load_balancer");
    assert_eq!(r.body["action"]["status"], "running");

    let add = format!("/load_balancers/{id}/actions/add_service");
    let locked = fx.post(&add, tcp(80)).await;
    assert_eq!(locked.status, 423);
    assert_eq!(locked.code(), "locked");
    let put = fx.put(&format!("/load_balancers/{id}"), json!({"name": "x"})).await;
    assert_eq!(put.status, 423);
    assert_eq!(fx.get(&format!("/load_balancers/{id}")).await.status, 200);

    let done = fx.wait_action(r.body["action"]["id"].as_u64().unwrap()).await;
    assert_eq!(done["status"], "success");
    let ok = fx.post(&add, tcp(80)).await;
    assert_eq!(ok.status, 201, "{}", ok.body);
    assert_eq!(ok.body["action"]["status"], "running");
    // The service shows up when the action has finished.
    assert!(fx.h.load_balancer(id).unwrap().services.is_empty());
    fx.wait_action(ok.body["action"]["id"].as_u64().unwrap()).await;
    let svc = &fx.get(&format!("/load_balancers/{id}")).await.body["load_balancer"]["services"][0];
    assert_eq!(
        svc,
        &json!({"protocol": "tcp", "listen_port": 80, "destination_port": 30080,
                "proxyprotocol": false,
                "health_check": {"protocol": "tcp", "port": 30080, "interval": 15,
                                 "timeout": 10, "retries": 3}})
    );
}

#[tokio::test]
async fn service_rules_and_defaults() {
    let fx = Fx::instant().await;
    let id = fx.h.seed_load_balancer(&SeedLoadBalancer::new("lb")).unwrap();
    let add = format!("/load_balancers/{id}/actions/add_service");
    for port in 1..=5 {
        let r = fx.post(&add, tcp(port)).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let dup = fx.post(&add, tcp(3)).await;
    assert_eq!(dup.status, 409);
    assert_eq!(dup.code(), "source_port_already_used");
    let full = fx.post(&add, tcp(6)).await;
    assert_eq!(full.status, 403);
    assert_eq!(full.code(), "resource_limit_exceeded");

    // Downgrading below usage is refused; upgrading allows more services.
    let r = fx.post(&format!("/load_balancers/{id}/actions/delete_service"), json!({"listen_port": 9})).await;
    assert_eq!(r.code(), "not_found");
    let r = fx.post(&format!("/load_balancers/{id}/actions/change_type"), json!({"load_balancer_type": "lb21"})).await;
    assert_eq!(r.status, 201);
    assert_eq!(fx.post(&add, tcp(6)).await.status, 201);
    let r = fx.post(&format!("/load_balancers/{id}/actions/change_type"), json!({"load_balancer_type": "lb11"})).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.code(), "invalid_load_balancer_type");

    let r = fx
        .post(&add, json!({"protocol": "http", "health_check": {"protocol": "http", "http": {"path": "/healthz"}}}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let lb = fx.h.load_balancer(id).unwrap();
    let http = lb.services.iter().find(|s| s.listen_port == 80).unwrap();
    assert_eq!(http.destination_port, 80);
    assert_eq!(http.health_check.port, 80);
    let hc_http = http.health_check.http.as_ref().unwrap();
    assert_eq!(hc_http.path, "/healthz");
    assert_eq!(hc_http.status_codes, vec!["2??", "3??"]);
    let h = http.http.as_ref().unwrap();
    assert_eq!((h.cookie_name.as_str(), h.cookie_lifetime), ("HCLBSTICKY", 300));

    let r = fx
        .post(
            &format!("/load_balancers/{id}/actions/update_service"),
            json!({"listen_port": 80, "destination_port": 8080, "http": {"sticky_sessions": true}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let lb = fx.h.load_balancer(id).unwrap();
    let http = lb.services.iter().find(|s| s.listen_port == 80).unwrap();
    assert_eq!(http.destination_port, 8080);
    assert!(http.http.as_ref().unwrap().sticky_sessions);

    let r = fx.post(&add, json!({"protocol": "https"})).await;
    assert_eq!(r.code(), "invalid_input", "https needs a certificate");
    let r = fx.post(&add, json!({"protocol": "udp", "listen_port": 1, "destination_port": 1})).await;
    assert_eq!(r.code(), "invalid_input");
}

#[tokio::test]
async fn targets_limits_and_private_ip_rules() {
    let fx = Fx::instant().await;
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central")).unwrap();
    let mut batch = SeedServerBatch::new("node-", 26);
    batch.networks.push(net.into());
    let servers = fx.h.seed_servers(&batch).unwrap();
    let outside = fx.h.seed_server(&SeedServer::new("outside")).unwrap();
    let id = fx.h.seed_load_balancer(&SeedLoadBalancer::new("lb")).unwrap();
    let add = format!("/load_balancers/{id}/actions/add_target");
    let target = |s: u64, private: bool| json!({"type": "server", "server": {"id": s}, "use_private_ip": private});

    let r = fx.post(&add, target(servers[0], true)).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.code(), "load_balancer_not_attached_to_network");

    let attach = format!("/load_balancers/{id}/actions/attach_to_network");
    let r = fx.post(&attach, json!({"network": net, "ip": "10.0.1.200"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let lb = fx.h.load_balancer(id).unwrap();
    assert_eq!(lb.private_net[0].ip, "10.0.1.200");
    assert_eq!(fx.h.network(net).unwrap().load_balancers, vec![id]);
    let again = fx.post(&attach, json!({"network": net})).await;
    assert_eq!(again.status, 409);
    assert_eq!(again.code(), "load_balancer_already_attached");

    let r = fx.post(&add, target(outside, true)).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.code(), "server_not_attached_to_network");

    for s in &servers[..25] {
        let r = fx.post(&add, target(*s, true)).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let dup = fx.post(&add, target(servers[0], false)).await;
    assert_eq!(dup.status, 409);
    assert_eq!(dup.code(), "target_already_defined");
    let full = fx.post(&add, target(servers[25], true)).await;
    assert_eq!(full.status, 403);
    assert_eq!(full.code(), "resource_limit_exceeded");

    fx.post(
        &format!("/load_balancers/{id}/actions/add_service"),
        json!({"protocol": "tcp", "listen_port": 443, "destination_port": 30443}),
    )
    .await;
    fx.h.set_server_status(servers[1], hcloud_fake::wire::ServerStatus::Off).unwrap();
    let lb = fx.get(&format!("/load_balancers/{id}")).await.body["load_balancer"].clone();
    assert_eq!(
        lb["targets"][0],
        json!({"type": "server", "server": {"id": servers[0]}, "use_private_ip": true,
               "health_status": [{"listen_port": 443, "status": "healthy"}]})
    );
    assert_eq!(lb["targets"][1]["health_status"][0]["status"], "unhealthy", "a stopped server fails its checks");
    assert_eq!(fx.get(&format!("/servers/{}", servers[0])).await.body["server"]["load_balancers"], json!([id]));

    let rm = format!("/load_balancers/{id}/actions/remove_target");
    let r = fx.post(&rm, json!({"type": "server", "server": {"id": servers[0]}})).await;
    assert_eq!(r.status, 201);
    let r = fx.post(&rm, json!({"type": "server", "server": {"id": servers[0]}})).await;
    assert_eq!(r.code(), "not_found");

    let r = fx.post(&add, json!({"type": "ip", "ip": {"ip": "203.0.113.5"}})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let lb_ip = lb["public_net"]["ipv4"]["ip"].as_str().unwrap().to_owned();
    let r = fx.post(&add, json!({"type": "ip", "ip": {"ip": lb_ip}})).await;
    assert_eq!(r.code(), "cloud_resource_ip_not_allowed");

    let detach = format!("/load_balancers/{id}/actions/detach_from_network");
    assert_eq!(fx.post(&detach, json!({"network": net})).await.status, 201);
    let r = fx.post(&detach, json!({"network": net})).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.code(), "load_balancer_not_attached_to_network");
}

#[tokio::test]
async fn protection_update_and_other_actions() {
    let fx = Fx::instant().await;
    let id = fx.h.seed_load_balancer(&SeedLoadBalancer::new("lb")).unwrap();
    fx.h.seed_load_balancer(&SeedLoadBalancer::new("taken")).unwrap();
    let act = |name: &str| format!("/load_balancers/{id}/actions/{name}");

    let r = fx.post(&act("change_protection"), json!({"delete": true})).await;
    assert_eq!(r.status, 201);
    let r = fx.delete(&format!("/load_balancers/{id}")).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.code(), "protected");

    let r = fx.put(&format!("/load_balancers/{id}"), json!({"name": "renamed", "labels": {"new": "1"}})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["load_balancer"]["labels"], json!({"new": "1"}));
    let r = fx.put(&format!("/load_balancers/{id}"), json!({"name": "taken"})).await;
    assert_eq!(r.code(), "uniqueness_error");
    let r = fx.get("/load_balancers?name=renamed").await;
    assert_eq!(r.body["load_balancers"][0]["id"], id);
    let r = fx.get("/load_balancers?label_selector=new").await;
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 1);

    assert_eq!(fx.post(&act("change_algorithm"), json!({"type": "least_connections"})).await.status, 201);
    assert_eq!(fx.post(&act("change_algorithm"), json!({"type": "random"})).await.code(), "invalid_input");
    // Disabling the public interface needs a network (and no public targets).
    let r = fx.post(&act("disable_public_interface"), json!({})).await;
    assert_eq!((r.status, r.code()), (422, "load_balancer_not_attached_to_network"));
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central")).unwrap();
    assert_eq!(fx.post(&act("attach_to_network"), json!({"network": net})).await.status, 201);
    assert_eq!(fx.post(&act("disable_public_interface"), json!({})).await.status, 201);
    let lb = fx.h.load_balancer(id).unwrap();
    assert_eq!(lb.algorithm.kind, "least_connections");
    assert!(!lb.public_net.enabled);
    let server = fx.h.seed_server(&SeedServer::new("s")).unwrap();
    let r = fx.post(&act("add_target"), json!({"type": "server", "server": {"id": server}})).await;
    assert_eq!(r.code(), "load_balancer_public_interface_disabled");
    assert_eq!(fx.post(&act("enable_public_interface"), json!({})).await.status, 201);
    assert_eq!(fx.post(&act("add_target"), json!({"type": "server", "server": {"id": server}})).await.status, 201);
    let r = fx.post(&act("disable_public_interface"), json!({})).await;
    assert_eq!((r.status, r.code()), (422, "targets_without_use_private_ip"));

    let ip = lb.public_net.ipv4.ip.clone().unwrap();
    let r = fx.post(&act("change_dns_ptr"), json!({"ip": ip, "dns_ptr": "lb.example.com"})).await;
    assert_eq!(r.status, 201);
    assert_eq!(fx.h.load_balancer(id).unwrap().public_net.ipv4.dns_ptr.as_deref(), Some("lb.example.com"));
    let r = fx.post(&act("change_dns_ptr"), json!({"ip": "1.2.3.4", "dns_ptr": "x"})).await;
    assert_eq!(r.code(), "invalid_input");

    assert_eq!(fx.post(&act("change_protection"), json!({"delete": false})).await.status, 201);
    // Today's API answers the deletion with an action.
    let r = fx.delete(&format!("/load_balancers/{id}")).await;
    assert_eq!((r.status, r.body["action"]["command"].as_str()), (200, Some("delete_load_balancer")));
    assert_eq!(r.body["action"]["resources"], json!([{"id": id, "type": "load_balancer"}]));
    assert_eq!(fx.get(&format!("/load_balancers/{id}")).await.status, 404);
}

#[tokio::test]
async fn action_lifecycle_and_injected_failure() {
    let fx = Fx::new(FakeConfig::default().with_action_delay(Duration::from_millis(150))).await;
    let id = fx.h.seed_load_balancer(&SeedLoadBalancer::new("lb")).unwrap();
    let server = fx.h.seed_server(&SeedServer::new("s")).unwrap();
    fx.h.fail_next_actions(ActionFailure::new(1, Some("add_target"), "target_failed"));

    // A non-matching command is not affected.
    let r = fx
        .post(
            &format!("/load_balancers/{id}/actions/add_service"),
            json!({"protocol": "tcp", "listen_port": 80, "destination_port": 80}),
        )
        .await;
    let a = fx.wait_action(r.body["action"]["id"].as_u64().unwrap()).await;
    assert_eq!(a["status"], "success");

    let r = fx
        .post(&format!("/load_balancers/{id}/actions/add_target"), json!({"type": "server", "server": {"id": server}}))
        .await;
    assert_eq!(r.status, 201);
    let action_id = r.body["action"]["id"].as_u64().unwrap();
    assert_eq!(r.body["action"]["status"], "running");
    assert_eq!(r.body["action"]["finished"], json!(null));
    assert_eq!(r.body["action"]["error"], json!(null));
    let a = fx.wait_action(action_id).await;
    assert_eq!(a["status"], "error");
    assert_eq!(a["error"]["code"], "target_failed");
    assert!(fx.h.load_balancer(id).unwrap().targets.is_empty(), "effect not applied");

    // The next one succeeds.
    let r = fx
        .post(&format!("/load_balancers/{id}/actions/add_target"), json!({"type": "server", "server": {"id": server}}))
        .await;
    let a = fx.wait_action(r.body["action"]["id"].as_u64().unwrap()).await;
    assert_eq!(a["status"], "success");
    assert_eq!(fx.h.load_balancer(id).unwrap().targets.len(), 1);
    let r = fx.get(&format!("/load_balancers/{id}/actions/{action_id}")).await;
    assert_eq!(r.body["action"]["status"], "error");
    let r = fx.get(&format!("/actions?id={action_id}&id=1")).await;
    assert_eq!(r.body["actions"].as_array().unwrap().len(), 1, "{}", r.body);
    let r = fx.get(&format!("/load_balancers/{id}/actions")).await;
    assert_eq!(r.body["actions"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn label_selector_targets_are_supported() {
    let fx = Fx::instant().await;
    let id = fx.h.seed_load_balancer(&SeedLoadBalancer::new("lb")).unwrap();
    let a = fx.h.seed_server(&SeedServer::new("a").label("role", "web")).unwrap();
    fx.h.seed_server(&SeedServer::new("b").label("role", "db")).unwrap();
    let r = fx
        .post(
            &format!("/load_balancers/{id}/actions/add_target"),
            json!({"type": "label_selector", "label_selector": {"selector": "role=web"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let lb = fx.get(&format!("/load_balancers/{id}")).await.body["load_balancer"].clone();
    assert_eq!(lb["targets"][0]["type"], "label_selector");
    assert_eq!(lb["targets"][0]["targets"][0]["server"]["id"], a);
    let r = fx
        .post(
            &format!("/load_balancers/{id}/actions/add_target"),
            json!({"type": "label_selector", "label_selector": {"selector": "role in web"}}),
        )
        .await;
    assert_eq!(r.code(), "invalid_input");
}

/// `PUT /_fake/load_balancer_types/{type}/deprecation` deprecates a type the way the API serves
/// one (`deprecation {announced, unavailable_after}` and `deprecated`): in the type list, by id
/// and in each Load Balancer of that type. Past `unavailable_after` it can no longer be ordered
/// (create, change_type); `DELETE` makes it a current type again.
#[tokio::test]
async fn a_load_balancer_type_deprecated_through_the_control_surface() {
    let fx = Fx::instant().await;
    let create = |name: &str, t: &str| json!({"name": name, "load_balancer_type": t, "location": "nbg1"});
    let r = fx.post("/load_balancers", create("old", "lb21")).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let old = r.id("load_balancer");
    let r = fx.post("/load_balancers", create("small", "lb11")).await;
    let small = r.id("load_balancer");

    let dep = json!({"announced": "2026-01-01T00:00:00+00:00", "unavailable_after": "2026-02-01T00:00:00+00:00"});
    let r = fx.control(reqwest::Method::PUT, "/load_balancer_types/lb21/deprecation", Some(dep.clone())).await;
    assert_eq!(r.status, 204, "{}", r.body);
    let listed = fx.get("/load_balancer_types?name=lb21").await.body["load_balancer_types"][0].clone();
    assert_eq!((&listed["deprecation"], &listed["deprecated"]), (&dep, &dep["announced"]));
    assert_eq!(fx.get("/load_balancer_types/202").await.body["load_balancer_type"]["deprecation"], dep);
    let served = fx.get(&format!("/load_balancers/{old}")).await.body["load_balancer"]["load_balancer_type"].clone();
    assert_eq!(served["deprecation"], dep, "the Load Balancers of that type show it");
    let lb11 = fx.get("/load_balancer_types?name=lb11").await.body["load_balancer_types"][0].clone();
    assert_eq!(lb11["deprecation"], json!(null), "only that type");

    // Unavailable since 2026-02-01: neither a new Load Balancer nor a type change.
    let r = fx.post("/load_balancers", create("new", "lb21")).await;
    assert_eq!((r.status, r.code()), (400, "invalid_input"), "{}", r.body);
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "load_balancer_type");
    let change = format!("/load_balancers/{small}/actions/change_type");
    let r = fx.post(&change, json!({"load_balancer_type": "lb21"})).await;
    assert_eq!((r.status, r.code()), (400, "invalid_input"), "{}", r.body);

    // Bad input names the field; nothing changes.
    let bad = json!({"announced": "soon", "unavailable_after": "2026-02-01T00:00:00+00:00"});
    let r = fx.control(reqwest::Method::PUT, "/load_balancer_types/lb11/deprecation", Some(bad)).await;
    assert_eq!((r.status, r.code()), (400, "invalid_input"), "{}", r.body);
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "announced");
    let r = fx.control(reqwest::Method::PUT, "/load_balancer_types/lb99/deprecation", Some(dep.clone())).await;
    assert_eq!((r.status, r.code()), (400, "invalid_input"), "{}", r.body);
    let lb11 = fx.get("/load_balancer_types?name=lb11").await.body["load_balancer_types"][0].clone();
    assert_eq!(lb11["deprecation"], json!(null));

    // Current again.
    let r = fx.control(reqwest::Method::DELETE, "/load_balancer_types/lb21/deprecation", None).await;
    assert_eq!(r.status, 204, "{}", r.body);
    let listed = fx.get("/load_balancer_types?name=lb21").await.body["load_balancer_types"][0].clone();
    assert_eq!((&listed["deprecation"], &listed["deprecated"]), (&json!(null), &json!(null)));
    let r = fx.post(&change, json!({"load_balancer_type": "lb21"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
}
