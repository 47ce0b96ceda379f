//! A shared informer: one watch per resource feeding one cache ([`Store`]) and any number of
//! event handlers, like client-go's shared informers.
//!
//! Handlers see `(old, new)` pairs: `old` is the cached object before the event (`None` for
//! an add), so controllers can filter updates the way upstream's `UpdateFunc`s do. Handlers
//! run inline on the informer task and must only enqueue work. Every `resync_period` all
//! cached objects are replayed as updates with `old == new`, like an informer resync.
//! `metadata.managedFields` is dropped before caching: controllers never need it and it is
//! often the largest part of an object.
//!
//! A handler that panics is one change's failure, not the watch's (like a reconcile that
//! panics, see [`crate::worker`]): the panic is logged with the object, counted for the
//! handler's controller (`controller_reconcile_panics_total`, and as an error in
//! `controller_reconcile_total`, with [`Informer::metrics`]), and the other handlers and every
//! later change are delivered as usual; the next resync replays the objects still cached. A
//! panic anywhere else ends [`Informer::run`], and [`Synced`] then reports the cache out of
//! sync, so whoever runs the informer sees it stop.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, warn};

use crate::metrics::RuntimeMetrics;
use crate::worker::panic_message;

/// What happened to an object.
#[derive(Debug)]
pub enum Change<'a, K> {
    /// Added (`old` is `None`) or updated; a resync replays objects with `old == new`.
    Applied {
        /// The cached object before the change.
        old: Option<&'a Arc<K>>,
        /// The object now.
        new: &'a Arc<K>,
    },
    /// Deleted.
    Deleted(&'a Arc<K>),
}

/// A handler's function.
type HandlerFn<K> = Box<dyn Fn(&Change<'_, K>) + Send + Sync>;

/// A registered handler and the controller it belongs to (logs, metrics).
struct Handler<K> {
    controller: String,
    call: HandlerFn<K>,
}

/// A shared informer for one resource type.
pub struct Informer<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    api: Api<K>,
    config: watcher::Config,
    store: Store<K>,
    writer: reflector::store::Writer<K>,
    handlers: Vec<Handler<K>>,
    resync_period: Option<Duration>,
    /// During a (re-)list: the objects cached before it and the keys seen since, so objects
    /// that vanished while the watch was down get a `Deleted` event at `InitDone`.
    relist: Option<Relist<K>>,
    synced: tokio::sync::watch::Sender<bool>,
    /// Where handler panics are counted.
    metrics: Option<RuntimeMetrics>,
}

/// Resolves once the informer's cache holds the first complete list. Unlike
/// `Store::wait_until_ready` (which wakes only one waiter), any number of tasks can wait.
#[derive(Debug, Clone)]
pub struct Synced(tokio::sync::watch::Receiver<bool>);

impl Synced {
    /// Waits for the first complete list; `false` if the informer stopped before that.
    pub async fn wait(&self) -> bool {
        self.0.clone().wait_for(|synced| *synced).await.is_ok()
    }

    /// True once the cache holds the first complete list, as long as the informer runs: once
    /// it stopped (its task returned, panicked or was dropped) the cache no longer follows the
    /// API server, and this is false again.
    pub fn is_synced(&self) -> bool {
        *self.0.borrow() && !self.is_stopped()
    }

    /// True once the informer stopped (it is dropped when its task ends, however it ends).
    pub fn is_stopped(&self) -> bool {
        // The informer owns the sender: the channel is closed exactly when it is gone.
        self.0.has_changed().is_err()
    }
}

struct Relist<K>
where
    K: Resource,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    before: Vec<Arc<K>>,
    seen: Vec<ObjectRef<K>>,
}

