//! [`Fence`]: the lock-free "may I still act?" check, and [`HealthCheck`], the liveness check
//! of client-go's `HealthzAdaptor`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Nanoseconds since `epoch`, saturating (584 years fit).
fn nanos_since(epoch: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX)
}

/// One term of leadership: from acquisition until it is lost, released or dropped. A new
/// acquisition starts a new term, so a [`Fence`] of an old term never becomes current again.
#[derive(Debug)]
pub(crate) struct Term {
    /// Base of the atomic instants below.
    epoch: Instant,
    /// The fence closes at this instant (nanoseconds since `epoch`, exclusive).
    valid_until: AtomicU64,
    /// Completion time of the last successful write (client-go's "observed time"), for health.
    renewed: AtomicU64,
    /// Cancelled when the term ends, for any reason.
    ended: CancellationToken,
    /// Set by the first [`Term::end`], so exactly one caller reports the end.
    ending: AtomicBool,
    /// The last failed renewal since the last successful one, for the loss report.
    last_error: Mutex<Option<String>>,
    /// We believe we lead: from acquisition until a release (a loss keeps the belief, so a
    /// replica that fails to stop after losing the lease turns unhealthy).
    believed: AtomicBool,
}

impl Term {
    /// A term whose fence is open until `valid_until`, with a successful write completed `now`.
    pub fn start(now: Instant, valid_until: Instant) -> Arc<Term> {
        let term = Term {
            epoch: now,
            valid_until: AtomicU64::new(0),
            renewed: AtomicU64::new(0),
            ended: CancellationToken::new(),
            ending: AtomicBool::new(false),
            last_error: Mutex::new(None),
            believed: AtomicBool::new(true),
        };
        term.renewed(now, valid_until);
        Arc::new(term)
    }

    /// A successful write completed at `now`; the fence stays open until `valid_until`.
    pub fn renewed(&self, now: Instant, valid_until: Instant) {
        self.valid_until.fetch_max(nanos_since(self.epoch, valid_until), Ordering::SeqCst);
        self.renewed.fetch_max(nanos_since(self.epoch, now), Ordering::SeqCst);
    }

    /// Records (or, with `None`, clears) the last renewal failure; returns the previous one.
    pub fn set_last_error(&self, error: Option<String>) -> Option<String> {
        // Only a swap under the lock; a poisoned lock still holds a valid value.
        std::mem::replace(&mut *self.last_error.lock_unpoisoned(), error)
    }

    /// The last renewal failure since the last success.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock_unpoisoned().clone()
    }

    /// Ends the term: the fence closes for good and [`Fence::lost`] fires. True for the
    /// call that ended it (the one that should report why).
    pub fn end(&self) -> bool {
        let first = !self.ending.swap(true, Ordering::SeqCst);
        self.ended.cancel();
        first
    }

    /// The lease was given up on purpose: no longer believed to be ours.
    pub fn released(&self) {
        self.end();
        self.believed.store(false, Ordering::SeqCst);
    }

    /// Whether the term ended.
    pub fn has_ended(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// The instant the fence closes (whether or not the term ended).
    pub fn valid_until(&self) -> Instant {
        self.epoch + Duration::from_nanos(self.valid_until.load(Ordering::SeqCst))
    }

    fn is_current_at(&self, now: Instant) -> bool {
        !self.ended.is_cancelled() && nanos_since(self.epoch, now) < self.valid_until.load(Ordering::SeqCst)
    }

    /// The token cancelled when the term ends.
    pub fn ended_token(&self) -> CancellationToken {
        self.ended.clone()
    }
}

/// A cheap, clonable "are we still the leader?" check for every side effect.
///
/// [`Fence::is_current`] is true only while this replica leads *and* local monotonic time is
/// before the send time of the last successful renewal plus `renew_deadline`. Another replica
/// can take over at the earliest `lease_duration` (> `renew_deadline`) after it observed that
/// renewal, so a caller that checks `is_current()` right before each external side effect
/// never acts after a takeover. The check is two atomic loads and a clock read: no lock, no
/// I/O, usable from synchronous code on any thread.
///
/// A fence belongs to one term of leadership. [`Fence::lost`] is cancelled when the term ends
/// for any reason: the renew deadline passed or another holder was seen (lost), the lease was
/// released, or the [`crate::Leadership`] was dropped.
#[derive(Debug, Clone)]
pub struct Fence {
    inner: FenceInner,
}

