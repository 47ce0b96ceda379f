//! One client address cannot take the port away from the others: 200 connections from
//! 127.0.0.1 (keep-alive ones asking for `/healthz` now and then, silent TLS ones, silent TCP
//! ones; each reconnects once closed) while a kubelet-like probe from 127.0.0.2 opens a fresh
//! connection for every `/healthz` and must be answered within 1 s every time. The default caps,
//! with short timeouts so that the attacker's connections cycle within the test.

#![allow(clippy::expect_used, clippy::unwrap_used)] // Test helpers outside #[test] fns.

use crate::common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Running, start_secure_with};
use controller_serving::{CertificateDer, Health, Limits, MetricsRegistry, Timeouts};
use reqwest::StatusCode;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

/// The probe's address: another client than the attacker's 127.0.0.1.
const PROBE_ADDRESS: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// How long a probe may take: the kubelet's default probe timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// The attacker's connections, by kind.
const KEEP_ALIVE: usize = 100;
const SILENT_TLS: usize = 50;
const SILENT_TCP: usize = 50;
/// How often a keep-alive connection asks for `/healthz`: well within the read/idle timeout,
/// so the server never finds it idle long enough to close it.
const REQUEST_EVERY: Duration = Duration::from_millis(700);
/// The attacker's pause before reconnecting a closed connection (it keeps the test's CPU use
/// bounded on a small, shared machine, where the probe's 1 s must not go to the attacker's
/// own handshakes; a real attacker would not pause).
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// Every phase of a connection times out after 2 s (the defaults are 10 s and 90 s).
fn short_timeouts() -> Timeouts {
    let phase = Duration::from_secs(2);
    Timeouts {
        read: phase,
        idle: phase,
        handler: Duration::from_secs(5),
        write: Duration::from_secs(5),
        tls_handshake: phase,
    }
}

/// The attacker's TLS client: X25519 only, the cheapest key share to generate for every attempt.
fn connector(ca: &CertificateDer<'static>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = vec![rustls::crypto::aws_lc_rs::kx_group::X25519];
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// `GET /healthz` on a keep-alive HTTP/1.1 connection; `Err` once the server closed it.
async fn keep_alive_get(stream: &mut (impl AsyncRead + AsyncWrite + Unpin)) -> std::io::Result<()> {
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").await?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 512];
    // The answer is `ok` with a Content-Length: read until the headers and the two bytes are in.
    loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        response.extend_from_slice(&chunk[..read]);
        if let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n")
            && response.len() >= end + 4 + 2
        {
            return Ok(());
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    KeepAlive,
    SilentTls,
    SilentTcp,
}

/// One attacker connection from 127.0.0.1, reconnecting whenever the server closes it, until
/// `stop`. `attempted` counts first attempts.
async fn attacker(
    kind: Kind,
    addr: SocketAddr,
    tls: TlsConnector,
    attempted: Arc<AtomicUsize>,
    stop: CancellationToken,
) {
    let mut first = true;
    while !stop.is_cancelled() {
        let session = async {
            let Ok(tcp) = TcpStream::connect(addr).await else { return };
            match kind {
                Kind::SilentTcp => {
                    let mut tcp = tcp;
                    let _ = tcp.read(&mut [0u8; 1]).await;
                }
                Kind::SilentTls | Kind::KeepAlive => {
                    let name = ServerName::try_from("localhost").unwrap();
                    let Ok(mut stream) = tls.connect(name, tcp).await else { return };
                    if let Kind::SilentTls = kind {
                        let _ = stream.read(&mut [0u8; 1]).await;
                        return;
                    }
                    while keep_alive_get(&mut stream).await.is_ok() {
                        tokio::time::sleep(REQUEST_EVERY).await;
                    }
                }
            }
        };
        if first {
            attempted.fetch_add(1, Ordering::Relaxed);
            first = false;
        }
        tokio::select! {
            () = session => {}
            () = stop.cancelled() => return,
        }
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}

/// A client whose connections come from `local` and are never reused (the kubelet opens a new
/// connection for every probe).
fn probe_client(running: &Running, local: IpAddr) -> reqwest::Client {
    let ca = reqwest::Certificate::from_der(&running.ca()).unwrap();
    reqwest::Client::builder()
        .tls_certs_only([ca])
        .resolve("localhost", running.addr())
        .local_address(local)
        .pool_max_idle_per_host(0)
        .timeout(PROBE_TIMEOUT)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_with_200_connections_leaves_healthz_to_another_address() {
    common::init_tracing();
    // 127.0.0.2 must be usable as a source address (all of 127.0.0.0/8 is on Linux).
    let probe_socket = TcpSocket::new_v4().unwrap();
    probe_socket.bind(SocketAddr::new(PROBE_ADDRESS, 0)).expect("binding 127.0.0.2 for the probe");
    drop(probe_socket);

    let limits = Limits { timeouts: short_timeouts(), ..Limits::SECURE };
    let running = start_secure_with(Health::new(), MetricsRegistry::new(), None, limits).await;
    let tls = connector(&running.ca());
    let stop = CancellationToken::new();
    let attempted = Arc::new(AtomicUsize::new(0));
    let mut attackers = tokio::task::JoinSet::new();
    // The keep-alive connections first, so that without a cap per client they take every slot.
    let kinds = std::iter::repeat_n(Kind::KeepAlive, KEEP_ALIVE)
        .chain(std::iter::repeat_n(Kind::SilentTls, SILENT_TLS))
        .chain(std::iter::repeat_n(Kind::SilentTcp, SILENT_TCP));
    for (i, kind) in kinds.enumerate() {
        if i == KEEP_ALIVE {
            let deadline = Instant::now() + Duration::from_secs(10);
            while attempted.load(Ordering::Relaxed) < KEEP_ALIVE && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        attackers.spawn(attacker(kind, running.addr(), tls.clone(), Arc::clone(&attempted), stop.clone()));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while attempted.load(Ordering::Relaxed) < KEEP_ALIVE + SILENT_TLS + SILENT_TCP && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(attempted.load(Ordering::Relaxed), 200, "every attacker connection was attempted");

    // 30 probes, 200 ms apart: at least 6 s, three times the timeouts, so attacker connections
    // are closed and reopened meanwhile. Every one must be answered `ok` within the timeout.
    let probe = probe_client(&running, PROBE_ADDRESS);
    let mut outcomes = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let outcome = match probe.get(running.url("/healthz")).send().await {
            Ok(response) => Ok(response.status()),
            Err(error) => Err(format!("{error:?}")),
        };
        outcomes.push((started.elapsed(), outcome));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.cancel();
    attackers.join_all().await;

    let failed: Vec<_> = outcomes
        .iter()
        .filter(|(elapsed, outcome)| *elapsed >= PROBE_TIMEOUT || *outcome != Ok(StatusCode::OK))
        .collect();
    assert!(failed.is_empty(), "{} of {} probes failed: {failed:#?}", failed.len(), outcomes.len());
}
