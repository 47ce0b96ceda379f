//! The data plane's `http` and `https` services, over real TCP on 127.x addresses, against
//! what Hetzner documents of them:
//!
//! - `503` when no target is healthy (the official CCM's e2e suite, `WaitForHTTPAvailable` in
//!   its `tests/e2e/helper_test.go`, waits through 503s while a new Load Balancer's targets turn
//!   healthy);
//! - `X-Forwarded-For` with the client's address (Hetzner's Load Balancer FAQ, "Do Load
//!   Balancers forward special HTTP headers?", pointed to by Hetzner's maintainers in
//!   hetznercloud/hcloud-cloud-controller-manager#92 and #171);
//! - sticky sessions with the `cookie_name` / `cookie_lifetime` cookie and `redirect_http`
//!   (the API reference's `load_balancer_service.http`);
//! - TLS terminated with the uploaded certificate (`certificates` of an `https` service), and
//!   with an issued managed one.
//!
//! Blocks 20-23 of the data plane tests' addresses (see `data_plane.rs`). Conditions are polled
//! with a deadline, never slept for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use reqwest::Method;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpSocket;

use crate::data_plane::harness::{Fx, backends, eventually};

const CERT: &str = include_str!("fixtures/test-only-cert.pem");
const KEY: &str = include_str!("fixtures/test-only-key.pem");

/// An answer as a client reads it.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// Header lines as sent, `name: value`.
    headers: Vec<String>,
    body: String,
}

impl Answer {
    /// The values of header `name` (any case).
    fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter_map(|l| l.split_once(':'))
            .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
            .collect()
    }
}

/// `GET <path>` to `addr` from `source` (a 127.x address of the test) over a fresh connection,
/// with extra header lines; `None` when the connection fails or ends without an answer.
async fn request(addr: SocketAddr, source: Ipv4Addr, path: &str, extra: &[&str]) -> Option<Answer> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::new(IpAddr::V4(source), 0)).ok()?;
    let mut stream = socket.connect(addr).await.ok()?;
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: lb.example\r\nConnection: close\r\n");
    for line in extra {
        req.push_str(line);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).await.ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    Some(Answer { status, headers: lines.map(str::to_owned).collect(), body: body.to_owned() })
}

fn http_service(protocol: &str, listen_port: u16, destination_port: u16, http: serde_json::Value) -> serde_json::Value {
    json!({"protocol": protocol, "listen_port": listen_port, "destination_port": destination_port,
           "health_check": {"protocol": "tcp", "port": destination_port, "interval": 1, "timeout": 1, "retries": 1},
           "http": http})
}

fn lb(name: &str, services: serde_json::Value, targets: &[u64]) -> serde_json::Value {
    let targets: Vec<_> = targets.iter().map(|id| json!({"type": "server", "server": {"id": id}})).collect();
    json!({"name": name, "load_balancer_type": "lb11", "location": "fsn1",
           "algorithm": {"type": "round_robin"}, "services": services, "targets": targets})
}

