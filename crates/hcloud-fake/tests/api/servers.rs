use std::time::Duration;

use hcloud_fake::FakeConfig;
use hcloud_fake::control::{PublicIpv6Change, SeedNetwork, SeedServer, SeedServerBatch};
use hcloud_fake::wire::ServerStatus;
use pretty_assertions::assert_eq;
use reqwest::Method;
use serde_json::json;

use super::common::Fx;

fn network(fx: &Fx) -> u64 {
    fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap()
}

#[tokio::test]
async fn create_with_network_assigns_ips_and_starts_after_action() {
    let fx = Fx::new(FakeConfig::default().with_action_delay(Duration::from_millis(200))).await;
    let net = network(&fx);
    let r = fx
        .post(
            "/servers",
            json!({"name": "node-1", "server_type": "cx23", "image": "ubuntu-24.04",
                   "location": "fsn1", "networks": [net], "labels": {"role": "worker"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let s = &r.body["server"];
    assert_eq!(s["id"], 10_000_001);
    assert_eq!(s["status"], "initializing");
    assert!(s.get("datacenter").is_none(), "datacenter was removed from the API");
    assert_eq!(s["location"]["name"], "fsn1");
    assert_eq!(s["location"]["network_zone"], "eu-central");
    assert!(s["public_net"]["ipv4"]["ip"].as_str().unwrap().starts_with("198.18."));
    assert!(s["public_net"]["ipv6"]["ip"].as_str().unwrap().ends_with("::/64"));
    assert_eq!(s["private_net"][0]["network"], net);
    assert_eq!(s["private_net"][0]["ip"], "10.0.0.2");
    assert_eq!(s["server_type"]["name"], "cx23");
    assert_eq!(s["image"]["name"], "ubuntu-24.04");
    assert!(r.body["root_password"].is_string());
    assert_eq!(r.body["next_actions"], json!([]));
    let action = &r.body["action"];
    assert_eq!(action["command"], "create_server");
    assert_eq!(action["status"], "running");
    assert_eq!(action["progress"], 0);
    assert_eq!(action["resources"][0], json!({"id": 10_000_001, "type": "server"}));

    let done = fx.wait_action(action["id"].as_u64().unwrap()).await;
    assert_eq!(done["status"], "success");
    assert_eq!(done["progress"], 100);
    assert!(done["finished"].is_string());
    let r = fx.get("/servers/10000001").await;
    assert_eq!(r.body["server"]["status"], "running");
    let n = fx.get(&format!("/networks/{net}")).await;
    assert_eq!(n.body["network"]["servers"], json!([10_000_001]));

    // A second server gets the next private IP and a different public IP.
    let r2 = fx
        .post(
            "/servers",
            json!({"name": "node-2", "server_type": "cpx11", "image": "ubuntu-24.04",
                   "networks": [net], "public_net": {"enable_ipv6": false},
                   "start_after_create": false, "ssh_keys": ["k"]}),
        )
        .await;
    assert_eq!(r2.status, 201);
    assert_eq!(r2.body["server"]["private_net"][0]["ip"], "10.0.0.3");
    assert_eq!(r2.body["server"]["public_net"]["ipv6"], json!(null));
    assert_ne!(r2.body["server"]["public_net"]["ipv4"]["ip"], r.body["server"]["public_net"]["ipv4"]["ip"]);
    assert_eq!(r2.body["root_password"], json!(null));
    fx.wait_action(r2.body["action"]["id"].as_u64().unwrap()).await;
    assert_eq!(fx.h.server(r2.id("server")).unwrap().status, ServerStatus::Off);
}

#[tokio::test]
async fn arm_types_get_arm_images_and_bad_input_is_rejected() {
    let fx = Fx::instant().await;
    let r = fx.post("/servers", json!({"name": "arm-1", "server_type": "cax11", "image": "ubuntu-24.04"})).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["server"]["image"]["architecture"], "arm");
    assert_eq!(r.body["server"]["status"], "running", "zero delay finishes at once");
    for (body, field) in [
        (json!({"name": "x", "server_type": "nope", "image": "ubuntu-24.04"}), "server_type"),
        (json!({"name": "x", "server_type": "cx23", "image": "nope"}), "image"),
        (json!({"name": "x", "server_type": "cx23", "image": "ubuntu-24.04", "location": "mars"}), "location"),
        (json!({"name": "bad name", "server_type": "cx23", "image": "ubuntu-24.04"}), "name"),
        (json!({"server_type": "cx23", "image": "ubuntu-24.04"}), "name"),
        (json!({"name": "x", "server_type": "cx23", "image": "ubuntu-24.04", "networks": [999]}), "networks"),
    ] {
        let r = fx.post("/servers", body).await;
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(r.code(), "invalid_input");
        assert_eq!(r.body["error"]["details"]["fields"][0]["name"], field);
    }
    let dup = fx.post("/servers", json!({"name": "arm-1", "server_type": "cx23", "image": "ubuntu-24.04"})).await;
    assert_eq!(dup.status, 409);
    assert_eq!(dup.code(), "uniqueness_error");
    assert_eq!(dup.body["error"]["details"]["fields"], json!([{"name": "name"}]));
}

#[tokio::test]
async fn pagination_meta_and_filters() {
    let fx = Fx::instant().await;
    let mut batch = SeedServerBatch::new("node-", 120);
    batch.labels.insert("pool".into(), "a".into());
    let ids = fx.h.seed_servers(&batch).unwrap();
    assert_eq!(ids.len(), 120);
    fx.h.seed_server(&SeedServer::new("other").label("pool", "b").status(ServerStatus::Off)).unwrap();

    let r = fx.get("/servers").await;
    assert_eq!(r.body["servers"].as_array().unwrap().len(), 25);
    assert_eq!(
        r.body["meta"]["pagination"],
        json!({"page": 1, "per_page": 25, "previous_page": null, "next_page": 2,
               "last_page": 5, "total_entries": 121})
    );
    let r = fx.get("/servers?per_page=50&page=2").await;
    let servers = r.body["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 50);
    assert_eq!(servers[0]["id"], ids[50]);
    assert!(servers.windows(2).all(|w| w[0]["id"].as_u64() < w[1]["id"].as_u64()));
    assert_eq!(
        r.body["meta"]["pagination"],
        json!({"page": 2, "per_page": 50, "previous_page": 1, "next_page": 3,
               "last_page": 3, "total_entries": 121})
    );
    let r = fx.get("/servers?per_page=500&page=3").await;
    assert_eq!(r.body["servers"].as_array().unwrap().len(), 21);
    assert_eq!(r.body["meta"]["pagination"]["per_page"], 50);
    assert_eq!(r.body["meta"]["pagination"]["next_page"], json!(null));
    assert_eq!(r.body["meta"]["pagination"]["previous_page"], 2);

    let r = fx.get("/servers?name=node-7").await;
    assert_eq!(r.body["servers"][0]["name"], "node-7");
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 1);
    let r = fx.get("/servers?label_selector=pool%3Db").await;
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 1);
    let r = fx.get("/servers?label_selector=pool+in+(a,b)&per_page=1").await;
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 121);
    let r = fx.get("/servers?status=off").await;
    assert_eq!(r.body["servers"][0]["name"], "other");
    let r = fx.get("/servers?status=off&status=running").await;
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 121);

    let r = fx.get("/servers?label_selector=pool+in+a").await;
    assert_eq!(r.status, 400);
    assert_eq!(r.code(), "invalid_input");
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "label_selector");
    let r = fx.get("/servers?page=0").await;
    assert_eq!(r.code(), "invalid_input");
}