impl<K> Informer<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    /// An informer watching `api` with `config`.
    pub fn new(api: Api<K>, config: watcher::Config) -> Self {
        let writer = reflector::store::Writer::default();
        let store = writer.as_reader();
        let (synced, _) = tokio::sync::watch::channel(false);
        Informer {
            api,
            config,
            store,
            writer,
            handlers: Vec::new(),
            resync_period: None,
            relist: None,
            synced,
            metrics: None,
        }
    }

    /// Counts handler panics in `metrics`, as reconcile panics of the handler's controller.
    pub fn metrics(mut self, metrics: RuntimeMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Replays all cached objects as updates every `period` (upstream: `--min-resync-period`).
    pub fn resync_every(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// The cache. Wait for [`Informer::synced`] before trusting it.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// A handle that resolves once the cache holds the first complete list.
    pub fn synced(&self) -> Synced {
        Synced(self.synced.subscribe())
    }

    /// Registers a handler of `controller` (the name its panics are logged and counted
    /// under). Handlers must be quick (enqueue only).
    pub fn on_change(&mut self, controller: &str, handler: impl Fn(&Change<'_, K>) + Send + Sync + 'static) {
        self.handlers.push(Handler { controller: controller.to_owned(), call: Box::new(handler) });
    }

    /// Runs the watch until `shutdown`. Watch errors are retried with backoff forever.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut stream = watcher::watcher(self.api.clone(), self.config.clone()).default_backoff().boxed();
        let mut resync = self.resync_period.map(|p| {
            let mut i = tokio::time::interval_at(tokio::time::Instant::now() + p, p);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        loop {
            let next_resync = async {
                match resync.as_mut() {
                    Some(i) => {
                        i.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = next_resync => self.resync(),
                event = stream.next() => match event {
                    Some(Ok(event)) => self.handle(event),
                    Some(Err(e)) => warn!(error = %e, kind = %K::kind(&Default::default()), "watch failed; retrying"),
                    None => return,
                },
            }
        }
    }

    fn handle(&mut self, mut event: Event<K>) {
        match &mut event {
            Event::Apply(obj) | Event::InitApply(obj) | Event::Delete(obj) => {
                obj.meta_mut().managed_fields = None;
            }
            Event::Init | Event::InitDone => {}
        }
        match &event {
            Event::Init => {
                debug!(kind = %K::kind(&Default::default()), "watch (re)started");
                self.relist = Some(Relist { before: self.store.state(), seen: Vec::new() });
                self.writer.apply_watcher_event(&event);
            }
            Event::InitApply(obj) => {
                // The reflector commits a re-list to the store only at InitDone; remember the
                // object and dispatch once the store holds it.
                if let Some(relist) = self.relist.as_mut() {
                    relist.seen.push(ObjectRef::from_obj(obj));
                }
                self.writer.apply_watcher_event(&event);
            }
            Event::InitDone => {
                self.writer.apply_watcher_event(&event);
                debug!(kind = %K::kind(&Default::default()), objects = self.store.len(), "initial list done");
                if let Some(relist) = self.relist.take() {
                    let before: HashMap<ObjectRef<K>, Arc<K>> =
                        relist.before.into_iter().map(|o| (ObjectRef::from_obj(o.as_ref()), o)).collect();
                    let seen: HashSet<&ObjectRef<K>> = relist.seen.iter().collect();
                    for key in &relist.seen {
                        if let Some(new) = self.store.get(key) {
                            self.dispatch(&Change::Applied { old: before.get(key), new: &new });
                        }
                    }
                    for (key, gone) in &before {
                        if !seen.contains(key) {
                            self.dispatch(&Change::Deleted(gone));
                        }
                    }
                }
                self.synced.send_replace(true);
            }
            Event::Apply(obj) => {
                let key = ObjectRef::from_obj(obj);
                let old = self.store.get(&key);
                self.writer.apply_watcher_event(&event);
                if let Some(new) = self.store.get(&key) {
                    self.dispatch(&Change::Applied { old: old.as_ref(), new: &new });
                }
            }
            Event::Delete(obj) => {
                let old = self.store.get(&ObjectRef::from_obj(obj));
                self.writer.apply_watcher_event(&event);
                let gone = old.unwrap_or_else(|| Arc::new(obj.clone()));
                self.dispatch(&Change::Deleted(&gone));
            }
        }
    }

    fn resync(&self) {
        for obj in self.store.state() {
            self.dispatch(&Change::Applied { old: Some(&obj), new: &obj });
        }
    }

    /// Hands `change` to every handler; a handler that panics misses this change only.
    fn dispatch(&self, change: &Change<'_, K>) {
        for handler in &self.handlers {
            // Unwind safety as in the reconcile loop: a handler is called again after a panic,
            // and what it touches (queues, triggers, caches) sits behind locks that every user
            // of this runtime treats as consistent when poisoned (single-step mutations).
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| (handler.call)(change))) {
                self.handler_panicked(&handler.controller, change, &*panic);
            }
        }
    }

    /// A handler of `controller` panicked on `change`: log and count it like a reconcile panic.
    fn handler_panicked(&self, controller: &str, change: &Change<'_, K>, panic: &(dyn std::any::Any + Send)) {
        if let Some(m) = &self.metrics {
            m.reconcile_panicked(controller);
            m.reconciled(controller, "error");
        }
        let object = match change {
            Change::Applied { new, .. } => new,
            Change::Deleted(gone) => gone,
        };
        error!(
            controller,
            kind = %K::kind(&Default::default()),
            object = %crate::worker::KeyName(&ObjectRef::from_obj(object.as_ref())),
            panic = panic_message(panic),
            "informer handler panicked (a bug); it misses this change, the watch goes on"
        );
    }
}

#[cfg(test)]
#[path = "informer_tests.rs"]
mod tests;
