//! The reconciler: one task that wakes on a state change (or every reconcile interval),
//! computes the [`Plan`](super::plan::Plan) and makes the running listeners and checkers match
//! it. On stop it ends every task it started and waits for them.
//!
//! - Checkers: a new (service, target) gets a board entry (`unknown`) and a checker; a changed
//!   one (health check, address) is restarted from `unknown`; a gone one is stopped and its
//!   entry removed.
//! - Listeners: a new one is bound (a bind error is recorded, logged once per distinct error,
//!   and retried at every reconcile); a changed spec is swapped in without rebinding; a gone
//!   one (service deleted, Load Balancer deleted, public interface disabled) is stopped: its
//!   socket closes and its forwarded connections are aborted.
//! - A [`crate::FakeHandle::reset`] starts everything over.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::board::CheckKey;
use super::plan::{CheckSpec, ForwardSpec, ListenerKey, diff, plan};
use super::shared::{Counters, DataPlaneShared, ListenerRecord};
use super::targets::ListenerCtx;
use crate::control::ListenerState;
use crate::handle::FakeHandle;
use sync_lock::Unpoison as _;

struct RunningListener {
    spec: Arc<ForwardSpec>,
    spec_tx: watch::Sender<Arc<ForwardSpec>>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
    counters: Arc<Counters>,
}

struct FailedListener {
    spec: Arc<ForwardSpec>,
    error: String,
}

struct RunningCheck {
    spec: CheckSpec,
    task: Option<JoinHandle<()>>,
}

/// What runs.
pub(super) struct Reconciler {
    handle: FakeHandle,
    shared: Arc<DataPlaneShared>,
    listeners: BTreeMap<ListenerKey, RunningListener>,
    failed: BTreeMap<ListenerKey, FailedListener>,
    checks: BTreeMap<CheckKey, RunningCheck>,
    generation: u64,
}

impl Reconciler {
    pub(super) fn new(handle: FakeHandle, shared: Arc<DataPlaneShared>) -> Self {
        let generation = shared.generation.load(Ordering::SeqCst);
        Self {
            handle,
            shared,
            listeners: BTreeMap::new(),
            failed: BTreeMap::new(),
            checks: BTreeMap::new(),
            generation,
        }
    }

    /// One pass: plan, then make checkers and listeners match.
    pub(super) async fn reconcile(&mut self) {
        let generation = self.shared.generation.load(Ordering::SeqCst);
        if generation != self.generation {
            self.stop_all().await;
            self.generation = generation;
        }
        let config = self.shared.config.clone();
        let plan = self.handle.with_state_quiet(|state| plan(state, &config));
        self.apply_checks(plan.checks).await;
        self.apply_listeners(plan.listeners).await;
        self.publish();
    }

    async fn apply_checks(&mut self, wanted: BTreeMap<CheckKey, CheckSpec>) {
        let d = diff(&self.checks, &wanted, |running, spec| running.spec == *spec);
        for key in d.removed.iter().chain(&d.changed) {
            if let Some(running) = self.checks.remove(key) {
                stop_task(running.task).await;
            }
        }
        for key in &d.removed {
            self.shared.board.lock_unpoisoned().remove(key);
        }
        for key in d.added.iter().chain(&d.changed) {
            let Some(spec) = wanted.get(key) else { continue };
            let hc = &spec.health_check;
            let address = spec.target.as_ref().ok().map(|ip| std::net::SocketAddr::new(*ip, hc.port));
            // A changed check starts over from `unknown` (open connections are kept).
            self.shared.board.lock_unpoisoned().insert(
                key.clone(),
                address,
                &hc.protocol,
                spec.target.as_ref().err().cloned(),
            );
            let task = address.map(|target| {
                let proxy = spec.proxyprotocol.then_some(self.shared.config.proxy_protocol());
                tokio::spawn(super::probe::run(key.clone(), target, hc.clone(), proxy, Arc::clone(&self.shared.board)))
            });
            self.checks.insert(key.clone(), RunningCheck { spec: spec.clone(), task });
        }
    }