#[tokio::test]
async fn http_services_add_x_forwarded_for_and_answer_503_without_a_healthy_target() {
    let fx = Fx::new(20).await;
    let (mut b, port) = backends(&fx, &["alpha", "beta"], 11).await;
    let servers = [fx.server("alpha", 11), fx.server("beta", 12)];
    let (id, ip) = fx.create_lb(lb("web", json!([http_service("http", 8080, port, json!({}))]), &servers)).await;
    for s in servers {
        fx.wait_health(id, s, 8080, "healthy").await;
    }
    let addr = SocketAddr::new(IpAddr::V4(ip), 8080);
    let client = Ipv4Addr::new(127, 0, 20, 99);

    let first = request(addr, client, "/a?b=c", &[]).await.expect("an answer");
    let second = request(addr, client, "/", &["X-Forwarded-For: 198.51.100.7"]).await.expect("an answer");
    assert_eq!((first.status, second.status), (200, 200), "{first:?} {second:?}");
    let mut names = vec![first.body.clone(), second.body.clone()];
    names.sort();
    assert_eq!(names, vec!["alpha", "beta"], "round robin per request");
    // What the backends received: the path as asked, the client's address appended.
    let raw: Vec<String> = b
        .iter()
        .flat_map(|b| b.seen.raw.lock().unwrap().clone())
        .map(|r| String::from_utf8_lossy(&r).to_ascii_lowercase())
        .filter(|r| !r.starts_with("get /healthz"))
        .collect();
    assert_eq!(raw.len(), 2, "{raw:?}");
    let with_path = raw.iter().find(|r| r.starts_with("get /a?b=c http/1.1\r\n")).expect("the first request");
    assert!(with_path.contains("\r\nx-forwarded-for: 127.0.20.99\r\n"), "{with_path}");
    assert!(with_path.contains("\r\nx-forwarded-proto: http\r\n"), "{with_path}");
    assert!(with_path.contains("\r\nhost: lb.example\r\n"), "the Host header is kept: {with_path}");
    let appended = raw.iter().find(|r| r.starts_with("get / http/1.1\r\n")).expect("the second request");
    assert!(appended.contains("\r\nx-forwarded-for: 198.51.100.7, 127.0.20.99\r\n"), "{appended}");

    for backend in &mut b {
        backend.stop().await;
    }
    for s in servers {
        fx.wait_health(id, s, 8080, "unhealthy").await;
    }
    let refused = request(addr, client, "/", &[]).await.expect("an answer from the Load Balancer itself");
    assert_eq!(refused.status, 503, "{refused:?}");
    eventually("the 503 counted as rejected", || async {
        fx.h.data_plane_listeners().first().filter(|l| l.rejected_connections >= 1).map(|_| ())
    })
    .await;
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn sticky_sessions_keep_a_client_on_its_target_while_it_is_healthy() {
    let fx = Fx::new(21).await;
    let (mut b, port) = backends(&fx, &["one", "two"], 11).await;
    let servers = [fx.server("one", 11), fx.server("two", 12)];
    let sticky = json!({"sticky_sessions": true, "cookie_name": "STICKY", "cookie_lifetime": 120});
    let (id, ip) = fx.create_lb(lb("sticky", json!([http_service("http", 8081, port, sticky)]), &servers)).await;
    for s in servers {
        fx.wait_health(id, s, 8081, "healthy").await;
    }
    let addr = SocketAddr::new(IpAddr::V4(ip), 8081);
    let client = Ipv4Addr::new(127, 0, 21, 99);

    let first = request(addr, client, "/", &[]).await.expect("an answer");
    let set = first.header("set-cookie");
    assert_eq!(set.len(), 1, "a new session gets the cookie: {first:?}");
    let cookie = set[0].split(';').next().unwrap().to_owned();
    assert!(cookie.starts_with("STICKY="), "{cookie}");
    assert!(set[0].contains("Max-Age=120"), "the cookie lives cookie_lifetime seconds: {}", set[0]);
    let cookie_line = format!("Cookie: other=1; {cookie}");
    for _ in 0..5 {
        let again = request(addr, client, "/", &[&cookie_line]).await.expect("an answer");
        assert_eq!(again.body, first.body, "the session stays on its target");
        assert!(again.header("set-cookie").is_empty(), "a valid cookie is not set again: {again:?}");
    }
    // Without the cookie, requests are balanced as usual.
    let mut plain = Vec::new();
    for _ in 0..2 {
        plain.push(request(addr, client, "/", &[]).await.expect("an answer").body);
    }
    plain.sort();
    assert_eq!(plain, vec!["one", "two"]);

    // The session's target fails: the session moves and gets a new cookie.
    let (index, other) = if first.body == "one" { (0, "two") } else { (1, "one") };
    b[index].stop().await;
    fx.wait_health(id, servers[index], 8081, "unhealthy").await;
    let moved = request(addr, client, "/", &[&cookie_line]).await.expect("an answer");
    assert_eq!(moved.body, other, "{moved:?}");
    let renewed = moved.header("set-cookie");
    assert_eq!(renewed.len(), 1, "{moved:?}");
    assert_ne!(renewed[0].split(';').next(), Some(cookie.as_str()), "{moved:?}");
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn https_services_terminate_tls_with_the_uploaded_certificate_and_redirect_http() {
    let fx = Fx::new(22).await;
    let (b, port) = backends(&fx, &["secure"], 11).await;
    let server = fx.server("secure", 11);
    let (status, body) = fx
        .api(Method::POST, "/certificates", Some(json!({"name": "uploaded", "certificate": CERT, "private_key": KEY})))
        .await;
    assert_eq!(status, 201, "{body}");
    let cert = body["certificate"]["id"].as_u64().unwrap();
    let http = json!({"certificates": [cert], "redirect_http": true});
    let (id, ip) = fx.create_lb(lb("tls", json!([http_service("https", 8443, port, http)]), &[server])).await;
    fx.wait_health(id, server, 8443, "healthy").await;

    // The fixture is a self-signed CA certificate, which a verifying client refuses as a
    // server's: the client takes any certificate and the test compares the one presented.
    let client = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .tls_info(true)
        .resolve("www.fake.example.com", SocketAddr::new(IpAddr::V4(ip), 8443))
        .build()
        .unwrap();
    let response = client.get("https://www.fake.example.com:8443/over-tls").send().await.expect("a TLS answer");
    assert_eq!(response.status(), 200);
    let presented =
        response.extensions().get::<reqwest::tls::TlsInfo>().and_then(|i| i.peer_certificate()).map(<[u8]>::to_vec);
    let uploaded = CertificateDer::from_pem_slice(CERT.as_bytes()).unwrap().to_vec();
    assert_eq!(presented, Some(uploaded), "the Load Balancer presents the uploaded certificate");
    assert_eq!(response.text().await.unwrap(), "secure");
    let raw = b[0].seen.raw.lock().unwrap().clone();
    let seen = raw.iter().map(|r| String::from_utf8_lossy(r).to_ascii_lowercase()).find(|r| r.contains("/over-tls"));
    let seen = seen.expect("the backend got the request in plain HTTP");
    assert!(seen.starts_with("get /over-tls http/1.1\r\n"), "{seen}");
    assert!(seen.contains("\r\nx-forwarded-proto: https\r\n"), "{seen}");

    // Port 80 redirects to https on the service's port.
    let redirect = eventually("port 80 redirecting", || async {
        request(SocketAddr::new(IpAddr::V4(ip), 80), Ipv4Addr::new(127, 0, 22, 99), "/x?y=1", &[]).await
    })
    .await;
    assert_eq!(redirect.status, 301, "{redirect:?}");
    assert_eq!(redirect.header("location"), vec!["https://lb.example:8443/x?y=1"]);
    fx.fake.shutdown().await;
}

#[tokio::test]
async fn https_services_present_an_issued_managed_certificate() {
    let fx = Fx::new(23).await;
    let (_b, port) = backends(&fx, &["managed"], 11).await;
    let server = fx.server("managed", 11);
    let (status, body) = fx
        .api(
            Method::POST,
            "/certificates",
            Some(json!({"name": "managed", "type": "managed", "domain_names": ["shop.example"]})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let cert = body["certificate"]["id"].as_u64().unwrap();
    let pem = eventually("the certificate issued", || async {
        let (_, body) = fx.api(Method::GET, &format!("/certificates/{cert}"), None).await;
        body["certificate"]["certificate"].as_str().map(str::to_owned)
    })
    .await;
    let http = json!({"certificates": [cert]});
    let (id, ip) = fx.create_lb(lb("managed", json!([http_service("https", 443, port, http)]), &[server])).await;
    fx.wait_health(id, server, 443, "healthy").await;
    let client = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .tls_info(true)
        .resolve("shop.example", SocketAddr::new(IpAddr::V4(ip), 443))
        .build()
        .unwrap();
    let response = client.get("https://shop.example/").send().await.expect("a TLS answer");
    let presented =
        response.extensions().get::<reqwest::tls::TlsInfo>().and_then(|i| i.peer_certificate()).map(<[u8]>::to_vec);
    let issued = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap().to_vec();
    assert_eq!(presented, Some(issued), "the Load Balancer presents the issued certificate");
    assert_eq!(response.text().await.unwrap(), "managed");
    fx.fake.shutdown().await;
}
