//! Choosing a target for a connection or request, and connecting to it: what the `tcp`
//! listener ([`super::listener`]) and the HTTP proxy ([`super::http`]) share.
//!
//! The candidates are the targets the API reports `healthy` for the service (a test override
//! first, else the checks; see `State::target_status`) that have an address; the Load
//! Balancer's algorithm picks one ([`super::select`]), or a sticky session's target while it is
//! healthy. A connection to a target leaves from the given source address (the Load Balancer's
//! own, when it is not loopback).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};

use super::board::{CheckKey, SharedBoard};
use super::config::ProxyProtocolVersion;
use super::plan::ForwardSpec;
use super::select::pick;
use super::shared::Counters;
use crate::handle::FakeHandle;
use crate::state::HealthKey;
use sync_lock::Unpoison as _;

/// How long connecting to a target may take before the client connection is closed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What a listener task needs besides its socket.
pub(super) struct ListenerCtx {
    pub handle: FakeHandle,
    pub board: SharedBoard,
    pub counters: Arc<Counters>,
    pub proxy_protocol: ProxyProtocolVersion,
}

/// The candidates of a spec: targets the API reports healthy for the service, with an address.
fn candidates(handle: &FakeHandle, spec: &ForwardSpec) -> Vec<(HealthKey, IpAddr)> {
    handle.with_state_unsettled(|state| {
        spec.backends
            .iter()
            .filter_map(|(key, ip)| ip.map(|ip| (key, ip)))
            .filter(|(key, _)| state.target_status(spec.lb, spec.listen_port, key) == "healthy")
            .map(|(key, ip)| (key.clone(), ip))
            .collect()
    })
}

/// A target chosen for one connection (or request): where to connect, and the guard that
/// counts it as open until dropped.
pub(super) struct Chosen {
    pub target: HealthKey,
    pub backend: SocketAddr,
    pub guard: ConnectionGuard,
}

/// Chooses a healthy target of `spec`: `preferred` when it is one of them (a sticky session),
/// else by the Load Balancer's algorithm. `None` when no target is healthy.
pub(super) fn choose(
    ctx: &ListenerCtx,
    spec: &ForwardSpec,
    cursor: &AtomicUsize,
    preferred: Option<&HealthKey>,
) -> Option<Chosen> {
    let candidates = candidates(&ctx.handle, spec);
    let keys: Vec<CheckKey> = candidates
        .iter()
        .map(|(target, _)| CheckKey { lb: spec.lb, listen_port: spec.listen_port, target: target.clone() })
        .collect();
    let chosen = {
        let mut board = ctx.board.lock_unpoisoned();
        let sticky = preferred.and_then(|p| candidates.iter().position(|(target, _)| target == p));
        let chosen = sticky.or_else(|| {
            let active: Vec<u64> = keys.iter().map(|k| board.active(k)).collect();
            let mut at = cursor.fetch_add(1, Ordering::Relaxed);
            pick(spec.algorithm, &active, &mut at)
        });
        if let Some(i) = chosen {
            // Counted before the next accept, so least_connections sees it at once.
            board.connection_opened(&keys[i]);
        }
        chosen
    }?;
    ctx.counters.active.fetch_add(1, Ordering::Relaxed);
    let guard = ConnectionGuard {
        board: Arc::clone(&ctx.board),
        key: keys[chosen].clone(),
        counters: Arc::clone(&ctx.counters),
    };
    let (target, ip) = candidates.into_iter().nth(chosen)?;
    Some(Chosen { target, backend: SocketAddr::new(ip, spec.destination_port), guard })
}

/// Connects to a target from `source` (any port; `None`: the kernel's choice) within
/// [`CONNECT_TIMEOUT`].
pub(super) async fn connect(backend: SocketAddr, source: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let attempt = async {
        let socket = if backend.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
        if let Some(source) = source.filter(|s| s.is_ipv4() == backend.is_ipv4()) {
            socket.bind(SocketAddr::new(source, 0))?;
        }
        socket.connect(backend).await
    };
    tokio::time::timeout(CONNECT_TIMEOUT, attempt)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "connecting timed out")))
}

/// Undoes the connection counts when a forwarded connection ends (also when aborted).
pub(super) struct ConnectionGuard {
    board: SharedBoard,
    key: CheckKey,
    pub counters: Arc<Counters>,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.board.lock_unpoisoned().connection_closed(&self.key);
        self.counters.active.fetch_sub(1, Ordering::Relaxed);
    }
}