#[derive(Debug, Clone)]
enum FenceInner {
    Term(Arc<Term>),
    Unconditional(CancellationToken),
}

impl Fence {
    pub(crate) fn new(term: Arc<Term>) -> Fence {
        Fence { inner: FenceInner::Term(term) }
    }

    /// A fence that is always current and never lost: for running without leader election
    /// (a single replica), so code that checks a fence needs no special case.
    pub fn unconditional() -> Fence {
        Fence { inner: FenceInner::Unconditional(CancellationToken::new()) }
    }

    /// Whether side effects are allowed now.
    pub fn is_current(&self) -> bool {
        match &self.inner {
            FenceInner::Term(term) => term.is_current_at(Instant::now()),
            FenceInner::Unconditional(_) => true,
        }
    }

    /// How long the fence stays open if no renewal succeeds in between; `None` when it is
    /// closed, `Some(Duration::MAX)` for [`Fence::unconditional`]. Use it to bound the timeout
    /// of an external request.
    pub fn remaining(&self) -> Option<Duration> {
        match &self.inner {
            FenceInner::Term(term) => {
                let now = Instant::now();
                term.is_current_at(now).then(|| term.valid_until().saturating_duration_since(now))
            }
            FenceInner::Unconditional(_) => Some(Duration::MAX),
        }
    }

    /// The instant the fence closes unless a renewal succeeds first; `None` once the term
    /// ended, or for [`Fence::unconditional`].
    pub fn valid_until(&self) -> Option<Instant> {
        match &self.inner {
            FenceInner::Term(term) => (!term.has_ended()).then(|| term.valid_until()),
            FenceInner::Unconditional(_) => None,
        }
    }

    /// A token cancelled when this term of leadership ends for any reason (lost, released,
    /// dropped). Clone it or derive child tokens for the work that must stop with it.
    pub fn lost(&self) -> CancellationToken {
        match &self.inner {
            FenceInner::Term(term) => term.ended_token(),
            FenceInner::Unconditional(token) => token.clone(),
        }
    }
}

/// The elector's view of its current term, shared with [`HealthCheck`]s.
#[derive(Debug, Default)]
pub(crate) struct CurrentTerm(Mutex<Option<Arc<Term>>>);

impl CurrentTerm {
    pub fn set(&self, term: Option<Arc<Term>>) {
        // The critical section is a pointer swap; a poisoned lock still holds a valid value.
        *self.0.lock_unpoisoned() = term;
    }

    fn get(&self) -> Option<Arc<Term>> {
        self.0.lock_unpoisoned().clone()
    }
}

/// Liveness check of leader election (client-go's `HealthzAdaptor`): unhealthy only while we
/// believe we lead but our last successful renewal is older than `lease_duration + timeout`,
/// that is, the lease expired more than `timeout` ago. A standby, or a leader that released the
/// lease, is healthy. Cheap: a std mutex around a pointer and two atomic loads.
#[derive(Debug, Clone)]
pub struct HealthCheck {
    pub(crate) current: Arc<CurrentTerm>,
    pub(crate) lease: String,
    pub(crate) lease_duration: Duration,
    pub(crate) timeout: Duration,
}

/// The answer of an unhealthy [`HealthCheck`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "failed election to renew leadership on lease {lease}: last renewal {since_renewal:?} ago, more than the lease \
     duration {lease_duration:?} plus the tolerance {timeout:?}"
)]
pub struct Unhealthy {
    /// The Lease, `namespace/name`.
    pub lease: String,
    /// Time since the last successful renewal.
    pub since_renewal: Duration,
    /// The configured lease duration.
    pub lease_duration: Duration,
    /// The tolerance the check was built with.
    pub timeout: Duration,
}

