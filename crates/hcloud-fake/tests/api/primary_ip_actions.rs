//! `POST /primary_ips/{id}/actions/assign` and `/unassign`: the Primary IP moves between a
//! server and the unassigned ones when the action finishes, the action (`assign_primary_ip`,
//! `unassign_primary_ip`; resources the server and the Primary IP) shows on
//! `GET /servers/actions`, `GET /primary_ips/actions` and each resource's actions, and the
//! API's documented refusals.

use hcloud_fake::FakeConfig;
use hcloud_fake::control::SeedServer;
use hcloud_fake::wire::ServerStatus;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::common::Fx;

fn commands(body: &Value) -> Vec<String> {
    body["actions"].as_array().unwrap().iter().map(|a| a["command"].as_str().unwrap().to_owned()).collect()
}

fn off(name: &str) -> SeedServer {
    SeedServer { status: ServerStatus::Off, ..SeedServer::new(name) }
}

#[tokio::test]
async fn unassign_then_assign_moves_the_ip_and_records_the_actions_on_both_lists() {
    let fx = Fx::instant().await;
    let a = fx.h.seed_server(&off("a")).unwrap();
    let b = fx.h.seed_server(&SeedServer { enable_ipv4: false, ..off("b") }).unwrap();
    let v4 = fx.h.server(a).unwrap().public_net.ipv4.unwrap();

    let r = fx.post(&format!("/primary_ips/{}/actions/unassign", v4.id), json!({})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "unassign_primary_ip");
    let kinds: Vec<(u64, &str)> = r.body["action"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["id"].as_u64().unwrap(), x["type"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [(a, "server"), (v4.id, "primary_ip")]);
    assert!(fx.h.server(a).unwrap().public_net.ipv4.is_none(), "the server lost it");
    let r = fx.get(&format!("/primary_ips/{}", v4.id)).await;
    assert_eq!(
        (r.body["primary_ip"]["assignee_id"].clone(), r.body["primary_ip"]["ip"].clone()),
        (json!(null), json!(v4.ip))
    );
    assert_eq!(r.body["primary_ip"]["assignee_type"], "unassigned");

    let r = fx
        .post(&format!("/primary_ips/{}/actions/assign", v4.id), json!({"assignee_id": b, "assignee_type": "server"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "assign_primary_ip");
    let moved = fx.h.server(b).unwrap().public_net.ipv4.unwrap();
    assert_eq!((moved.id, moved.ip.clone()), (v4.id, v4.ip.clone()), "same Primary IP, same address");
    let r = fx.get(&format!("/primary_ips/{}", v4.id)).await;
    assert_eq!(r.body["primary_ip"]["assignee_id"], json!(b));

    // On both kind lists, newest first, as the API shows them; and on each resource's list.
    let want = ["assign_primary_ip", "unassign_primary_ip"];
    assert_eq!(commands(&fx.get("/servers/actions?sort=id:desc").await.body), want);
    assert_eq!(commands(&fx.get("/primary_ips/actions?sort=id:desc").await.body), want);
    let oldest_first = ["unassign_primary_ip", "assign_primary_ip"];
    assert_eq!(commands(&fx.get(&format!("/primary_ips/{}/actions", v4.id)).await.body), oldest_first);
    assert_eq!(commands(&fx.get(&format!("/servers/{a}/actions")).await.body), ["unassign_primary_ip"]);
    assert_eq!(commands(&fx.get(&format!("/servers/{b}/actions")).await.body), ["assign_primary_ip"]);
    let one = fx.get("/primary_ips/actions?sort=id:desc").await.body["actions"][0]["id"].as_u64().unwrap();
    let r = fx.get(&format!("/primary_ips/{}/actions/{one}", v4.id)).await;
    assert_eq!((r.status, r.body["action"]["status"].clone()), (200, json!("success")), "{}", r.body);
}

#[tokio::test]
async fn the_change_is_made_when_the_action_finishes() {
    let fx = Fx::new(FakeConfig::default().with_action_delay(std::time::Duration::from_secs(3600))).await;
    let a = fx.h.seed_server(&SeedServer { enable_ipv6: false, ..off("a") }).unwrap();
    let v6 = fx.post("/primary_ips", json!({"name": "v6", "type": "ipv6", "location": "fsn1"})).await.id("primary_ip");
    let r = fx
        .post(&format!("/primary_ips/{v6}/actions/assign"), json!({"assignee_id": a, "assignee_type": "server"}))
        .await;
    assert_eq!((r.status, r.body["action"]["status"].clone()), (201, json!("running")), "{}", r.body);
    assert!(fx.h.server(a).unwrap().public_net.ipv6.is_none(), "not yet");
    assert_eq!(commands(&fx.get("/servers/actions?status=running").await.body), ["assign_primary_ip"]);
    // The server and the Primary IP are busy meanwhile.
    let r = fx.post(&format!("/primary_ips/{v6}/actions/unassign"), json!({})).await;
    assert_eq!(r.code(), "locked", "{}", r.body);
    fx.h.finish_all_actions();
    assert_eq!(fx.h.server(a).unwrap().public_net.ipv6.unwrap().id, v6);
}

#[tokio::test]
async fn refusals_as_the_api_documents_them() {
    let fx = Fx::instant().await;
    let running = fx.h.seed_server(&SeedServer::new("running")).unwrap();
    let running_bare = fx.h.seed_server(&SeedServer { enable_ipv4: false, ..SeedServer::new("running-bare") }).unwrap();
    let a = fx.h.seed_server(&off("a")).unwrap();
    let bare = fx.h.seed_server(&SeedServer { enable_ipv4: false, ..off("bare") }).unwrap();
    let nbg = fx.h.seed_server(&SeedServer { enable_ipv4: false, ..off("nbg").location("nbg1") }).unwrap();
    let v4_running = fx.h.server(running).unwrap().public_net.ipv4.unwrap().id;
    let v4_a = fx.h.server(a).unwrap().public_net.ipv4.unwrap().id;
    let spare =
        fx.post("/primary_ips", json!({"name": "spare", "type": "ipv4", "location": "fsn1"})).await.id("primary_ip");
    let assign = |ip: u64, server: u64| {
        (format!("/primary_ips/{ip}/actions/assign"), json!({"assignee_id": server, "assignee_type": "server"}))
    };
    for ((path, body), status, code) in [
        (assign(spare, running_bare), 422, "server_not_stopped"),
        (assign(v4_a, bare), 422, "primary_ip_already_assigned"),
        (assign(spare, a), 422, "server_has_ipv4"),
        (assign(spare, nbg), 400, "invalid_input"),
        (assign(spare, 999_999), 404, "not_found"),
        (assign(999_999, bare), 404, "not_found"),
        (
            (
                format!("/primary_ips/{spare}/actions/assign"),
                json!({"assignee_id": bare, "assignee_type": "floating_ip"}),
            ),
            400,
            "invalid_input",
        ),
        ((format!("/primary_ips/{v4_running}/actions/unassign"), json!({})), 422, "server_not_stopped"),
        ((format!("/primary_ips/{spare}/actions/unassign"), json!({})), 400, "invalid_input"),
    ] {
        let r = fx.post(&path, body).await;
        assert_eq!((r.status, r.code()), (status, code), "{path}: {}", r.body);
    }
    // A server's IPv4 that a Load Balancer targets (publicly) stays.
    let lb = fx
        .post(
            "/load_balancers",
            json!({"name": "lb", "load_balancer_type": "lb11", "location": "fsn1",
            "targets": [{"type": "server", "server": {"id": a}}]}),
        )
        .await;
    assert_eq!(lb.status, 201, "{}", lb.body);
    let r = fx.post(&format!("/primary_ips/{v4_a}/actions/unassign"), json!({})).await;
    assert_eq!((r.status, r.code()), (422, "server_is_load_balancer_target"), "{}", r.body);
    // No action was recorded by any refusal.
    assert_eq!(commands(&fx.get("/primary_ips/actions").await.body), Vec::<String>::new());
    let _ = bare;
}

#[tokio::test]
async fn a_primary_ip_without_auto_delete_outlives_its_server_unassigned() {
    let fx = Fx::instant().await;
    let a = fx.h.seed_server(&SeedServer::new("a")).unwrap();
    let v4 = fx.h.server(a).unwrap().public_net.ipv4.unwrap();
    assert_eq!(fx.put(&format!("/primary_ips/{}", v4.id), json!({"auto_delete": false})).await.status, 200);
    let r = fx.delete(&format!("/servers/{a}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = fx.get(&format!("/primary_ips/{}", v4.id)).await;
    assert_eq!((r.status, r.body["primary_ip"]["ip"].clone()), (200, json!(v4.ip)), "{}", r.body);
    assert_eq!(r.body["primary_ip"]["assignee_type"], "unassigned");
    let v6 = fx.get("/primary_ips").await.body["primary_ips"].as_array().unwrap().len();
    assert_eq!(v6, 1, "the IPv6 one had auto_delete and went with the server");
}
