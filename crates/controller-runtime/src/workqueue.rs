//! A rate-limited work queue with client-go's semantics.
//!
//! - A key added while it waits in the queue is not added twice (`dirty` set).
//! - A key is never handed to two workers at once: a key added while it is being processed is
//!   re-queued when the worker calls [`WorkQueue::done`].
//! - [`WorkQueue::add_rate_limited`] re-adds a key after a per-key exponential delay
//!   (client-go's `ItemExponentialFailureRateLimiter`: `base * 2^failures`, capped);
//!   [`WorkQueue::forget`] resets the key's failure count.
//! - [`WorkQueue::add_after`] re-adds a key after a fixed delay.
//! - With [`WorkQueue::with_metrics`], depth, adds, retries and the time keys wait and are
//!   worked on are exported under client-go's `workqueue_*` names.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::{QueueMetrics, RuntimeMetrics};

/// Per-key exponential backoff, like client-go's `ItemExponentialFailureRateLimiter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExponentialBackoff {
    /// Delay after the first failure.
    pub base: Duration,
    /// Cap of the delay, however many failures.
    pub max: Duration,
}

impl ExponentialBackoff {
    /// client-go's default for controllers: 5 ms doubling up to 1000 s.
    pub const CONTROLLER_DEFAULT: ExponentialBackoff =
        ExponentialBackoff { base: Duration::from_millis(5), max: Duration::from_secs(1000) };

    /// The delay after `failures` previous failures (0-based).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 1u64.checked_shl(failures.min(62)).unwrap_or(u64::MAX);
        let nanos = (self.base.as_nanos() as u64).saturating_mul(factor);
        Duration::from_nanos(nanos).min(self.max)
    }
}

struct State<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    /// Keys being processed, with when their worker got them.
    processing: HashMap<K, Instant>,
    failures: HashMap<K, u32>,
    /// When each waiting key was added.
    added: HashMap<K, Instant>,
}

/// A deduplicating, rate-limited work queue. Cheap to clone; clones share the queue.
pub struct WorkQueue<K> {
    name: Arc<str>,
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
    backoff: ExponentialBackoff,
    shutdown: CancellationToken,
    metrics: QueueMetrics,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue {
            name: self.name.clone(),
            state: self.state.clone(),
            notify: self.notify.clone(),
            backoff: self.backoff,
            shutdown: self.shutdown.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// A queue named `name` (the metrics label) whose rate-limited adds back off with
    /// `backoff`, closed when `shutdown` fires.
    pub fn new(name: &str, backoff: ExponentialBackoff, shutdown: CancellationToken) -> Self {
        WorkQueue {
            name: name.into(),
            state: Arc::new(Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashMap::new(),
                failures: HashMap::new(),
                added: HashMap::new(),
            })),
            notify: Arc::new(Notify::new()),
            backoff,
            shutdown,
            metrics: QueueMetrics::default(),
        }
    }

    /// Exports this queue's metrics through `metrics`.
    pub fn with_metrics(mut self, metrics: &RuntimeMetrics) -> Self {
        self.metrics = metrics.queue(&self.name);
        self
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The token that closes the queue.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // A panic while holding this lock leaves the sets consistent (every mutation is a
        // single insert/remove), so a poisoned lock is safe to keep using.
        self.state.lock_unpoisoned()
    }

    /// Adds a key now.
    pub fn add(&self, key: K) {
        {
            let mut s = self.lock();
            if !s.dirty.insert(key.clone()) {
                return;
            }
            self.metrics.adds.inc();
            s.added.insert(key.clone(), Instant::now());
            if s.processing.contains_key(&key) {
                return;
            }
            s.queue.push_back(key);
            self.metrics.depth.set(s.queue.len() as i64);
        }
        self.notify.notify_one();
    }

    /// Adds a key after `delay`.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let q = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(delay) => q.add(key),
                _ = q.shutdown.cancelled() => {}
            }
        });
    }

    /// Adds a key after its next backoff delay and counts a failure. Returns the delay.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        let delay = {
            let mut s = self.lock();
            let failures = s.failures.entry(key.clone()).or_insert(0);
            let d = self.backoff.delay(*failures);
            *failures = failures.saturating_add(1);
            d
        };
        self.metrics.retries.inc();
        self.add_after(key, delay);
        delay
    }

    /// How many times the key failed since it was last forgotten.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Resets the key's failure count.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// Waits for the next key; `None` once shut down. The caller must call [`Self::done`].
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            {
                let mut s = self.lock();
                if let Some(key) = s.queue.pop_front() {
                    let now = Instant::now();
                    s.dirty.remove(&key);
                    if let Some(added) = s.added.remove(&key) {
                        self.metrics.queue_duration.observe(now.saturating_duration_since(added));
                    }
                    s.processing.insert(key.clone(), now);
                    self.metrics.depth.set(s.queue.len() as i64);
                    if !s.queue.is_empty() {
                        // Wake another worker for the rest.
                        self.notify.notify_one();
                    }
                    return Some(key);
                }
            }
            tokio::select! {
                _ = notified => {}
                _ = self.shutdown.cancelled() => return None,
            }
        }
    }

    /// Marks the key processed; re-queues it if it was added meanwhile.
    pub fn done(&self, key: &K) {
        let requeue = {
            let mut s = self.lock();
            if let Some(started) = s.processing.remove(key) {
                self.metrics.work_duration.observe(started.elapsed());
            }
            if s.dirty.contains(key) {
                s.queue.push_back(key.clone());
                self.metrics.depth.set(s.queue.len() as i64);
                true
            } else {
                false
            }
        };
        if requeue {
            self.notify.notify_one();
        }
    }

    /// Keys waiting (not counting those being processed).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// True if no key is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_matches_client_go_defaults() {
        let b = ExponentialBackoff::CONTROLLER_DEFAULT;
        assert_eq!(b.delay(0), Duration::from_millis(5));
        assert_eq!(b.delay(1), Duration::from_millis(10));
        assert_eq!(b.delay(10), Duration::from_millis(5 * 1024));
        assert_eq!(b.delay(30), Duration::from_secs(1000));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1000));
    }

    #[tokio::test]
    async fn dedups_and_never_hands_out_a_key_twice() {
        let q = WorkQueue::new("test", ExponentialBackoff::CONTROLLER_DEFAULT, CancellationToken::new());
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        let first = q.get().await.expect("key");
        assert_eq!(first, "a");
        // Added while processing: not queued until done.
        q.add("a");
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
        q.done(&"a");
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        q.done(&"b");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_adds_back_off_and_forget_resets() {
        let q = WorkQueue::new("test", ExponentialBackoff::CONTROLLER_DEFAULT, CancellationToken::new());
        assert_eq!(q.add_rate_limited("k"), Duration::from_millis(5));
        assert_eq!(q.add_rate_limited("k"), Duration::from_millis(10));
        assert_eq!(q.failures(&"k"), 2);
        assert!(q.is_empty(), "not added before the delay");
        let got = tokio::time::timeout(Duration::from_secs(1), q.get()).await.expect("added after delay");
        assert_eq!(got, Some("k"));
        q.done(&"k");
        q.forget(&"k");
        assert_eq!(q.failures(&"k"), 0);
        assert_eq!(q.add_rate_limited("k"), Duration::from_millis(5));
    }

    #[tokio::test]
    async fn shutdown_releases_waiting_workers() {
        let token = CancellationToken::new();
        let q: WorkQueue<&str> = WorkQueue::new("test", ExponentialBackoff::CONTROLLER_DEFAULT, token.clone());
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        token.cancel();
        assert_eq!(waiter.await.expect("joins"), None);
    }
}
