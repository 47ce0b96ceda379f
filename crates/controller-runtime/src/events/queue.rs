//! A bounded queue in front of an [`EventRecorder`], for callers that must not wait for the API
//! server, with client-go's limits: its broadcaster holds at most 1,000 events and drops what
//! comes beyond (`watch.NewLongQueueBroadcaster(1000, DropIfChannelFull)`), and one goroutine
//! writes them one at a time through the event correlator, which turns a repeat into a count
//! update.
//!
//! Here a repeat of an event that is still waiting is folded into it at once (its occurrences
//! go up, it takes no second place in the queue), so a provider raising the same warning in a
//! loop fills one place; the recorder then publishes it with its count, or adds the count to
//! the same event published within the aggregation window.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use sync_lock::Unpoison as _;

use k8s_openapi::api::core::v1::ObjectReference;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::{EventRecorder, EventType, Key, MAX_NOTE, describe, truncate};
use crate::metrics::RuntimeMetrics;

/// client-go's queue length (`maxQueuedEvents` of `tools/record`).
pub const DEFAULT_QUEUE_CAPACITY: usize = 1000;

/// What became of an event handed to an [`EventQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Queued {
    /// It waits for its turn.
    New,
    /// The same event was still waiting; its count went up.
    Repeat,
    /// The queue was full; the event is dropped (and counted).
    Dropped,
}

/// An event waiting to be published.
struct Waiting {
    regarding: ObjectReference,
    occurrences: i32,
}

#[derive(Default)]
struct Pending {
    /// Keys in arrival order; each is in `events` too.
    order: VecDeque<Key>,
    events: HashMap<Key, Waiting>,
}

struct Inner {
    recorder: EventRecorder,
    capacity: usize,
    pending: Mutex<Pending>,
    ready: Notify,
    dropped: Counter,
}

/// A bounded, non-blocking front of an [`EventRecorder`]: [`EventQueue::normal`] and
/// [`EventQueue::warning`] return at once; [`EventQueue::run`] publishes what waits, one event
/// at a time (each waiting for the client's rate limit). At most `capacity` distinct events
/// wait; beyond that events are dropped, counted in `events_dropped_total{component}` and
/// logged (the first drop and then every doubling). Cheap to clone; clones share the queue.
#[derive(Clone)]
pub struct EventQueue {
    inner: Arc<Inner>,
}

impl EventQueue {
    /// A queue of at most `capacity` waiting events (at least one) publishing through
    /// `recorder`, counting drops in `metrics`.
    pub fn new(recorder: EventRecorder, capacity: usize, metrics: &RuntimeMetrics) -> Self {
        let dropped = metrics.events_dropped(&recorder.component);
        EventQueue {
            inner: Arc::new(Inner {
                recorder,
                capacity: capacity.max(1),
                pending: Mutex::default(),
                ready: Notify::new(),
                dropped,
            }),
        }
    }

    /// Queues a Normal event.
    pub fn normal(&self, regarding: ObjectReference, reason: &str, note: String) -> Queued {
        self.push(regarding, EventType::Normal, reason, note)
    }

    /// Queues a Warning event.
    pub fn warning(&self, regarding: ObjectReference, reason: &str, note: String) -> Queued {
        self.push(regarding, EventType::Warning, reason, note)
    }

    /// Distinct events waiting to be published.
    pub fn pending(&self) -> usize {
        self.lock().order.len()
    }

