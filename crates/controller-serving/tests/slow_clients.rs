//! Idle and slow clients on the secure port: every phase of a connection times out, and a cap
//! on connections keeps `/healthz` answering while more idle connections are open than the
//! cap. Short limits through `serve_secure_with`; deadlines, no sleeps standing in for them.

#![allow(clippy::expect_used, clippy::unwrap_used)] // Test helpers outside #[test] fns.

use crate::common;

use std::time::{Duration, Instant};

use common::{Running, closed_within, start_secure_with, tls_connect};
use controller_serving::{Health, Limits, MetricsRegistry, Timeouts};
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Far beyond every short timeout below, far below every default one.
const DEADLINE: Duration = Duration::from_secs(5);

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Every phase times out after `phase`; writes and handlers get the deadline.
fn short(phase: Duration) -> Timeouts {
    Timeouts { read: phase, idle: phase, handler: DEADLINE, write: DEADLINE, tls_handshake: phase }
}

async fn tls_idle(running: &Running, protocols: &[&[u8]]) -> tokio_rustls::client::TlsStream<TcpStream> {
    tls_connect(running.addr(), "localhost", &running.ca(), protocols).await.expect("a TLS handshake")
}

#[tokio::test]
async fn a_silent_client_is_closed_in_every_phase() {
    common::init_tracing();
    let limits = Limits { timeouts: short(ms(300)), ..Limits::SECURE };
    let running = start_secure_with(Health::new(), MetricsRegistry::new(), None, limits).await;

    // Connected, no TLS handshake.
    let mut raw = TcpStream::connect(running.addr()).await.expect("connect");
    // TLS done, HTTP/1.1 (no ALPN), no request.
    let mut http1 = tls_idle(&running, &[]).await;
    // TLS done, h2 by ALPN, not even the connection preface.
    let mut h2 = tls_idle(&running, &[b"h2"]).await;
    assert_eq!(h2.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    // TLS done, HTTP/1.1, half a request line.
    let mut partial = tls_idle(&running, &[]).await;
    partial.write_all(b"GET /healthz HT").await.expect("write");

    let started = Instant::now();
    assert!(closed_within(&mut raw, DEADLINE).await, "no TLS handshake: closed after the handshake timeout");
    assert!(closed_within(&mut http1, DEADLINE).await, "no HTTP/1 request: closed after the read timeout");
    assert!(closed_within(&mut h2, DEADLINE).await, "no h2 request: closed after the read timeout");
    assert!(closed_within(&mut partial, DEADLINE).await, "half a request: closed after the read timeout");
    assert!(started.elapsed() < DEADLINE, "{:?}", started.elapsed());
}

/// Reads h2 frames (type, flags, stream, payload), answering the server's SETTINGS and PINGs.
struct H2 {
    stream: tokio_rustls::client::TlsStream<TcpStream>,
}

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const ACK: u8 = 0x1;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

impl H2 {
    async fn start(stream: tokio_rustls::client::TlsStream<TcpStream>) -> H2 {
        let mut h2 = H2 { stream };
        h2.stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.expect("preface");
        h2.send(SETTINGS, 0, 0, &[]).await;
        h2
    }

    async fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let len = u32::try_from(payload.len()).expect("a small frame").to_be_bytes();
        let mut frame = vec![len[1], len[2], len[3], kind, flags];
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.extend_from_slice(payload);
        self.stream.write_all(&frame).await.expect("send a frame");
    }

    /// `GET /healthz` on stream 1 (HPACK: indexed `:method GET`, `:scheme https`, literal
    /// `:path` and `:authority` with indexed names).
    async fn get_healthz(&mut self) {
        let mut block = vec![0x82, 0x87, 0x04, 8];
        block.extend_from_slice(b"/healthz");
        block.extend_from_slice(&[0x01, 9]);
        block.extend_from_slice(b"localhost");
        self.send(HEADERS, END_STREAM | END_HEADERS, 1, &block).await;
    }

    /// The next frame other than SETTINGS and PING (which are acknowledged) and WINDOW_UPDATE;
    /// `None` at the end of the connection.
    async fn next(&mut self) -> Option<(u8, u8, u32, Vec<u8>)> {
        loop {
            let mut header = [0u8; 9];
            self.stream.read_exact(&mut header).await.ok()?;
            let len = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            let (kind, flags) = (header[3], header[4]);
            let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
            let mut payload = vec![0u8; len];
            self.stream.read_exact(&mut payload).await.ok()?;
            match (kind, flags & ACK) {
                (SETTINGS, 0) => self.send(SETTINGS, ACK, 0, &[]).await,
                (PING, 0) => self.send(PING, ACK, 0, &payload).await,
                (SETTINGS | PING, _) | (WINDOW_UPDATE, _) => {}
                _ => return Some((kind, flags, stream, payload)),
            }
        }
    }
}