#[tokio::test]
async fn power_attach_detach_and_delete_take_effect_when_actions_finish() {
    // Actions never finish on their own here; `finish_all_actions` completes them, so the
    // intermediate states can be asserted without racing a timer.
    let fx = Fx::new(FakeConfig::default().with_action_delay(Duration::from_secs(600))).await;
    let net = network(&fx);
    let id = fx.h.seed_server(&SeedServer::new("n1")).unwrap();

    let r = fx.post(&format!("/servers/{id}/actions/poweroff"), json!({})).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["action"]["command"], "stop_server");
    assert_eq!(fx.get(&format!("/servers/{id}")).await.body["server"]["status"], "running");
    assert_eq!(fx.get(&format!("/servers/{id}")).await.body["server"]["locked"], true);
    let again = fx.post(&format!("/servers/{id}/actions/poweron"), json!({})).await;
    assert_eq!(again.status, 423);
    assert_eq!(again.code(), "locked");
    fx.h.finish_all_actions();
    fx.wait_action(r.body["action"]["id"].as_u64().unwrap()).await;
    assert_eq!(fx.get(&format!("/servers/{id}")).await.body["server"]["status"], "off");

    let r = fx
        .post(
            &format!("/servers/{id}/actions/attach_to_network"),
            json!({"network": net, "ip": "10.0.0.50", "alias_ips": ["10.0.0.51"]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["action"]["resources"], json!([{"id": id, "type": "server"}, {"id": net, "type": "network"}]));
    assert_eq!(fx.h.server(id).unwrap().private_net.len(), 0, "applies on completion");
    fx.h.finish_all_actions();
    fx.wait_action(r.body["action"]["id"].as_u64().unwrap()).await;
    let s = fx.h.server(id).unwrap();
    assert_eq!(s.private_net[0].ip, "10.0.0.50");
    assert_eq!(s.private_net[0].alias_ips, vec!["10.0.0.51".to_owned()]);

    let r = fx.post(&format!("/servers/{id}/actions/attach_to_network"), json!({"network": net})).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.code(), "server_already_attached");

    let other = fx.h.seed_server(&SeedServer::new("n2")).unwrap();
    let r = fx
        .post(&format!("/servers/{other}/actions/attach_to_network"), json!({"network": net, "ip": "10.0.0.50"}))
        .await;
    assert_eq!(r.code(), "ip_not_available");
    let r = fx
        .post(&format!("/servers/{other}/actions/attach_to_network"), json!({"network": net, "ip": "10.0.1.5"}))
        .await;
    assert_eq!(r.code(), "ip_not_available", "outside every subnet");

    let r = fx.post(&format!("/servers/{id}/actions/detach_from_network"), json!({"network": net})).await;
    assert_eq!(r.status, 201);
    fx.h.finish_all_actions();
    fx.wait_action(r.body["action"]["id"].as_u64().unwrap()).await;
    assert!(fx.h.server(id).unwrap().private_net.is_empty());
    let r = fx.post(&format!("/servers/{id}/actions/detach_from_network"), json!({"network": net})).await;
    assert_eq!(r.code(), "server_not_attached_to_network");

    let r = fx.delete(&format!("/servers/{id}")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["action"]["command"], "delete_server");
    assert_eq!(fx.get(&format!("/servers/{id}")).await.body["server"]["status"], "deleting");
    fx.h.finish_all_actions();
    fx.wait_action(r.body["action"]["id"].as_u64().unwrap()).await;
    let r = fx.get(&format!("/servers/{id}")).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.code(), "not_found");
    assert_eq!(fx.get("/servers/abc").await.code(), "invalid_input");
    assert_eq!(fx.post("/servers/1/actions/poweron", json!({})).await.status, 404);
}

