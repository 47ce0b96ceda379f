//! The fault kinds a client must survive: lost answers, proxy pages, resets, `locked` and
//! `conflict` anywhere; and the token fingerprint in the request log.

use std::error::Error as _;

use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::{FaultRule, token_fingerprint};
use pretty_assertions::assert_eq;
use reqwest::Method;
use serde_json::json;

use super::common::{Fx, TOKEN};

/// Whether the error's source chain holds an I/O `ConnectionReset` (a TCP RST, not a close).
fn is_reset(e: &reqwest::Error) -> bool {
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionReset
        {
            return true;
        }
        source = s.source();
    }
    false
}

#[tokio::test]
async fn applied_html_502_changes_state_and_answers_like_a_proxy() {
    let fx = Fx::instant().await;
    let id = fx.h.seed_server(&SeedServer::new("s")).unwrap();
    fx.h.inject_fault(FaultRule::html(Some("POST"), "/servers/{id}/actions/poweroff", 502).applied());

    let resp =
        fx.client.post(format!("{}/servers/{id}/actions/poweroff", fx.base)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(resp.status(), 502);
    assert_eq!(resp.headers()["content-type"], "text/html");
    assert!(resp.headers().get("ratelimit-remaining").is_none(), "a proxy page has no API headers");
    let body = resp.text().await.unwrap();
    assert!(body.contains("<title>502 Bad Gateway</title>"), "{body}");

    // The change took effect: the server is off and its action exists.
    assert_eq!(fx.h.server(id).unwrap().status, hcloud_fake::wire::ServerStatus::Off);
    let actions = fx.get(&format!("/servers/{id}/actions")).await;
    assert_eq!(actions.body["actions"][0]["command"], "stop_server");
    let last = fx.h.request_log().into_iter().find(|r| r.endpoint.ends_with("/poweroff")).unwrap();
    assert_eq!(last.status, 502);
    assert_eq!(last.fault.as_deref(), Some("html 502"));
    assert_eq!(last.handler_status, Some(201));
    assert_eq!(last.error_code, None, "no JSON envelope");

    // Without `apply` the request is rejected before anything changes.
    fx.h.inject_fault(FaultRule::html(Some("POST"), "/servers/{id}/actions/poweron", 503));
    let r =
        fx.client.post(format!("{}/servers/{id}/actions/poweron", fx.base)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(fx.h.server(id).unwrap().status, hcloud_fake::wire::ServerStatus::Off);
    assert_eq!(fx.h.request_log().last().unwrap().handler_status, None);
}

#[tokio::test]
async fn reset_before_the_answer_after_applying_a_create() {
    let fx = Fx::instant().await;
    fx.h.inject_fault(FaultRule::reset(Some("POST"), "/load_balancers").applied());
    let err = fx
        .client
        .post(format!("{}/load_balancers", fx.base))
        .bearer_auth(TOKEN)
        .json(&json!({"name": "lb", "load_balancer_type": "lb11", "location": "fsn1", "labels": {"uid": "a"}}))
        .send()
        .await
        .expect_err("the connection is reset");
    assert!(is_reset(&err), "a TCP reset, not a close: {err:?}");

    // The load balancer exists; the client finds it by its label.
    let r = fx.get("/load_balancers?label_selector=uid%3Da").await;
    assert_eq!(r.body["load_balancers"].as_array().unwrap().len(), 1);
    let rec = fx.h.request_log().into_iter().find(|r| r.endpoint == "POST /v1/load_balancers").unwrap();
    assert_eq!((rec.status, rec.handler_status, rec.fault.as_deref()), (0, Some(201), Some("reset before_response")));

    // Not applied: nothing is created, and the next request works on a new connection.
    fx.h.inject_fault(FaultRule::reset(Some("POST"), "/load_balancers"));
    let err = fx
        .client
        .post(format!("{}/load_balancers", fx.base))
        .bearer_auth(TOKEN)
        .json(&json!({"name": "lb2", "load_balancer_type": "lb11", "location": "fsn1"}))
        .send()
        .await
        .expect_err("reset");
    assert!(is_reset(&err), "{err:?}");
    assert_eq!(fx.get("/load_balancers").await.body["load_balancers"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn reset_in_the_middle_of_the_body() {
    let fx = Fx::instant().await;
    for i in 0..20 {
        fx.h.seed_server(&SeedServer::new(&format!("s{i}"))).unwrap();
    }
    let full = fx.client.get(format!("{}/servers", fx.base)).bearer_auth(TOKEN).send().await.unwrap();
    let full_len = full.bytes().await.unwrap().len();

    fx.h.inject_fault(FaultRule::reset_mid_body(Some("GET"), "/servers"));
    let mut resp = fx.client.get(format!("{}/servers", fx.base)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(resp.status(), 200, "the headers arrive");
    assert_eq!(resp.content_length(), Some(full_len as u64), "announcing the whole body");
    let mut received = 0;
    let err = loop {
        match resp.chunk().await {
            Ok(Some(c)) => received += c.len(),
            Ok(None) => panic!("the body completed ({received} of {full_len} bytes)"),
            Err(e) => break e,
        }
    };
    assert!(received > 0 && received < full_len, "part of the body arrived: {received} of {full_len}");
    assert!(is_reset(&err), "{err:?}");
    let rec = fx.h.request_log().last().cloned().unwrap();
    assert_eq!((rec.status, rec.fault.as_deref()), (200, Some("reset mid_body")));
}

#[tokio::test]
async fn locked_and_conflict_on_any_path() {
    let fx = Fx::instant().await;
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let srv = fx.h.seed_server(&SeedServer::new("s").network(net)).unwrap();
    let gw = fx.h.server(srv).unwrap().private_net[0].ip.clone();

    fx.h.inject_fault(FaultRule::locked(None, "/**"));
    let r = fx.get("/servers").await;
    assert_eq!((r.status, r.code()), (423, "locked"));
    assert!(r.header("ratelimit-remaining").is_some(), "an API answer carries the API's headers");

    // Over HTTP, the status follows from the code.
    let rule = json!({"method": "POST", "path": "/networks/{id}/actions/add_route", "error": {"code": "conflict"}});
    assert_eq!(fx.control(Method::POST, "/faults", Some(rule)).await.status, 201);
    let route = json!({"destination": "10.100.0.0/24", "gateway": gw});
    let r = fx.post(&format!("/networks/{net}/actions/add_route"), route.clone()).await;
    assert_eq!((r.status, r.code()), (409, "conflict"));
    assert!(fx.h.network(net).unwrap().routes.is_empty(), "rejected before anything changed");
    let r = fx.post(&format!("/networks/{net}/actions/add_route"), route).await;
    assert_eq!(r.status, 201, "{}", r.body);

    // The control surface rejects rules that make no sense.
    for bad in [
        json!({"path": "/servers", "html": {"status": 502}, "error": {"code": "locked"}}),
        json!({"path": "/servers", "html": {"status": 404}}),
        json!({"path": "/servers", "apply": true}),
        json!({"path": "", "error": {"code": "locked"}}),
        json!({"path": "/servers", "reset": "sometimes"}),
    ] {
        let r = fx.control(Method::POST, "/faults", Some(bad.clone())).await;
        assert_eq!((r.status, r.code()), (400, "invalid_input"), "{bad}");
    }
    let r = fx
        .control(Method::POST, "/faults", Some(json!({"path": "/servers", "html": {"status": 504}, "apply": true})))
        .await;
    assert_eq!(r.status, 201);
    let listed = fx.control(Method::GET, "/faults", None).await.body;
    assert_eq!(listed[0]["rule"]["html"]["status"], 504);
    assert_eq!(listed[0]["rule"]["apply"], true);
}

#[tokio::test]
async fn the_log_tells_clients_apart_by_token_fingerprint() {
    let fx = Fx::instant().await;
    let url = format!("{}/servers", fx.base);
    let (a, b) = ("token-of-cluster-a-0123456789", "token-of-cluster-b-9876543210");
    for _ in 0..3 {
        fx.call_with(Method::GET, &url, Some(a), None).await;
    }
    fx.call_with(Method::GET, &format!("{url}?name=x"), Some(b), None).await;
    fx.call_with(Method::GET, &url, None, None).await;

    let fa = token_fingerprint(a);
    assert!(fa.starts_with("tok-") && fa.len() == 12 && fa[4..].bytes().all(|c| c.is_ascii_hexdigit()), "{fa}");
    assert_eq!(fa, token_fingerprint(a), "stable");
    assert_ne!(fa, token_fingerprint(b));
    assert_eq!(fx.h.request_log_for(&fa).len(), 3);
    let of_b = fx.h.request_log_for_token(b);
    assert_eq!(of_b.len(), 1);
    assert_eq!(of_b[0].query.as_deref(), Some("name=x"));
    assert_eq!(fx.h.request_log().last().unwrap().token_fingerprint, None, "no token, no fingerprint");

    let r = fx.control(Method::GET, &format!("/requests/log?token_fingerprint={fa}"), None).await;
    assert_eq!(r.body.as_array().unwrap().len(), 3);
    let r = fx.control(Method::GET, &format!("/requests?token_fingerprint={}", token_fingerprint(b)), None).await;
    assert_eq!(r.body["log"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["counts"]["total"], 5);
    let everything = serde_json::to_string(&fx.h.request_log()).unwrap();
    assert!(!everything.contains(a) && !everything.contains(b), "tokens never appear in the log");
}
