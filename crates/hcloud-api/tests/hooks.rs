//! The hooks the application layer builds on, against `hcloud-fake` over HTTP: the request
//! gate (leader-election fence), the observer's start/end pairs with the official
//! `api_endpoint` label, and the debug wire log that never shows a private key.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::io::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use hcloud_api::Error;
use hcloud_api::models::{CreateCertificateRequest, ServerId};
use hcloud_fake::control::SeedServer;
use hcloud_fake::{FakeConfig, FaultRule};
use pretty_assertions::assert_eq;

/// A gate that allows as many exchanges as `budget` holds, then refuses.
fn budget_gate(budget: &Arc<AtomicI64>) -> Arc<dyn Fn() -> Result<(), String> + Send + Sync> {
    let budget = budget.clone();
    Arc::new(move || if budget.fetch_sub(1, Ordering::SeqCst) > 0 { Ok(()) } else { Err("leadership lost".to_owned()) })
}

#[tokio::test]
async fn a_refusing_gate_stops_every_exchange_before_the_network() {
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let env = Env::with(FakeConfig::default().with_action_delay(FOREVER), |b| b.gate(budget_gate(&budget))).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    assert_eq!(env.client.servers().get(sid(server)).await.unwrap().name, "node-1");
    env.h.reset_requests();
    env.rec.take();

    // Closed: nothing is sent, the observer sees nothing.
    budget.store(0, Ordering::SeqCst);
    let err = env.client.servers().get(sid(server)).await.unwrap_err();
    match &err {
        Error::NotSent { request, reason } => {
            assert_eq!(request, &format!("GET /servers/{server}"));
            assert_eq!(reason, "leadership lost");
        }
        other => panic!("expected NotSent, got {other:?}"),
    }
    assert!(err.is_not_sent() && !err.is_transient() && !err.is_not_found());
    assert!(err.to_string().contains("not sent: leadership lost"), "{err}");
    let err = env.client.servers().poweroff(sid(server)).await.unwrap_err();
    assert!(err.is_not_sent(), "{err:?}");
    assert_eq!(env.h.request_counts().total, 0, "nothing reached the API");
    assert!(env.rec.take().is_empty());

    // Closing between attempts: the retry after a 503 is not sent.
    env.h.inject_fault(FaultRule::error(Some("GET"), "/servers/{id}", 503, "unavailable").times(0));
    budget.store(1, Ordering::SeqCst);
    let err = env.client.servers().get(sid(server)).await.unwrap_err();
    assert!(err.is_not_sent(), "{err:?}");
    assert_eq!(env.count("GET /v1/servers/{id}"), 1, "the first attempt only");
    env.h.clear_faults();

    // Closing during an action wait: the next poll is not sent and the wait ends.
    budget.store(i64::MAX, Ordering::SeqCst);
    let action = env.client.servers().poweroff(sid(server)).await.unwrap();
    let client = env.client.clone();
    let task = tokio::spawn(async move { client.wait_for_action(&action, WAIT).await });
    let h = env.h.clone();
    until("the waiter polled", || h.request_count("GET /v1/actions") >= 1).await;
    budget.store(0, Ordering::SeqCst);
    let err = task.await.unwrap().unwrap_err();
    assert!(err.is_not_sent(), "{err:?}");
    assert!(err.to_string().starts_with("GET /actions"), "{err}");
}