#[tokio::test]
async fn instant_control_mutations() {
    let fx = Fx::instant().await;
    let net = network(&fx);
    let mut seed = SeedServer::new("fixed").network_ip(net, "10.0.0.10").location("hel1");
    seed.public_ipv4 = Some("198.18.200.7".into());
    seed.public_ipv6 = Some("2001:db8:ff::/64".into());
    let id = fx.h.seed_server(&seed).unwrap();
    let s = fx.h.server(id).unwrap();
    assert_eq!(s.public_net.ipv4.unwrap().ip, "198.18.200.7");
    assert_eq!(s.public_net.ipv6.unwrap().ip, "2001:db8:ff::/64");
    assert_eq!(s.private_net[0].ip, "10.0.0.10");
    assert_eq!(s.location.name, "hel1");

    let mut dup = SeedServer::new("dup");
    dup.public_ipv4 = Some("198.18.200.7".into());
    assert!(fx.h.seed_server(&dup).is_err(), "fixed IPv4 already taken");
    let mut private_only = SeedServer::new("private-only");
    private_only.enable_ipv4 = false;
    private_only.enable_ipv6 = false;
    let pid = fx.h.seed_server(&private_only).unwrap();
    let r = fx.get(&format!("/servers/{pid}")).await;
    assert_eq!(r.body["server"]["public_net"]["ipv4"], json!(null));
    assert_eq!(r.body["server"]["public_net"]["ipv6"], json!(null));

    fx.h.set_server_status(id, ServerStatus::Off).unwrap();
    fx.h.rename_server(id, "renamed").unwrap();
    let r = fx.get(&format!("/servers/{id}")).await;
    assert_eq!(r.body["server"]["status"], "off");
    assert_eq!(r.body["server"]["name"], "renamed");
    assert_eq!(fx.h.rename_server(id, "private-only").unwrap_err().to_string().contains("uniqueness_error"), true);

    let r = fx
        .control(Method::PATCH, &format!("/servers/{id}"), Some(json!({"status": "running", "labels": {"a": "b"}})))
        .await;
    assert_eq!(r.status, 204);
    let s = fx.h.server(id).unwrap();
    assert_eq!(s.labels["a"], "b");
    assert_eq!(s.status, ServerStatus::Running);

    let r = fx.control(Method::DELETE, &format!("/servers/{id}"), None).await;
    assert_eq!(r.status, 204);
    assert!(fx.h.server(id).is_none());
    assert!(fx.h.network(net).unwrap().servers.is_empty());
    assert!(fx.h.delete_server(id).is_err());
    let r = fx.control(Method::DELETE, &format!("/servers/{id}"), None).await;
    assert_eq!(r.status, 404);
}

