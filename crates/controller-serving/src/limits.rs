//! What a listener allows one client: a timeout on every phase of a connection, and caps on
//! the connections served at once, in all and per client, so that idle, slow or greedy clients
//! cannot hold tasks and file descriptors until `/healthz` and `/metrics` stop answering.
//!
//! ```text
//!  accept ─► admission (see `admission`): the client's cap, then a free slot (the reserved
//!            │ ones only for a client without another connection), or wait up to
//!            │ `admission_wait` (at most `max_connections` wait; beyond that, closed at once)
//!            ▼
//!          TLS handshake (`tls_handshake`) ─► HTTP/1 or h2, as ALPN chose (no sniffing)
//!            ▼
//!          no request in flight: the first request's headers within `read`, later ones
//!          within `idle` (HTTP/1 also bounds each request's headers by `read`) ─► closed
//!          a request in flight: `handler` to answer, `write` without progress ─► 503 / closed
//! ```

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
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
    /// Connections one client may have open or waiting at once (at least 1); beyond that its
    /// new connections are closed at once. A client is an IPv4 address or an IPv6 /64.
    pub max_connections_per_client: usize,
    /// Slots of `max_connections` kept for clients that have no other connection open or
    /// waiting (a kubelet probe's), so that clients holding several connections cannot take
    /// them all. At most `max_connections - 1`.
    pub reserved_for_new_clients: usize,
    /// How long a connection beyond `max_connections` waits for a slot before it is closed.
    pub admission_wait: Duration,
}

impl Limits {
    /// Connections served at once by default: a health and metrics port has a few clients
    /// (probes, one scraper per Prometheus replica), so 128 is ample and bounds the memory and
    /// file descriptors a flood of connections can take.
    pub const MAX_CONNECTIONS: usize = 128;
    /// Connections one client may hold by default: a probe or a scraper uses one or two.
    pub const MAX_CONNECTIONS_PER_CLIENT: usize = 8;
    /// Slots kept for clients without another connection by default.
    pub const RESERVED_FOR_NEW_CLIENTS: usize = 16;
    /// How long a connection beyond the cap waits by default: the default timeout of a
    /// kubelet probe, the main client of this port.
    pub const ADMISSION_WAIT: Duration = Duration::from_secs(1);
    /// The plain listener's limits.
    pub const PLAIN: Limits = Limits { timeouts: Timeouts::PLAIN, ..Self::SECURE };
    /// The secure listener's limits.
    pub const SECURE: Limits = Limits {
        timeouts: Timeouts::SECURE,
        max_connections: Self::MAX_CONNECTIONS,
        max_connections_per_client: Self::MAX_CONNECTIONS_PER_CLIENT,
        reserved_for_new_clients: Self::RESERVED_FOR_NEW_CLIENTS,
        admission_wait: Self::ADMISSION_WAIT,
    };
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
}