impl HealthCheck {
    /// `Ok` unless we believe we lead and the lease expired more than the tolerance ago.
    pub fn check(&self) -> Result<(), Unhealthy> {
        let Some(term) = self.current.get() else { return Ok(()) };
        if !term.believed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let renewed = term.epoch + Duration::from_nanos(term.renewed.load(Ordering::SeqCst));
        let since_renewal = Instant::now().saturating_duration_since(renewed);
        if since_renewal > self.lease_duration.saturating_add(self.timeout) {
            return Err(Unhealthy {
                lease: self.lease.clone(),
                since_renewal,
                lease_duration: self.lease_duration,
                timeout: self.timeout,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[tokio::test(start_paused = true)]
    async fn fence_is_current_strictly_before_its_deadline() {
        let t0 = Instant::now();
        let term = Term::start(t0, t0 + secs(10.0));
        let fence = Fence::new(term.clone());
        assert!(fence.is_current());
        assert_eq!(fence.valid_until(), Some(t0 + secs(10.0)));
        assert_eq!(fence.remaining(), Some(secs(10.0)));
        tokio::time::advance(secs(9.999)).await;
        assert!(fence.is_current());
        tokio::time::advance(secs(0.001)).await;
        assert!(!fence.is_current(), "closed exactly at the deadline");
        assert_eq!(fence.remaining(), None);
        assert!(!fence.lost().is_cancelled(), "the deadline alone does not end the term");
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_extend_and_never_shorten_the_fence() {
        let t0 = Instant::now();
        let term = Term::start(t0, t0 + secs(10.0));
        let fence = Fence::new(term.clone());
        term.renewed(t0 + secs(2.0), t0 + secs(12.0));
        assert_eq!(fence.valid_until(), Some(t0 + secs(12.0)));
        // A late report of an older write does not move it back.
        term.renewed(t0 + secs(3.0), t0 + secs(11.0));
        assert_eq!(fence.valid_until(), Some(t0 + secs(12.0)));
        tokio::time::advance(secs(11.5)).await;
        assert!(fence.is_current());
    }

    #[tokio::test(start_paused = true)]
    async fn ending_the_term_closes_the_fence_for_good() {
        let t0 = Instant::now();
        let term = Term::start(t0, t0 + secs(10.0));
        let fence = Fence::new(term.clone());
        let clone = fence.clone();
        let token = fence.lost();
        assert!(term.end(), "the first end reports");
        assert!(!term.end(), "later ends do not");
        assert!(token.is_cancelled());
        assert!(!fence.is_current() && !clone.is_current());
        assert_eq!(fence.valid_until(), None);
        term.renewed(t0, t0 + secs(100.0));
        assert!(!fence.is_current(), "a renewal report after the end does not reopen it");
    }

    #[test]
    fn fence_is_usable_from_synchronous_threads() {
        let term = Term::start(Instant::now(), Instant::now() + secs(60.0));
        let fence = Fence::new(term.clone());
        let from_thread = {
            let fence = fence.clone();
            std::thread::spawn(move || fence.is_current()).join().expect("thread")
        };
        assert!(from_thread);
        term.end();
        let after_end = std::thread::spawn(move || fence.is_current()).join().expect("thread");
        assert!(!after_end);
    }

    #[test]
    fn unconditional_fence_is_always_current() {
        let fence = Fence::unconditional();
        assert!(fence.is_current());
        assert_eq!(fence.remaining(), Some(Duration::MAX));
        assert_eq!(fence.valid_until(), None);
        assert!(!fence.lost().is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn health_fails_only_when_believed_leading_past_expiry_plus_tolerance() {
        let current = Arc::new(CurrentTerm::default());
        let check = HealthCheck {
            current: current.clone(),
            lease: "ns/lock".to_owned(),
            lease_duration: secs(15.0),
            timeout: secs(20.0),
        };
        assert_eq!(check.check(), Ok(()), "standby is healthy");
        let t0 = Instant::now();
        let term = Term::start(t0, t0 + secs(10.0));
        current.set(Some(term.clone()));
        tokio::time::advance(secs(35.0)).await;
        assert_eq!(check.check(), Ok(()), "exactly lease duration + tolerance is still healthy");
        tokio::time::advance(secs(0.001)).await;
        let error = check.check().expect_err("unhealthy");
        assert_eq!(error.since_renewal, secs(35.001));
        assert!(error.to_string().starts_with("failed election to renew leadership on lease ns/lock"), "{error}");
        // A loss keeps the belief (the process should have stopped), a release drops it.
        term.end();
        assert!(check.check().is_err());
        term.released();
        assert_eq!(check.check(), Ok(()));
        // A renewal makes a believed leader healthy again.
        let term = Term::start(t0, t0 + secs(10.0));
        current.set(Some(term.clone()));
        assert!(check.check().is_err());
        term.renewed(Instant::now(), Instant::now() + secs(10.0));
        assert_eq!(check.check(), Ok(()));
    }
}