/// Each server with IPv6 has its own /64; one created without has `ipv6: null`; the control
/// surface gives a server another /64 (or none), as reassigning its IPv6 Primary IP would.
#[tokio::test]
async fn public_ipv6_networks_are_distinct_and_can_change() {
    let fx = Fx::instant().await;
    let mut nets = Vec::new();
    for name in ["v6-1", "v6-2", "v6-3"] {
        let r = fx.post("/servers", json!({"name": name, "server_type": "cx23", "image": "ubuntu-24.04"})).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let net = r.body["server"]["public_net"]["ipv6"]["ip"].as_str().expect("ipv6").to_owned();
        assert!(net.ends_with("/64"), "{net}");
        nets.push(net);
    }
    nets.sort();
    nets.dedup();
    assert_eq!(nets.len(), 3, "a /64 each: {nets:?}");
    let r = fx
        .post(
            "/servers",
            json!({"name": "v4-only", "server_type": "cx23", "image": "ubuntu-24.04",
                   "public_net": {"enable_ipv4": true, "enable_ipv6": false}}),
        )
        .await;
    assert_eq!(r.body["server"]["public_net"]["ipv6"], json!(null));
    let v4_only = r.id("server");

    let id = fx.h.seed_server(&SeedServer::new("moving")).unwrap();
    let before = fx.get(&format!("/servers/{id}")).await.body["server"]["public_net"]["ipv6"].clone();
    fx.h.change_server_ipv6(id, PublicIpv6Change::Next).unwrap();
    let after = fx.get(&format!("/servers/{id}")).await.body["server"]["public_net"]["ipv6"].clone();
    assert_ne!(after["ip"], before["ip"], "another /64");
    assert_ne!(after["id"], before["id"], "another Primary IP");
    assert!(!nets.contains(&after["ip"].as_str().unwrap().to_owned()), "not another server's");
    let r = fx.get(&format!("/primary_ips/{}", before["id"])).await;
    assert_eq!(r.status, 404, "the old Primary IP is gone");
    let r = fx.get(&format!("/primary_ips/{}", after["id"])).await;
    assert_eq!(
        (r.body["primary_ip"]["ip"].clone(), r.body["primary_ip"]["assignee_id"].clone()),
        (after["ip"].clone(), json!(id))
    );

    // Over HTTP: a fixed /64 (a bare address means its /64), then none, then the next free one.
    let path = format!("/servers/{id}");
    let patch = |body: serde_json::Value| fx.control(Method::PATCH, &path, Some(body));
    assert_eq!(patch(json!({"public_ipv6": {"net": "2001:db8:ff::"}})).await.status, 204);
    let r = fx.get(&format!("/servers/{id}")).await;
    assert_eq!(r.body["server"]["public_net"]["ipv6"]["ip"], "2001:db8:ff::/64");
    assert_eq!(patch(json!({"public_ipv6": "remove"})).await.status, 204);
    let r = fx.get(&format!("/servers/{id}")).await;
    assert_eq!(r.body["server"]["public_net"]["ipv6"], json!(null));
    assert_eq!(patch(json!({"public_ipv6": "next"})).await.status, 204);
    let r = fx.get(&format!("/servers/{id}")).await;
    assert!(r.body["server"]["public_net"]["ipv6"]["ip"].as_str().is_some_and(|n| n.ends_with("/64")));

    // Another server's /64 is taken, and the failed patch changes nothing.
    let mut taken = SeedServer::new("taken");
    taken.public_ipv6 = Some("2001:db8:fe::/64".into());
    fx.h.seed_server(&taken).unwrap();
    let r = patch(json!({"name": "renamed", "public_ipv6": {"net": "2001:db8:fe::/64"}})).await;
    assert_eq!(r.code(), "ip_not_available", "{}", r.body);
    assert_eq!(fx.h.server(id).unwrap().name, "moving");
    assert_eq!(patch(json!({"public_ipv6": {"net": "198.18.0.0/24"}})).await.code(), "invalid_input");
    assert_eq!(patch(json!({"public_ipv6": "sideways"})).await.code(), "invalid_input");

    // A server created without IPv6 can get one.
    fx.h.change_server_ipv6(v4_only, PublicIpv6Change::Next).unwrap();
    assert!(fx.h.server(v4_only).unwrap().public_net.ipv6.is_some());
}