    async fn apply_listeners(&mut self, wanted: BTreeMap<ListenerKey, ForwardSpec>) {
        let d = diff(&self.listeners, &wanted, |running, spec| *running.spec == *spec);
        for key in &d.removed {
            if let Some(running) = self.listeners.remove(key) {
                stop_listener(running).await;
            }
        }
        for key in &d.changed {
            if let (Some(running), Some(spec)) = (self.listeners.get_mut(key), wanted.get(key)) {
                running.spec = Arc::new(spec.clone());
                // The listener ends only when stopped, so its receiver lives as long as this.
                let _ = running.spec_tx.send(Arc::clone(&running.spec));
            }
        }
        self.failed.retain(|key, _| wanted.contains_key(key));
        for key in d.added {
            let Some(spec) = wanted.get(&key) else { continue };
            let spec = Arc::new(spec.clone());
            match TcpListener::bind(key.addr).await {
                Ok(socket) => {
                    if self.failed.remove(&key).is_some() {
                        tracing::info!(load_balancer = key.lb, address = %key.addr, "data plane: listening now");
                    }
                    self.listeners.insert(key, self.start_listener(socket, spec));
                }
                Err(e) => {
                    let error = e.to_string();
                    let known = self.failed.get(&key).is_some_and(|f| f.error == error);
                    if !known {
                        tracing::warn!(
                            load_balancer = key.lb,
                            address = %key.addr,
                            "data plane: cannot listen: {error} (retrying at every reconcile)"
                        );
                    }
                    self.failed.insert(key, FailedListener { spec, error });
                }
            }
        }
    }

    fn start_listener(&self, socket: TcpListener, spec: Arc<ForwardSpec>) -> RunningListener {
        let (spec_tx, spec_rx) = watch::channel(Arc::clone(&spec));
        let (stop, stopped) = oneshot::channel();
        let counters = Arc::new(Counters::default());
        let ctx = ListenerCtx {
            handle: self.handle.clone(),
            board: Arc::clone(&self.shared.board),
            counters: Arc::clone(&counters),
            proxy_protocol: self.shared.config.proxy_protocol(),
        };
        let task = tokio::spawn(super::listener::serve(socket, spec_rx, ctx, stopped));
        RunningListener { spec, spec_tx, stop, task, counters }
    }

    /// Writes the listeners' status where the control surface reads it.
    fn publish(&self) {
        let running = self.listeners.iter().map(|(key, l)| {
            (
                *key,
                ListenerRecord {
                    spec: Arc::clone(&l.spec),
                    state: ListenerState::Listening,
                    error: None,
                    counters: Some(Arc::clone(&l.counters)),
                },
            )
        });
        let failed = self.failed.iter().map(|(key, f)| {
            (
                *key,
                ListenerRecord {
                    spec: Arc::clone(&f.spec),
                    state: ListenerState::BindFailed,
                    error: Some(f.error.clone()),
                    counters: None,
                },
            )
        });
        *self.shared.listeners.lock_unpoisoned() = running.chain(failed).collect();
    }

    /// Stops every listener and checker and waits for them; clears the board and the status.
    pub(super) async fn stop_all(&mut self) {
        for (_, running) in std::mem::take(&mut self.listeners) {
            stop_listener(running).await;
        }
        self.failed.clear();
        for (_, running) in std::mem::take(&mut self.checks) {
            stop_task(running.task).await;
        }
        self.shared.board.lock_unpoisoned().clear();
        self.shared.listeners.lock_unpoisoned().clear();
    }
}

/// Aborts a checker and waits until it is gone (its socket with it).
async fn stop_task(task: Option<JoinHandle<()>>) {
    if let Some(task) = task {
        task.abort();
        let _ = task.await;
    }
}

/// Stops a listener: it closes its socket, aborts its connections and ends.
async fn stop_listener(running: RunningListener) {
    let RunningListener { stop, task, .. } = running;
    let _ = stop.send(());
    if let Err(e) = task.await
        && e.is_panic()
    {
        tracing::warn!("data plane: a listener task panicked: {e}");
    }
}
