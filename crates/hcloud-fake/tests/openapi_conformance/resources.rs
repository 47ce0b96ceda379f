//! Scenario, part 1: catalogue, removed endpoints, networks, servers, routes, primary IPs,
//! certificates.

use std::time::Duration;

use hcloud_fake::FakeHandle;
use hcloud_fake::control::{SeedNetwork, SeedServer};
use reqwest::Method;
use serde_json::json;

use super::client::Client;

/// What part 2 builds on.
pub struct Made {
    pub net: u64,
    pub other_net: u64,
    pub server: u64,
    pub server2: u64,
    pub private_only: u64,
    pub gw: String,
    pub cert: u64,
    pub create_action: u64,
    pub add_route: u64,
    pub issue: u64,
}

pub const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

pub async fn run(c: &mut Client, h: &FakeHandle) -> Made {
    // ----- catalogue -----
    c.get("/locations", "/locations").await;
    c.get("/locations", "/locations?name=fsn1").await;
    c.get("/locations/{id}", "/locations/1").await;
    let types = c.get("/server_types", "/server_types?per_page=50").await;
    for t in types["server_types"].as_array().unwrap().clone() {
        let id = t["id"].as_u64().unwrap();
        c.get("/server_types/{id}", &format!("/server_types/{id}")).await;
    }
    c.get("/server_types", "/server_types?name=cpx11").await;
    let lb_types = c.get("/load_balancer_types", "/load_balancer_types").await;
    for t in lb_types["load_balancer_types"].as_array().unwrap().clone() {
        let id = t["id"].as_u64().unwrap();
        c.get("/load_balancer_types/{id}", &format!("/load_balancer_types/{id}")).await;
    }
    c.get("/load_balancer_types", "/load_balancer_types?name=lb-legacy").await;
    let images = c.get("/images", "/images?type=system&include_deprecated=true&sort=name:asc&per_page=50").await;
    for i in images["images"].as_array().unwrap().clone() {
        let id = i["id"].as_u64().unwrap();
        c.get("/images/{id}", &format!("/images/{id}")).await;
    }
    c.get("/images", "/images?name=ubuntu-24.04&architecture=arm&status=available&label_selector=!x").await;
    c.get("/locations", "/locations?sort=name:desc").await;
    c.get("/pricing", "/pricing").await;
    c.expect_error(Method::GET, "/images", "/images?sort=size", None, 400, "invalid_input").await;
    c.expect_error(Method::GET, "/images/{id}", "/images/1", None, 404, "not_found").await;
    // Removed since 2026-10-01.
    c.expect_error(Method::GET, "/datacenters", "/datacenters", None, 410, "deprecated_api_endpoint").await;
    c.expect_error(Method::GET, "/datacenters/{id}", "/datacenters/1", None, 410, "deprecated_api_endpoint").await;

    // ----- networks -----
    let (s, net) = c
        .call(
            Method::POST,
            "/networks",
            "/networks",
            Some(json!({"name": "k8s", "ip_range": "10.0.0.0/8", "labels": {"env": "test"},
                        "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/24", "network_zone": "eu-central"}]})),
        )
        .await;
    assert_eq!(s, 201, "{net}");
    let net = net["network"]["id"].as_u64().unwrap();
    let other_net =
        h.seed_network(&SeedNetwork::new("other", "192.168.0.0/16").subnet("192.168.1.0/24", "eu-central")).unwrap();
    c.get("/networks", "/networks").await;
    c.get("/networks", "/networks?label_selector=env%3Dtest&page=1&per_page=1").await;
    c.get("/networks", "/networks?name=k8s").await;
    c.get("/networks/{id}", &format!("/networks/{net}")).await;

    // ----- servers -----
    let (s, created) = c
        .call(
            Method::POST,
            "/servers",
            "/servers",
            Some(json!({"name": "node-1", "server_type": "cpx11", "image": "ubuntu-24.04",
                        "location": "nbg1", "networks": [net], "labels": {"role": "worker"}})),
        )
        .await;
    assert_eq!(s, 201, "{created}");
    let server = created["server"]["id"].as_u64().unwrap();
    let create_action = created["action"]["id"].as_u64().unwrap();
    c.get("/servers/{id}", &format!("/servers/{server}")).await;
    c.wait(create_action).await;
    let (s, arm) = c
        .call(
            Method::POST,
            "/servers",
            "/servers",
            Some(json!({"name": "node-2", "server_type": "cax11", "image": "debian-12",
                        "public_net": {"enable_ipv4": true, "enable_ipv6": false},
                        "ssh_keys": ["me"]})),
        )
        .await;
    assert_eq!(s, 201, "{arm}");
    let server2 = arm["server"]["id"].as_u64().unwrap();
    c.wait(arm["action"]["id"].as_u64().unwrap()).await;
    h.seed_server(&SeedServer::new("seeded").network(net).label("role", "worker")).unwrap();
    let mut private_only = SeedServer::new("private-only").network(net);
    private_only.enable_ipv4 = false;
    private_only.enable_ipv6 = false;
    let private_only = h.seed_server(&private_only).unwrap();
    c.get("/servers", "/servers").await;
    c.get("/servers", "/servers?label_selector=role%3Dworker&per_page=1&page=2").await;
    c.get("/servers", "/servers?name=node-1&status=running").await;
    c.get("/servers/{id}", &format!("/servers/{server2}")).await;
    c.act("/servers/{id}/actions/poweroff", &format!("/servers/{server}/actions/poweroff"), json!({})).await;
    c.act("/servers/{id}/actions/poweron", &format!("/servers/{server}/actions/poweron"), json!({})).await;
    let shutdown =
        c.act("/servers/{id}/actions/shutdown", &format!("/servers/{server}/actions/shutdown"), json!({})).await;
    c.act(
        "/servers/{id}/actions/attach_to_network",
        &format!("/servers/{server}/actions/attach_to_network"),
        json!({"network": other_net, "ip": "192.168.1.10", "alias_ips": ["192.168.1.11"]}),
    )
    .await;
    c.get("/servers/{id}", &format!("/servers/{server}")).await;
    c.act(
        "/servers/{id}/actions/detach_from_network",
        &format!("/servers/{server}/actions/detach_from_network"),
        json!({"network": other_net}),
    )
    .await;
    c.expect_error(
        Method::POST,
        "/servers/{id}/actions/detach_from_network",
        &format!("/servers/{server}/actions/detach_from_network"),
        Some(json!({"network": other_net})),
        422,
        "server_not_attached_to_network",
    )
    .await;
    c.expect_error(
        Method::POST,
        "/servers/{id}/actions/attach_to_network",
        &format!("/servers/{server}/actions/attach_to_network"),
        Some(json!({"network": net})),
        422,
        "server_already_attached",
    )
    .await;
    c.expect_error(
        Method::POST,
        "/servers/{id}/actions/attach_to_network",
        &format!("/servers/{server2}/actions/attach_to_network"),
        Some(json!({"network": net, "ip": h.server(server).unwrap().private_net[0].ip})),
        422,
        "ip_not_available",
    )
    .await;
    c.get("/servers/{id}/actions/{action_id}", &format!("/servers/{server}/actions/{shutdown}")).await;
    c.get("/servers/{id}/actions", &format!("/servers/{server}/actions")).await;
    c.get("/servers/actions/{id}", &format!("/servers/actions/{shutdown}")).await;

    // ----- primary IPs -----
    let ipv4 = h.server(server).unwrap().public_net.ipv4.unwrap();
    c.get("/primary_ips", "/primary_ips").await;
    c.get("/primary_ips", &format!("/primary_ips?ip={}", ipv4.ip)).await;
    c.get("/primary_ips/{id}", &format!("/primary_ips/{}", ipv4.id)).await;
    let (s, spare) = c
        .call(
            Method::POST,
            "/primary_ips",
            "/primary_ips",
            Some(json!({"name": "spare", "type": "ipv4", "location": "fsn1", "labels": {"spare": "yes"}})),
        )
        .await;
    assert_eq!(s, 201, "{spare}");
    let spare = spare["primary_ip"]["id"].as_u64().unwrap();
    c.get("/primary_ips", "/primary_ips?label_selector=spare").await;
    for (id, body) in [
        (spare, json!({"name": "spare-2", "labels": {"spare": "yes", "team": "x"}, "auto_delete": true})),
        (ipv4.id, json!({"labels": {"role": "web"}})),
    ] {
        let (s, _) = c.call(Method::PUT, "/primary_ips/{id}", &format!("/primary_ips/{id}"), Some(body)).await;
        assert_eq!(s, 200);
    }
    c.get("/primary_ips", "/primary_ips?sort=created:desc&sort=id").await;
    // Assign the spare one to a server that is off and has no IPv4, then unassign it.
    let stopped =
        SeedServer { enable_ipv4: false, status: hcloud_fake::wire::ServerStatus::Off, ..SeedServer::new("stopped") };
    let stopped = h.seed_server(&stopped).unwrap();
    let (s, assigned) = c
        .call(
            Method::POST,
            "/primary_ips/{id}/actions/assign",
            &format!("/primary_ips/{spare}/actions/assign"),
            Some(json!({"assignee_id": stopped, "assignee_type": "server"})),
        )
        .await;
    assert_eq!(s, 201, "{assigned}");
    let assigned = assigned["action"]["id"].as_u64().unwrap();
    c.wait(assigned).await;
    c.get("/primary_ips/{id}/actions", &format!("/primary_ips/{spare}/actions")).await;
    c.get("/primary_ips/{id}/actions/{action_id}", &format!("/primary_ips/{spare}/actions/{assigned}")).await;
    c.expect_error(
        Method::POST,
        "/primary_ips/{id}/actions/assign",
        &format!("/primary_ips/{spare}/actions/assign"),
        Some(json!({"assignee_id": stopped, "assignee_type": "server"})),
        422,
        "primary_ip_already_assigned",
    )
    .await;
    let (s, unassigned) = c
        .call(
            Method::POST,
            "/primary_ips/{id}/actions/unassign",
            &format!("/primary_ips/{spare}/actions/unassign"),
            None,
        )
        .await;
    assert_eq!(s, 201, "{unassigned}");
    c.wait(unassigned["action"]["id"].as_u64().unwrap()).await;
    c.expect_error(
        Method::DELETE,
        "/primary_ips/{id}",
        &format!("/primary_ips/{}", ipv4.id),
        None,
        422,
        "must_be_unassigned",
    )
    .await;
    let (s, _) = c.call(Method::DELETE, "/primary_ips/{id}", &format!("/primary_ips/{spare}"), None).await;
    assert_eq!(s, 204);

    // ----- routes -----
    let gw = h.server(server).unwrap().private_net[0].ip.clone();
    let add_route = c
        .act(
            "/networks/{id}/actions/add_route",
            &format!("/networks/{net}/actions/add_route"),
            json!({"destination": "10.244.0.0/24", "gateway": gw}),
        )
        .await;
    c.act(
        "/networks/{id}/actions/add_route",
        &format!("/networks/{net}/actions/add_route"),
        json!({"destination": "172.20.0.0/24", "gateway": gw}),
    )
    .await;
    c.get("/networks/{id}", &format!("/networks/{net}")).await;
    c.act(
        "/networks/{id}/actions/delete_route",
        &format!("/networks/{net}/actions/delete_route"),
        json!({"destination": "172.20.0.0/24", "gateway": gw}),
    )
    .await;
    c.expect_error(
        Method::POST,
        "/networks/{id}/actions/add_route",
        &format!("/networks/{net}/actions/add_route"),
        Some(json!({"destination": "100.64.0.0/24", "gateway": gw})),
        400,
        "invalid_input",
    )
    .await;
    // A network busy with a change answers `conflict`.
    h.set_action_delay(Duration::from_secs(60));
    let (s, _) = c
        .call(
            Method::POST,
            "/networks/{id}/actions/add_route",
            &format!("/networks/{net}/actions/add_route"),
            Some(json!({"destination": "10.245.0.0/24", "gateway": gw})),
        )
        .await;
    assert_eq!(s, 201);
    c.expect_error(
        Method::POST,
        "/networks/{id}/actions/delete_route",
        &format!("/networks/{net}/actions/delete_route"),
        Some(json!({"destination": "10.244.0.0/24", "gateway": gw})),
        409,
        "conflict",
    )
    .await;
    h.finish_all_actions();
    h.set_action_delay(Duration::from_millis(20));
    c.get("/networks/{id}/actions/{action_id}", &format!("/networks/{net}/actions/{add_route}")).await;
    c.get("/networks/{id}/actions", &format!("/networks/{net}/actions")).await;
    c.get("/networks/actions/{id}", &format!("/networks/actions/{add_route}")).await;

    names_labels_subnets_protection(c, h, net, other_net, server2).await;

    // ----- certificates -----
    let pem = include_str!("../fixtures/test-only-cert.pem");
    let (s, up) = c
        .call(
            Method::POST,
            "/certificates",
            "/certificates",
            Some(json!({"name": "uploaded", "certificate": pem, "private_key": KEY,
                        "labels": {"kind": "up"}})),
        )
        .await;
    assert_eq!(s, 201, "{up}");
    let cert = up["certificate"]["id"].as_u64().unwrap();
    h.set_action_delay(Duration::from_millis(300));
    let (s, managed) = c
        .call(
            Method::POST,
            "/certificates",
            "/certificates",
            Some(json!({"name": "managed", "type": "managed", "domain_names": ["example.com"]})),
        )
        .await;
    h.set_action_delay(Duration::from_millis(20));
    assert_eq!(s, 201, "{managed}");
    let managed_id = managed["certificate"]["id"].as_u64().unwrap();
    c.get("/certificates/{id}", &format!("/certificates/{managed_id}")).await;
    let issue = managed["action"]["id"].as_u64().unwrap();
    c.wait(issue).await;
    c.get("/certificates", "/certificates").await;
    c.get("/certificates", "/certificates?type=managed&label_selector=!kind").await;
    c.get("/certificates", "/certificates?name=uploaded").await;
    let (s, _) = c
        .call(
            Method::PUT,
            "/certificates/{id}",
            &format!("/certificates/{cert}"),
            Some(json!({"labels": {"kind": "up"}})),
        )
        .await;
    assert_eq!(s, 200);
    c.expect_error(
        Method::PUT,
        "/certificates/{id}",
        &format!("/certificates/{cert}"),
        Some(json!({"name": "managed"})),
        409,
        "uniqueness_error",
    )
    .await;
    c.get("/certificates/{id}", &format!("/certificates/{cert}")).await;
    c.get("/certificates/{id}", &format!("/certificates/{managed_id}")).await;
    c.get("/certificates/{id}/actions/{action_id}", &format!("/certificates/{managed_id}/actions/{issue}")).await;
    c.get("/certificates/{id}/actions", &format!("/certificates/{managed_id}/actions")).await;
    c.get("/certificates/actions/{id}", &format!("/certificates/actions/{issue}")).await;
    c.expect_error(
        Method::POST,
        "/certificates",
        "/certificates",
        Some(json!({"name": "x", "certificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
                    "private_key": KEY})),
        400,
        "invalid_input",
    )
    .await;

    Made { net, other_net, server, server2, private_only, gw, cert, create_action, add_route, issue }
}

