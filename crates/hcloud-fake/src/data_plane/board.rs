//! The board: health-check results and open connections per (Load Balancer, service, target),
//! shared by the checkers (which write results), the listeners (which read health and count
//! connections), the reconciler (which adds and removes entries) and the state's rendering
//! (which reports the health in `GET /load_balancers/{id}`).
//!
//! Lock order: whoever holds the state lock may take the board lock, never the other way
//! round (checkers and listeners take the board alone).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use super::health::{Health, HealthTracker};
use crate::control::DataPlaneCheck;
use crate::state::records::HealthKey;

/// One health-checked target of one service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CheckKey {
    pub lb: u64,
    pub listen_port: u16,
    pub target: HealthKey,
}

/// What is known of one [`CheckKey`].
#[derive(Debug, Clone)]
struct Entry {
    tracker: HealthTracker,
    address: Option<SocketAddr>,
    protocol: String,
    checks: u64,
    last_error: Option<String>,
    active: u64,
}

/// Results and connection counts (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Board {
    entries: BTreeMap<CheckKey, Entry>,
}

/// The board as the data plane's parts share it.
pub(crate) type SharedBoard = Arc<Mutex<Board>>;

impl Board {
    /// Starts tracking a target: `unknown`, or `unhealthy` with `unreachable` as the reason
    /// when it has no address to check.
    pub fn insert(&mut self, key: CheckKey, address: Option<SocketAddr>, protocol: &str, unreachable: Option<String>) {
        let mut tracker = HealthTracker::default();
        if unreachable.is_some() {
            tracker.record(false, 1);
        }
        let entry = Entry {
            tracker,
            address,
            protocol: protocol.to_owned(),
            checks: 0,
            last_error: unreachable,
            active: self.entries.get(&key).map_or(0, |e| e.active),
        };
        self.entries.insert(key, entry);
    }

    /// Stops tracking a target.
    pub fn remove(&mut self, key: &CheckKey) {
        self.entries.remove(key);
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Records a completed check; returns (before, after) when the target is tracked.
    pub fn record(&mut self, key: &CheckKey, result: Result<(), String>, retries: u64) -> Option<(Health, Health)> {
        let entry = self.entries.get_mut(key)?;
        let before = entry.tracker.health();
        entry.checks = entry.checks.saturating_add(1);
        let after = entry.tracker.record(result.is_ok(), retries);
        entry.last_error = result.err();
        Some((before, after))
    }

    /// The checks' verdict on a target for the service on `listen_port`.
    pub fn health(&self, lb: u64, listen_port: u16, target: &HealthKey) -> Option<Health> {
        let key = CheckKey { lb, listen_port, target: target.clone() };
        self.entries.get(&key).map(|e| e.tracker.health())
    }

    /// Open forwarded connections to a target.
    pub fn active(&self, key: &CheckKey) -> u64 {
        self.entries.get(key).map_or(0, |e| e.active)
    }

    /// A forwarded connection to the target opened.
    pub fn connection_opened(&mut self, key: &CheckKey) {
        if let Some(e) = self.entries.get_mut(key) {
            e.active = e.active.saturating_add(1);
        }
    }

    /// A forwarded connection to the target closed.
    pub fn connection_closed(&mut self, key: &CheckKey) {
        if let Some(e) = self.entries.get_mut(key) {
            e.active = e.active.saturating_sub(1);
        }
    }

    /// Every tracked target, by key.
    pub fn snapshot(&self) -> Vec<DataPlaneCheck> {
        self.entries
            .iter()
            .map(|(k, e)| {
                let (server, ip) = k.target.server_and_ip();
                DataPlaneCheck {
                    load_balancer: k.lb,
                    listen_port: k.listen_port,
                    server,
                    ip,
                    address: e.address,
                    protocol: e.protocol.clone(),
                    status: e.tracker.health().as_str().to_owned(),
                    checks: e.checks,
                    consecutive_failures: e.tracker.consecutive_failures(),
                    last_error: e.last_error.clone(),
                    active_connections: e.active,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_track_results_and_connections() {
        let mut b = Board::default();
        let key = CheckKey { lb: 1, listen_port: 80, target: HealthKey::Server(7) };
        b.insert(key.clone(), Some("127.0.0.1:80".parse().unwrap()), "tcp", None);
        assert_eq!(b.health(1, 80, &HealthKey::Server(7)), Some(Health::Unknown));
        assert_eq!(b.record(&key, Ok(()), 3), Some((Health::Unknown, Health::Healthy)));
        b.connection_opened(&key);
        assert_eq!(b.active(&key), 1);
        // Re-inserting (a changed health check) starts over but keeps the open connections.
        b.insert(key.clone(), None, "http", Some("no address".to_owned()));
        let snap = b.snapshot();
        assert_eq!(snap[0].status, "unhealthy");
        assert_eq!(snap[0].active_connections, 1);
        assert_eq!(snap[0].last_error.as_deref(), Some("no address"));
        b.connection_closed(&key);
        b.connection_closed(&key);
        assert_eq!(b.active(&key), 0);
        b.remove(&key);
        assert_eq!(b.record(&key, Ok(()), 3), None);
        assert_eq!(b.health(1, 80, &HealthKey::Server(7)), None);
    }
}