/// `hcloud server add-label/remove-label` (`PUT /servers/{id}`) answered `method not allowed`.
#[tokio::test]
async fn put_renames_and_relabels_a_server() {
    let fx = Fx::instant().await;
    let id = fx.h.seed_server(&SeedServer::new("web-1").label("role", "web")).unwrap();
    fx.h.seed_server(&SeedServer::new("web-2")).unwrap();
    let path = format!("/servers/{id}");

    let r = fx.put(&path, json!({"labels": {"role": "web", "tier": "frontend"}})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["server"]["labels"], json!({"role": "web", "tier": "frontend"}));
    assert_eq!(r.body["server"]["name"], "web-1");
    // Labels replace, they are not merged.
    let r = fx.put(&path, json!({"labels": {"role": "web"}})).await;
    assert_eq!(r.body["server"]["labels"], json!({"role": "web"}));
    let r = fx.put(&path, json!({"name": "web-9"})).await;
    assert_eq!(
        (r.body["server"]["name"].as_str(), r.body["server"]["labels"]["role"].as_str()),
        (Some("web-9"), Some("web"))
    );
    assert_eq!(fx.get("/servers?name=web-9").await.body["servers"][0]["id"], id);

    let r = fx.put(&path, json!({"name": "web-2"})).await;
    assert_eq!((r.status, r.code()), (409, "uniqueness_error"));
    for body in [json!({"name": "not_a_hostname"}), json!({"labels": {"bad key!": "x"}})] {
        let r = fx.put(&path, body.clone()).await;
        assert_eq!((r.status, r.code()), (400, "invalid_input"), "{body}: {}", r.body);
    }
    assert_eq!(fx.put("/servers/1", json!({"name": "x"})).await.status, 404);
    fx.h.lock_resource(hcloud_fake::control::ResourceRef::server(id));
    assert_eq!(fx.put(&path, json!({"name": "x"})).await.code(), "locked");
}

