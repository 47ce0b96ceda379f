//! The Robot part under `/robot`: wire format, basic auth, control surface, faults, counters.

use hcloud_fake::FaultRule;
use hcloud_fake::robot::SeedRobotServer;
use serde_json::{Value, json};

use super::common::Fx;

async fn robot_get(fx: &Fx, path: &str, auth: Option<(&str, &str)>) -> (u16, Value) {
    let url = format!("{}{path}", fx.fake.robot_url());
    let mut req = fx.client.get(url);
    if let Some((u, p)) = auth {
        req = req.basic_auth(u, Some(p));
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

const AUTH: Option<(&str, &str)> = Some(("robot", "robot-password"));

#[tokio::test]
async fn servers_are_served_wrapped_behind_basic_auth() {
    let fx = Fx::instant().await;
    let (status, body) = robot_get(&fx, "/server", AUTH).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("SERVER_NOT_FOUND")), "empty account: {body}");

    let n = fx.h.seed_robot_server(&SeedRobotServer::new("bm-1").product("AX41-NVMe").dc("HEL1-DC2")).expect("seed");
    // Seeding through the control surface.
    let resp = fx
        .client
        .post(format!("{}/robot/servers", fx.fake.control_url()))
        .json(&json!({"name": "bm-2", "operating_status": "shut off"}))
        .send()
        .await
        .expect("seed");
    assert_eq!(resp.status().as_u16(), 201);
    let m = resp.json::<Value>().await.expect("json")["number"].as_u64().expect("number");

    // And through the seed file format.
    let resp = fx
        .client
        .post(format!("{}/seed", fx.fake.control_url()))
        .json(&json!({"robot_servers": [{"name": "bm-3", "number": 424242, "dc": "NBG1-DC3"}]}))
        .send()
        .await
        .expect("seed");
    assert_eq!(resp.status().as_u16(), 201);
    assert_eq!(resp.json::<Value>().await.expect("json")["robot_servers"], json!([424242]));
    fx.h.delete_robot_server(424242).expect("delete");

    let (status, body) = robot_get(&fx, "/server", AUTH).await;
    assert_eq!(status, 200);
    let list = body.as_array().expect("array");
    assert_eq!(list.len(), 2);
    let first = &list[0]["server"];
    assert_eq!(first["server_number"], n);
    assert_eq!(first["server_name"], "bm-1");
    assert_eq!(first["product"], "AX41-NVMe");
    assert_eq!(first["dc"], "HEL1-DC2");
    assert!(first["server_ip"].as_str().expect("ip").starts_with("198.19."), "{first}");
    assert!(first["server_ipv6_net"].as_str().expect("v6").ends_with("::"), "{first}");

    let (status, body) = robot_get(&fx, &format!("/server/{m}"), AUTH).await;
    assert_eq!((status, body["server"]["server_name"].as_str()), (200, Some("bm-2")));
    let (status, body) = robot_get(&fx, &format!("/reset/{m}"), AUTH).await;
    assert_eq!((status, body["reset"]["operating_status"].as_str()), (200, Some("shut off")));
    let (status, body) = robot_get(&fx, "/server/999", AUTH).await;
    assert_eq!(
        (status, body["error"]["status"].as_u64(), body["error"]["code"].as_str()),
        (404, Some(404), Some("SERVER_NOT_FOUND"))
    );

    for bad in [None, Some(("robot", "wrong")), Some(("other", "robot-password"))] {
        let (status, body) = robot_get(&fx, "/server", bad).await;
        assert_eq!((status, body["error"]["code"].as_str()), (401, Some("UNAUTHORIZED")), "{bad:?}");
    }

    // Counted like the cloud API, under their own keys.
    assert_eq!(fx.h.request_count("GET /robot/server"), 5);
    assert_eq!(fx.h.request_count("GET /robot/server/{id}"), 2);
    assert_eq!(fx.h.request_count("GET /robot/reset/{id}"), 1);

    // Removal and rename through the control surface.
    let resp = fx.client.delete(format!("{}/robot/servers/{n}", fx.fake.control_url())).send().await.expect("delete");
    assert_eq!(resp.status().as_u16(), 204);
    let resp = fx
        .client
        .patch(format!("{}/robot/servers/{m}", fx.fake.control_url()))
        .json(&json!({"name": "renamed"}))
        .send()
        .await
        .expect("patch");
    assert_eq!(resp.status().as_u16(), 204);
    let (_, body) = robot_get(&fx, "/server", AUTH).await;
    assert_eq!(body.as_array().map(Vec::len), Some(1));
    assert_eq!(body[0]["server"]["server_name"], "renamed");
}

#[tokio::test]
async fn robot_faults_answer_the_robot_envelope() {
    let fx = Fx::instant().await;
    fx.h.seed_robot_server(&SeedRobotServer::new("bm-1")).expect("seed");
    fx.h.inject_robot_fault(FaultRule::error(Some("GET"), "/robot/server", 403, "RATE_LIMIT_EXCEEDED").times(2));
    for _ in 0..2 {
        let (status, body) = robot_get(&fx, "/server", AUTH).await;
        assert_eq!((status, body["error"]["code"].as_str()), (403, Some("RATE_LIMIT_EXCEEDED")), "{body}");
        assert_eq!(body["error"]["status"], 403);
    }
    let (status, _) = robot_get(&fx, "/server", AUTH).await;
    assert_eq!(status, 200, "the fault was used up");
    // Cloud faults do not touch /robot, and Robot faults do not touch /v1.
    fx.h.inject_fault(FaultRule::error(None, "/**", 503, "unavailable").times(0));
    let (status, _) = robot_get(&fx, "/server", AUTH).await;
    assert_eq!(status, 200);
    fx.h.clear_faults();
    // Through the control surface.
    let resp = fx
        .client
        .post(format!("{}/robot/faults", fx.fake.control_url()))
        .json(&json!({"path": "/server/{id}", "times": 0, "error": {"status": 503, "code": "INTERNAL_ERROR"}}))
        .send()
        .await
        .expect("fault");
    assert_eq!(resp.status().as_u16(), 201);
    let (status, body) = robot_get(&fx, "/server/100001", AUTH).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("INTERNAL_ERROR")));
    fx.h.clear_robot_faults();
    let (status, _) = robot_get(&fx, "/server/100001", AUTH).await;
    assert_eq!(status, 200);
}
