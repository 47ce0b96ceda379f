use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use hcloud_fake::control::{ResourceRef, SeedServer};
use hcloud_fake::{FakeConfig, FaultRule, TokenPolicy};
use pretty_assertions::assert_eq;
use reqwest::Method;
use serde_json::json;

use super::common::Fx;

#[tokio::test]
async fn authentication() {
    let fx = Fx::instant().await;
    let url = format!("{}/servers", fx.base);
    let r = fx.call_with(Method::GET, &url, None, None).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.code(), "unauthorized");
    assert!(r.header("ratelimit-limit").is_some());
    let r = fx.client.get(&url).header("Authorization", "Basic abc").send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = fx.call_with(Method::GET, &url, Some("anything"), None).await;
    assert_eq!(r.status, 200);

    fx.h.set_token_policy(TokenPolicy::deny(["bad"]));
    assert_eq!(fx.call_with(Method::GET, &url, Some("bad"), None).await.status, 401);
    assert_eq!(fx.call_with(Method::GET, &url, Some("good"), None).await.status, 200);

    let r = fx.control(Method::PUT, "/config/token_policy", Some(json!({"mode": "allow", "tokens": ["good"]}))).await;
    assert_eq!(r.status, 204);
    assert_eq!(fx.call_with(Method::GET, &url, Some("good"), None).await.status, 200);
    assert_eq!(fx.call_with(Method::GET, &url, Some("other"), None).await.status, 401);
    assert_eq!(fx.h.settings().token_policy, TokenPolicy::allow(["good"]));
    // The control surface needs no token.
    assert_eq!(fx.control(Method::GET, "/state", None).await.status, 200);
}

#[tokio::test]
async fn rate_limit() {
    let fx = Fx::new(FakeConfig::default().with_rate_limit(3, 0.0)).await;
    for expected in [2, 1, 0] {
        let r = fx.get("/servers").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("ratelimit-limit").as_deref(), Some("3"));
        assert_eq!(r.header("ratelimit-remaining"), Some(expected.to_string()));
        let reset: i64 = r.header("ratelimit-reset").unwrap().parse().unwrap();
        assert!(reset > 1_700_000_000);
    }
    let r = fx.get("/servers").await;
    assert_eq!(r.status, 429);
    assert_eq!(r.code(), "rate_limit_exceeded");
    assert_eq!(r.header("ratelimit-remaining").as_deref(), Some("0"));
    assert!(r.header("ratelimit-reset").is_some());
    assert!(r.header("x-correlation-id").is_some());

    let r = fx.control(Method::POST, "/rate_limit/refill", None).await;
    assert_eq!(r.status, 204);
    assert_eq!(fx.get("/servers").await.status, 200);
    fx.h.set_rate_limit(1000, 10.0);
    let r = fx.get("/servers").await;
    assert_eq!(r.header("ratelimit-limit").as_deref(), Some("1000"));
    assert_eq!(r.header("ratelimit-remaining").as_deref(), Some("999"));
}

