//! What a listener allows one client: a timeout on every phase of a connection, and a cap on
//! the connections served at once, so that idle or slow clients cannot hold tasks and file
//! descriptors until `/healthz` and `/metrics` stop answering.
//!
//! ```text
//!  accept ─► admission: a free slot, or wait up to `admission_wait` (at most `max_connections`
//!            │          connections wait; beyond that, closed at once)
//!            ▼
//!          TLS handshake (`tls_handshake`) ─► HTTP/1 or h2, as ALPN chose (no sniffing)
//!            ▼
//!          no request in flight: the first request's headers within `read`, later ones
//!          within `idle` (HTTP/1 also bounds each request's headers by `read`) ─► closed
//!          a request in flight: `handler` to answer, `write` without progress ─► 503 / closed
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

/// Timeouts of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Time to receive a request's headers, counted from when the connection is ready for the
    /// next request; also the time a new connection (after its TLS handshake) may take to send
    /// its first request. For HTTP/1 it also closes idle keep-alive connections.
    pub read: Duration,
    /// Time an HTTP/2 connection may stay without a request in flight after its last one
    /// (Go's `IdleTimeout`; HTTP/1 connections are closed after `read` already).
    pub idle: Duration,
    /// Time to produce a response (authentication included); then `503`.
    pub handler: Duration,
    /// Time a response write may make no progress (the client stopped reading).
    pub write: Duration,
    /// Time to complete the TLS handshake (secure listener only).
    pub tls_handshake: Duration,
}

impl Timeouts {
    /// The plain listener's timeouts: those of the metrics listener of the official Go CCM
    /// (read 5 s, handler 10 s, write 20 s; its idle timeout is its read timeout).
    pub const PLAIN: Timeouts = Timeouts {
        read: Duration::from_secs(5),
        idle: Duration::from_secs(5),
        handler: Duration::from_secs(10),
        write: Duration::from_secs(20),
        tls_handshake: Duration::from_secs(10),
    };
    /// The secure listener's timeouts (upstream's generic request timeout is 60 s and its
    /// secure serving closes idle connections after 90 s).
    pub const SECURE: Timeouts = Timeouts {
        read: Duration::from_secs(10),
        idle: Duration::from_secs(90),
        handler: Duration::from_secs(60),
        write: Duration::from_secs(60),
        tls_handshake: Duration::from_secs(10),
    };
}

/// What one listener allows its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The timeouts of every phase.
    pub timeouts: Timeouts,
    /// Connections served at once (at least 1). As many more may wait for a slot.
    pub max_connections: usize,
    /// How long a connection beyond `max_connections` waits for a slot before it is closed.
    pub admission_wait: Duration,
}

impl Limits {
    /// Connections served at once by default: a health and metrics port has a few clients
    /// (probes, one scraper per Prometheus replica), so 64 is ample and bounds the memory and
    /// file descriptors a flood of connections can take.
    pub const MAX_CONNECTIONS: usize = 64;
    /// How long a connection beyond the cap waits by default: the default timeout of a
    /// kubelet probe, the main client of this port.
    pub const ADMISSION_WAIT: Duration = Duration::from_secs(1);
    /// The plain listener's limits.
    pub const PLAIN: Limits = Limits {
        timeouts: Timeouts::PLAIN,
        max_connections: Self::MAX_CONNECTIONS,
        admission_wait: Self::ADMISSION_WAIT,
    };
    /// The secure listener's limits.
    pub const SECURE: Limits = Limits {
        timeouts: Timeouts::SECURE,
        max_connections: Self::MAX_CONNECTIONS,
        admission_wait: Self::ADMISSION_WAIT,
    };
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// As many connections as are served already wait for a slot.
    WaitingRoomFull,
    /// No slot freed up within the admission wait.
    NoSlotInTime,
}

/// The connection cap of one listener: `max` slots, and as many connections waiting for one
/// (first come, first served) for at most `wait`.
pub(crate) struct Admission {
    slots: Arc<Semaphore>,
    waiting_room: Arc<Semaphore>,
    wait: Duration,
    refused: AtomicU64,
}

impl Admission {
    pub(crate) fn new(limits: &Limits) -> Self {
        let max = limits.max_connections.max(1);
        Admission {
            slots: Arc::new(Semaphore::new(max)),
            waiting_room: Arc::new(Semaphore::new(max)),
            wait: limits.admission_wait,
            refused: AtomicU64::new(0),
        }
    }