/// `hcloud server enable-protection/reboot/reset` answered "not supported by the fake".
#[tokio::test]
async fn protection_reboot_and_reset_are_actions() {
    let fx = Fx::instant().await;
    let id = fx.h.seed_server(&SeedServer::new("web-1").status(ServerStatus::Off)).unwrap();
    let act = |cmd: &str| format!("/servers/{id}/actions/{cmd}");

    let r = fx.post(&act("change_protection"), json!({"delete": true, "rebuild": true})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "change_protection");
    assert_eq!(
        fx.get(&format!("/servers/{id}")).await.body["server"]["protection"],
        json!({"delete": true, "rebuild": true})
    );
    assert_eq!(fx.delete(&format!("/servers/{id}")).await.code(), "protected");
    // The API wants both equal (the description: "currently delete and rebuild attribute needs
    // to have the same value"); one alone sets both.
    let r = fx.post(&act("change_protection"), json!({"delete": false, "rebuild": true})).await;
    assert_eq!((r.status, r.code()), (400, "invalid_input"));
    fx.post(&act("change_protection"), json!({"delete": false})).await;
    assert_eq!(
        fx.get(&format!("/servers/{id}")).await.body["server"]["protection"],
        json!({"delete": false, "rebuild": false})
    );

    // An ACPI reboot leaves a stopped server stopped; a reset starts it.
    let r = fx.post(&act("reboot"), json!({})).await;
    assert_eq!((r.status, r.body["action"]["command"].as_str()), (201, Some("reboot_server")));
    assert_eq!(fx.get(&format!("/servers/{id}")).await.body["server"]["status"], "off");
    let r = fx.post(&act("reset"), json!({})).await;
    assert_eq!((r.status, r.body["action"]["command"].as_str()), (201, Some("reset_server")));
    assert_eq!(fx.get(&format!("/servers/{id}")).await.body["server"]["status"], "running");
}

/// `hcloud server set-rdns` answered "server action 'change_dns_ptr' is not supported".
#[tokio::test]
async fn reverse_dns_of_a_servers_ips_is_set_and_reset() {
    let fx = Fx::instant().await;
    let id = fx.h.seed_server(&SeedServer::new("web-1")).unwrap();
    let server = fx.get(&format!("/servers/{id}")).await.body["server"].clone();
    let v4 = server["public_net"]["ipv4"]["ip"].as_str().unwrap().to_owned();
    let default_ptr = server["public_net"]["ipv4"]["dns_ptr"].clone();
    assert_eq!(server["public_net"]["ipv6"]["dns_ptr"], json!([]));
    let v6 = server["public_net"]["ipv6"]["ip"].as_str().unwrap().replace("::/64", "::1");
    let path = format!("/servers/{id}/actions/change_dns_ptr");

    let r = fx.post(&path, json!({"ip": v4, "dns_ptr": "web-1.example.com"})).await;
    assert_eq!((r.status, r.body["action"]["command"].as_str()), (201, Some("change_dns_ptr")), "{}", r.body);
    let r = fx.post(&path, json!({"ip": v6, "dns_ptr": "web-1.example.com"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let s = fx.get(&format!("/servers/{id}")).await.body["server"]["public_net"].clone();
    assert_eq!(s["ipv4"]["dns_ptr"], "web-1.example.com");
    assert_eq!(s["ipv6"]["dns_ptr"], json!([{"ip": v6, "dns_ptr": "web-1.example.com"}]));
    // The Primary IPs show the same entries.
    let ips = fx.get("/primary_ips").await.body["primary_ips"].clone();
    let v4_ip = ips.as_array().unwrap().iter().find(|p| p["type"] == "ipv4").unwrap();
    assert_eq!(v4_ip["dns_ptr"], json!([{"ip": v4, "dns_ptr": "web-1.example.com"}]));
    let v6_ip = ips.as_array().unwrap().iter().find(|p| p["type"] == "ipv6").unwrap();
    assert_eq!(v6_ip["dns_ptr"], json!([{"ip": v6, "dns_ptr": "web-1.example.com"}]));

    // `null` resets: the IPv4 to its default, the IPv6 entry goes.
    fx.post(&path, json!({"ip": v4, "dns_ptr": null})).await;
    fx.post(&path, json!({"ip": v6, "dns_ptr": null})).await;
    let s = fx.get(&format!("/servers/{id}")).await.body["server"]["public_net"].clone();
    assert_eq!((s["ipv4"]["dns_ptr"].clone(), s["ipv6"]["dns_ptr"].clone()), (default_ptr, json!([])));

    for body in [
        json!({"ip": "203.0.113.1", "dns_ptr": "x.example.com"}),
        json!({"ip": "2001:db8:ffff::1", "dns_ptr": "x.example.com"}),
        json!({"ip": "nonsense", "dns_ptr": "x.example.com"}),
        json!({"ip": v4, "dns_ptr": ""}),
        json!({"ip": v4}),
    ] {
        let r = fx.post(&path, body.clone()).await;
        assert_eq!((r.status, r.code()), (400, "invalid_input"), "{body}: {}", r.body);
    }
}