#[tokio::test]
async fn an_h2_connection_is_closed_once_idle_after_its_last_request() {
    common::init_tracing();
    // A long read timeout (the first request's deadline, the ping interval), a short idle one.
    let timeouts = Timeouts { read: Duration::from_secs(30), idle: ms(300), ..short(ms(300)) };
    let running =
        start_secure_with(Health::new(), MetricsRegistry::new(), None, Limits { timeouts, ..Limits::SECURE }).await;
    let mut h2 = H2::start(tls_idle(&running, &[b"h2"]).await).await;
    h2.get_healthz().await;
    let mut body = Vec::new();
    loop {
        let frame = tokio::time::timeout(DEADLINE, h2.next()).await.expect("a frame in time");
        let (kind, flags, stream, payload) = frame.expect("the answer before the end of the connection");
        assert_eq!(stream, 1, "frame {kind} on stream {stream}");
        if kind == DATA {
            body.extend_from_slice(&payload);
        }
        if flags & END_STREAM != 0 {
            break;
        }
    }
    assert_eq!(body, b"ok");
    let answered = Instant::now();
    // Then nothing: the server says goodbye (GOAWAY, no error; it pings to learn when the
    // client saw it) and closes.
    let mut after = Vec::new();
    let ended = tokio::time::timeout(DEADLINE, async {
        while let Some((kind, _, _, payload)) = h2.next().await {
            after.push((kind, payload.get(4..8).map(<[u8]>::to_vec)));
        }
    })
    .await;
    assert!(ended.is_ok(), "closed after the GOAWAY; frames so far: {after:?}");
    assert!(after.iter().all(|(kind, _)| *kind == GOAWAY), "{after:?}");
    assert!(after.iter().any(|(_, code)| code.as_deref() == Some(&[0, 0, 0, 0][..])), "GOAWAY NO_ERROR: {after:?}");
    assert!(answered.elapsed() < DEADLINE, "closed by the idle timeout, not by the read timeout");
}

#[tokio::test]
async fn healthz_answers_while_more_idle_connections_than_the_cap_are_open() {
    common::init_tracing();
    // Every phase times out after 1 s; a connection beyond the cap waits 1 s for a slot.
    // No cap per client and no reserved slots: all connections come from 127.0.0.1, and this is
    // about the overall cap.
    let limits = Limits {
        timeouts: short(ms(1000)),
        max_connections: 4,
        max_connections_per_client: 100,
        reserved_for_new_clients: 0,
        admission_wait: Duration::from_secs(1),
    };
    let running = start_secure_with(Health::new(), MetricsRegistry::new(), None, limits).await;
    // Four idle TLS connections take every slot, four raw ones fill the waiting room, eight
    // more are refused.
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(tls_idle(&running, &[]).await);
    }
    let mut streams = Vec::new();
    for _ in 0..12 {
        streams.push(TcpStream::connect(running.addr()).await.expect("connect"));
    }
    // The cap at work: the eight beyond the waiting room are closed at once, long before any
    // timeout (1 s) could close them; the four waiting ones are still open. Without a cap all
    // twelve would be served and none closed yet.
    let outcomes = closed(streams, ms(500)).await;
    let refused = outcomes.iter().filter(|(closed, _)| *closed).count();
    assert_eq!(refused, 8, "of 12 connections beyond a full cap of 4 with a waiting room of 4");
    let mut raw: Vec<TcpStream> = outcomes.into_iter().map(|(_, stream)| stream).collect();

    let started = Instant::now();
    let mut answered = None;
    while answered.is_none() && started.elapsed() < DEADLINE {
        // A fresh client each time: a refused connection is closed at once.
        answered = running.client().get(running.url("/healthz")).send().await.ok().map(|r| r.status());
        if answered.is_none() {
            tokio::time::sleep(ms(50)).await;
        }
    }
    assert_eq!(answered, Some(StatusCode::OK), "/healthz answered within {DEADLINE:?}");
    for stream in &mut idle {
        assert!(closed_within(stream, DEADLINE).await, "an idle TLS connection is closed");
    }
    for stream in &mut raw {
        assert!(closed_within(stream, DEADLINE).await, "an idle TCP connection is closed");
    }
}

