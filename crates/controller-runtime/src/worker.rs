//! The one reconcile loop every controller runs on.
//!
//! A controller implements [`Reconciler`] (key in, outcome out) and hands its [`WorkQueue`] to
//! [`Workers::run`], which owns everything around the reconcile call:
//!
//! - `workers` tasks take keys from the queue (a key is never reconciled twice at once);
//! - success forgets the key's failures; [`Reconciled::requeue_after`] re-adds it later;
//! - an error whose [`ReconcileError::retry_after`] is set waits exactly that long (upstream's
//!   `RetryError`), any other error backs off per key (client-go's rate-limited requeue);
//! - the first failure of a key and then every doubling of its failure count publish a
//!   Warning event on the object ([`Reconciler::regarding`]) with the error's reason; the other
//!   failures are logged, so a persistent problem is visible without flooding events;
//! - keys that failed because the remote side was unreachable ([`ReconcileError::is_transient`])
//!   are all retried as soon as any reconcile reports that the remote side answered again
//!   ([`Reconciled::remote_answered`]), and one of them is probed every
//!   [`WorkerConfig::recovery_probe`], so an outage ends for every key together instead of
//!   each waiting out a backoff that grew to minutes;
//! - a reconcile that panics is one key's failure, not the controller's (controller-runtime's
//!   `RecoverPanic`, its default): the panic is logged with the key, counted in
//!   `controller_reconcile_panics_total`, and the key is released and retried with backoff like
//!   any error, while the other keys go on. A panic anywhere else in the loop ends
//!   [`Workers::run`] with that panic, so whoever runs the controller sees it stop.

use std::collections::HashSet;
use std::fmt::{self, Display};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use futures::FutureExt as _;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::reflector::{Lookup, ObjectRef};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::events::EventRecorder;
use crate::metrics::RuntimeMetrics;
use crate::workqueue::WorkQueue;

/// What a successful reconcile reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// The remote side (e.g. the cloud provider) was asked and answered: if keys failed
    /// transiently before, the outage is over and they are retried now.
    pub remote_answered: bool,
    /// Reconcile the key again after this delay.
    pub requeue_after: Option<Duration>,
}

impl Reconciled {
    /// Done, without asking the remote side.
    pub const DONE: Reconciled = Reconciled { remote_answered: false, requeue_after: None };
    /// Done; the remote side answered.
    pub const ANSWERED: Reconciled = Reconciled { remote_answered: true, requeue_after: None };
}

/// What the reconcile loop needs to know about a failure.
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// Reason of the Warning event published about the failure (CamelCase), or `None` for a
    /// failure the reconciler reports itself (or that needs no event).
    fn event_reason(&self) -> Option<&str>;

    /// True if the failure is the remote side's (outage, rate limit) and says nothing about
    /// the object.
    fn is_transient(&self) -> bool {
        false
    }

    /// Retry after exactly this delay instead of backing off (upstream's `RetryError`).
    fn retry_after(&self) -> Option<Duration> {
        None
    }
}

/// A controller's reconcile logic for one object.
pub trait Reconciler: Send + Sync + 'static {
    /// The kind of object the controller reconciles; its queue holds [`ObjectRef`]s to them,
    /// the keys the informer's store is read with.
    type Resource: kube::Resource<DynamicType = ()> + Send + Sync + 'static;
    /// Why a reconcile failed.
    type Error: ReconcileError;

    /// Brings the object behind `key` to its desired state.
    fn reconcile(
        &self,
        key: &ObjectRef<Self::Resource>,
    ) -> impl Future<Output = Result<Reconciled, Self::Error>> + Send;

    /// The object a Warning event about a failure of `key` is attached to, if it still exists.
    fn regarding(&self, key: &ObjectRef<Self::Resource>) -> Option<ObjectReference>;
}

/// A queue key of `R`.
type Key<R> = ObjectRef<<R as Reconciler>::Resource>;

/// An object's key as client-go writes it (`MetaNamespaceKeyFunc`) and logs show it:
/// `namespace/name`, or `name` for a cluster-scoped object.
pub struct KeyName<'a, K: Lookup>(pub &'a ObjectRef<K>);

