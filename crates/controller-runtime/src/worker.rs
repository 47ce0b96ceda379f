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
mod tests {
    use super::*;
    use crate::workqueue::ExponentialBackoff;
    use k8s_openapi::api::core::v1::Node;
    use std::collections::HashMap;

    fn key(name: &str) -> ObjectRef<Node> {
        ObjectRef::new(name)
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct TestError(&'static str);

    impl ReconcileError for TestError {
        fn event_reason(&self) -> Option<&str> {
            Some("TestFailed")
        }
        fn is_transient(&self) -> bool {
            self.0 == "outage"
        }
        fn retry_after(&self) -> Option<Duration> {
            (self.0 == "pending").then_some(Duration::from_secs(42))
        }
    }

    /// Answers per key from a script; records every call with its (paused) time.
    #[derive(Default)]
    struct Scripted {
        answers: Mutex<HashMap<&'static str, Vec<Result<Reconciled, &'static str>>>>,
        calls: Mutex<Vec<(String, tokio::time::Instant)>>,
    }

    impl Reconciler for Scripted {
        type Resource = Node;
        type Error = TestError;
        async fn reconcile(&self, key: &ObjectRef<Node>) -> Result<Reconciled, TestError> {
            self.calls.lock().expect("lock").push((key.name.clone(), tokio::time::Instant::now()));
            let mut answers = self.answers.lock().expect("lock");
            let script = answers.get_mut(key.name.as_str()).expect("scripted key");
            let next = if script.len() > 1 { script.remove(0) } else { script[0] };
            next.map_err(TestError)
        }
        fn regarding(&self, _: &ObjectRef<Node>) -> Option<ObjectReference> {
            None
        }
    }

    fn calls_of(r: &Scripted, key: &str) -> Vec<tokio::time::Instant> {
        r.calls.lock().expect("lock").iter().filter(|(k, _)| k == key).map(|(_, t)| *t).collect()
    }

    type Script = Vec<(&'static str, Vec<Result<Reconciled, &'static str>>)>;

    /// An hour-long backoff: a key that failed is not retried by its backoff during a test.
    const SLOW: ExponentialBackoff =
        ExponentialBackoff { base: Duration::from_secs(3600), max: Duration::from_secs(3600) };

    async fn start(
        script: Script,
        backoff: ExponentialBackoff,
    ) -> (Arc<Scripted>, WorkQueue<ObjectRef<Node>>, CancellationToken) {
        let r = Arc::new(Scripted { answers: Mutex::new(script.into_iter().collect()), ..Default::default() });
        let token = CancellationToken::new();
        let queue = WorkQueue::new("test", backoff, token.clone());
        tokio::spawn(Workers::new(r.clone(), queue.clone(), WorkerConfig::new("test", 2)).run());
        (r, queue, token)
    }

    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn errors_back_off_per_key_and_success_forgets() {
        let (r, q, token) = start(
            vec![("k", vec![Err("bad"), Err("bad"), Err("bad"), Ok(Reconciled::DONE)])],
            ExponentialBackoff::CONTROLLER_DEFAULT,
        )
        .await;
        q.add(key("k"));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let calls = calls_of(&r, "k");
        assert_eq!(calls.len(), 4, "three failures, then success");
        // client-go's per-key backoff: 5 ms, 10 ms, 20 ms between attempts.
        let gaps: Vec<Duration> = calls.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, vec![Duration::from_millis(5), Duration::from_millis(10), Duration::from_millis(20)]);
        assert_eq!(q.failures(&key("k")), 0, "success forgets the failures");
        token.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_waits_exactly_that_long_without_counting_a_failure() {
        let (r, q, token) = start(vec![("svc", vec![Err("pending"), Ok(Reconciled::DONE)])], SLOW).await;
        q.add(key("svc"));
        settle().await;
        assert_eq!(q.failures(&key("svc")), 0, "upstream RetryError: no rate-limited requeue");
        tokio::time::sleep(Duration::from_secs(41)).await;
        assert_eq!(calls_of(&r, "svc").len(), 1, "not before 42 s");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let calls = calls_of(&r, "svc");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1] - calls[0], Duration::from_secs(42));
        token.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_after_reconciles_again_later() {
        let requeue = Reconciled { remote_answered: false, requeue_after: Some(Duration::from_secs(10)) };
        let (r, q, token) = start(vec![("k", vec![Ok(requeue), Ok(Reconciled::DONE)])], SLOW).await;
        q.add(key("k"));
        tokio::time::sleep(Duration::from_secs(11)).await;
        let calls = calls_of(&r, "k");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1] - calls[0], Duration::from_secs(10));
        token.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_from_the_remote_side_retries_every_transient_failure_at_once() {
        let (r, q, token) = start(
            vec![
                ("a", vec![Err("outage"), Ok(Reconciled::DONE)]),
                ("b", vec![Err("outage"), Ok(Reconciled::DONE)]),
                ("c", vec![Ok(Reconciled::ANSWERED)]),
            ],
            SLOW,
        )
        .await;
        // a and b fail: their backoff is an hour.
        q.add(key("a"));
        q.add(key("b"));
        settle().await;
        assert_eq!((calls_of(&r, "a").len(), calls_of(&r, "b").len()), (1, 1));
        // c's reconcile reaches the remote side: a and b are retried now, not in an hour.
        q.add(key("c"));
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!((calls_of(&r, "a").len(), calls_of(&r, "b").len()), (2, 2));
        assert_eq!(q.failures(&key("a")), 0, "the retry succeeded");
        token.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn the_recovery_probe_retries_one_transient_failure_per_interval() {
        let (r, q, token) = start(vec![("a", vec![Err("outage")]), ("x", vec![Err("bad")])], SLOW).await;
        q.add(key("a"));
        q.add(key("x"));
        settle().await;
        let start = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_secs(61)).await;
        let calls = calls_of(&r, "a");
        assert_eq!(calls.len(), 3, "probed at 30 s and 60 s although its backoff is an hour");
        assert_eq!(calls[1] - start, Duration::from_secs(30));
        assert_eq!(calls_of(&r, "x").len(), 1, "a non-transient failure is not probed");
        token.cancel();
    }