/// Limits whose timeouts do not strike during a test: only the cap of two decides (no cap per
/// client, no reserved slots).
fn cap_of_two() -> Limits {
    let timeouts = Timeouts { read: Duration::from_secs(60), idle: Duration::from_secs(60), ..Timeouts::SECURE };
    Limits {
        timeouts,
        max_connections: 2,
        max_connections_per_client: 100,
        reserved_for_new_clients: 0,
        admission_wait: Duration::from_secs(60),
    }
}

/// Which of `streams` the server closes within `deadline`, checked at the same time.
async fn closed(streams: Vec<TcpStream>, deadline: Duration) -> Vec<(bool, TcpStream)> {
    let mut checks = tokio::task::JoinSet::new();
    for mut stream in streams {
        checks.spawn(async move {
            let mut byte = [0u8; 1];
            let closed = matches!(tokio::time::timeout(deadline, stream.read(&mut byte)).await, Ok(Ok(0) | Err(_)));
            (closed, stream)
        });
    }
    checks.join_all().await
}

#[tokio::test]
async fn beyond_the_cap_a_connection_waits_for_a_slot() {
    common::init_tracing();
    let running = start_secure_with(Health::new(), MetricsRegistry::new(), None, cap_of_two()).await;
    let mut idle = vec![tls_idle(&running, &[]).await, tls_idle(&running, &[]).await];
    let client = running.client();
    let url = running.url("/healthz");
    let probe = tokio::spawn(async move { client.get(url).send().await.map(|r| r.status()) });
    // Negative check: with both slots taken, the probe gets no answer.
    tokio::time::sleep(ms(500)).await;
    assert!(!probe.is_finished(), "every slot is taken: the probe waits (it was not refused either)");
    drop(idle.pop());
    let answer = tokio::time::timeout(DEADLINE, probe).await.expect("the probe is answered once a slot is free");
    assert_eq!(answer.expect("the probe task").ok(), Some(StatusCode::OK));
    running.shutdown.cancel();
    common::stopped(running.bound).await;
}

#[tokio::test]
async fn beyond_the_waiting_room_connections_are_closed_at_once_and_leaving_frees_a_place() {
    common::init_tracing();
    let running = start_secure_with(Health::new(), MetricsRegistry::new(), None, cap_of_two()).await;
    let _idle = [tls_idle(&running, &[]).await, tls_idle(&running, &[]).await];
    let mut streams = Vec::new();
    for _ in 0..5 {
        streams.push(TcpStream::connect(running.addr()).await.expect("connect"));
    }
    // Two wait (as many as are served), three are closed at once.
    let outcomes = closed(streams, Duration::from_secs(2)).await;
    let refused = outcomes.iter().filter(|(closed, _)| *closed).count();
    assert_eq!(refused, 3, "of 5 connections beyond a full cap of 2");

    // The two waiting clients give up: their places are free again.
    drop(outcomes);
    let started = Instant::now();
    let mut admitted = false;
    while !admitted && started.elapsed() < DEADLINE {
        let stream = TcpStream::connect(running.addr()).await.expect("connect");
        // Closed at once while the room is full; kept waiting once a place is free.
        admitted = closed(vec![stream], ms(300)).await.iter().all(|(closed, _)| !closed);
    }
    assert!(admitted, "a new connection waits again within {DEADLINE:?}");
    running.shutdown.cancel();
    common::stopped(running.bound).await;
}