impl<K: Lookup> Display for KeyName<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            Some(ns) => write!(f, "{ns}/{}", self.0.name),
            None => f.write_str(&self.0.name),
        }
    }
}

/// The key of `object`: its name, within its namespace if it has one. (An object without a
/// name, which the API server never hands out, gets the empty name instead of a panic.)
pub fn key_of<K: kube::Resource<DynamicType = ()>>(object: &K) -> ObjectRef<K> {
    let meta = object.meta();
    let key = ObjectRef::new(meta.name.as_deref().unwrap_or_default());
    match meta.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        Some(ns) => key.within(ns),
        None => key,
    }
}

/// A cluster pass or a reconcile that cannot fail.
impl ReconcileError for std::convert::Infallible {
    fn event_reason(&self) -> Option<&str> {
        match *self {}
    }
}

/// How [`Workers::run`] runs a reconciler.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The controller's name (logs, metrics).
    pub name: String,
    /// Keys reconciled at once (`--concurrent-*-syncs`); at least 1.
    pub workers: usize,
    /// How often one transiently failed key is retried early to detect recovery.
    pub recovery_probe: Duration,
}

impl WorkerConfig {
    /// `workers` workers for controller `name`, probing for recovery every 30 s.
    pub fn new(name: &str, workers: usize) -> Self {
        WorkerConfig { name: name.to_owned(), workers, recovery_probe: Duration::from_secs(30) }
    }
}

struct Loop<R: Reconciler> {
    reconciler: Arc<R>,
    queue: WorkQueue<Key<R>>,
    events: Option<EventRecorder>,
    metrics: Option<RuntimeMetrics>,
    name: String,
    /// Keys whose last reconcile failed transiently.
    transient: Mutex<HashSet<Key<R>>>,
}

/// A reconciler with its queue, ready to run.
pub struct Workers<R: Reconciler> {
    reconciler: Arc<R>,
    queue: WorkQueue<Key<R>>,
    config: WorkerConfig,
    events: Option<EventRecorder>,
    metrics: Option<RuntimeMetrics>,
}

impl<R: Reconciler> Workers<R> {
    /// Workers for `reconciler` over `queue`. Without [`Workers::events`], failures are only
    /// logged.
    pub fn new(reconciler: Arc<R>, queue: WorkQueue<Key<R>>, config: WorkerConfig) -> Self {
        Workers { reconciler, queue, config, events: None, metrics: None }
    }

    /// Publishes Warning events about failures through `events`.
    pub fn events(mut self, events: EventRecorder) -> Self {
        self.events = Some(events);
        self
    }

    /// Counts reconcile outcomes in `metrics`.
    pub fn metrics(mut self, metrics: RuntimeMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Runs `workers` reconcile loops plus the recovery probe until the queue's shutdown
    /// token fires.
    ///
    /// A panic outside a reconcile (a bug in the loop itself, or in [`Reconciler::regarding`])
    /// stops every loop and resumes here, so the controller's task ends with it.
    pub async fn run(self) {
        let Workers { reconciler, queue, config, events, metrics } = self;
        let shutdown = queue.shutdown_token().clone();
        let name = config.name.clone();
        let this =
            Arc::new(Loop { reconciler, queue, events, metrics, name: config.name, transient: Mutex::default() });
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..config.workers.max(1) {
            let this = this.clone();
            tasks.spawn(async move { this.worker().await }.instrument(info_span!("worker", controller = %name)));
        }
        let probe = this.clone();
        let token = shutdown.clone();
        tasks.spawn(async move { probe.recovery_probe(config.recovery_probe, token).await });
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                Some(joined) = tasks.join_next() => {
                    // The loops return only after shutdown; one that ended early panicked.
                    if let Err(e) = joined
                        && e.is_panic()
                    {
                        tasks.shutdown().await;
                        std::panic::resume_unwind(e.into_panic());
                    }
                }
            }
        }
        tasks.shutdown().await;
    }
}