    /// Panics the first time it reconciles `boom`; everything else succeeds.
    #[derive(Default)]
    struct PanicsOnce {
        calls: Mutex<Vec<(String, tokio::time::Instant)>>,
    }

    impl Reconciler for PanicsOnce {
        type Resource = Node;
        type Error = TestError;
        async fn reconcile(&self, key: &ObjectRef<Node>) -> Result<Reconciled, TestError> {
            let first = {
                let mut calls = self.calls.lock().expect("lock");
                calls.push((key.name.clone(), tokio::time::Instant::now()));
                calls.iter().filter(|(k, _)| *k == key.name).count() == 1
            };
            if key.name == "boom" && first {
                panic!("reconciling boom hit a bug");
            }
            Ok(Reconciled::DONE)
        }
        fn regarding(&self, _: &ObjectRef<Node>) -> Option<ObjectReference> {
            None
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_reconcile_is_counted_and_its_key_retried_with_backoff() {
        let metrics = RuntimeMetrics::default();
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let r = Arc::new(PanicsOnce::default());
        let token = CancellationToken::new();
        let q = WorkQueue::new("test", ExponentialBackoff::CONTROLLER_DEFAULT, token.clone());
        // One worker: if the panic took it down, nothing else would ever be reconciled.
        tokio::spawn(Workers::new(r.clone(), q.clone(), WorkerConfig::new("test", 1)).metrics(metrics).run());
        q.add(key("boom"));
        q.add(key("other"));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t0 = r.calls.lock().expect("lock").first().map(|(_, t)| *t);
        let calls: Vec<(String, Duration)> = r
            .calls
            .lock()
            .expect("lock")
            .iter()
            .map(|(k, t)| (k.clone(), t.duration_since(t0.unwrap_or(*t))))
            .collect();
        // The panic released the key: `other` is reconciled, then `boom` again after the first
        // backoff step (5 ms), and its success forgets the failure.
        assert_eq!(
            calls,
            vec![
                ("boom".to_owned(), Duration::ZERO),
                ("other".to_owned(), Duration::ZERO),
                ("boom".to_owned(), Duration::from_millis(5))
            ]
        );
        assert_eq!(q.failures(&key("boom")), 0);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        for needle in [
            "controller_reconcile_panics_total{controller=\"test\"} 1\n",
            "controller_reconcile_total{controller=\"test\",result=\"error\"} 1\n",
            "controller_reconcile_total{controller=\"test\",result=\"success\"} 2\n",
        ] {
            assert!(text.contains(needle), "{needle} missing in\n{text}");
        }
        token.cancel();
    }

    /// Fails every key, and panics when asked which object a failure is about.
    struct BrokenRegarding;

    impl Reconciler for BrokenRegarding {
        type Resource = Node;
        type Error = TestError;
        async fn reconcile(&self, _: &ObjectRef<Node>) -> Result<Reconciled, TestError> {
            Err(TestError("bad"))
        }
        fn regarding(&self, _: &ObjectRef<Node>) -> Option<ObjectReference> {
            panic!("regarding hit a bug");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_panic_outside_a_reconcile_ends_run_with_that_panic() {
        let token = CancellationToken::new();
        let q = WorkQueue::new("test", SLOW, token.clone());
        let run = tokio::spawn(Workers::new(Arc::new(BrokenRegarding), q.clone(), WorkerConfig::new("test", 2)).run());
        q.add(key("k"));
        let joined = tokio::time::timeout(Duration::from_secs(1), run).await.expect("run ends with the panic");
        let panic = joined.err().filter(|e| e.is_panic()).map(|e| e.into_panic());
        assert_eq!(panic.as_deref().map(panic_message), Some("regarding hit a bug"));
        assert!(!token.is_cancelled(), "ended by the panic, not by shutdown");
    }

    #[test]
    fn keys_show_as_namespace_slash_name() {
        use k8s_openapi::api::core::v1::Service;
        let mut svc = Service::default();
        svc.metadata.name = Some("web".into());
        assert_eq!(KeyName(&key_of(&svc)).to_string(), "web");
        svc.metadata.namespace = Some(String::new());
        assert_eq!(key_of(&svc), ObjectRef::new("web"), "an empty namespace is none");
        svc.metadata.namespace = Some("shop".into());
        svc.metadata.uid = Some("u-1".into());
        assert_eq!(key_of(&svc), ObjectRef::new("web").within("shop"));
        assert_eq!(KeyName(&key_of(&svc)).to_string(), "shop/web");
        assert_eq!(key_of(&Node::default()).name, "", "no panic without a name");
    }

    #[test]
    fn panic_messages_of_literals_and_format_strings() {
        let literal = std::panic::catch_unwind(|| panic!("plain")).err();
        assert_eq!(literal.as_deref().map(panic_message), Some("plain"));
        let formatted = std::panic::catch_unwind(|| panic!("key {}", 7)).err();
        assert_eq!(formatted.as_deref().map(panic_message), Some("key 7"));
        let other = std::panic::catch_unwind(|| std::panic::panic_any(42_u8)).err();
        assert_eq!(other.as_deref().map(panic_message), Some("a panic without a message"));
    }
}
