//! Health checkers: one task per (Load Balancer, service, target) that checks at the service's
//! `interval`, each check bounded by its `timeout`, and records the result on the board.
//!
//! A check (the first one at once, then one per interval, at least a second apart):
//! - `tcp`: a TCP connection to `<target>:<health_check.port>` opens;
//! - `http`: `GET <http.path>` (HTTP/1.1, `Host` = `http.domain` or the target's address) is
//!   answered with a status matching `http.status_codes` and, when `http.response` is set, a
//!   body containing it; with the service's `proxyprotocol` the PROXY header goes first;
//! - `http` with `tls` (an `https` check): only the TCP connection is checked (the fake speaks
//!   no TLS).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::board::{CheckKey, SharedBoard};
use super::config::ProxyProtocolVersion;
use super::health::{HttpVerdict, http_request, judge_http};
use super::proxy_protocol;
use crate::wire::HealthCheck;
use sync_lock::Unpoison as _;

/// Most bytes of an answer read while looking for the status line and body text.
const MAX_ANSWER: usize = 64 * 1024;

/// Checks `target` forever (until the task is aborted), recording each result.
pub(super) async fn run(
    key: CheckKey,
    target: SocketAddr,
    health_check: HealthCheck,
    proxy: Option<ProxyProtocolVersion>,
    board: SharedBoard,
) {
    let interval = Duration::from_secs(health_check.interval.max(1));
    let timeout = Duration::from_secs(health_check.timeout.max(1));
    loop {
        let result = check(target, &health_check, proxy, timeout).await;
        let change = board.lock_unpoisoned().record(&key, result.clone(), health_check.retries);
        if let Some((before, after)) = change
            && before != after
        {
            tracing::info!(
                load_balancer = key.lb,
                listen_port = key.listen_port,
                target = ?key.target,
                %target,
                error = result.err().unwrap_or_default(),
                "data plane: target {} -> {}",
                before.as_str(),
                after.as_str()
            );
        }
        tokio::time::sleep(interval).await;
    }
}

/// One check, bounded by `timeout`.
pub(super) async fn check(
    target: SocketAddr,
    health_check: &HealthCheck,
    proxy: Option<ProxyProtocolVersion>,
    timeout: Duration,
) -> Result<(), String> {
    match tokio::time::timeout(timeout, exchange(target, health_check, proxy)).await {
        Ok(result) => result,
        Err(_) => Err(format!("no answer within {}s", timeout.as_secs())),
    }
}

async fn exchange(
    target: SocketAddr,
    health_check: &HealthCheck,
    proxy: Option<ProxyProtocolVersion>,
) -> Result<(), String> {
    let mut stream = TcpStream::connect(target).await.map_err(|e| format!("connect to {target}: {e}"))?;
    let http = match &health_check.http {
        Some(http) if health_check.protocol == "http" && !http.tls => http,
        _ => return Ok(()),
    };
    if let Some(version) = proxy {
        let local = stream.local_addr().map_err(|e| format!("local address: {e}"))?;
        let header = proxy_protocol::encode(version, local, target);
        stream.write_all(&header).await.map_err(|e| format!("write to {target}: {e}"))?;
    }
    let host = match target {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    stream.write_all(http_request(http, &host).as_bytes()).await.map_err(|e| format!("write to {target}: {e}"))?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|e| format!("read from {target}: {e}"))?;
        answer.extend_from_slice(&chunk[..n]);
        let complete = n == 0 || answer.len() >= MAX_ANSWER;
        match judge_http(http, &answer, complete) {
            HttpVerdict::Pass => return Ok(()),
            HttpVerdict::Fail(reason) => return Err(reason),
            HttpVerdict::NeedMore => {}
        }
    }
}