/// What Hetzner's hcloud CLI manages besides the CCM's needs: names and labels (`PUT`),
/// subnets, the network's range, protection, reboot/reset, sorted lists.
async fn names_labels_subnets_protection(c: &mut Client, h: &FakeHandle, net: u64, other_net: u64, server2: u64) {
    c.get("/servers", "/servers?sort=name:desc&sort=id").await;
    c.get("/networks", "/networks?sort=created:desc").await;
    let (s, _) = c
        .call(Method::PUT, "/servers/{id}", &format!("/servers/{server2}"), Some(json!({"labels": {"tier": "db"}})))
        .await;
    assert_eq!(s, 200);
    c.expect_error(
        Method::PUT,
        "/servers/{id}",
        &format!("/servers/{server2}"),
        Some(json!({"name": "node-1"})),
        409,
        "uniqueness_error",
    )
    .await;
    for body in [json!({"delete": true, "rebuild": true}), json!({"delete": false, "rebuild": false})] {
        c.act(
            "/servers/{id}/actions/change_protection",
            &format!("/servers/{server2}/actions/change_protection"),
            body,
        )
        .await;
    }
    c.act("/servers/{id}/actions/reboot", &format!("/servers/{server2}/actions/reboot"), json!({})).await;
    let v4 = h.server(server2).unwrap().public_net.ipv4.unwrap().ip;
    let rdns = format!("/servers/{server2}/actions/change_dns_ptr");
    for ptr in [json!("node-2.example.com"), json!(null)] {
        c.act("/servers/{id}/actions/change_dns_ptr", &rdns, json!({"ip": v4, "dns_ptr": ptr})).await;
    }
    c.expect_error(
        Method::POST,
        "/servers/{id}/actions/change_dns_ptr",
        &rdns,
        Some(json!({"ip": "203.0.113.1", "dns_ptr": "x.example.com"})),
        400,
        "invalid_input",
    )
    .await;
    c.act("/servers/{id}/actions/reset", &format!("/servers/{server2}/actions/reset"), json!({})).await;

    let (s, _) = c
        .call(
            Method::PUT,
            "/networks/{id}",
            &format!("/networks/{other_net}"),
            Some(json!({"labels": {"kind": "other"}, "expose_routes_to_vswitch": false})),
        )
        .await;
    assert_eq!(s, 200);
    let subnet = |action: &str| format!("/networks/{other_net}/actions/{action}");
    c.act(
        "/networks/{id}/actions/add_subnet",
        &subnet("add_subnet"),
        json!({"type": "cloud", "network_zone": "eu-central", "ip_range": "192.168.2.0/24"}),
    )
    .await;
    c.act(
        "/networks/{id}/actions/add_subnet",
        &subnet("add_subnet"),
        json!({"type": "cloud", "network_zone": "us-east"}),
    )
    .await;
    c.get("/networks/{id}", &format!("/networks/{other_net}")).await;
    c.act("/networks/{id}/actions/delete_subnet", &subnet("delete_subnet"), json!({"ip_range": "192.168.2.0/24"}))
        .await;
    c.expect_error(
        Method::POST,
        "/networks/{id}/actions/add_subnet",
        &subnet("add_subnet"),
        Some(json!({"type": "cloud", "network_zone": "eu-central", "ip_range": "10.0.0.0/24"})),
        400,
        "invalid_input",
    )
    .await;
    // A subnet with servers in it cannot go (the API's `service_error`).
    c.expect_error(
        Method::POST,
        "/networks/{id}/actions/delete_subnet",
        &format!("/networks/{net}/actions/delete_subnet"),
        Some(json!({"ip_range": "10.0.0.0/24"})),
        503,
        "service_error",
    )
    .await;
    let growing = h.seed_network(&SeedNetwork::new("growing", "172.16.0.0/16")).unwrap();
    let action = |a: &str| format!("/networks/{growing}/actions/{a}");
    c.act("/networks/{id}/actions/change_ip_range", &action("change_ip_range"), json!({"ip_range": "172.16.0.0/12"}))
        .await;
    c.expect_error(
        Method::POST,
        "/networks/{id}/actions/change_ip_range",
        &action("change_ip_range"),
        Some(json!({"ip_range": "172.16.0.0/16"})),
        400,
        "invalid_input",
    )
    .await;
    c.act("/networks/{id}/actions/change_protection", &action("change_protection"), json!({"delete": true})).await;
    c.expect_error(Method::DELETE, "/networks/{id}", &format!("/networks/{growing}"), None, 403, "protected").await;
    c.act("/networks/{id}/actions/change_protection", &action("change_protection"), json!({"delete": false})).await;
    let (s, _) = c.call(Method::DELETE, "/networks/{id}", &format!("/networks/{growing}"), None).await;
    assert_eq!(s, 204);
}
