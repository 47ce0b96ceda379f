//! The decisions of leader election as pure functions of what we observed and the local
//! monotonic time: [`observe`] folds a read into what we know, [`next_step`] says what to do.
//!
//! Expiry is judged only by *local monotonic* time since this replica last saw the record
//! change, plus the record's `leaseDurationSeconds` (client-go's rule). The remote `renewTime`
//! is never compared with the local clock, so clock skew between nodes cannot make a replica
//! take over a live lease or wait for a dead one.

use std::time::Duration;

use tokio::time::Instant;

use crate::record::Snapshot;

/// The three timings of an [`crate::ElectionConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    /// How long others wait after seeing our last write (we write it as `leaseDurationSeconds`).
    pub lease_duration: Duration,
    /// How long after the last successful write the leader gives up.
    pub renew_deadline: Duration,
    /// Renewal and polling period.
    pub retry_period: Duration,
}

/// What this replica knows about the Lease.
#[derive(Debug, Clone)]
pub(crate) enum View {
    /// Nothing yet, or our copy is known to be outdated (a write conflicted): read first.
    Unknown,
    /// The Lease does not exist. It may be created from `not_before` on: at once, unless it
    /// vanished while another replica held it, in which case that holder may still act until
    /// its lease duration has passed since we noticed.
    Absent {
        /// Earliest time to create it.
        not_before: Instant,
    },
    /// The Lease as last read or written, and when we last saw its content change.
    Present {
        /// The object and its record.
        snapshot: Box<Snapshot>,
        /// Local time of the last observed change (holder, renewTime, resourceVersion, ...).
        changed_at: Instant,
    },
}

impl View {
    /// The current holder, if the Lease exists and someone holds it.
    pub fn holder(&self) -> Option<&str> {
        match self {
            View::Present { snapshot, .. } if snapshot.record.is_held() => Some(&snapshot.record.holder),
            _ => None,
        }
    }

    /// When a lease held by someone else may be taken over (`changed_at + leaseDurationSeconds`).
    pub fn expiry(&self) -> Option<Instant> {
        match self {
            View::Present { snapshot, changed_at } => Some(*changed_at + record_duration(snapshot)),
            _ => None,
        }
    }
}

/// Where this replica stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Not leading; the next periodic read is due at `next_poll`.
    Standby {
        /// Time of the next read.
        next_poll: Instant,
    },
    /// Leading.
    Leader {
        /// Send time of the last successful acquire/renew request.
        renewed_at: Instant,
        /// Time of the next renewal attempt.
        next_renewal: Instant,
    },
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// GET the Lease.
    Read,
    /// POST a new Lease with us as holder.
    Create,
    /// PUT the observed Lease with us as holder (taking it over, or re-acquiring our own).
    Acquire,
    /// PUT the observed Lease with a fresh renewTime (we lead).
    Renew,
    /// Nothing to do before `until`.
    Wait {
        /// When to decide again.
        until: Instant,
    },
    /// Leadership is lost (only while leading).
    Lost(Loss),
}

/// Why the leader lost the lease (the pure form of [`crate::LostReason`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Loss {
    /// No renewal succeeded within the renew deadline.
    Deadline {
        /// Time since the send time of the last successful write.
        since_renewal: Duration,
    },
    /// The Lease names another holder (or none).
    HolderChanged {
        /// The holder now, if any.
        holder: Option<String>,
    },
}

/// The duration a record asks for (`leaseDurationSeconds`; absent or negative counts as 0, as
/// in client-go).
fn record_duration(snapshot: &Snapshot) -> Duration {
    Duration::from_secs(u64::try_from(snapshot.record.lease_duration_seconds).unwrap_or(0))
}