impl<R: Reconciler> Loop<R> {
    fn transient(&self) -> std::sync::MutexGuard<'_, HashSet<Key<R>>> {
        // Inserts and removes only; a poisoned set is still a valid set.
        self.transient.lock_unpoisoned()
    }

    fn count(&self, result: &'static str) {
        if let Some(m) = &self.metrics {
            m.reconciled(&self.name, result);
        }
    }

    async fn worker(&self) {
        while let Some(key) = self.queue.get().await {
            debug!(key = %KeyName(&key), "reconciling");
            // Unwind safety: after a panic the reconciler is used again for other keys. What a
            // reconcile leaves behind is its writes (planned, idempotent, retried) and the
            // shared state behind locks that every user of this runtime treats as consistent
            // when poisoned (single-step mutations), so nothing half-done is observed later.
            match AssertUnwindSafe(self.reconciler.reconcile(&key)).catch_unwind().await {
                Ok(result) => self.handle(&key, result).await,
                Err(panic) => self.panicked(&key, &*panic),
            }
            self.queue.done(&key);
        }
    }

    /// A reconcile of `key` panicked: count and log it, retry the key with backoff.
    fn panicked(&self, key: &Key<R>, panic: &(dyn std::any::Any + Send)) {
        if let Some(m) = &self.metrics {
            m.reconcile_panicked(&self.name);
        }
        self.count("error");
        self.transient().remove(key);
        let delay = self.queue.add_rate_limited(key.clone());
        error!(
            controller = %self.name,
            key = %KeyName(key),
            panic = panic_message(panic),
            ?delay,
            "reconcile panicked (a bug); retrying the key with backoff"
        );
    }

    async fn handle(&self, key: &Key<R>, result: Result<Reconciled, R::Error>) {
        match result {
            Ok(outcome) => {
                self.count("success");
                self.queue.forget(key);
                self.transient().remove(key);
                if outcome.remote_answered {
                    self.retry_transient_failures();
                }
                if let Some(delay) = outcome.requeue_after {
                    self.queue.add_after(key.clone(), delay);
                }
            }
            Err(e) => {
                if e.is_transient() {
                    self.transient().insert(key.clone());
                } else {
                    self.transient().remove(key);
                }
                let failures = self.queue.failures(key);
                // First failure, then every doubling: visible but not a flood.
                let announce = failures == 0 || failures.is_power_of_two();
                let regarding = if announce { self.reconciler.regarding(key) } else { None };
                match (&self.events, e.event_reason(), regarding) {
                    (Some(events), Some(reason), Some(regarding)) => {
                        events.warning(&regarding, reason, e.to_string()).await;
                    }
                    _ => warn!(key = %KeyName(key), error = %e, failures = failures + 1, "reconcile failed"),
                }
                if let Some(delay) = e.retry_after() {
                    self.count("requeue_after");
                    self.queue.add_after(key.clone(), delay);
                    debug!(key = %KeyName(key), ?delay, "retrying after the requested delay");
                } else {
                    self.count("error");
                    let delay = self.queue.add_rate_limited(key.clone());
                    debug!(key = %KeyName(key), ?delay, "requeued with backoff");
                }
            }
        }
    }

    /// After the remote side answered again, retries every key that failed transiently, now.
    fn retry_transient_failures(&self) {
        let waiting = std::mem::take(&mut *self.transient());
        if !waiting.is_empty() {
            info!(controller = %self.name, keys = waiting.len(), "the remote side answers again; retrying what failed during the outage");
            for key in waiting {
                self.queue.add(key);
            }
        }
    }

    /// Every `interval`, retries one transiently failed key early.
    async fn recovery_probe(&self, interval: Duration, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let probe = self.transient().iter().next().cloned();
            if let Some(key) = probe {
                debug!(key = %KeyName(&key), "probing whether the remote side recovered");
                self.queue.add(key);
            }
        }
    }
}

/// The message of a panic's payload (`panic!` with a literal or a format string), or a
/// placeholder for any other payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(message) = payload.downcast_ref::<&'static str>() {
        message
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message
    } else {
        "a panic without a message"
    }
}

#[cfg(test)]
#[path = "worker_tests.rs"]
mod tests;
