//! The plain HTTP listener: ephemeral port, endpoints, no authentication, timeouts, shutdown.

#![allow(clippy::expect_used, clippy::unwrap_used)] // Test helpers outside #[test] fns.

use crate::common;

use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::stopped;
use controller_serving::{
    Health, Limits, MetricsRegistry, Probe, ServeError, Timeouts, parse_listen_address, serve_plain, serve_plain_with,
};
use prometheus_client::metrics::gauge::Gauge;
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn an_ephemeral_port_serves_metrics_and_health_without_credentials() {
    common::init_tracing();
    let metrics = MetricsRegistry::new();
    let queue_depth = Gauge::<i64>::default();
    metrics.register("test_queue_depth", "Items waiting.", queue_depth.clone());
    queue_depth.set(7);
    let shutdown = CancellationToken::new();
    let addr = parse_listen_address("127.0.0.1:0").expect("a valid address");
    let bound = serve_plain(addr, Health::new(), metrics, shutdown.clone()).await.expect("serving");
    assert_ne!(bound.local_addr.port(), 0, "the real port is reported");
    assert!(bound.certificate_chain.is_empty());
    let base = format!("http://{}", bound.local_addr);
    let client = reqwest::Client::new();

    let response = client.get(format!("{base}/metrics")).send().await.expect("request");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers().get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = response.text().await.unwrap_or_default();
    assert!(text.contains("# TYPE test_queue_depth gauge\ntest_queue_depth 7\n"), "{text}");

    // A token is neither needed nor looked at.
    let response = client.get(format!("{base}/metrics")).bearer_auth("whatever").send().await.expect("request");
    assert_eq!(response.status(), StatusCode::OK);
    for path in ["/healthz", "/readyz/ping", "/livez?verbose"] {
        let response = client.get(format!("{base}{path}")).send().await.expect("request");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    let response = client.get(format!("{base}/")).send().await.expect("request");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(response.text().await.ok().as_deref(), Some("404 page not found\n"));

    shutdown.cancel();
    stopped(bound).await;
}

#[tokio::test]
async fn go_style_all_interfaces_address_binds() {
    // ":0" is Go's "all interfaces, any port"; it must bind (dual-stack, or IPv4 without IPv6).
    let shutdown = CancellationToken::new();
    let addr = parse_listen_address(":0").expect("valid");
    let bound = serve_plain(addr, Health::new(), MetricsRegistry::new(), shutdown.clone()).await.expect("serving");
    assert!(bound.local_addr.ip().is_unspecified(), "{}", bound.local_addr);
    let loopback = SocketAddr::from(([127, 0, 0, 1], bound.local_addr.port()));
    let response = reqwest::get(format!("http://{loopback}/healthz")).await.expect("IPv4 loopback reaches it");
    assert_eq!(response.status(), StatusCode::OK);
    shutdown.cancel();
    stopped(bound).await;
}

#[tokio::test]
async fn port_in_use_is_a_start_up_error() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let result = serve_plain(addr, Health::new(), MetricsRegistry::new(), CancellationToken::new()).await;
    match result {
        Err(error @ ServeError::Bind { .. }) => {
            let cause = TcpListener::bind(addr).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(cause.to_lowercase().contains("in use"), "{cause}");
            assert_eq!(
                test_harness::error_chain(&error),
                format!("cannot listen on {addr} (plain HTTP listener): {cause}")
            );
        }
        other => panic!("expected a bind error, got {other:?}"),
    }
}

fn short_timeouts() -> Limits {
    let timeouts = Timeouts {
        read: Duration::from_millis(300),
        idle: Duration::from_millis(300),
        handler: Duration::from_millis(300),
        write: Duration::from_secs(5),
        tls_handshake: Duration::from_secs(5),
    };
    Limits { timeouts, ..Limits::PLAIN }
}

#[tokio::test]
async fn a_handler_that_takes_too_long_is_answered_503() {
    common::init_tracing();
    let health = Health::new();
    // The check blocks until the test releases it, well after the handler timeout.
    let (release, blocked) = mpsc::channel::<()>();
    let blocked = std::sync::Mutex::new(blocked);
    health.register("stuck", &[Probe::Readyz], move || {
        let _ = blocked.lock().map(|receiver| receiver.recv_timeout(Duration::from_secs(30)));
        Ok(())
    });
    let shutdown = CancellationToken::new();
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let bound = serve_plain_with(addr, health, MetricsRegistry::new(), shutdown.clone(), short_timeouts())
        .await
        .expect("serving");
    let started = Instant::now();
    let response = reqwest::get(format!("http://{}/readyz", bound.local_addr)).await.expect("a response");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(started.elapsed() < Duration::from_secs(20), "answered by the timeout, not by the check");
    // The other endpoints still work meanwhile.
    let response = reqwest::get(format!("http://{}/healthz", bound.local_addr)).await.expect("a response");
    assert_eq!(response.status(), StatusCode::OK);
    let _ = release.send(());
    shutdown.cancel();
    stopped(bound).await;
}

#[tokio::test]
async fn a_client_that_sends_no_request_is_disconnected_after_the_read_timeout() {
    let shutdown = CancellationToken::new();
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let bound = serve_plain_with(addr, Health::new(), MetricsRegistry::new(), shutdown.clone(), short_timeouts())
        .await
        .expect("serving");
    let mut stream = tokio::net::TcpStream::connect(bound.local_addr).await.expect("connect");
    // Half a request line, then silence.
    stream.write_all(b"GET /healthz HT").await.expect("write");
    let mut buffer = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut buffer)).await;
    assert!(closed.is_ok(), "the server must close the connection by itself");
    // An HTTP/1 server may answer 408 before closing; it must not answer the request.
    let text = String::from_utf8_lossy(&buffer);
    assert!(!text.contains("200 OK"), "{text}");

    // A well-behaved keep-alive connection gets answers.
    let mut stream = tokio::net::TcpStream::connect(bound.local_addr).await.expect("connect");
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    let mut response = [0u8; 256];
    let n = stream.read(&mut response).await.expect("read");
    assert!(String::from_utf8_lossy(response.get(..n).unwrap_or_default()).starts_with("HTTP/1.1 200 OK"));
    shutdown.cancel();
    stopped(bound).await;
}

#[tokio::test]
async fn the_plain_listener_speaks_http1_only() {
    let shutdown = CancellationToken::new();
    let bound =
        serve_plain(SocketAddr::from(([127, 0, 0, 1], 0)), Health::new(), MetricsRegistry::new(), shutdown.clone())
            .await
            .expect("serving");
    let h2c = reqwest::Client::builder().http2_prior_knowledge().build().expect("client");
    let result = h2c.get(format!("http://{}/healthz", bound.local_addr)).send().await;
    assert!(result.is_err(), "h2c prior knowledge must be refused: {result:?}");
    shutdown.cancel();
    stopped(bound).await;
}
