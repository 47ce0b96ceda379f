//! Robot (dedicated) servers: the cached server list with its rate-limit circuit breaker
//! ([`RobotInventory`], the official CCM's `internal/robot` cache and rate-limit wrapper) and
//! the pure server → Node metadata mapping ([`metadata`]).
//!
//! ```text
//!  lookups (by number, by name) ──► RobotInventory::servers ── list younger than
//!        │                            ROBOT_CACHE_TIMEOUT? ──► answer from memory
//!        │                            else one GET /server (concurrent callers share it)
//!  "absent" before a Node is deleted ──► confirmed by GET /server/{n} (never from the list alone);
//!                                         by name (no providerID yet): by a list requested now
//!  shutdown ──► GET /reset/{n} (never cached)
//!  every request ──► circuit: a RATE_LIMIT_EXCEEDED or 403 answer opens it for
//!                    ROBOT_RATE_LIMIT_WAIT_TIME; meanwhile calls fail without a request
//! ```

pub mod config;
#[cfg(test)]
mod config_tests;
pub(crate) mod instances;
pub mod metadata;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use hcloud_api::robot::{RobotClient, RobotError, RobotReset, RobotServer};
use tokio::time::Instant;
use tracing::{debug, warn};

/// How far Robot (dedicated server) support goes, from `ROBOT_ENABLED` and the credentials.
#[derive(Debug, Clone, Default)]
pub enum RobotMode {
    /// `ROBOT_ENABLED` is not true: Robot Nodes are not served.
    #[default]
    Off,
    /// `ROBOT_ENABLED` without credentials: Robot Nodes are recognized and become Load
    /// Balancer IP targets through their InternalIP, but no Robot server can be looked up.
    LoadBalancerOnly,
    /// `ROBOT_ENABLED` with credentials: Robot servers are looked up in this cached list.
    Full(Arc<RobotInventory>),
}

impl RobotMode {
    /// Whether Robot Nodes are served at all.
    pub fn is_enabled(&self) -> bool {
        !matches!(self, RobotMode::Off)
    }

    /// The Robot server list, with credentials.
    pub fn inventory(&self) -> Option<&Arc<RobotInventory>> {
        match self {
            RobotMode::Full(inventory) => Some(inventory),
            RobotMode::Off | RobotMode::LoadBalancerOnly => None,
        }
    }
}

/// When a circuit opened at `now` for `wait` closes. The configuration stops at Go's largest
/// duration (about 292 years), which an `Instant` holds; a longer wait (only through
/// [`RobotInventory::new`]) is cut to a century rather than overflow.
fn circuit_end(now: Instant, wait: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    now.checked_add(wait).or_else(|| now.checked_add(CENTURY)).unwrap_or(now)
}

#[derive(Default)]
struct State {
    list: Option<(Instant, Arc<Vec<RobotServer>>)>,
    generation: u64,
    circuit: Option<(Instant, String)>,
}

/// The cached Robot server list behind a rate-limit circuit breaker.
pub struct RobotInventory {
    client: RobotClient,
    cache_timeout: Duration,
    rate_limit_wait: Duration,
    state: Mutex<State>,
    refresh: tokio::sync::Mutex<()>,
    requests: AtomicU64,
}

impl std::fmt::Debug for RobotInventory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RobotInventory")
            .field("client", &self.client)
            .field("cache_timeout", &self.cache_timeout)
            .field("rate_limit_wait", &self.rate_limit_wait)
            .finish_non_exhaustive()
    }
}

