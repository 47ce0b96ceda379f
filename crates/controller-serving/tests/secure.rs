//! The secure listener without an API server: TLS (generated and file certificates), the
//! endpoints, start-up errors and shutdown.

#![allow(clippy::expect_used, clippy::unwrap_used)] // Test helpers outside #[test] fns.

use crate::common;

use std::net::TcpListener;

use common::{PemFiles, free_port, handshake, https_client, loopback_settings, pem_files, start_secure, stopped};
use controller_serving::{Health, MetricsRegistry, Probe, ServeError, serve_secure};
use prometheus_client::metrics::counter::Counter;
use reqwest::StatusCode;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn the_generated_certificate_is_presented_and_valid_for_loopback_and_the_host_name() {
    common::init_tracing();
    let running = start_secure(Health::new(), MetricsRegistry::new(), None).await;
    let chain = &running.bound.certificate_chain;
    assert_eq!(chain.len(), 2, "serving certificate + its CA");
    let ca = running.ca();
    for name in ["localhost", "127.0.0.1", "::1"] {
        let result = handshake(running.addr(), name, &ca).await;
        assert_eq!(result, Ok(()), "the certificate must be valid for {name}");
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_ascii_lowercase();
    let valid_dns = !hostname.is_empty()
        && hostname.split('.').all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if valid_dns {
        assert_eq!(handshake(running.addr(), &hostname, &ca).await, Ok(()), "valid for the host name {hostname}");
    }
    // The verification is real: another name or another CA fails.
    let other_name = handshake(running.addr(), "not-a-san.example", &ca).await;
    assert!(other_name.as_ref().is_err_and(|e| e.contains("certificate")), "{other_name:?}");
    let other_ca = pem_files().cert_der;
    let untrusted = handshake(running.addr(), "localhost", &other_ca).await;
    assert!(untrusted.is_err(), "a client trusting another CA must fail: {untrusted:?}");
}

#[tokio::test]
async fn health_paths_and_metrics_answer_over_https() {
    common::init_tracing();
    let health = Health::new();
    let metrics = MetricsRegistry::new();
    let starts = Counter::<u64>::default();
    metrics.register("test_starts", "Starts.", starts.clone());
    starts.inc_by(2);
    let running = start_secure(health.clone(), metrics, None).await;
    let client = running.client();

    for path in ["/healthz", "/livez", "/readyz", "/healthz/ping"] {
        let response = client.get(running.url(path)).send().await.expect("request");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(response.text().await.ok().as_deref(), Some("ok"), "{path}");
    }
    // A check registered after serving started is used at once.
    health.register("late-controller", &[Probe::Healthz], || Err("not synced".to_owned()));
    let response = client.get(running.url("/healthz?verbose")).send().await.expect("request");
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        response.text().await.ok().as_deref(),
        Some("[-]late-controller failed: reason withheld\nhealthz check failed\n")
    );
    let response = client.get(running.url("/healthz?exclude=late-controller")).send().await.expect("request");
    assert_eq!(response.status(), StatusCode::OK);

    let response = client.get(running.url("/metrics")).send().await.expect("request");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers().get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = response.text().await.unwrap_or_default();
    assert!(text.contains("test_starts_total 2\n"), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");

    let response = client.get(running.url("/debug/pprof")).send().await.expect("request");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let response = client.post(running.url("/metrics")).send().await.expect("request");
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn http2_is_negotiated_by_alpn() {
    let running = start_secure(Health::new(), MetricsRegistry::new(), None).await;
    let ca = reqwest::Certificate::from_der(&running.ca()).expect("DER");
    let client = reqwest::Client::builder()
        .tls_certs_only([ca])
        .resolve("localhost", running.addr())
        .http2_prior_knowledge()
        .build()
        .expect("client");
    let response = client.get(running.url("/readyz")).send().await.expect("request");
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn certificate_files_are_served() {
    common::init_tracing();
    let PemFiles { dir: _dir, cert, key, cert_der } = pem_files();
    let mut settings = loopback_settings(free_port());
    settings.cert_file = Some(cert);
    settings.key_file = Some(key);
    let shutdown = CancellationToken::new();
    let bound = serve_secure(&settings, Health::new(), MetricsRegistry::new(), None, shutdown.clone())
        .await
        .expect("starting with certificate files")
        .expect("a non-zero port");
    assert_eq!(bound.certificate_chain, vec![cert_der.clone()]);
    // rcgen's simple certificate is self-signed, so it is its own trust anchor.
    let client = https_client(&cert_der, bound.local_addr);
    let response = client.get(format!("https://localhost:{}/healthz", bound.local_addr.port())).send().await;
    assert_eq!(response.map(|r| r.status()).ok(), Some(StatusCode::OK));
    shutdown.cancel();
    stopped(bound).await;
}

async fn start_error(settings: &controller_serving::SecureServing) -> ServeError {
    match serve_secure(settings, Health::new(), MetricsRegistry::new(), None, CancellationToken::new()).await {
        Ok(bound) => panic!("expected a start-up error, got {bound:?}"),
        Err(error) => error,
    }
}

#[tokio::test]
async fn port_in_use_is_a_start_up_error_naming_the_flags() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let error = start_error(&loopback_settings(port)).await;
    assert!(matches!(error, ServeError::Bind { .. }), "{error:?}");
    let cause = TcpListener::bind(("127.0.0.1", port)).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(cause.to_lowercase().contains("in use"), "{cause}");
    // The cause is the error's source, named once in the chain.
    assert_eq!(
        test_harness::error_chain(&error),
        format!("cannot listen on 127.0.0.1:{port} (--bind-address/--secure-port): {cause}")
    );
}

#[tokio::test]
async fn unreadable_missing_or_mismatched_certificate_files_are_start_up_errors() {
    let good = pem_files();
    let other = pem_files();
    let garbage = good.dir.path().join("garbage.pem");
    std::fs::write(&garbage, "this is not PEM\n").expect("write");
    let missing = good.dir.path().join("missing.crt");
    let port = free_port();
    let with = |cert: Option<&std::path::Path>, key: Option<&std::path::Path>| {
        let mut settings = loopback_settings(port);
        settings.cert_file = cert.map(std::path::Path::to_path_buf);
        settings.key_file = key.map(std::path::Path::to_path_buf);
        settings
    };

    let error = start_error(&with(Some(&missing), Some(&good.key))).await;
    let message = error.to_string();
    assert!(matches!(error, ServeError::CertFile { .. }), "{error:?}");
    assert!(message.starts_with("--tls-cert-file ") && message.contains("missing.crt"), "{message}");
    assert!(message.contains("cannot read it"), "{message}");

    let error = start_error(&with(Some(&garbage), Some(&good.key))).await;
    assert!(error.to_string().starts_with("--tls-cert-file ") && error.to_string().contains("CERTIFICATE"), "{error}");

    let error = start_error(&with(Some(&good.cert), Some(&garbage))).await;
    let message = error.to_string();
    assert!(matches!(error, ServeError::KeyFile { .. }), "{error:?}");
    assert!(message.starts_with("--tls-private-key-file ") && message.contains("private key"), "{message}");

    let error = start_error(&with(Some(&good.cert), Some(&other.key))).await;
    let message = error.to_string();
    assert!(matches!(error, ServeError::Pair { .. }), "{error:?}");
    assert!(message.contains("--tls-cert-file") && message.contains("--tls-private-key-file"), "{message}");
    assert!(message.to_lowercase().contains("key"), "{message}");

    let error = start_error(&with(Some(&good.cert), None)).await;
    assert_eq!(
        error.to_string(),
        "--tls-cert-file is set but --tls-private-key-file is not: give both, or neither to use a generated \
         self-signed certificate"
    );
    let error = start_error(&with(None, Some(&good.key))).await;
    assert!(error.to_string().starts_with("--tls-private-key-file is set but --tls-cert-file is not"), "{error}");

    // None of the failed starts left the port bound.
    assert!(TcpListener::bind(("127.0.0.1", port)).is_ok(), "port {port} must still be free");
}

#[tokio::test]
async fn port_zero_turns_secure_serving_off() {
    let settings = loopback_settings(0);
    let result = serve_secure(&settings, Health::new(), MetricsRegistry::new(), None, CancellationToken::new()).await;
    assert!(matches!(result, Ok(None)), "{result:?}");
}

#[tokio::test]
async fn shutdown_stops_the_server_and_releases_the_port() {
    let running = start_secure(Health::new(), MetricsRegistry::new(), None).await;
    let addr = running.addr();
    // An open keep-alive connection must not keep the server alive.
    let client = running.client();
    let response = client.get(running.url("/healthz")).send().await.expect("request");
    assert_eq!(response.status(), StatusCode::OK);
    running.shutdown.cancel();
    stopped(running.bound).await;
    assert!(TcpListener::bind(addr).is_ok(), "{addr} is released after shutdown");
    let after = client.get(format!("https://localhost:{}/healthz", addr.port())).send().await;
    assert!(after.is_err(), "no answer after shutdown: {after:?}");
}
