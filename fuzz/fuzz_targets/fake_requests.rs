//! The fake's request parsing, end to end through its router (no socket): paths, query
//! strings (pagination, `label_selector`, ids, filters), JSON bodies of creates, updates and
//! actions, Bearer and Basic authentication, for `/v1` (Hetzner Cloud) and `/robot` (Robot).
//!
//! Input: requests separated by a line `===`; each is `METHOD /path?query`, header lines, an
//! empty line and the body (see the seed corpus). Authorization is added unless given. Every
//! input starts from a fresh fake with a network, two servers (one in the network), a Load
//! Balancer, a certificate and a Robot server.
//!
//! Properties: the fake never answers 500 (an internal error; no fault is injected here); every
//! `/v1` answer that is not a success is the API's error envelope; every success with a body is
//! JSON; and afterwards the client's models decode the fake's lists of every resource, whatever
//! the requests created or changed.

#![no_main]

use std::sync::OnceLock;

use axum::body::Body;
use hcloud_api::fuzzing::decode_page;
use hcloud_api::models::{Certificate, LoadBalancer, Network, Server};
use hcloud_fake::control::{SeedCertificate, SeedLoadBalancer, SeedNetwork, SeedServer};
use hcloud_fake::robot::SeedRobotServer;
use hcloud_fake::{FakeConfig, FakeHandle, RateLimitConfig};
use http::{Method, Request, StatusCode};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tower::ServiceExt;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime"))
}

fn fake() -> FakeHandle {
    let config = FakeConfig {
        action_delay: std::time::Duration::ZERO,
        rate_limit: RateLimitConfig { capacity: 1_000_000, refill_per_second: 1_000_000.0 },
        log_requests: false,
        ..FakeConfig::default()
    };
    let h = FakeHandle::new(config);
    let net = h
        .seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central"))
        .expect("seed network");
    h.seed_server(&SeedServer::new("node-1").network(net)).expect("seed server");
    h.seed_server(&SeedServer::new("node-2")).expect("seed server");
    h.seed_load_balancer(&SeedLoadBalancer::new("lb-1")).expect("seed load balancer");
    h.seed_certificate(&SeedCertificate::uploaded("cert-1", &["example.com"])).expect("seed certificate");
    h.seed_robot_server(&SeedRobotServer::new("bm-1")).expect("seed robot server");
    h
}

/// One request of the input, or `None` if it is no valid HTTP request.
fn request(text: &[u8]) -> Option<Request<Body>> {
    let head_end = text.windows(2).position(|w| w == b"\n\n").unwrap_or(text.len());
    let body = text.get(head_end + 2..).unwrap_or_default().to_vec();
    let head = std::str::from_utf8(&text[..head_end]).ok()?;
    let mut lines = head.lines();
    let (method, target) = lines.next()?.split_once(' ')?;
    let method = Method::from_bytes(method.as_bytes()).ok()?;
    let target = if target.starts_with("/v1") || target.starts_with("/robot") {
        target.to_owned()
    } else {
        format!("/v1{target}")
    };
    let mut builder = Request::builder().method(method).uri(target.as_str());
    let mut authorized = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        authorized |= name.trim().eq_ignore_ascii_case("authorization");
        builder = builder.header(name.trim(), value.trim());
    }
    if !authorized {
        let auth = if target.starts_with("/robot") { "Basic cm9ib3Q6cm9ib3QtcGFzc3dvcmQ=" } else { "Bearer fuzz" };
        builder = builder.header("authorization", auth);
    }
    if !body.is_empty() {
        builder = builder.header("content-type", "application/json");
    }
    builder.body(Body::from(body)).ok()
}

async fn send(h: &FakeHandle, req: Request<Body>) -> (StatusCode, Vec<u8>) {
    let resp = h.router().oneshot(req).await.expect("the router is infallible");
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), 16 << 20).await.expect("a whole body");
    (status, body.to_vec())
}

fuzz_target!(|data: &[u8]| {
    let requests: Vec<Request<Body>> = data
        .split(|b| *b == 0)
        .flat_map(|chunk| {
            // `===` lines separate requests (NUL bytes, too).
            let text = chunk;
            let mut parts = Vec::new();
            let mut start = 0;
            for (i, w) in text.windows(5).enumerate() {
                if w == b"\n===\n" && i >= start {
                    parts.push(&text[start..i]);
                    start = i + 5;
                }
            }
            parts.push(&text[start.min(text.len())..]);
            parts.into_iter().filter_map(request).collect::<Vec<_>>()
        })
        .take(16)
        .collect();
    if requests.is_empty() {
        return;
    }
    let h = fake();
    runtime().block_on(async {
        for req in requests {
            let v1 = req.uri().path().starts_with("/v1");
            let what = format!("{} {}", req.method(), req.uri());
            let (status, body) = send(&h, req).await;
            assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR, "{what}: {}", String::from_utf8_lossy(&body));
            if v1 && !status.is_success() {
                let envelope: Value = serde_json::from_slice(&body)
                    .unwrap_or_else(|e| panic!("{what} -> {status}: no JSON error envelope ({e})"));
                let error = &envelope["error"];
                assert!(error["code"].is_string() && error["message"].is_string(), "{what} -> {status}: {envelope}");
            }
            if v1 && status.is_success() && !body.is_empty() {
                serde_json::from_slice::<Value>(&body).unwrap_or_else(|e| panic!("{what} -> {status}: not JSON ({e})"));
            }
        }
        // The client reads whatever state the requests left.
        for (path, key) in [
            ("/v1/servers", "servers"),
            ("/v1/load_balancers", "load_balancers"),
            ("/v1/networks", "networks"),
            ("/v1/certificates", "certificates"),
        ] {
            let req = Request::get(path).header("authorization", "Bearer fuzz").body(Body::empty()).expect("request");
            let (status, body) = send(&h, req).await;
            assert_eq!(status, StatusCode::OK, "GET {path}: {}", String::from_utf8_lossy(&body));
            let decoded = match key {
                "servers" => decode_page::<Server>(&body, key).map(|p| p.items.len()),
                "load_balancers" => decode_page::<LoadBalancer>(&body, key).map(|p| p.items.len()),
                "networks" => decode_page::<Network>(&body, key).map(|p| p.items.len()),
                _ => decode_page::<Certificate>(&body, key).map(|p| p.items.len()),
            };
            if let Err(e) = decoded {
                panic!("the client cannot read GET {path}: {e}\n{}", String::from_utf8_lossy(&body));
            }
        }
    });
});
