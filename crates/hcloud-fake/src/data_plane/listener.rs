//! Listeners: one task per service on `<Load Balancer public IPv4>:<listen_port>` that
//! accepts connections and forwards each to one healthy target.
//!
//! Per connection: the targets the API reports `healthy` for this service (a test override
//! first, else the checks; see `State::target_status`) that have an address are the
//! candidates; the algorithm picks one ([`super::select`]); no candidate closes the client
//! connection at once. Then the fake connects to `<target>:<destination_port>`, writes the
//! PROXY header when the service has `proxyprotocol`, and copies bytes both ways until both
//! sides are done. The forwarding spec (targets, ports, algorithm) is swapped in by the
//! reconciler without rebinding.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use super::board::{CheckKey, SharedBoard};
use super::config::ProxyProtocolVersion;
use super::plan::ForwardSpec;
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
    let mut connections = JoinSet::new();
    let mut cursor = 0usize;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    let current = Arc::clone(&spec.borrow());
                    if let Some(task) = route(&ctx, &current, client, peer, &mut cursor) {
                        connections.spawn(task);
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

/// Picks a target for a new connection and returns the task that forwards it; `None` (the
/// client is dropped, i.e. closed) when no target is healthy.
fn route(
    ctx: &ListenerCtx,
    spec: &ForwardSpec,
    client: TcpStream,
    peer: SocketAddr,
    cursor: &mut usize,
) -> Option<impl Future<Output = ()> + Send + 'static> {
    ctx.counters.accepted.fetch_add(1, Ordering::Relaxed);
    let candidates = candidates(&ctx.handle, spec);
    let keys: Vec<CheckKey> = candidates
        .iter()
        .map(|(target, _)| CheckKey { lb: spec.lb, listen_port: spec.listen_port, target: target.clone() })
        .collect();
    let chosen = {
        let mut board = ctx.board.lock_unpoisoned();
        let active: Vec<u64> = keys.iter().map(|k| board.active(k)).collect();
        let chosen = pick(spec.algorithm, &active, cursor);
        if let Some(i) = chosen {
            // Counted before the next accept, so least_connections sees it at once.
            board.connection_opened(&keys[i]);
        }
        chosen
    };
    let Some(i) = chosen else {
        ctx.counters.rejected.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(load_balancer = spec.lb, listen_port = spec.listen_port, %peer, "data plane: no healthy target");
        return None;
    };
    ctx.counters.active.fetch_add(1, Ordering::Relaxed);
    let guard =
        ConnectionGuard { board: Arc::clone(&ctx.board), key: keys[i].clone(), counters: Arc::clone(&ctx.counters) };
    let backend = SocketAddr::new(candidates[i].1, spec.destination_port);
    let header = spec
        .proxyprotocol
        .then(|| client.local_addr().ok())
        .flatten()
        .map(|local| proxy_protocol::encode(ctx.proxy_protocol, peer, local));
    Some(forward(client, backend, header, guard))
}

/// Undoes the connection counts when a forwarded connection ends (also when aborted).
struct ConnectionGuard {
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
async fn forward(mut client: TcpStream, backend: SocketAddr, header: Option<Vec<u8>>, guard: ConnectionGuard) {
    let mut upstream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(backend)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(%backend, "data plane: connecting to the target failed: {e}");
            guard.counters.rejected.fetch_add(1, Ordering::Relaxed);
            return;
        }
        Err(_) => {
            tracing::debug!(%backend, "data plane: connecting to the target timed out");
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