/// Folds the result of a read (`None`: the Lease does not exist) into what we knew.
///
/// A record that differs from the previous one (record fields or `resourceVersion`) counts as
/// changed *now*. A Lease that vanished while it was held by someone else, unexpired, may be
/// created only one lease duration from now: its holder may have renewed after our last read,
/// and its fence lasts at most a renew deadline (< lease duration) after that renewal.
pub(crate) fn observe(previous: &View, read: Option<Snapshot>, now: Instant, me: &str) -> View {
    match read {
        Some(snapshot) => {
            let changed_at = match previous {
                View::Present { snapshot: old, changed_at } if old.same_as(&snapshot) => *changed_at,
                _ => now,
            };
            View::Present { snapshot: Box::new(snapshot), changed_at }
        }
        None => {
            let not_before = match previous {
                View::Absent { not_before } => *not_before,
                View::Present { snapshot, changed_at }
                    if snapshot.record.is_held()
                        && snapshot.record.holder != me
                        && now < *changed_at + record_duration(snapshot) =>
                {
                    now + record_duration(snapshot)
                }
                _ => now,
            };
            View::Absent { not_before }
        }
    }
}

/// The next step for `role` given `view` at local time `now`.
///
/// Standby: read when the poll is due; a missing Lease is created (see [`observe`]); a free
/// lease (empty holder), our own, or one whose holder has not changed it for its lease duration
/// is acquired; otherwise wait for the next poll or the expiry, whichever comes first.
///
/// Leader: lost once `renew_deadline` has passed since the send time of the last successful
/// write, or as soon as a read shows another holder; otherwise renew every `retry_period`
/// (reading first when our copy is outdated, re-creating the Lease if someone deleted it).
pub(crate) fn next_step(view: &View, role: Role, now: Instant, me: &str, timing: &Timing) -> Step {
    match role {
        Role::Standby { next_poll } => {
            if now >= next_poll {
                return Step::Read;
            }
            match view {
                View::Unknown => Step::Wait { until: next_poll },
                View::Absent { not_before } if now >= *not_before => Step::Create,
                View::Absent { not_before } => Step::Wait { until: next_poll.min(*not_before) },
                View::Present { snapshot, changed_at } => {
                    let record = &snapshot.record;
                    let expiry = view.expiry().unwrap_or(*changed_at);
                    if !record.is_held() || record.holder == me || now >= expiry {
                        Step::Acquire
                    } else {
                        Step::Wait { until: next_poll.min(expiry) }
                    }
                }
            }
        }
        Role::Leader { renewed_at, next_renewal } => {
            let deadline = renewed_at + timing.renew_deadline;
            if now >= deadline {
                return Step::Lost(Loss::Deadline { since_renewal: now.saturating_duration_since(renewed_at) });
            }
            if let View::Present { snapshot, .. } = view
                && snapshot.record.holder != me
            {
                let holder = snapshot.record.is_held().then(|| snapshot.record.holder.clone());
                return Step::Lost(Loss::HolderChanged { holder });
            }
            if now < next_renewal {
                return Step::Wait { until: next_renewal.min(deadline) };
            }
            match view {
                View::Unknown => Step::Read,
                View::Absent { .. } => Step::Create,
                View::Present { .. } => Step::Renew,
            }
        }
    }
}

/// The fence of a write sent at `sent`: our side effects are safe until `sent +
/// renew_deadline`. Another replica takes over at the earliest `lease_duration` after it
/// observed that write, which it cannot observe before it was sent, and `lease_duration >
/// renew_deadline`.
pub(crate) fn fence_until(sent: Instant, timing: &Timing) -> Instant {
    sent + timing.renew_deadline
}

/// The timeout of one API call: at most `renew_deadline`, and while leading never longer than
/// the time left until the renew deadline (`None`: no time left, do not send).
pub(crate) fn call_timeout(role: Role, now: Instant, timing: &Timing) -> Option<Duration> {
    match role {
        Role::Standby { .. } => Some(timing.renew_deadline),
        Role::Leader { renewed_at, .. } => {
            let left = (renewed_at + timing.renew_deadline).saturating_duration_since(now);
            (!left.is_zero()).then(|| left.min(timing.renew_deadline))
        }
    }
}

/// The standby poll interval: `retry_period` plus a jitter of up to 20 % (`jitter` in `[0, 1)`
/// scales it), so standbys do not poll in lockstep but take over within about one period.
pub(crate) fn poll_interval(timing: &Timing, jitter: f64) -> Duration {
    timing.retry_period + timing.retry_period.mul_f64(0.2 * jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