#[tokio::test]
async fn fault_injection_latency_and_locks() {
    let fx = Fx::instant().await;
    let id = fx.h.seed_server(&SeedServer::new("s")).unwrap();
    fx.h.inject_fault(FaultRule::error(Some("GET"), "/v1/servers", 502, "bad_gateway").times(2));
    assert_eq!(fx.get("/servers").await.status, 502);
    let r = fx.get("/servers").await;
    assert_eq!(r.status, 502);
    assert_eq!(r.code(), "bad_gateway");
    assert_eq!(fx.get("/servers").await.status, 200);

    // Patterns and the HTTP form.
    let r = fx
        .control(
            Method::POST,
            "/faults",
            Some(json!({"method": "POST", "path": "/servers/{id}/actions/*",
                        "error": {"status": 503, "code": "unavailable"}})),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(fx.control(Method::GET, "/faults", None).await.body.as_array().unwrap().len(), 1);
    assert_eq!(fx.get(&format!("/servers/{id}")).await.status, 200, "GET not matched");
    let r = fx.post(&format!("/servers/{id}/actions/poweroff"), json!({})).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.code(), "unavailable");
    assert_eq!(fx.post(&format!("/servers/{id}/actions/poweroff"), json!({})).await.status, 201);

    fx.h.inject_fault(FaultRule::latency(None, "/servers/{id}", Duration::from_millis(300)));
    let started = Instant::now();
    let r = fx.get(&format!("/servers/{id}")).await;
    assert_eq!(r.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
    let log = fx.h.request_log();
    assert!(log.last().unwrap().latency_ms >= 300.0);

    fx.h.inject_fault(FaultRule::error(None, "/**", 500, "server_error").times(0));
    assert_eq!(fx.get("/networks").await.status, 500);
    assert_eq!(fx.get("/load_balancers").await.status, 500);
    assert_eq!(fx.control(Method::DELETE, "/faults", None).await.status, 204);
    assert_eq!(fx.get("/networks").await.status, 200);

    // Locks.
    fx.h.lock_resource(ResourceRef::server(id));
    let r = fx.post(&format!("/servers/{id}/actions/poweron"), json!({})).await;
    assert_eq!(r.status, 423);
    assert_eq!(r.code(), "locked");
    assert_eq!(fx.get(&format!("/servers/{id}")).await.body["server"]["locked"], true);
    let r = fx.control(Method::DELETE, &format!("/locks/server/{id}"), None).await;
    assert_eq!(r.status, 204);
    assert_eq!(fx.post(&format!("/servers/{id}/actions/poweron"), json!({})).await.status, 201);
    let r = fx.control(Method::POST, "/locks", Some(json!({"type": "server", "id": id}))).await;
    assert_eq!(r.status, 204);
    assert_eq!(fx.delete(&format!("/servers/{id}")).await.code(), "locked");
}

#[tokio::test]
async fn counters_log_and_reset() {
    let fx = Fx::instant().await;
    let id = fx.h.seed_server(&SeedServer::new("s")).unwrap();
    fx.get("/servers").await;
    fx.get("/servers?page=1").await;
    fx.get(&format!("/servers/{id}")).await;
    fx.get("/servers/99999999").await;
    fx.post(&format!("/servers/{id}/actions/poweroff"), json!({})).await;
    fx.get("/nothing/here").await;
    fx.control(Method::GET, "/state", None).await; // not counted

    let counts = fx.h.request_counts();
    assert_eq!(counts.total, 6);
    assert_eq!(counts.get("GET /v1/servers"), 2);
    assert_eq!(counts.get("GET /v1/servers/{id}"), 2);
    assert_eq!(fx.h.request_count("POST /v1/servers/{id}/actions/poweroff"), 1);
    assert_eq!(counts.get("GET /v1/nothing/here"), 1);

    let log = fx.h.request_log();
    assert_eq!(log.len(), 6);
    assert_eq!(log[1].query.as_deref(), Some("page=1"));
    assert_eq!(log[3].status, 404);
    assert_eq!(log[3].error_code.as_deref(), Some("not_found"));
    assert_eq!(log[2].path, format!("/v1/servers/{id}"));
    assert!(log[0].timestamp.ends_with('Z'));
    let ids: BTreeSet<_> = log.iter().map(|r| r.correlation_id.clone()).collect();
    assert_eq!(ids.len(), 6, "correlation ids are unique");

    let r = fx.control(Method::GET, "/requests", None).await;
    assert_eq!(r.body["counts"]["total"], 6);
    assert_eq!(r.body["counts"]["by_endpoint"]["GET /v1/servers"], 2);
    assert_eq!(r.body["log"].as_array().unwrap().len(), 6);
    assert_eq!(fx.control(Method::GET, "/requests/counts", None).await.body["total"], 6);
    assert_eq!(fx.control(Method::DELETE, "/requests", None).await.status, 204);
    assert_eq!(fx.h.request_counts().total, 0);
    assert!(fx.h.server(id).is_some(), "state kept");

    fx.h.inject_fault(FaultRule::error(None, "/servers", 500, "server_error"));
    fx.h.set_rate_limit(1, 0.0);
    assert_eq!(fx.control(Method::POST, "/reset", None).await.status, 204);
    assert!(fx.h.server(id).is_none());
    assert!(fx.h.faults().is_empty());
    assert_eq!(fx.h.settings().rate_limit.capacity, 3600);
    assert_eq!(fx.h.settings().action_delay_ms, 0);
    let r = fx.get("/servers").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["servers"], json!([]));
    // Ids start over.
    assert_eq!(fx.h.seed_server(&SeedServer::new("again")).unwrap(), 10_000_001);
}

