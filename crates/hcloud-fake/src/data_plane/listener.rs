//! Listeners: one task per service on `<Load Balancer public IPv4>:<listen_port>` that
//! accepts connections and hands each to the service's protocol.
//!
//! - `tcp`: per connection, a healthy target is chosen ([`super::targets`]); none closes the
//!   client connection at once. Then the fake connects to `<target>:<destination_port>`, writes the
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
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use super::plan::{ForwardMode, ForwardSpec};
use super::proxy_protocol;
use super::targets::{ConnectionGuard, ListenerCtx, choose, connect};

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
