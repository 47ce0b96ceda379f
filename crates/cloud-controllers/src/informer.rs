//! A shared informer: one watch per resource feeding one cache ([`Store`]) and any number of
//! event handlers, like client-go's shared informers.
//!
//! Handlers see `(old, new)` pairs: `old` is the cached object before the event (`None` for
//! an add), so controllers can filter updates the way upstream's `UpdateFunc`s do. Handlers
//! run inline on the informer task and must only enqueue work. Every `resync_period` all
//! cached objects are replayed as updates with `old == new`, like an informer resync.
//! `metadata.managedFields` is dropped before caching: controllers never need it and it is
//! often the largest part of an object.

use std::collections::HashSet;
use std::fmt::Debug;
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
use tracing::{debug, warn};

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

type Handler<K> = Box<dyn Fn(&Change<'_, K>) + Send + Sync>;

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
}

type Relist<K> = (Vec<Arc<K>>, HashSet<ObjectRef<K>>);

impl<K> Informer<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    /// An informer watching `api` with `config`.
    pub fn new(api: Api<K>, config: watcher::Config) -> Self {
        let writer = reflector::store::Writer::default();
        let store = writer.as_reader();
        Informer { api, config, store, writer, handlers: Vec::new(), resync_period: None, relist: None }
    }

    /// Replays all cached objects as updates every `period` (upstream: `--min-resync-period`).
    pub fn resync_every(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// The cache. Wait for [`Store::wait_until_ready`] before trusting it.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Registers a handler. Handlers must be quick (enqueue only).
    pub fn on_change(&mut self, handler: impl Fn(&Change<'_, K>) + Send + Sync + 'static) {
        self.handlers.push(Box::new(handler));
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
        let old = match &event {
            Event::Apply(obj) | Event::InitApply(obj) | Event::Delete(obj) => self.store.get(&ObjectRef::from_obj(obj)),
            Event::Init | Event::InitDone => None,
        };
        match &event {
            Event::Init => self.relist = Some((self.store.state(), HashSet::new())),
            Event::InitApply(obj) => {
                if let Some((_, seen)) = self.relist.as_mut() {
                    seen.insert(ObjectRef::from_obj(obj));
                }
            }
            _ => {}
        }
        self.writer.apply_watcher_event(&event);
        if let Event::InitDone = &event
            && let Some((before, seen)) = self.relist.take()
        {
            for gone in before.iter().filter(|o| !seen.contains(&ObjectRef::from_obj(o.as_ref()))) {
                self.dispatch(&Change::Deleted(gone));
            }
        }
        match &event {
            Event::Apply(obj) | Event::InitApply(obj) => {
                if let Some(new) = self.store.get(&ObjectRef::from_obj(obj)) {
                    self.dispatch(&Change::Applied { old: old.as_ref(), new: &new });
                }
            }
            Event::Delete(obj) => {
                let gone = old.unwrap_or_else(|| Arc::new(obj.clone()));
                self.dispatch(&Change::Deleted(&gone));
            }
            Event::Init => debug!(kind = %K::kind(&Default::default()), "watch (re)started"),
            Event::InitDone => debug!(kind = %K::kind(&Default::default()), "initial list done"),
        }
    }

    fn resync(&self) {
        for obj in self.store.state() {
            self.dispatch(&Change::Applied { old: Some(&obj), new: &obj });
        }
    }

    fn dispatch(&self, change: &Change<'_, K>) {
        for h in &self.handlers {
            h(change);
        }
    }
}
