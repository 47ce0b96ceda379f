//! Cluster passes: work that covers the whole cluster at once (every route, every load
//! balancer's backends) instead of one object, run by one task, one pass at a time.
//!
//! - Informer handlers call [`PassTrigger::trigger`] ("something changed, run a pass soon").
//!   Triggers that arrive before a pass starts are all covered by it (the pass reads the cache
//!   with their changes in it); a trigger that arrives during a pass brings exactly one more
//!   pass after it.
//! - A pass asked for by a trigger starts at least [`PassConfig::min_interval`] after the
//!   previous pass started (upstream route controller's `minRouteResyncInterval`).
//! - [`PassTimer::Resync`]: a pass whenever none started for that long, a safety net for
//!   changes no trigger reports. [`PassTimer::Every`]: a pass every period (not sliding, like
//!   upstream's `NonSlidingUntil`; a late tick delays the next one). [`PassTimer::Sliding`]: a
//!   pass a period after the previous one ended (upstream's `wait.Until`), the first at once.
//! - A failed pass is retried with [`PassConfig::backoff`] (the failure count resets on
//!   success); a failure the error marks as transient is retried at least every
//!   [`PassConfig::recovery_probe`], an error's [`ReconcileError::retry_after`] exactly then,
//!   and a success's [`Reconciled::requeue_after`] brings a pass after that delay. A pass that
//!   panics counts as a failure. There is no object to attach a Warning event to: failures are
//!   logged, and a pass reports what failed for which object itself.
//! - With [`Passes::metrics`], passes are counted like reconciles
//!   (`controller_reconcile_total`, `controller_reconcile_panics_total`) and the triggers like a
//!   work queue of one key (`workqueue_*{name}`).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt as _;
use sync_lock::Unpoison as _;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, warn};

use crate::metrics::{QueueMetrics, RuntimeMetrics};
use crate::worker::{ReconcileError, Reconciled, panic_message};
use crate::workqueue::ExponentialBackoff;

/// Passes that come without a trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassTimer {
    /// Only triggers and retries bring passes.
    None,
    /// A pass whenever none started for this long.
    Resync(Duration),
    /// A pass every period, counted from the start of [`Passes::run`].
    Every(Duration),
    /// A pass this long after the previous pass ended, the first at once (upstream's sliding
    /// `wait.Until`: slow passes never pile up).
    Sliding(Duration),
}

/// How a [`Passes`] runner paces and retries its passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassConfig {
    /// The controller's name (logs, metrics).
    pub name: String,
    /// Shortest time from the start of one pass to the start of a pass a trigger asks for.
    pub min_interval: Duration,
    /// Passes that come without a trigger.
    pub timer: PassTimer,
    /// Delay before retrying a failed pass, growing with consecutive failures.
    pub backoff: ExponentialBackoff,
    /// Longest delay before retrying a pass that failed transiently.
    pub recovery_probe: Duration,
}

impl PassConfig {
    /// Passes for controller `name`: right after a trigger, no timer, failures retried with
    /// client-go's controller backoff, transient ones at least every 30 s.
    pub fn new(name: &str) -> Self {
        PassConfig {
            name: name.to_owned(),
            min_interval: Duration::ZERO,
            timer: PassTimer::None,
            backoff: ExponentialBackoff::CONTROLLER_DEFAULT,
            recovery_probe: Duration::from_secs(30),
        }
    }
}

/// What triggers and the runner share.
#[derive(Default)]
struct Shared {
    /// When the first trigger not yet covered by a pass arrived.
    pending: Mutex<Option<Instant>>,
    wake: Notify,
    metrics: Mutex<QueueMetrics>,
}

impl Shared {
    fn metrics(&self) -> QueueMetrics {
        self.metrics.lock_unpoisoned().clone()
    }

    /// Takes the pending trigger, if any: the pass starting now covers it.
    fn take_pending(&self) -> Option<Instant> {
        let taken = self.pending.lock_unpoisoned().take();
        self.metrics().depth.set(0);
        taken
    }
}

/// Asks the runner for a pass. Cheap to clone; clones trigger the same runner.
#[derive(Clone)]
pub struct PassTrigger(Arc<Shared>);

impl PassTrigger {
    /// Something changed: run a pass soon (paced by [`PassConfig::min_interval`]).
    pub fn trigger(&self) {
        {
            let mut pending = self.0.pending.lock_unpoisoned();
            if pending.is_some() {
                return;
            }
            *pending = Some(Instant::now());
            let metrics = self.0.metrics();
            metrics.adds.inc();
            metrics.depth.set(1);
        }
        self.0.wake.notify_one();
    }
}

/// A paced, single-flight runner of cluster passes.
pub struct Passes {
    config: PassConfig,
    shared: Arc<Shared>,
    metrics: Option<RuntimeMetrics>,
    shutdown: CancellationToken,
}

/// The runner's own state between passes.
struct Schedule {
    /// When [`Passes::run`] started.
    started: Instant,
    last_start: Option<Instant>,
    /// When a failed (or requeued) pass is retried.
    retry_at: Option<Instant>,
    /// Consecutive failures.
    failures: u32,
    /// The next tick of [`PassTimer::Every`].
    next_tick: Option<Instant>,
    /// When the last pass ended ([`PassTimer::Sliding`]).
    last_end: Option<Instant>,
}

