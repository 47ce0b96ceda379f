//! The opt-in Load Balancer data plane: the fake's Load Balancers carry real TCP traffic and
//! check their targets' health for real.
//!
//! Off by default: without [`crate::FakeConfig::load_balancer_data_plane`] nothing here runs
//! (no task, no socket) and Load Balancers get addresses from 198.18.0.0/15 as always. On
//! ([`DataPlaneConfig`], binary flag `--load-balancer-data-plane`):
//!
//! - **Addresses**: each new Load Balancer's `public_net.ipv4.ip` comes from the configured
//!   range (inside `127.0.0.0/8`) or list of local addresses, so the address a client (or a
//!   Kubernetes Service's status) sees is the one that answers.
//! - **Listeners** (module `listener`): for every service, the fake listens on
//!   `<public IPv4>:<listen_port>` (TCP) while the Load Balancer's public interface is
//!   enabled; with the public interface disabled it listens nowhere (the private IP in a
//!   network and the IPv6 address are not served either). Each connection goes to one
//!   healthy target, chosen by the Load Balancer's algorithm (module `select`), at
//!   `<target>:<destination_port>`; without a healthy target a `tcp` connection is closed at
//!   once. `http` and `https` services speak HTTP (module `http`): TLS terminated with the
//!   service's certificates (module `tls`), `503` without a healthy target, `X-Forwarded-For`,
//!   sticky-session cookies, and port 80 redirecting to `https://` with `redirect_http`.
//! - **PROXY protocol** (module `proxy_protocol`): with a service's `proxyprotocol`, the header goes
//!   to the target before the client's bytes (source = client, destination = the Load
//!   Balancer's address and listen port). Which version Hetzner sends is not stated in the
//!   Hetzner documentation searched while writing this (the Load Balancer FAQ and overview on
//!   docs.hetzner.com; the API reference only has the boolean `proxyprotocol`, "Is
//!   Proxyprotocol enabled or not"); the one write-up found about Hetzner Load Balancers with
//!   the PROXY protocol (P. Stolz, A. Fink, "How Kubernetes violates the Principle of Least
//!   Surprise when used with PROXY Protocol on Hetzner Load Balancers", 2022) shows the
//!   version 1 text line. So version 1 is the default, an unverified choice; version 2 can be
//!   chosen with [`DataPlaneConfig::with_proxy_protocol`] (`--load-balancer-proxy-protocol v2`).
//! - **Health checks** (module `probe`, decisions in module `health`): every (service, target) is checked
//!   at the service's interval with its timeout and retries (`tcp`: connect; `http`: a GET
//!   whose status and body are judged; `https`: connect only). The results are what
//!   `GET /load_balancers/{id}` reports as `health_status` (`unknown` before the first check
//!   completes) and what forwarding uses; a test override (`/_fake/.../target_health`) wins
//!   over both. A server's `status` in the fake does not enter: stop the target's backend
//!   to make it fail.
//! - **Lifecycle** (module `reconcile`): one task wakes on every state change (every request and
//!   library call notifies it) or every reconcile interval (it then settles due actions
//!   itself, so an action finishing shows in the data plane without a request), diffs what
//!   should run (module `plan`) against what runs and starts, updates or stops listeners and
//!   checkers. Bind errors are logged, retried and shown by [`crate::FakeHandle::data_plane`]
//!   and `GET /_fake/data_plane`; they never stop the fake.
//! - **Shutdown**: [`crate::FakeServer::shutdown`] stops the reconciler, which stops every
//!   listener (socket closed, forwarded connections aborted) and checker and waits for them.
//!   Only a [`crate::FakeServer`] runs the data plane: a [`crate::FakeHandle`] served through
//!   [`crate::FakeHandle::router`] alone allocates the addresses but serves no traffic.
//!
//! Data flow: state change → reconciler → plan → listeners/checkers; checkers → board
//! (module `board`) ← listeners (health, open connections); board → rendering of the API's
//! `health_status`.

pub(crate) mod board;
pub mod config;
pub(crate) mod health;
mod http;
mod listener;
pub(crate) mod plan;
mod probe;
pub(crate) mod proxy_protocol;
mod reconcile;
pub(crate) mod select;
pub(crate) mod shared;
mod targets;
mod tls;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use config::{
    AddressSource, DEFAULT_RECONCILE_INTERVAL, DataPlaneConfig, DataPlaneConfigError, ProxyProtocolVersion,
};

use crate::handle::FakeHandle;

/// The running data plane of a [`crate::FakeServer`]; dropping it stops the reconciler
/// without waiting.
#[derive(Debug)]
pub(crate) struct DataPlaneTask {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl DataPlaneTask {
    /// Stops every listener and checker and waits (at most 5 s) until they are gone.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(Duration::from_secs(5), &mut task).await.is_err()
        {
            tracing::warn!("data plane: did not stop within 5 s; aborting");
            task.abort();
            let _ = task.await;
        }
    }
}

/// Starts the data plane of `handle` when it has one and none runs yet.
pub(crate) fn spawn(handle: &FakeHandle) -> Option<DataPlaneTask> {
    let shared = handle.data_plane_shared()?;
    if shared.running.swap(true, Ordering::SeqCst) {
        tracing::warn!("data plane: already running for this fake; not starting a second one");
        return None;
    }
    let (stop, mut stopped) = oneshot::channel::<()>();
    let handle = handle.clone();
    let task = tokio::spawn(async move {
        let mut reconciler = reconcile::Reconciler::new(handle, Arc::clone(&shared));
        let mut tick = tokio::time::interval(shared.config.reconcile_interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            reconciler.reconcile().await;
            tokio::select! {
                // An explicit stop or the task handle being dropped.
                _ = &mut stopped => break,
                () = shared.notify.notified() => {}
                _ = tick.tick() => {}
            }
        }
        reconciler.stop_all().await;
        shared.running.store(false, Ordering::SeqCst);
    });
    Some(DataPlaneTask { stop: Some(stop), task: Some(task) })
}