    /// Events dropped because the queue was full, since the queue was made.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.get()
    }

    /// Publishes waiting events, oldest first, one at a time, until `shutdown` (what still
    /// waits then is not published).
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            let next = {
                let mut pending = self.lock();
                let key = pending.order.pop_front();
                key.and_then(|key| pending.events.remove(&key).map(|waiting| (key, waiting)))
            };
            let Some((key, waiting)) = next else {
                tokio::select! {
                    () = self.inner.ready.notified() => continue,
                    () = shutdown.cancelled() => return,
                }
            };
            let Key { type_, reason, note, .. } = key;
            let record = self.inner.recorder.record(&waiting.regarding, type_, &reason, note, waiting.occurrences);
            tokio::select! {
                () = record => {}
                () = shutdown.cancelled() => return,
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        // Every change is a single push, pop or count update; a poisoned queue is consistent.
        self.inner.pending.lock_unpoisoned()
    }

    fn push(&self, regarding: ObjectReference, type_: EventType, reason: &str, note: String) -> Queued {
        let note = truncate(note, MAX_NOTE);
        let key = Key::new(&regarding, type_, reason, &note);
        let queued = {
            let mut pending = self.lock();
            if let Some(waiting) = pending.events.get_mut(&key) {
                waiting.occurrences = waiting.occurrences.saturating_add(1);
                Queued::Repeat
            } else if pending.order.len() >= self.inner.capacity {
                Queued::Dropped
            } else {
                pending.order.push_back(key.clone());
                pending.events.insert(key, Waiting { regarding: regarding.clone(), occurrences: 1 });
                Queued::New
            }
        };
        match queued {
            // One waiter (`run`); a notification without a waiter is kept for its next wait.
            Queued::New => self.inner.ready.notify_one(),
            Queued::Repeat => {}
            Queued::Dropped => {
                let dropped = self.inner.dropped.inc() + 1;
                if dropped.is_power_of_two() {
                    warn!(
                        component = %self.inner.recorder.component,
                        object = %describe(&regarding),
                        reason,
                        dropped,
                        "{} events are waiting to be published (the most that may); dropping events: {note}",
                        self.inner.capacity
                    );
                }
            }
        }
        queued
    }

    /// The waiting events as (reason, note, occurrences), oldest first.
    #[cfg(test)]
    fn waiting(&self) -> Vec<(String, String, i32)> {
        let pending = self.lock();
        pending
            .order
            .iter()
            .filter_map(|key| pending.events.get(key).map(|w| (key.reason.clone(), key.note.clone(), w.occurrences)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    /// A recorder whose client is never used: these tests do not start `run`.
    fn recorder() -> EventRecorder {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        let client = kube::Client::try_from(config).expect("a client for a fixed URL");
        EventRecorder::new(client, "test-provider")
    }

    fn service(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Service".to_owned()),
            namespace: Some("shop".to_owned()),
            name: Some(name.to_owned()),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn at_most_capacity_events_wait_and_the_rest_are_dropped_and_counted() {
        let metrics = RuntimeMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let queue = EventQueue::new(recorder(), DEFAULT_QUEUE_CAPACITY, &metrics);
        let mut outcomes = HashMap::new();
        for i in 0..5000 {
            let queued = queue.warning(service(&format!("web-{i}")), "Broken", format!("attempt {i}"));
            *outcomes.entry(queued).or_insert(0) += 1;
        }
        assert_eq!(queue.pending(), 1000);
        assert_eq!(queue.dropped(), 4000);
        assert_eq!(outcomes, HashMap::from([(Queued::New, 1000), (Queued::Dropped, 4000)]));
        // The oldest wait; the newest were dropped.
        let waiting = queue.waiting();
        assert_eq!(waiting.first().map(|w| w.1.as_str()), Some("attempt 0"));
        assert_eq!(waiting.last().map(|w| w.1.as_str()), Some("attempt 999"));
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        assert!(text.contains("events_dropped_total{component=\"test-provider\"} 4000\n"), "{text}");
    }

    #[tokio::test]
    async fn repeats_of_a_waiting_event_raise_its_count_and_take_no_place() {
        let queue = EventQueue::new(recorder(), 2, &RuntimeMetrics::default());
        assert_eq!(queue.warning(service("web"), "Broken", "the same problem".to_owned()), Queued::New);
        for _ in 1..5000 {
            assert_eq!(queue.warning(service("web"), "Broken", "the same problem".to_owned()), Queued::Repeat);
        }
        // Another object, reason, type or message is another event.
        assert_eq!(queue.warning(service("api"), "Broken", "the same problem".to_owned()), Queued::New);
        assert_eq!(queue.normal(service("web"), "Broken", "the same problem".to_owned()), Queued::Dropped);
        assert_eq!(queue.warning(service("web"), "Broken", "the same problem".to_owned()), Queued::Repeat);
        assert_eq!(
            queue.waiting(),
            vec![
                ("Broken".to_owned(), "the same problem".to_owned(), 5001),
                ("Broken".to_owned(), "the same problem".to_owned(), 1),
            ]
        );
        assert_eq!(queue.dropped(), 1);
    }

    #[tokio::test]
    async fn notes_are_truncated_before_they_are_compared() {
        let queue = EventQueue::new(recorder(), 10, &RuntimeMetrics::default());
        let long = "x".repeat(2000);
        assert_eq!(queue.warning(service("web"), "Broken", format!("{long}a")), Queued::New);
        assert_eq!(queue.warning(service("web"), "Broken", format!("{long}b")), Queued::Repeat);
        assert_eq!(queue.waiting().first().map(|w| w.1.len()), Some(MAX_NOTE));
    }
}