impl Passes {
    /// A runner configured by `config` that stops when `shutdown` fires.
    pub fn new(config: PassConfig, shutdown: CancellationToken) -> Self {
        Passes { config, shared: Arc::default(), metrics: None, shutdown }
    }

    /// Counts passes and triggers in `metrics`.
    pub fn metrics(mut self, metrics: RuntimeMetrics) -> Self {
        *self.shared.metrics.lock_unpoisoned() = metrics.queue(&self.config.name);
        self.metrics = Some(metrics);
        self
    }

    /// The handle informer handlers trigger passes with.
    pub fn trigger(&self) -> PassTrigger {
        PassTrigger(self.shared.clone())
    }

    /// Runs `pass` whenever one is due, one at a time, until shutdown. A pass in progress when
    /// shutdown fires is dropped at its next await point. A trigger that came before `run`
    /// brings a pass at once.
    pub async fn run<F, Fut, E>(self, mut pass: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Reconciled, E>>,
        E: ReconcileError,
    {
        let started = Instant::now();
        let next_tick = match self.config.timer {
            PassTimer::Every(period) => Some(started + period),
            PassTimer::None | PassTimer::Resync(_) | PassTimer::Sliding(_) => None,
        };
        let mut schedule =
            Schedule { started, last_start: None, retry_at: None, failures: 0, next_tick, last_end: None };
        loop {
            let woken = self.shared.wake.notified();
            let due = self.due(&schedule);
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                // A trigger: look again when the pass it asks for is due.
                _ = woken => continue,
                _ = sleep_until(due) => {}
            }
            let result = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                result = self.pass(&mut schedule, &mut pass) => result,
            };
            self.outcome(&mut schedule, result);
        }
    }

    /// When the next pass is due, if any is.
    fn due(&self, s: &Schedule) -> Option<Instant> {
        let triggered = self.shared.pending.lock_unpoisoned().map(|_| match s.last_start {
            Some(last) => last + self.config.min_interval,
            None => Instant::now(),
        });
        let resync = match self.config.timer {
            PassTimer::Resync(resync) => Some(s.last_start.unwrap_or(s.started) + resync),
            PassTimer::Sliding(period) => Some(s.last_end.map_or(s.started, |end| end + period)),
            PassTimer::None | PassTimer::Every(_) => None,
        };
        [triggered, s.retry_at, resync, s.next_tick].into_iter().flatten().min()
    }

    /// Runs one pass, which covers every reason it was due for.
    async fn pass<F, Fut, E>(&self, s: &mut Schedule, pass: &mut F) -> std::thread::Result<Result<Reconciled, E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Reconciled, E>>,
    {
        let now = Instant::now();
        let metrics = self.shared.metrics();
        if let Some(triggered) = self.shared.take_pending() {
            metrics.queue_duration.observe(now.saturating_duration_since(triggered));
        }
        if let (PassTimer::Every(period), Some(tick)) = (self.config.timer, s.next_tick)
            && tick <= now
        {
            s.next_tick = Some(now.max(tick) + period);
        }
        s.last_start = Some(now);
        s.retry_at = None;
        debug!(controller = %self.config.name, "pass started");
        // Unwind safety as in the reconcile loop: a pass's writes are planned and idempotent,
        // and the state it shares sits behind locks that stay consistent when poisoned.
        let result = AssertUnwindSafe(pass()).catch_unwind().await;
        metrics.work_duration.observe(now.elapsed());
        result
    }

    /// Records how a pass ended and when the next one is due because of it.
    fn outcome<E: ReconcileError>(&self, s: &mut Schedule, result: std::thread::Result<Result<Reconciled, E>>) {
        let name = &self.config.name;
        let now = Instant::now();
        s.last_end = Some(now);
        match result {
            Ok(Ok(outcome)) => {
                self.count("success");
                s.failures = 0;
                s.retry_at = outcome.requeue_after.map(|delay| now + delay);
            }
            Ok(Err(e)) => {
                warn!(controller = %name, error = %e, failures = s.failures + 1, "pass failed");
                if let Some(delay) = e.retry_after() {
                    self.count("requeue_after");
                    s.retry_at = Some(now + delay);
                    debug!(controller = %name, ?delay, "retrying after the requested delay");
                } else {
                    self.count("error");
                    let delay = self.back_off(s, e.is_transient());
                    debug!(controller = %name, ?delay, "retrying the pass with backoff");
                }
            }
            Err(panic) => {
                if let Some(m) = &self.metrics {
                    m.reconcile_panicked(name);
                }
                self.count("error");
                let delay = self.back_off(s, false);
                error!(
                    controller = %name,
                    panic = panic_message(&*panic),
                    ?delay,
                    "pass panicked (a bug); retrying with backoff"
                );
            }
        }
    }

    /// Schedules the retry of a failed pass; returns its delay.
    fn back_off(&self, s: &mut Schedule, transient: bool) -> Duration {
        let mut delay = self.config.backoff.delay(s.failures);
        if transient {
            delay = delay.min(self.config.recovery_probe);
        }
        s.failures = s.failures.saturating_add(1);
        self.shared.metrics().retries.inc();
        s.retry_at = Some(Instant::now() + delay);
        delay
    }

    fn count(&self, result: &'static str) {
        if let Some(m) = &self.metrics {
            m.reconciled(&self.config.name, result);
        }
    }
}

/// Sleeps until `due`, or forever without one.
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;
