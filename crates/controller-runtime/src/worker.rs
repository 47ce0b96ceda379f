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
//!   each waiting out a backoff that grew to minutes.

use std::collections::BTreeSet;
use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

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

/// A controller's reconcile logic for one key.
pub trait Reconciler: Send + Sync + 'static {
    /// What the queue holds (e.g. a node name, a `namespace/name`).
    type Key: Clone + Eq + Hash + Ord + Debug + Display + Send + Sync + 'static;
    /// Why a reconcile failed.
    type Error: ReconcileError;

    /// Brings the object behind `key` to its desired state.
    fn reconcile(&self, key: &Self::Key) -> impl Future<Output = Result<Reconciled, Self::Error>> + Send;

    /// The object a Warning event about a failure of `key` is attached to, if it still exists.
    fn regarding(&self, key: &Self::Key) -> Option<ObjectReference>;
}

/// How [`run_workers`] runs a reconciler.
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
    queue: WorkQueue<R::Key>,
    events: Option<EventRecorder>,
    metrics: Option<RuntimeMetrics>,
    name: String,
    /// Keys whose last reconcile failed transiently.
    transient: Mutex<BTreeSet<R::Key>>,
}

/// A reconciler with its queue, ready to run.
pub struct Workers<R: Reconciler> {
    reconciler: Arc<R>,
    queue: WorkQueue<R::Key>,
    config: WorkerConfig,
    events: Option<EventRecorder>,
    metrics: Option<RuntimeMetrics>,
}

impl<R: Reconciler> Workers<R> {
    /// Workers for `reconciler` over `queue`. Without [`Workers::events`], failures are only
    /// logged.
    pub fn new(reconciler: Arc<R>, queue: WorkQueue<R::Key>, config: WorkerConfig) -> Self {
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
        shutdown.cancelled().await;
        tasks.shutdown().await;
    }
}

impl<R: Reconciler> Loop<R> {
    fn transient(&self) -> std::sync::MutexGuard<'_, BTreeSet<R::Key>> {
        // Inserts and removes only; a poisoned set is still a valid set.
        self.transient.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count(&self, result: &'static str) {
        if let Some(m) = &self.metrics {
            m.reconciled(&self.name, result);
        }
    }

    async fn worker(&self) {
        while let Some(key) = self.queue.get().await {
            debug!(%key, "reconciling");
            let result = self.reconciler.reconcile(&key).await;
            self.handle(&key, result).await;
            self.queue.done(&key);
        }
    }

    async fn handle(&self, key: &R::Key, result: Result<Reconciled, R::Error>) {
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
                    _ => warn!(%key, error = %e, failures = failures + 1, "reconcile failed"),
                }
                if let Some(delay) = e.retry_after() {
                    self.count("requeue_after");
                    self.queue.add_after(key.clone(), delay);
                    debug!(%key, ?delay, "retrying after the requested delay");
                } else {
                    self.count("error");
                    let delay = self.queue.add_rate_limited(key.clone());
                    debug!(%key, ?delay, "requeued with backoff");
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
                debug!(%key, "probing whether the remote side recovered");
                self.queue.add(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workqueue::ExponentialBackoff;
    use std::collections::HashMap;

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
        calls: Mutex<Vec<(&'static str, tokio::time::Instant)>>,
    }

    impl Reconciler for Scripted {
        type Key = &'static str;
        type Error = TestError;
        async fn reconcile(&self, key: &&'static str) -> Result<Reconciled, TestError> {
            self.calls.lock().expect("lock").push((key, tokio::time::Instant::now()));
            let mut answers = self.answers.lock().expect("lock");
            let script = answers.get_mut(key).expect("scripted key");
            let next = if script.len() > 1 { script.remove(0) } else { script[0] };
            next.map_err(TestError)
        }
        fn regarding(&self, _: &&'static str) -> Option<ObjectReference> {
            None
        }
    }

    fn calls_of(r: &Scripted, key: &str) -> Vec<tokio::time::Instant> {
        r.calls.lock().expect("lock").iter().filter(|(k, _)| *k == key).map(|(_, t)| *t).collect()
    }

    type Script = Vec<(&'static str, Vec<Result<Reconciled, &'static str>>)>;

    /// An hour-long backoff: a key that failed is not retried by its backoff during a test.
    const SLOW: ExponentialBackoff =
        ExponentialBackoff { base: Duration::from_secs(3600), max: Duration::from_secs(3600) };

    async fn start(
        script: Script,
        backoff: ExponentialBackoff,
    ) -> (Arc<Scripted>, WorkQueue<&'static str>, CancellationToken) {
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
        q.add("k");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let calls = calls_of(&r, "k");
        assert_eq!(calls.len(), 4, "three failures, then success");
        // client-go's per-key backoff: 5 ms, 10 ms, 20 ms between attempts.
        let gaps: Vec<Duration> = calls.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, vec![Duration::from_millis(5), Duration::from_millis(10), Duration::from_millis(20)]);
        assert_eq!(q.failures(&"k"), 0, "success forgets the failures");
        token.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_waits_exactly_that_long_without_counting_a_failure() {
        let (r, q, token) = start(vec![("svc", vec![Err("pending"), Ok(Reconciled::DONE)])], SLOW).await;
        q.add("svc");
        settle().await;
        assert_eq!(q.failures(&"svc"), 0, "upstream RetryError: no rate-limited requeue");
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
        q.add("k");
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
        q.add("a");
        q.add("b");
        settle().await;
        assert_eq!((calls_of(&r, "a").len(), calls_of(&r, "b").len()), (1, 1));
        // c's reconcile reaches the remote side: a and b are retried now, not in an hour.
        q.add("c");
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!((calls_of(&r, "a").len(), calls_of(&r, "b").len()), (2, 2));
        assert_eq!(q.failures(&"a"), 0, "the retry succeeded");
        token.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn the_recovery_probe_retries_one_transient_failure_per_interval() {
        let (r, q, token) = start(vec![("a", vec![Err("outage")]), ("x", vec![Err("bad")])], SLOW).await;
        q.add("a");
        q.add("x");
        settle().await;
        let start = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_secs(61)).await;
        let calls = calls_of(&r, "a");
        assert_eq!(calls.len(), 3, "probed at 30 s and 60 s although its backoff is an hour");
        assert_eq!(calls[1] - start, Duration::from_secs(30));
        assert_eq!(calls_of(&r, "x").len(), 1, "a non-transient failure is not probed");
        token.cancel();
    }
}
