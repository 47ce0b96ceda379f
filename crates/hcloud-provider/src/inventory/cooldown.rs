//! The inventory's cooldown: after a transient API failure (5xx, 429, timeout, broken
//! connection) lookups fail fast without a request for 1 s, doubling per consecutive failure,
//! at most 30 s.

use std::sync::Mutex;
use std::time::Duration;
use sync_lock::Unpoison as _;

use hcloud_api::Error;
use tokio::time::Instant;
use tracing::debug;

/// Longest cooldown after consecutive transient failures.
const MAX_COOLDOWN: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Health {
    failures: u32,
    until: Option<Instant>,
    last_error: String,
}

/// Consecutive transient failures and the cooldown they started.
#[derive(Default)]
pub(super) struct Cooldown(Mutex<Health>);

impl Cooldown {
    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        // Plain counters; a poisoned lock still holds consistent values.
        self.0.lock_unpoisoned()
    }

    /// Fails fast while a cooldown runs (`request` names what was not sent).
    pub(super) fn gate(&self, request: &str) -> Result<(), Error> {
        let h = self.health();
        match h.until {
            Some(until) if until > Instant::now() => Err(Error::from(hcloud_api::ApiError {
                status: 503,
                code: hcloud_api::ErrorCode::Unavailable,
                message: format!(
                    "not sent: the Hetzner Cloud API failed {} time(s) in a row (last: {}); next attempt in {:?}",
                    h.failures,
                    h.last_error,
                    until.saturating_duration_since(Instant::now())
                ),
                details: None,
                correlation_id: None,
                request: request.to_owned(),
            })),
            _ => Ok(()),
        }
    }

    /// Ends the cooldown on an answer, or starts (extends) it on a transient failure: true
    /// if it started one.
    pub(super) fn record<T>(&self, result: &Result<T, Error>) -> bool {
        let mut h = self.health();
        match result {
            Ok(_) => {
                if h.failures > 0 {
                    debug!(after_failures = h.failures, "Hetzner Cloud API answers again");
                }
                *h = Health::default();
                false
            }
            Err(e) if e.is_transient() => {
                h.failures = h.failures.saturating_add(1);
                let cooldown = Duration::from_secs(1).saturating_mul(1 << (h.failures - 1).min(5)).min(MAX_COOLDOWN);
                h.until = Some(Instant::now() + cooldown);
                h.last_error = e.to_string();
                true
            }
            Err(_) => false,
        }
    }
}
