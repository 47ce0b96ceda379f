//! Scenario, part 2: load balancers, the error codes of the operations, deletion.

use std::time::Duration;

use hcloud_fake::FakeHandle;
use hcloud_fake::control::{SeedNetwork, SeedServer};
use reqwest::Method;
use serde_json::json;

use super::client::Client;
use super::resources::Made;

/// Returns the ids of the two load balancers.
pub async fn run(c: &mut Client, h: &FakeHandle, m: &Made) -> (u64, u64) {
    let Made { net, other_net, server, server2, private_only, cert, .. } = *m;
    let gw = m.gw.clone();

    // A long delay for the create action so the `locked` check below cannot race it.
    h.set_action_delay(Duration::from_secs(60));
    let (s, lb) = c
        .call(
            Method::POST,
            "/load_balancers",
            "/load_balancers",
            Some(json!({
                "name": "lb", "load_balancer_type": "lb11", "location": "fsn1",
                "labels": {"svc": "web"}, "network": net, "algorithm": {"type": "round_robin"},
                "services": [
                    {"protocol": "tcp", "listen_port": 80, "destination_port": 30080, "proxyprotocol": false,
                     "health_check": {"protocol": "tcp", "port": 30080, "interval": 15, "timeout": 10, "retries": 3}},
                    {"protocol": "https", "listen_port": 443, "destination_port": 30443, "proxyprotocol": false,
                     "http": {"certificates": [cert], "redirect_http": false, "timeout_idle": 30},
                     "health_check": {"protocol": "http", "port": 30443, "interval": 10, "timeout": 5,
                                      "retries": 2, "http": {"domain": "example.com", "path": "/healthz",
                                                             "status_codes": ["200"], "tls": true}}}
                ],
                "targets": [{"type": "server", "server": {"id": server}, "use_private_ip": true}]
            })),
        )
        .await;
    assert_eq!(s, 201, "{lb}");
    let lb_id = lb["load_balancer"]["id"].as_u64().unwrap();
    let lb_create = lb["action"]["id"].as_u64().unwrap();
    let lb_action = |name: &str| format!("/load_balancers/{lb_id}/actions/{name}");
    c.expect_error(
        Method::POST,
        "/load_balancers/{id}/actions/add_service",
        &lb_action("add_service"),
        Some(json!({"protocol": "tcp", "listen_port": 8080, "destination_port": 8080})),
        423,
        "locked",
    )
    .await;
    h.finish_all_actions();
    h.set_action_delay(Duration::from_millis(20));
    c.wait(lb_create).await;
    let (s, lb2) = c
        .call(
            Method::POST,
            "/load_balancers",
            "/load_balancers",
            Some(json!({"name": "lb-zone", "load_balancer_type": "lb21", "network_zone": "eu-central",
                        "public_interface": true})),
        )
        .await;
    assert_eq!(s, 201, "{lb2}");
    let lb2_id = lb2["load_balancer"]["id"].as_u64().unwrap();
    c.wait(lb2["action"]["id"].as_u64().unwrap()).await;
    c.get("/load_balancers", "/load_balancers").await;
    c.get("/load_balancers", "/load_balancers?label_selector=svc%3Dweb").await;
    c.get("/load_balancers", "/load_balancers?name=lb-zone").await;
    c.get("/load_balancers/{id}", &format!("/load_balancers/{lb_id}")).await;
    let (s, _) = c
        .call(
            Method::PUT,
            "/load_balancers/{id}",
            &format!("/load_balancers/{lb_id}"),
            Some(json!({"name": "lb-renamed", "labels": {"svc": "web", "tier": "edge"}})),
        )
        .await;
    assert_eq!(s, 200);
    let add_service = c
        .act(
            "/load_balancers/{id}/actions/add_service",
            &lb_action("add_service"),
            json!({"protocol": "http", "listen_port": 8080, "destination_port": 80,
                   "proxyprotocol": true,
                   "http": {"cookie_name": "SESSION", "cookie_lifetime": 60, "sticky_sessions": true,
                            "timeout_idle": 60},
                   "health_check": {"protocol": "http", "port": 80, "interval": 15, "timeout": 10, "retries": 3,
                                    "http": {"path": "/"}}}),
        )
        .await;
    c.act(
        "/load_balancers/{id}/actions/update_service",
        &lb_action("update_service"),
        json!({"listen_port": 8080, "destination_port": 8081,
               "health_check": {"protocol": "tcp", "port": 8081}}),
    )
    .await;
    c.act(
        "/load_balancers/{id}/actions/add_service",
        &lb_action("add_service"),
        json!({"protocol": "tcp", "listen_port": 9000, "destination_port": 9000}),
    )
    .await;
    c.act("/load_balancers/{id}/actions/delete_service", &lb_action("delete_service"), json!({"listen_port": 9000}))
        .await;
    c.act(
        "/load_balancers/{id}/actions/add_target",
        &lb_action("add_target"),
        json!({"type": "ip", "ip": {"ip": "203.0.113.10"}}),
    )
    .await;
    c.act(
        "/load_balancers/{id}/actions/add_target",
        &lb_action("add_target"),
        json!({"type": "label_selector", "label_selector": {"selector": "role=worker"},
               "use_private_ip": true}),
    )
    .await;
    c.act(
        "/load_balancers/{id}/actions/add_target",
        &lb_action("add_target"),
        json!({"type": "server", "server": {"id": server2}, "use_private_ip": false}),
    )
    .await;
    c.get("/load_balancers/{id}", &format!("/load_balancers/{lb_id}")).await;
    c.get("/servers/{id}", &format!("/servers/{server}")).await;
    c.get("/certificates/{id}", &format!("/certificates/{cert}")).await;
    c.act(
        "/load_balancers/{id}/actions/remove_target",
        &lb_action("remove_target"),
        json!({"type": "ip", "ip": {"ip": "203.0.113.10"}}),
    )
    .await;
    c.act(
        "/load_balancers/{id}/actions/attach_to_network",
        &lb_action("attach_to_network"),
        json!({"network": other_net, "ip_range": "192.168.1.0/24"}),
    )
    .await;
    c.get("/networks/{id}", &format!("/networks/{other_net}")).await;
    c.act(
        "/load_balancers/{id}/actions/detach_from_network",
        &lb_action("detach_from_network"),
        json!({"network": other_net}),
    )
    .await;
    c.act("/load_balancers/{id}/actions/change_type", &lb_action("change_type"), json!({"load_balancer_type": "lb21"}))
        .await;
    c.act(
        "/load_balancers/{id}/actions/change_algorithm",
        &lb_action("change_algorithm"),
        json!({"type": "least_connections"}),
    )
    .await;
    c.expect_error(
        Method::POST,
        "/load_balancers/{id}/actions/disable_public_interface",
        &lb_action("disable_public_interface"),
        Some(json!({})),
        422,
        "targets_without_use_private_ip",
    )
    .await;
    c.act(
        "/load_balancers/{id}/actions/remove_target",
        &lb_action("remove_target"),
        json!({"type": "server", "server": {"id": server2}}),
    )
    .await;
    c.act("/load_balancers/{id}/actions/disable_public_interface", &lb_action("disable_public_interface"), json!({}))
        .await;
    c.act("/load_balancers/{id}/actions/enable_public_interface", &lb_action("enable_public_interface"), json!({}))
        .await;
    let lb_now = c.get("/load_balancers/{id}", &format!("/load_balancers/{lb_id}")).await;
    let v6 = lb_now["load_balancer"]["public_net"]["ipv6"]["ip"].clone();
    c.act(
        "/load_balancers/{id}/actions/change_dns_ptr",
        &lb_action("change_dns_ptr"),
        json!({"ip": v6, "dns_ptr": "lb.example.com"}),
    )
    .await;
    c.act(
        "/load_balancers/{id}/actions/change_dns_ptr",
        &lb_action("change_dns_ptr"),
        json!({"ip": v6, "dns_ptr": null}),
    )
    .await;
    c.act("/load_balancers/{id}/actions/change_protection", &lb_action("change_protection"), json!({"delete": true}))
        .await;
    c.get("/load_balancers/{id}/actions/{action_id}", &format!("/load_balancers/{lb_id}/actions/{add_service}")).await;
    c.get("/load_balancers/{id}/actions", &format!("/load_balancers/{lb_id}/actions?per_page=5&page=2")).await;
    c.get("/load_balancers/actions/{id}", &format!("/load_balancers/actions/{add_service}")).await;
    c.get("/load_balancers/{id}", &format!("/load_balancers/{lb_id}")).await;

    // ----- operation-specific errors -----
    let lb2_action = |name: &str| format!("/load_balancers/{lb2_id}/actions/{name}");
    let outside = h.seed_server(&SeedServer::new("outside")).unwrap();
    let us_only =
        h.seed_network(&SeedNetwork::new("us-only", "10.100.0.0/16").subnet("10.100.0.0/24", "us-east")).unwrap();
    let err = |status: u16, code: &'static str| (status, code);
    let cases = [
        (
            "/load_balancers/{id}/actions/add_service",
            lb_action("add_service"),
            json!({"protocol": "tcp", "listen_port": 80, "destination_port": 1}),
            err(409, "source_port_already_used"),
        ),
        (
            "/load_balancers/{id}/actions/add_target",
            lb_action("add_target"),
            json!({"type": "server", "server": {"id": server}, "use_private_ip": true}),
            err(409, "target_already_defined"),
        ),
        (
            "/load_balancers/{id}/actions/add_target",
            lb_action("add_target"),
            json!({"type": "server", "server": {"id": outside}, "use_private_ip": true}),
            err(422, "server_not_attached_to_network"),
        ),
        (
            "/load_balancers/{id}/actions/add_target",
            lb_action("add_target"),
            json!({"type": "server", "server": {"id": private_only}, "use_private_ip": false}),
            err(422, "missing_ipv4"),
        ),
        (
            "/load_balancers/{id}/actions/add_target",
            lb_action("add_target"),
            json!({"type": "ip", "ip": {"ip": lb_now["load_balancer"]["public_net"]["ipv4"]["ip"].clone()}}),
            err(422, "cloud_resource_ip_not_allowed"),
        ),
        (
            "/load_balancers/{id}/actions/add_target",
            lb2_action("add_target"),
            json!({"type": "server", "server": {"id": server}, "use_private_ip": true}),
            err(422, "load_balancer_not_attached_to_network"),
        ),
        (
            "/load_balancers/{id}/actions/disable_public_interface",
            lb2_action("disable_public_interface"),
            json!({}),
            err(422, "load_balancer_not_attached_to_network"),
        ),
        (
            "/load_balancers/{id}/actions/detach_from_network",
            lb2_action("detach_from_network"),
            json!({"network": net}),
            err(422, "load_balancer_not_attached_to_network"),
        ),
        (
            "/load_balancers/{id}/actions/attach_to_network",
            lb_action("attach_to_network"),
            json!({"network": net}),
            err(409, "load_balancer_already_attached"),
        ),
        (
            "/load_balancers/{id}/actions/attach_to_network",
            lb2_action("attach_to_network"),
            json!({"network": net, "ip": gw}),
            err(422, "ip_not_available"),
        ),
        (
            "/load_balancers/{id}/actions/attach_to_network",
            lb2_action("attach_to_network"),
            json!({"network": us_only}),
            err(422, "no_subnet_available"),
        ),
    ];
    for (template, path, body, (status, code)) in cases {
        c.expect_error(Method::POST, template, &path, Some(body), status, code).await;
    }
    // lb11 allows 5 services; the load balancer has 3.
    c.act("/load_balancers/{id}/actions/change_type", &lb_action("change_type"), json!({"load_balancer_type": "lb11"}))
        .await;
    for port in [81, 82] {
        c.act(
            "/load_balancers/{id}/actions/add_service",
            &lb_action("add_service"),
            json!({"protocol": "tcp", "listen_port": port, "destination_port": port}),
        )
        .await;
    }
    c.expect_error(
        Method::POST,
        "/load_balancers/{id}/actions/add_service",
        &lb_action("add_service"),
        Some(json!({"protocol": "tcp", "listen_port": 83, "destination_port": 83})),
        403,
        "resource_limit_exceeded",
    )
    .await;
    c.act("/load_balancers/{id}/actions/change_type", &lb_action("change_type"), json!({"load_balancer_type": "lb21"}))
        .await;
    c.act(
        "/load_balancers/{id}/actions/add_service",
        &lb_action("add_service"),
        json!({"protocol": "tcp", "listen_port": 83, "destination_port": 83}),
    )
    .await;
    c.expect_error(
        Method::POST,
        "/load_balancers/{id}/actions/change_type",
        &lb_action("change_type"),
        Some(json!({"load_balancer_type": "lb11"})),
        422,
        "invalid_load_balancer_type",
    )
    .await;
    c.expect_error(
        Method::DELETE,
        "/certificates/{id}",
        &format!("/certificates/{cert}"),
        None,
        422,
        "resource_in_use",
    )
    .await;
    c.expect_error(Method::DELETE, "/load_balancers/{id}", &format!("/load_balancers/{lb_id}"), None, 403, "protected")
        .await;
    (lb_id, lb2_id)
}