#[tokio::test]
async fn body_errors_unknown_endpoints_and_control_seeding() {
    let fx = Fx::instant().await;
    let r = fx.client.post(format!("{}/servers", fx.base)).bearer_auth("t").body("{not json").send().await.unwrap();
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "json_error");
    let r = fx.post("/servers", json!({"name": "x"})).await;
    assert_eq!(r.code(), "invalid_input");
    let r = fx.get("/volumes").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.code(), "not_found");
    let r = fx.call(Method::PATCH, "/servers", None).await;
    assert_eq!(r.status, 405);

    let r = fx
        .control(
            Method::POST,
            "/seed",
            Some(json!({
                "networks": [{"name": "k8s", "ip_range": "10.0.0.0/8",
                              "subnets": [{"ip_range": "10.0.0.0/24"}]}],
                "servers": [{"name": "cp", "networks": [{"network": "k8s", "ip": "10.0.0.5"}]}],
                "server_batches": [{"prefix": "w", "count": 2, "networks": ["k8s"]}],
                "certificates": [{"name": "c", "type": "managed", "domain_names": ["a.example"]}],
                "load_balancers": [{"name": "lb", "network": "k8s",
                                    "targets": [{"type": "server", "server": {"id": 10000001}, "use_private_ip": true}]}]
            })),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"networks": [20001], "servers": [10000001, 10000002, 10000003],
               "certificates": [40001], "load_balancers": [30001]})
    );
    let state = fx.control(Method::GET, "/state", None).await.body;
    assert_eq!(state["servers"][1]["name"], "w1");
    assert_eq!(state["servers"][2]["private_net"][0]["ip"], "10.0.0.3");
    assert_eq!(state["load_balancers"][0]["private_net"][0]["network"], 20001);
    assert_eq!(state["certificates"][0]["status"]["issuance"], "completed");

    let r = fx.control(Method::POST, "/seed/servers", Some(json!({"name": "x", "server_type": "nope"}))).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.code(), "invalid_input");
    let r = fx.control(Method::POST, "/seed/servers/batch", Some(json!({"prefix": "b-", "count": 3}))).await;
    assert_eq!(r.body["ids"].as_array().unwrap().len(), 3);
    let r = fx.control(Method::PUT, "/config/action_delay", Some(json!({"ms": 250}))).await;
    assert_eq!(r.status, 204);
    assert_eq!(fx.control(Method::GET, "/config", None).await.body["action_delay_ms"], 250);
    let r = fx.post("/servers/10000001/actions/poweroff", json!({})).await;
    assert_eq!(r.body["action"]["status"], "running");
    assert_eq!(fx.control(Method::POST, "/actions/finish", None).await.status, 204);
    assert_eq!(fx.h.server(10_000_001).unwrap().status, hcloud_fake::wire::ServerStatus::Off);
    let r = fx.control(Method::POST, "/action_failures", Some(json!({"command": "start_server"}))).await;
    assert_eq!(r.status, 204);
    let r = fx.post("/servers/10000001/actions/poweron", json!({})).await;
    let a = fx.wait_action(r.body["action"]["id"].as_u64().unwrap()).await;
    assert_eq!(a["status"], "error");
    assert_eq!(a["error"]["code"], "action_failed");
}

#[tokio::test]
async fn example_seed_file_applies() {
    let fx = Fx::instant().await;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/seed.json");
    let seed: hcloud_fake::control::Seed = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let created = fx.h.seed(&seed).unwrap();
    assert_eq!(created.servers.len(), 4);
    let lb = fx.h.load_balancer(created.load_balancers[0]).unwrap();
    assert_eq!(lb.targets[0].targets.as_ref().unwrap().len(), 3, "the three workers");
    let r = fx.get("/servers?label_selector=role%3Dworker").await;
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 3);
    assert_eq!(created.robot_servers.len(), 1);
    assert_eq!(fx.h.robot_server(created.robot_servers[0]).map(|s| s.name), Some("bm-1".to_owned()));
}
