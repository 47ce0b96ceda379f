//! `GET /servers/actions` and `GET /primary_ips/actions`: every action of the kind, with the
//! OpenAPI's `id`/`status` filters, `sort` and pagination; which changes record an action
//! (a Primary IP swapped, a network attached) and which do not (a rename through `PUT`, an
//! OS-initiated shutdown, label edits, a network deleted with servers attached), as the API
//! does.

use hcloud_fake::control::{PublicIpv6Change, SeedNetwork, SeedServer, ServerPatch};
use hcloud_fake::wire::ServerStatus;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::common::Fx;

fn commands(body: &Value) -> Vec<String> {
    body["actions"].as_array().unwrap().iter().map(|a| a["command"].as_str().unwrap().to_owned()).collect()
}

fn ids(body: &Value) -> Vec<u64> {
    body["actions"].as_array().unwrap().iter().map(|a| a["id"].as_u64().unwrap()).collect()
}

#[tokio::test]
async fn server_and_primary_ip_action_lists_filter_sort_and_page() {
    let fx = Fx::instant().await;
    let net = fx.h.seed_network(&SeedNetwork::new("net", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let a = fx.h.seed_server(&SeedServer::new("a")).unwrap();
    let b = fx.h.seed_server(&SeedServer::new("b")).unwrap();
    // Seeded servers have no actions yet.
    let r = fx.get("/servers/actions").await;
    assert_eq!((r.status, ids(&r.body)), (200, Vec::<u64>::new()), "{}", r.body);

    assert_eq!(fx.post(&format!("/servers/{a}/actions/poweroff"), json!({})).await.status, 201);
    let r = fx.post(&format!("/servers/{b}/actions/attach_to_network"), json!({"network": net})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    fx.h.change_server_ipv6(a, PublicIpv6Change::Next).unwrap();

    let r = fx.get("/servers/actions").await;
    assert_eq!(commands(&r.body), ["stop_server", "attach_to_network", "unassign_primary_ip", "assign_primary_ip"]);
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 4);
    // Newest first, one per page: what a client asks to see whether anything happened.
    let r = fx.get("/servers/actions?sort=id:desc&per_page=1").await;
    assert_eq!(commands(&r.body), ["assign_primary_ip"]);
    assert_eq!(
        (r.body["meta"]["pagination"]["next_page"].clone(), r.body["meta"]["pagination"]["last_page"].clone()),
        (json!(2), json!(4))
    );
    let r = fx.get("/servers/actions?sort=id:desc&per_page=1&page=4").await;
    assert_eq!(commands(&r.body), ["stop_server"]);
    let r = fx.get("/servers/actions?sort=command:asc").await;
    assert_eq!(commands(&r.body), ["assign_primary_ip", "attach_to_network", "stop_server", "unassign_primary_ip"]);
    let all = ids(&fx.get("/servers/actions").await.body);
    let r = fx.get(&format!("/servers/actions?id={}&id={}", all[0], all[3])).await;
    assert_eq!(ids(&r.body), vec![all[0], all[3]]);
    let r = fx.get("/servers/actions?status=running").await;
    assert_eq!(ids(&r.body), Vec::<u64>::new());
    let r = fx.get("/servers/actions?status=success&status=error&sort=finished:desc&sort=id:desc").await;
    assert_eq!(r.body["actions"].as_array().unwrap().len(), 4);

    // The Primary IP swap is on the Primary IP list as well, with both resources.
    let r = fx.get("/primary_ips/actions?sort=id:desc").await;
    assert_eq!(commands(&r.body), ["assign_primary_ip", "unassign_primary_ip"]);
    let kinds: Vec<&str> =
        r.body["actions"][0]["resources"].as_array().unwrap().iter().map(|x| x["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["server", "primary_ip"]);
    let one = r.body["actions"][0]["id"].as_u64().unwrap();
    assert_eq!(fx.get(&format!("/primary_ips/actions/{one}")).await.status, 200);

    for bad in ["/servers/actions?sort=name", "/servers/actions?status=done", "/primary_ips/actions?id=x"] {
        let r = fx.get(bad).await;
        assert_eq!((r.status, r.code()), (400, "invalid_input"), "{bad}: {}", r.body);
    }
}

#[tokio::test]
async fn rename_label_edit_and_os_shutdown_record_no_action() {
    let fx = Fx::instant().await;
    let a = fx.h.seed_server(&SeedServer::new("a")).unwrap();
    let r = fx.put(&format!("/servers/{a}"), json!({"name": "a2", "labels": {"k": "v"}})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // A shutdown from inside the server: only its status changes.
    fx.h.update_server(a, &ServerPatch { status: Some(ServerStatus::Off), ..ServerPatch::default() }).unwrap();
    // A network deleted with the server attached: detached, without a server action (the
    // API's `DELETE /networks/{id}` answers 204, "attached resources will be detached").
    let net = fx.h.seed_network(&SeedNetwork::new("net", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let b = fx.h.seed_server(&SeedServer::new("b").network(net)).unwrap();
    assert_eq!(fx.delete(&format!("/networks/{net}")).await.status, 204);
    assert!(fx.h.server(b).unwrap().private_net.is_empty(), "detached");
    assert_eq!(ids(&fx.get("/servers/actions").await.body), Vec::<u64>::new());
    assert_eq!(ids(&fx.get("/primary_ips/actions").await.body), Vec::<u64>::new());
}
