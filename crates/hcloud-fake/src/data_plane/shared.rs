//! What the fake's handle, the reconciler and the control surface share: the configuration,
//! the health board, the published listeners and their counters, and the wake-up signal. It
//! imports neither the handle nor the reconciler, so the handle can hold it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::Notify;

use super::board::SharedBoard;
use super::config::DataPlaneConfig;
use super::plan::{ForwardSpec, ListenerKey};
use crate::control::{DataPlaneListener, DataPlaneStatus, DataPlaneTarget, ListenerState};
use sync_lock::Unpoison as _;

/// Connection counters of one listener.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub accepted: AtomicU64,
    pub active: AtomicU64,
    pub rejected: AtomicU64,
}

/// A listener as the control surface shows it.
#[derive(Debug, Clone)]
pub(crate) struct ListenerRecord {
    pub(super) spec: Arc<ForwardSpec>,
    pub(super) state: ListenerState,
    pub(super) error: Option<String>,
    pub(super) counters: Option<Arc<Counters>>,
}

/// What the fake's handle, the reconciler and the control surface share.
#[derive(Debug)]
pub(crate) struct DataPlaneShared {
    pub config: DataPlaneConfig,
    /// Health-check results and open connections.
    pub board: SharedBoard,
    /// The listeners, as last published by the reconciler.
    pub(super) listeners: Mutex<BTreeMap<ListenerKey, ListenerRecord>>,
    /// Wakes the reconciler (a state change).
    pub(super) notify: Notify,
    /// Whether a reconciler runs.
    pub(super) running: AtomicBool,
    /// Bumped by a reset: the reconciler starts everything over.
    pub(super) generation: AtomicU64,
}

impl DataPlaneShared {
    /// A data plane for `config`, not running yet.
    pub fn new(config: DataPlaneConfig) -> Self {
        Self {
            config,
            board: SharedBoard::default(),
            listeners: Mutex::new(BTreeMap::new()),
            notify: Notify::new(),
            running: AtomicBool::new(false),
            generation: AtomicU64::new(0),
        }
    }

    /// The state changed: reconcile soon.
    pub fn changed(&self) {
        self.notify.notify_one();
    }

    /// The fake was reset: stop everything and start over.
    pub fn reset(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.board.lock_unpoisoned().clear();
        self.notify.notify_one();
    }

    /// The status shown by the control surface.
    pub fn status(&self) -> DataPlaneStatus {
        let listeners = self
            .listeners
            .lock_unpoisoned()
            .iter()
            .map(|(key, l)| {
                let load =
                    |f: fn(&Counters) -> &AtomicU64| l.counters.as_ref().map_or(0, |c| f(c).load(Ordering::Relaxed));
                DataPlaneListener {
                    load_balancer: key.lb,
                    listen_port: l.spec.listen_port,
                    address: key.addr,
                    protocol: match l.spec.mode {
                        super::plan::ForwardMode::RedirectToHttps { .. } => "redirect_http".to_owned(),
                        _ => l.spec.protocol.clone(),
                    },
                    state: l.state,
                    error: l.error.clone(),
                    targets: l
                        .spec
                        .backends
                        .iter()
                        .map(|(key, ip)| {
                            let (server, target_ip) = key.server_and_ip();
                            DataPlaneTarget {
                                server,
                                ip: target_ip,
                                address: ip.map(|ip| SocketAddr::new(ip, l.spec.destination_port)),
                            }
                        })
                        .collect(),
                    accepted_connections: load(|c| &c.accepted),
                    active_connections: load(|c| &c.active),
                    rejected_connections: load(|c| &c.rejected),
                }
            })
            .collect();
        DataPlaneStatus {
            enabled: true,
            running: self.running.load(Ordering::SeqCst),
            addresses: Some(self.config.to_string()),
            proxy_protocol: Some(self.config.proxy_protocol()),
            listeners,
            checks: self.board.lock_unpoisoned().snapshot(),
        }
    }
}