    /// A slot for a new connection, held until the permit is dropped.
    pub(crate) async fn admit(&self) -> Result<OwnedSemaphorePermit, Refused> {
        if let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(slot);
        }
        let _waiting = Arc::clone(&self.waiting_room).try_acquire_owned().map_err(|_| Refused::WaitingRoomFull)?;
        match tokio::time::timeout(self.wait, Arc::clone(&self.slots).acquire_owned()).await {
            Ok(Ok(slot)) => Ok(slot),
            // The semaphore is never closed; a closed one admits nobody either.
            Ok(Err(_)) | Err(_) => Err(Refused::NoSlotInTime),
        }
    }

    /// Counts a refused connection; the new total.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.fetch_add(1, Ordering::Relaxed) + 1
    }
}

#[derive(Debug, Clone, Copy)]
struct State {
    in_flight: usize,
    /// Since when no request is in flight (the connection's start before the first one).
    idle_since: Instant,
    served: bool,
}

/// The requests in flight on one connection, for its idle deadline.
#[derive(Clone)]
pub(crate) struct Activity(Arc<watch::Sender<State>>);

/// A request in flight; dropping it ends the request.
pub(crate) struct Busy(Activity);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.0.send_modify(|state| {
            state.in_flight = state.in_flight.saturating_sub(1);
            if state.in_flight == 0 {
                state.idle_since = Instant::now();
            }
        });
    }
}

impl Activity {
    /// A new connection, idle since now.
    pub(crate) fn new() -> Self {
        Activity(Arc::new(watch::Sender::new(State { in_flight: 0, idle_since: Instant::now(), served: false })))
    }

    /// A request starts.
    pub(crate) fn begin(&self) -> Busy {
        self.0.send_modify(|state| {
            state.in_flight += 1;
            state.served = true;
        });
        Busy(self.clone())
    }

    /// Completes once no request has been in flight for `first` (before the first request) or
    /// `idle` (after one), with whether a request was served.
    pub(crate) async fn idle_for(&self, first: Duration, idle: Duration) -> bool {
        let mut changes = self.0.subscribe();
        loop {
            let state = *changes.borrow_and_update();
            if state.in_flight > 0 {
                // The sender lives as long as `self`, so this only returns on a change.
                let _ = changes.changed().await;
                continue;
            }
            let deadline = state.idle_since + if state.served { idle } else { first };
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => return state.served,
                _ = changes.changed() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_requests_is_idle_after_the_first_request_timeout() {
        let activity = Activity::new();
        let started = Instant::now();
        assert!(!activity.idle_for(3 * SECOND, 90 * SECOND).await, "nothing served");
        assert_eq!(started.elapsed(), 3 * SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_in_flight_keep_a_connection_and_the_idle_timeout_counts_from_the_last() {
        let activity = Activity::new();
        let started = Instant::now();
        let watcher = {
            let activity = activity.clone();
            tokio::spawn(async move { activity.idle_for(3 * SECOND, 10 * SECOND).await })
        };
        tokio::time::sleep(2 * SECOND).await;
        let first = activity.begin();
        let second = activity.begin();
        tokio::time::sleep(60 * SECOND).await;
        drop(first);
        tokio::time::sleep(5 * SECOND).await;
        assert!(!watcher.is_finished(), "one request is still in flight");
        drop(second);
        let ended = Instant::now();
        assert!(watcher.await.expect("the watcher does not panic"), "requests were served");
        assert_eq!(ended - started, 67 * SECOND);
        assert_eq!(started.elapsed(), 77 * SECOND, "idle 10 s after the last request ended");
    }

    #[tokio::test(start_paused = true)]
    async fn beyond_the_cap_connections_wait_briefly_and_beyond_the_waiting_room_are_refused() {
        let limits = Limits { max_connections: 2, admission_wait: 5 * SECOND, ..Limits::SECURE };
        let admission = Arc::new(Admission::new(&limits));
        let first = admission.admit().await.expect("a free slot");
        let _second = admission.admit().await.expect("a free slot");
        let started = Instant::now();
        let waiting: Vec<_> = (0..2)
            .map(|_| {
                let admission = Arc::clone(&admission);
                tokio::spawn(async move { admission.admit().await.map(|slot| (slot, Instant::now())) })
            })
            .collect();
        tokio::task::yield_now().await;
        assert_eq!(admission.admit().await.err(), Some(Refused::WaitingRoomFull));
        let released = Instant::now() + 2 * SECOND;
        tokio::time::sleep_until(released).await;
        drop(first);
        let mut outcomes = Vec::new();
        for waiter in waiting {
            // Slots stay held in `outcomes`.
            outcomes.push(waiter.await.expect("the waiter does not panic"));
        }
        let admitted_after: Vec<_> = outcomes.iter().map(|o| o.as_ref().map(|(_, at)| *at - released)).collect();
        // The first in line gets the freed slot at once; the other one gives up after waiting 5 s.
        assert_eq!(admitted_after, vec![Ok(Duration::ZERO), Err(&Refused::NoSlotInTime)]);
        assert_eq!(started.elapsed(), 5 * SECOND);
    }
}