/// Generic errors and deletion.
pub async fn errors_and_deletes(c: &mut Client, h: &FakeHandle, m: &Made, (lb_id, lb2_id): (u64, u64)) {
    let Made { net, server, cert, .. } = *m;
    c.expect_error(Method::GET, "/servers/{id}", "/servers/1", None, 404, "not_found").await;
    c.expect_error(Method::GET, "/servers", "/servers?label_selector=a+in+b", None, 400, "invalid_input").await;
    c.expect_error(
        Method::POST,
        "/servers",
        "/servers",
        Some(json!({"name": "node-1", "server_type": "cpx11", "image": "ubuntu-24.04"})),
        409,
        "uniqueness_error",
    )
    .await;
    let (s, b) = c.call_as(Method::GET, "/servers", "/servers", None, None).await;
    assert_eq!((s, b["error"]["code"].as_str()), (401, Some("unauthorized")));

    c.act(
        "/load_balancers/{id}/actions/change_protection",
        &format!("/load_balancers/{lb_id}/actions/change_protection"),
        json!({"delete": false}),
    )
    .await;
    for id in [lb_id, lb2_id] {
        let (s, del) = c.call(Method::DELETE, "/load_balancers/{id}", &format!("/load_balancers/{id}"), None).await;
        assert_eq!(s, 200, "{del}");
        c.wait(del["action"]["id"].as_u64().unwrap()).await;
    }
    let (s, _) = c.call(Method::DELETE, "/certificates/{id}", &format!("/certificates/{cert}"), None).await;
    assert_eq!(s, 204);
    // Long delay so the `deleting` server can be fetched before the action removes it.
    h.set_action_delay(Duration::from_secs(60));
    let (s, del) = c.call(Method::DELETE, "/servers/{id}", &format!("/servers/{server}"), None).await;
    assert_eq!(s, 200, "{del}");
    let deleting = c.get("/servers/{id}", &format!("/servers/{server}")).await;
    assert_eq!(deleting["server"]["status"], "deleting");
    h.finish_all_actions();
    c.wait(del["action"]["id"].as_u64().unwrap()).await;
    let (s, _) = c.call(Method::DELETE, "/networks/{id}", &format!("/networks/{net}"), None).await;
    assert_eq!(s, 204);

    // Actions and rate limiting last (the bucket ends empty).
    c.get("/actions", &format!("/actions?id={}&id={}&id={}", m.create_action, m.add_route, m.issue)).await;
    c.expect_error(Method::GET, "/actions", "/actions", None, 400, "invalid_input").await;
    c.get("/actions/{id}", &format!("/actions/{}", m.add_route)).await;
    h.set_rate_limit(1, 0.0);
    c.get("/servers", "/servers").await;
    c.expect_error(Method::GET, "/servers", "/servers", None, 429, "rate_limit_exceeded").await;
}