impl RobotInventory {
    /// An empty inventory over `client`.
    pub fn new(client: RobotClient, cache_timeout: Duration, rate_limit_wait: Duration) -> RobotInventory {
        RobotInventory {
            client,
            cache_timeout,
            rate_limit_wait,
            state: Mutex::new(State::default()),
            refresh: tokio::sync::Mutex::new(()),
            requests: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every mutation replaces whole fields; a panic cannot leave a half-written state.
        self.state.lock_unpoisoned()
    }

    /// Requests sent to the webservice so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Fails fast while the circuit is open.
    fn gate(&self) -> Result<(), RobotError> {
        let mut s = self.lock();
        match &s.circuit {
            Some((until, cause)) if *until > Instant::now() => Err(RobotError::CircuitOpen {
                retry_in: until.saturating_duration_since(Instant::now()),
                cause: cause.clone(),
            }),
            Some(_) => {
                s.circuit = None;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Sends one request through the circuit.
    async fn call<T>(&self, request: impl Future<Output = Result<T, RobotError>>) -> Result<T, RobotError> {
        self.gate()?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let result = request.await;
        if let Err(e) = &result
            && e.is_rate_limit()
        {
            if self.rate_limit_wait.is_zero() {
                warn!(error = %e, "Robot webservice rate limit (ROBOT_RATE_LIMIT_WAIT_TIME=0: no wait)");
            } else {
                warn!(error = %e, wait = ?self.rate_limit_wait, "Robot webservice rate limit: no Robot requests for the wait time");
                self.lock().circuit = Some((circuit_end(Instant::now(), self.rate_limit_wait), e.to_string()));
            }
        }
        result
    }

    /// Every server, from a list at most `ROBOT_CACHE_TIMEOUT` old (one request per period;
    /// concurrent refreshes share one request).
    pub async fn servers(&self) -> Result<Arc<Vec<RobotServer>>, RobotError> {
        let generation = {
            let s = self.lock();
            if let Some((at, list)) = &s.list
                && at.elapsed() < self.cache_timeout
            {
                return Ok(list.clone());
            }
            s.generation
        };
        let _guard = self.refresh.lock().await;
        {
            let s = self.lock();
            if s.generation != generation
                && let Some((_, list)) = &s.list
            {
                return Ok(list.clone());
            }
        }
        self.list_now().await
    }

    /// Every server, from a list whose request started at or after `since` (a list taken
    /// earlier, however young, is refreshed; concurrent refreshes share one request). What
    /// confirms an absence by name, which has no single-server request.
    pub async fn servers_listed_since(&self, since: Instant) -> Result<Arc<Vec<RobotServer>>, RobotError> {
        let listed_since = |s: &State| s.list.as_ref().filter(|(at, _)| *at >= since).map(|(_, list)| list.clone());
        if let Some(list) = listed_since(&self.lock()) {
            return Ok(list);
        }
        let _guard = self.refresh.lock().await;
        if let Some(list) = listed_since(&self.lock()) {
            return Ok(list);
        }
        self.list_now().await
    }

    /// One `GET /server`; the answer becomes the cached list. Callers hold `refresh`.
    async fn list_now(&self) -> Result<Arc<Vec<RobotServer>>, RobotError> {
        let at = Instant::now();
        let list = Arc::new(self.call(self.client.servers()).await?);
        debug!(servers = list.len(), "Robot server list refreshed");
        let mut s = self.lock();
        s.list = Some((at, list.clone()));
        s.generation += 1;
        Ok(list)
    }

    /// The server with this number, from the cached list.
    pub async fn by_number(&self, number: u64) -> Result<Option<RobotServer>, RobotError> {
        Ok(self.servers().await?.iter().find(|s| s.server_number == number).cloned())
    }

    /// The server with this name, from the cached list.
    pub async fn by_name(&self, name: &str) -> Result<Option<RobotServer>, RobotError> {
        Ok(find_name(&self.servers().await?, name))
    }

    /// The server with this name from a list requested at or after `since` (to confirm an
    /// absence before anything destructive: a by-name miss in an older list may be a server
    /// added since).
    pub async fn by_name_listed_since(&self, name: &str, since: Instant) -> Result<Option<RobotServer>, RobotError> {
        Ok(find_name(&self.servers_listed_since(since).await?, name))
    }

    /// The server with this number from a direct `GET /server/{number}` (to confirm an
    /// absence before anything destructive); `None` only on `SERVER_NOT_FOUND`.
    pub async fn fetch(&self, number: u64) -> Result<Option<RobotServer>, RobotError> {
        let found = self.call(self.client.server(number)).await?;
        if found.is_some() {
            // The list missed a server that exists: it is out of date.
            self.lock().list = None;
        }
        Ok(found)
    }

    /// The reset state (`GET /reset/{number}`), never cached.
    pub async fn reset(&self, number: u64) -> Result<RobotReset, RobotError> {
        self.call(self.client.reset(number)).await
    }
}

fn find_name(servers: &[RobotServer], name: &str) -> Option<RobotServer> {
    servers.iter().find(|s| s.server_name == name).cloned()
}