#[tokio::test]
async fn the_observer_sees_a_start_and_an_end_of_every_exchange_with_the_official_label() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    env.h.inject_fault(FaultRule::error(Some("GET"), "/servers/{id}", 502, "bad_gateway"));

    env.client.servers().get(sid(server)).await.unwrap();
    let action = env.client.servers().poweroff(sid(server)).await.unwrap();
    env.client.wait_for_action(&action, WAIT).await.unwrap();
    let started = env.rec.started.lock().unwrap().clone();
    let finished = env.rec.take();
    assert_eq!(started.len(), finished.len());
    assert_eq!(env.rec.in_flight.load(Ordering::SeqCst), 0);
    assert_eq!(env.rec.max_in_flight.load(Ordering::SeqCst), 1);
    let head: Vec<Seen> = finished.iter().take(3).cloned().collect();
    assert_eq!(
        head,
        vec![
            ("GET".to_owned(), "/servers/{id}", "/servers/-".to_owned(), Some(502), 0),
            ("GET".to_owned(), "/servers/{id}", "/servers/-".to_owned(), Some(200), 1),
            (
                "POST".to_owned(),
                "/servers/{id}/actions/poweroff",
                "/servers/-/actions/poweroff".to_owned(),
                Some(201),
                0
            ),
        ]
    );
    assert!(finished.len() > 3, "and the polls");
    assert!(finished[3..].iter().all(|s| s.2 == "/actions" && s.3 == Some(200)), "{finished:?}");
    for ((m, label, attempt), seen) in started.iter().zip(&finished) {
        assert_eq!((m, label, *attempt), (&seen.0, &seen.2, seen.4));
    }

    // An exchange the caller abandons still ends, without a status.
    env.h.inject_fault(FaultRule::latency(Some("GET"), "/servers/{id}", Duration::from_secs(5)));
    let abandoned = tokio::time::timeout(Duration::from_millis(100), env.client.servers().get(ServerId(1))).await;
    assert!(abandoned.is_err(), "the caller gave up");
    assert_eq!(env.rec.in_flight.load(Ordering::SeqCst), 0, "the in-flight gauge went back to zero");
    let finished = env.rec.take();
    assert_eq!(finished.len(), 1);
    assert_eq!((finished[0].2.as_str(), finished[0].3), ("/servers/-", None));
}

/// Collects everything a `tracing` subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_debug_wire_log_never_shows_a_private_key() {
    const KEY_BODY: &str = "TUlJRXZRSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NCS2N3Z2dTakFnRUFBb0lCQVFD";
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // The test runs on one thread (current-thread runtime), so this covers the client.
    let _guard = tracing::subscriber::set_default(subscriber);
    let env = Env::with(FakeConfig::default(), |b| b.debug(true)).await;

    let created = env
        .client
        .certificates()
        .create(&CreateCertificateRequest::Uploaded {
            name: "ingress-tls".to_owned(),
            // The fake reads domains and dates from the PEM, as the API does: a real certificate.
            certificate: include_str!("../../hcloud-fake/tests/fixtures/test-only-cert.pem").to_owned(),
            private_key: format!("-----BEGIN PRIVATE KEY-----\n{KEY_BODY}\n-----END PRIVATE KEY-----\n").into(),
            labels: labels(&[("k8s-cluster", "prod")]),
        })
        .await
        .unwrap();
    assert_eq!(created.resource.name, "ingress-tls");

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("POST /certificates"), "the request was logged: {log}");
    assert!(log.contains("ingress-tls") && log.contains("BEGIN CERTIFICATE"), "{log}");
    assert!(log.contains(r#""private_key":"[redacted]""#), "{log}");
    assert!(!log.contains(KEY_BODY), "the private key leaked into the wire log: {log}");
    assert!(!log.contains(TOKEN));
}

/// The write gate (a dry run): every call that writes is refused before anything is sent, once
/// per call, with the method, template and path; reads go out as usual.
#[tokio::test]
async fn a_refusing_write_gate_stops_writes_and_lets_reads_through() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let gate: hcloud_api::WriteGate = {
        let seen = seen.clone();
        Arc::new(move |w: &hcloud_api::WriteRequest<'_>| {
            seen.lock().unwrap().push(format!("{} {} {}", w.method, w.endpoint, w.path));
            Err("dry run".to_owned())
        })
    };
    let env = Env::with(FakeConfig::default(), |b| b.write_gate(gate)).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    env.h.reset_requests();
    assert_eq!(env.client.servers().get(sid(server)).await.unwrap().name, "node-1", "a read goes out");
    let err = env.client.servers().poweroff(sid(server)).await.unwrap_err();
    assert!(err.is_not_sent(), "{err:?}");
    assert!(err.to_string().contains("not sent: dry run"), "{err}");
    assert_eq!(
        *seen.lock().unwrap(),
        [format!("POST /servers/{{id}}/actions/poweroff /servers/{server}/actions/poweroff")],
        "asked once, with the template and the path"
    );
    assert_eq!(env.h.request_counts().total, 1, "only the read reached the API");
}
