//! Listeners: one task per service on `<Load Balancer public IPv4>:<listen_port>` that
//! accepts connections and hands each to the service's protocol.
//!
//! - `tcp`: per connection, the targets the API reports `healthy` for this service (a test
//!   override first, else the checks; see `State::target_status`) that have an address are the
//!   candidates; the algorithm picks one ([`super::select`]); no candidate closes the client
//!   connection at once. Then the fake connects to `<target>:<destination_port>`, writes the
//!   PROXY header when the service has `proxyprotocol`, and copies bytes both ways until both
//!   sides are done.
//! - `http`/`https`: the connection (after the TLS handshake for `https`) is served as HTTP/1.1
//!   and every request is proxied on its own ([`super::http`]).
//! - The port 80 of an `https` service with `redirect_http` answers every request with a
//!   redirect to `https://`.
//!
//! A connection to a target leaves from the address the client reached (the Load Balancer's
//! address) unless that is a loopback address, which cannot reach another host: then the
//! kernel picks the source. The forwarding spec (targets, ports, algorithm, certificates) is
//! swapped in by the reconciler without rebinding.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use super::board::{CheckKey, SharedBoard};
use super::config::ProxyProtocolVersion;
use super::plan::{ForwardMode, ForwardSpec};
use super::proxy_protocol;
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

/// Accepts until `stop` fires (or its sender is dropped), then closes the socket and waits
/// for the connections it forwards to end (they are aborted).
pub(super) async fn serve(
    listener: TcpListener,
    spec: watch::Receiver<Arc<ForwardSpec>>,
    ctx: ListenerCtx,
    mut stop: oneshot::Receiver<()>,
) {
    let ctx = Arc::new(ctx);
    let mut connections = JoinSet::new();
    let cursor = Arc::new(AtomicUsize::new(0));
    let mut tls = super::tls::AcceptorCache::default();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    let current = Arc::clone(&spec.borrow());
                    match &current.mode {
                        ForwardMode::Tcp => {
                            if let Some(task) = route(&ctx, &current, client, peer, &cursor) {
                                connections.spawn(task);
                            }
                        }
                        ForwardMode::Http(http) => {
                            ctx.counters.accepted.fetch_add(1, Ordering::Relaxed);
                            let acceptor = match &http.tls {
                                Some(certificates) => match tls.acceptor(certificates) {
                                    Ok(acceptor) => Some(acceptor),
                                    Err(e) => {
                                        tracing::warn!(load_balancer = current.lb, listen_port = current.listen_port, "data plane: no TLS for this https service: {e}");
                                        ctx.counters.rejected.fetch_add(1, Ordering::Relaxed);
                                        continue;
                                    }
                                },
                                None => None,
                            };
                            let proxy = super::http::Proxy { ctx: Arc::clone(&ctx), spec: Arc::clone(&current), cursor: Arc::clone(&cursor), peer };
                            connections.spawn(proxy.serve(client, acceptor));
                        }
                        ForwardMode::RedirectToHttps { https_port } => {
                            ctx.counters.accepted.fetch_add(1, Ordering::Relaxed);
                            connections.spawn(super::http::redirect(client, *https_port));
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!("data plane: accept failed: {e}");
                    // E.g. out of file descriptors: do not spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
    drop(listener);
    connections.shutdown().await;
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

/// Picks a target for a new connection and returns the task that forwards it; `None` (the
/// client is dropped, i.e. closed) when no target is healthy.
fn route(
    ctx: &ListenerCtx,
    spec: &ForwardSpec,
    client: TcpStream,
    peer: SocketAddr,
    cursor: &AtomicUsize,
) -> Option<impl Future<Output = ()> + Send + 'static> {
    ctx.counters.accepted.fetch_add(1, Ordering::Relaxed);
    let Some(chosen) = choose(ctx, spec, cursor, None) else {
        ctx.counters.rejected.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(load_balancer = spec.lb, listen_port = spec.listen_port, %peer, "data plane: no healthy target");
        return None;
    };
    let local = client.local_addr().ok();
    let header = spec
        .proxyprotocol
        .then_some(local)
        .flatten()
        .map(|local| proxy_protocol::encode(ctx.proxy_protocol, peer, local));
    let source = local.map(|l| l.ip()).filter(|ip| !ip.is_loopback());
    Some(forward(client, chosen.backend, source, header, chosen.guard))
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
    counters: Arc<Counters>,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.board.lock_unpoisoned().connection_closed(&self.key);
        self.counters.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Connects to `backend`, sends `header`, then copies both ways until both sides closed.
async fn forward(
    mut client: TcpStream,
    backend: SocketAddr,
    source: Option<IpAddr>,
    header: Option<Vec<u8>>,
    guard: ConnectionGuard,
) {
    let mut upstream = match connect(backend, source).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(%backend, "data plane: connecting to the target failed: {e}");
            guard.counters.rejected.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    if let Some(header) = header
        && let Err(e) = upstream.write_all(&header).await
    {
        tracing::debug!(%backend, "data plane: writing the PROXY header failed: {e}");
        return;
    }
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        tracing::debug!(%backend, "data plane: forwarding ended with an error: {e}");
    }
    let _ = client.shutdown().await;
    let _ = upstream.shutdown().await;
    drop(guard);
}
