use hcloud_fake::control::{SeedNetwork, SeedServer};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::Fx;

#[tokio::test]
async fn create_list_delete() {
    let fx = Fx::instant().await;
    let r = fx
        .post(
            "/networks",
            json!({"name": "k8s", "ip_range": "10.0.0.0/16", "labels": {"env": "dev"},
                   "subnets": [{"type": "cloud", "ip_range": "10.0.1.0/24", "network_zone": "eu-central"}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let n = &r.body["network"];
    assert_eq!(n["id"], 20_001);
    assert_eq!(n["subnets"][0]["gateway"], "10.0.0.1");
    assert_eq!(n["routes"], json!([]));
    assert_eq!(n["protection"], json!({"delete": false}));

    let dup = fx.post("/networks", json!({"name": "k8s", "ip_range": "10.1.0.0/16"})).await;
    assert_eq!(dup.status, 409);
    assert_eq!(dup.code(), "uniqueness_error");
    for body in [
        json!({"name": "a", "ip_range": "8.8.0.0/16"}),
        json!({"name": "a", "ip_range": "10.0.0.1/16"}),
        json!({"name": "a", "ip_range": "10.0.0.0/16",
               "subnets": [{"type": "cloud", "ip_range": "10.1.0.0/24", "network_zone": "eu-central"}]}),
        json!({"name": "a", "ip_range": "10.0.0.0/16",
               "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/24", "network_zone": "moon"}]}),
    ] {
        let r = fx.post("/networks", body.clone()).await;
        assert_eq!(r.code(), "invalid_input", "{body}");
    }
    fx.post("/networks", json!({"name": "other", "ip_range": "192.168.0.0/16"})).await;
    let r = fx.get("/networks?label_selector=env%3Ddev").await;
    assert_eq!(r.body["networks"].as_array().unwrap().len(), 1);
    let r = fx.get("/networks?name=other").await;
    assert_eq!(r.body["networks"][0]["ip_range"], "192.168.0.0/16");

    let r = fx.delete("/networks/20001").await;
    assert_eq!(r.status, 204);
    assert_eq!(fx.get("/networks/20001").await.status, 404);

    let mut protected = SeedNetwork::new("protected", "10.9.0.0/16");
    protected.protection_delete = true;
    let id = fx.h.seed_network(&protected).unwrap();
    let r = fx.delete(&format!("/networks/{id}")).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.code(), "protected");
}

fn del_path(net: u64) -> String {
    format!("/networks/{net}/actions/delete_route")
}

#[tokio::test]
async fn routes_are_validated() {
    let fx = Fx::instant().await;
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let server = fx.h.seed_server(&SeedServer::new("node-1").network(net)).unwrap();
    let gw = fx.h.server(server).unwrap().private_net[0].ip.clone();
    assert_eq!(gw, "10.0.0.2");
    let path = format!("/networks/{net}/actions/add_route");

    let r = fx.post(&path, json!({"destination": "10.244.0.0/24", "gateway": gw})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "add_route");
    let n = fx.get(&format!("/networks/{net}")).await;
    assert_eq!(n.body["network"]["routes"], json!([{"destination": "10.244.0.0/24", "gateway": "10.0.0.2"}]));

    // The spec's rules (`route` schema): destination RFC 1918 or 0.0.0.0/0, no overlap with a
    // subnet, a route or 172.31.1.1; gateway not the network's first IP, not behind a
    // vSwitch, not 172.31.1.1.
    let cases = [
        (json!({"destination": "100.64.0.0/24", "gateway": gw}), "destination"),
        (json!({"destination": "172.16.0.0/12", "gateway": gw}), "destination"),
        (json!({"destination": "10.244.1.0/33", "gateway": gw}), "destination"),
        (json!({"destination": "10.244.1.1/24", "gateway": gw}), "destination"),
        (json!({"destination": "10.0.0.0/28", "gateway": gw}), "destination"),
        (json!({"destination": "10.244.0.0/16", "gateway": gw}), "destination"),
        (json!({"destination": "10.244.0.0/24", "gateway": gw}), "destination"),
        (json!({"destination": "10.244.1.0/24", "gateway": "10.0.0.1"}), "gateway"),
        (json!({"destination": "10.244.1.0/24", "gateway": "172.31.1.1"}), "gateway"),
        (json!({"destination": "10.244.1.0/24", "gateway": "not-an-ip"}), "gateway"),
        (json!({"destination": "10.244.1.0/24"}), "gateway"),
    ];
    for (body, field) in cases {
        let r = fx.post(&path, body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(r.code(), "invalid_input");
        assert_eq!(r.body["error"]["details"]["fields"][0]["name"], field, "{body}");
    }
    // A gateway no server holds is fine (a blackhole), and so is a destination outside the
    // network's range but inside RFC 1918.
    let r = fx.post(&path, json!({"destination": "192.168.7.0/24", "gateway": "10.0.0.99"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = fx.post(&del_path(net), json!({"destination": "192.168.7.0/24", "gateway": "10.0.0.99"})).await;
    assert_eq!(r.status, 201, "{}", r.body);

    let del = format!("/networks/{net}/actions/delete_route");
    let r = fx.post(&del, json!({"destination": "10.244.9.0/24", "gateway": gw})).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.code(), "not_found");
    let r = fx.post(&del, json!({"destination": "10.244.0.0/24", "gateway": gw})).await;
    assert_eq!(r.status, 201);
    assert_eq!(fx.h.network(net).unwrap().routes, vec![]);

    // At most 100 routes.
    for i in 0..100 {
        let r = fx.post(&path, json!({"destination": format!("10.244.{i}.0/24"), "gateway": gw})).await;
        assert_eq!(r.status, 201, "route {i}: {}", r.body);
    }
    let r = fx.post(&path, json!({"destination": "10.245.0.0/24", "gateway": gw})).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.code(), "resource_limit_exceeded");
    assert_eq!(fx.h.network(net).unwrap().routes.len(), 100);
}

#[tokio::test]
async fn test_controls_route_limit_out_of_band_route_removal_and_private_ip_moves() {
    let fx = Fx::instant().await;
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let a = fx.h.seed_server(&SeedServer::new("node-a").network_ip(net, "10.0.0.5")).unwrap();
    let b = fx.h.seed_server(&SeedServer::new("node-b").network_ip(net, "10.0.0.6")).unwrap();
    let path = format!("/networks/{net}/actions/add_route");

    // The route limit is a knob (default: the API's 100).
    fx.h.set_route_limit(2);
    for i in 0..2 {
        let r = fx.post(&path, json!({"destination": format!("10.244.{i}.0/24"), "gateway": "10.0.0.5"})).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let r = fx.post(&path, json!({"destination": "10.244.2.0/24", "gateway": "10.0.0.6"})).await;
    assert_eq!((r.status, r.code()), (403, "resource_limit_exceeded"), "{}", r.body);
    assert!(r.body["error"]["message"].as_str().unwrap().contains("already has 2 routes"), "{}", r.body);
    fx.h.set_route_limit(3);
    let r = fx.post(&path, json!({"destination": "10.244.2.0/24", "gateway": "10.0.0.6"})).await;
    assert_eq!(r.status, 201, "{}", r.body);

    // A route removed out of band is gone at once, without an action or a request.
    let requests = fx.h.request_counts().total;
    fx.h.remove_route(net, "10.244.1.0/24").unwrap();
    assert_eq!(fx.h.request_counts().total, requests);
    let routes: Vec<String> = fx.h.network(net).unwrap().routes.iter().map(|r| r.destination.clone()).collect();
    assert_eq!(routes, vec!["10.244.0.0/24", "10.244.2.0/24"]);
    let err = fx.h.remove_route(net, "10.244.1.0/24").unwrap_err();
    assert!(err.to_string().contains("not_found"), "{err}");

    // A private IP moves: the server shows the new one, the old one is free for others, and
    // routes via the old one stay (blackholes).
    fx.h.move_private_ip(a, net, "10.0.0.50").unwrap();
    assert_eq!(fx.h.server(a).unwrap().private_net[0].ip, "10.0.0.50");
    assert!(fx.h.network(net).unwrap().routes.iter().any(|r| r.gateway == "10.0.0.5"));
    let taken = fx.h.move_private_ip(b, net, "10.0.0.50").unwrap_err();
    assert!(taken.to_string().contains("ip_not_available"), "{taken}");
    fx.h.move_private_ip(b, net, "10.0.0.5").unwrap();
    assert_eq!(fx.h.server(b).unwrap().private_net[0].ip, "10.0.0.5");
    let c = fx.h.seed_server(&SeedServer::new("node-c")).unwrap();
    let unattached = fx.h.move_private_ip(c, net, "10.0.0.7").unwrap_err();
    assert!(unattached.to_string().contains("server_not_attached_to_network"), "{unattached}");
}

/// `hcloud network add-subnet` / `remove-subnet` answered "network action 'add_subnet' is not
/// supported by the fake".
#[tokio::test]
async fn subnets_are_added_and_deleted_by_actions() {
    let fx = Fx::new(hcloud_fake::FakeConfig::default().with_action_delay(std::time::Duration::from_secs(600))).await;
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8")).unwrap();
    let add = format!("/networks/{net}/actions/add_subnet");
    let del = format!("/networks/{net}/actions/delete_subnet");

    let r = fx.post(&add, json!({"type": "cloud", "network_zone": "eu-central", "ip_range": "10.0.0.0/24"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "add_subnet");
    assert_eq!(r.body["action"]["resources"], json!([{"id": net, "type": "network"}]));
    // Added when the action finishes; meanwhile the network is busy.
    assert_eq!(fx.get(&format!("/networks/{net}")).await.body["network"]["subnets"], json!([]));
    let busy = fx.post(&add, json!({"type": "cloud", "network_zone": "eu-central"})).await;
    assert_eq!((busy.status, busy.code()), (409, "conflict"));
    fx.h.finish_all_actions();
    let n = fx.get(&format!("/networks/{net}")).await;
    assert_eq!(
        n.body["network"]["subnets"],
        json!([{"type": "cloud", "ip_range": "10.0.0.0/24", "network_zone": "eu-central", "gateway": "10.0.0.1"}])
    );
    // Without a range the first free /24 is taken.
    fx.post(&add, json!({"type": "cloud", "network_zone": "us-east"})).await;
    fx.h.finish_all_actions();
    assert_eq!(fx.h.network(net).unwrap().subnets[1].ip_range, "10.0.1.0/24");

    for (body, field) in [
        (json!({"type": "cloud", "network_zone": "eu-central", "ip_range": "10.0.0.128/25"}), "ip_range"),
        (json!({"type": "cloud", "network_zone": "eu-central", "ip_range": "192.168.0.0/24"}), "ip_range"),
        (json!({"type": "cloud", "network_zone": "moon", "ip_range": "10.0.5.0/24"}), "network_zone"),
        (json!({"type": "wifi", "network_zone": "eu-central"}), "type"),
        (json!({"type": "vswitch", "network_zone": "eu-central"}), "vswitch_id"),
        (json!({"type": "cloud", "network_zone": "eu-central", "vswitch_id": 9}), "vswitch_id"),
        (json!({"network_zone": "eu-central"}), "type"),
    ] {
        let r = fx.post(&add, body.clone()).await;
        assert_eq!((r.status, r.code()), (400, "invalid_input"), "{body}: {}", r.body);
        assert_eq!(r.body["error"]["details"]["fields"][0]["name"], field, "{body}");
    }

    // A subnet someone holds an IP in cannot be deleted.
    let server = fx.h.seed_server(&SeedServer::new("node-1").network(net)).unwrap();
    let r = fx.post(&del, json!({"ip_range": "10.0.0.0/24"})).await;
    assert_eq!(r.code(), "service_error", "{}", r.body);
    assert_eq!(r.body["error"]["message"], "network has attached resources");
    fx.h.delete_server(server).unwrap();
    let r = fx.post(&del, json!({"ip_range": "10.0.0.0/24"})).await;
    assert_eq!((r.status, r.body["action"]["command"].as_str()), (201, Some("delete_subnet")), "{}", r.body);
    fx.h.finish_all_actions();
    let ranges: Vec<String> = fx.h.network(net).unwrap().subnets.iter().map(|s| s.ip_range.clone()).collect();
    assert_eq!(ranges, vec!["10.0.1.0/24"]);
    assert_eq!(fx.post(&del, json!({"ip_range": "10.0.0.0/24"})).await.code(), "not_found");
    assert_eq!(fx.post(&del, json!({})).await.code(), "invalid_input");
}

/// `hcloud network change-ip-range`, `enable-protection`, `add-label`, `update` and
/// `expose-routes-to-vswitch` had no endpoint in the fake.
#[tokio::test]
async fn ip_range_protection_and_put() {
    let fx = Fx::instant().await;
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central")).unwrap();
    fx.h.seed_network(&SeedNetwork::new("other", "192.168.0.0/16")).unwrap();
    let path = format!("/networks/{net}");
    let change = format!("/networks/{net}/actions/change_ip_range");

    // Only the netmask may shrink: the range grows at its end.
    for bad in ["10.0.0.0/17", "10.1.0.0/16", "10.0.0.0/7", "10.0.0.0/25", "nonsense"] {
        let r = fx.post(&change, json!({"ip_range": bad})).await;
        assert_eq!((r.status, r.code()), (400, "invalid_input"), "{bad}: {}", r.body);
        assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "ip_range");
    }
    let r = fx.post(&change, json!({"ip_range": "10.0.0.0/12"})).await;
    assert_eq!((r.status, r.body["action"]["command"].as_str()), (201, Some("change_ip_range")), "{}", r.body);
    let n = fx.get(&path).await.body["network"].clone();
    assert_eq!((n["ip_range"].as_str(), n["subnets"][0]["gateway"].as_str()), (Some("10.0.0.0/12"), Some("10.0.0.1")));

    let r = fx.post(&format!("{path}/actions/change_protection"), json!({"delete": true})).await;
    assert_eq!((r.status, r.body["action"]["command"].as_str()), (201, Some("change_protection")));
    assert_eq!(fx.get(&path).await.body["network"]["protection"], json!({"delete": true}));
    assert_eq!(fx.delete(&path).await.code(), "protected");
    fx.post(&format!("{path}/actions/change_protection"), json!({"delete": false})).await;

    let r = fx.put(&path, json!({"name": "k8s-2", "labels": {"env": "test"}, "expose_routes_to_vswitch": true})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let n = &r.body["network"];
    assert_eq!((n["name"].as_str(), n["expose_routes_to_vswitch"].as_bool()), (Some("k8s-2"), Some(true)));
    assert_eq!(n["labels"], json!({"env": "test"}));
    let r = fx.put(&path, json!({"labels": {}})).await;
    assert_eq!((r.body["network"]["labels"].clone(), r.body["network"]["name"].clone()), (json!({}), json!("k8s-2")));
    fx.h.seed_network(&SeedNetwork::new("taken", "172.16.0.0/16")).unwrap();
    assert_eq!(fx.put(&path, json!({"name": "taken"})).await.code(), "uniqueness_error");
    assert_eq!(fx.put(&path, json!({"name": ""})).await.code(), "invalid_input");
    assert_eq!(fx.put("/networks/1", json!({})).await.status, 404);
}
