//! The pure part of credential rotation: what a poll of the credential file(s) found, and
//! whether that calls for a check, a report, or nothing.
//!
//! ```text
//!  poll ──► Read::Value(v) ── v == in use ───────────────► Wait (a failed value forgotten)
//!     │                   ── v failed its check before,
//!     │                      and its recheck is not due ─► Wait
//!     │                   ── otherwise ──────────────────► Check(v) ─► checked(v, result)
//!     └──► Read::Invalid / Unreadable ── same problem as
//!                                        the last poll ──► Wait
//!                                     ── new problem ────► Problem (logged and counted once)
//! ```
//!
//! A value whose check failed is checked again when the file changes, or after
//! [`recheck_after`]: [`REJECTED_RECHECK`] after the API refused it (a token revoked or
//! mistyped stays so; checking it every poll would spend the request budget), a growing
//! backoff from [`FAILED_RECHECK_FIRST`] to [`REJECTED_RECHECK`] when the API could not be
//! asked.
//!
//! While the credential in use is refused (a 401 of a request that sent it), waiting is the
//! wrong choice: every request fails until the next check. [`Watch::in_use_refused`] makes a
//! waiting value due at once and has the file read now (the operator may have fixed it just
//! before revoking the old credential), at most once per [`REFUSED_IN_USE_RECHECK`], so a
//! flood of 401s is not a flood of checks.

use std::time::Duration;

use tokio::time::Instant;

/// When the API refused a value: how long until the same value is checked again.
pub const REJECTED_RECHECK: Duration = Duration::from_secs(300);

/// When the API could not be asked (unreachable, 5xx, rate-limited): the first wait before
/// the same value is checked again; it doubles with every failure up to [`REJECTED_RECHECK`].
pub const FAILED_RECHECK_FIRST: Duration = Duration::from_secs(15);

/// While the credential in use is refused: how often at most a 401 brings the file's read and
/// a waiting value's check forward.
pub const REFUSED_IN_USE_RECHECK: Duration = Duration::from_secs(30);

/// What one poll found.
#[derive(Debug)]
pub enum Read<T> {
    /// A well-formed credential.
    Value(T),
    /// The file holds no usable credential (e.g. empty); why, never the content.
    Invalid(String),
    /// The file cannot be read; why.
    Unreadable(String),
}

/// What the caller does after a poll.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<T> {
    /// Nothing to do.
    Wait,
    /// A credential other than the one in use: check it, then report with [`Watch::checked`].
    Check(T),
    /// The file became unusable (`unreadable`: it cannot be read, else its content is no
    /// credential): report it once; the credential in use stays.
    Problem {
        /// Whether the file could not be read at all.
        unreadable: bool,
        /// Why.
        message: String,
    },
}

/// How the check of a new credential went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// The API accepted it; it is in use now.
    Accepted,
    /// The API refused it (401/403): it is not used.
    Rejected(String),
    /// The API could not be asked; the check is repeated later.
    Failed(String),
}

#[derive(Debug)]
struct Failure<T> {
    value: T,
    failures: u32,
    rejected: bool,
    next: Instant,
}

/// The state of one watched credential between polls.
#[derive(Debug)]
pub struct Watch<T> {
    failed: Option<Failure<T>>,
    problem: Option<String>,
    /// When a 401 of the credential in use last brought a check forward.
    forced: Option<Instant>,
}

impl<T> Default for Watch<T> {
    fn default() -> Self {
        Watch { failed: None, problem: None, forced: None }
    }
}

impl<T: PartialEq + Clone> Watch<T> {
    /// Decides what `read`, found at `now` while `in_use` is the credential in use, calls for.
    pub fn poll(&mut self, in_use: &T, read: Read<T>, now: Instant) -> Step<T> {
        let (unreadable, message) = match read {
            Read::Value(value) => {
                self.problem = None;
                if &value == in_use {
                    self.failed = None;
                    return Step::Wait;
                }
                return match &self.failed {
                    Some(f) if f.value == value && now < f.next => Step::Wait,
                    _ => Step::Check(value),
                };
            }
            Read::Invalid(message) => (false, message),
            Read::Unreadable(message) => (true, message),
        };
        if self.problem.as_ref() == Some(&message) {
            return Step::Wait;
        }
        self.problem = Some(message.clone());
        Step::Problem { unreadable, message }
    }

    /// The credential in use was refused (401) at `now`: whether to read the file now. If so,
    /// a value waiting for its recheck is due at once. At most once per
    /// [`REFUSED_IN_USE_RECHECK`]; otherwise nothing changes.
    pub fn in_use_refused(&mut self, now: Instant) -> bool {
        if self.forced.is_some_and(|at| now < at + REFUSED_IN_USE_RECHECK) {
            return false;
        }
        self.forced = Some(now);
        if let Some(f) = &mut self.failed {
            f.next = f.next.min(now);
        }
        true
    }

    /// Records how the check of `value` (from [`Step::Check`]) went at `now`; returns when the
    /// same value is checked again if it failed.
    pub fn checked(&mut self, value: T, result: &Checked, now: Instant) -> Option<Duration> {
        let rejected = match result {
            Checked::Accepted => {
                self.failed = None;
                return None;
            }
            Checked::Rejected(_) => true,
            Checked::Failed(_) => false,
        };
        let failures = match &self.failed {
            Some(f) if f.value == value && f.rejected == rejected => f.failures.saturating_add(1),
            _ => 1,
        };
        let after = recheck_after(rejected, failures);
        self.failed = Some(Failure { value, failures, rejected, next: now + after });
        Some(after)
    }
}

/// How long a value that failed its check `failures` times in a row waits before the next
/// check (`rejected`: the API refused it).
pub fn recheck_after(rejected: bool, failures: u32) -> Duration {
    if rejected {
        return REJECTED_RECHECK;
    }
    let doublings = failures.saturating_sub(1).min(16);
    FAILED_RECHECK_FIRST.saturating_mul(1 << doublings).min(REJECTED_RECHECK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_value_in_use_calls_for_nothing_and_a_new_one_for_a_check() {
        let mut w = Watch::default();
        let t0 = Instant::now();
        assert_eq!(w.poll(&"old", Read::Value("old"), t0), Step::Wait);
        assert_eq!(w.poll(&"old", Read::Value("new"), t0), Step::Check("new"));
        assert_eq!(w.checked("new", &Checked::Accepted, t0), None);
        assert_eq!(w.poll(&"new", Read::Value("new"), t0), Step::Wait, "in use now");
    }

    #[test]
    fn a_rejected_value_waits_for_a_change_of_the_file_or_its_recheck() {
        let mut w = Watch::default();
        let t0 = Instant::now();
        assert_eq!(w.poll(&"old", Read::Value("bad"), t0), Step::Check("bad"));
        assert_eq!(w.checked("bad", &Checked::Rejected("401".into()), t0), Some(REJECTED_RECHECK));
        assert_eq!(w.poll(&"old", Read::Value("bad"), t0 + secs(5)), Step::Wait, "not every poll");
        assert_eq!(w.poll(&"old", Read::Value("bad"), t0 + secs(299)), Step::Wait);
        assert_eq!(w.poll(&"old", Read::Value("other"), t0 + secs(10)), Step::Check("other"), "the file changed");
        assert_eq!(w.poll(&"old", Read::Value("bad"), t0 + secs(300)), Step::Check("bad"), "recheck due");
        assert_eq!(w.checked("bad", &Checked::Rejected("401".into()), t0 + secs(300)), Some(REJECTED_RECHECK));
    }

    #[test]
    fn going_back_to_the_value_in_use_forgets_a_failed_one() {
        let mut w = Watch::default();
        let t0 = Instant::now();
        assert_eq!(w.poll(&"old", Read::Value("bad"), t0), Step::Check("bad"));
        w.checked("bad", &Checked::Rejected("401".into()), t0);
        assert_eq!(w.poll(&"old", Read::Value("old"), t0 + secs(5)), Step::Wait);
        assert_eq!(w.poll(&"old", Read::Value("bad"), t0 + secs(10)), Step::Check("bad"), "written again: checked");
    }

    #[test]
    fn an_unreachable_api_is_asked_again_with_a_growing_backoff() {
        let mut w = Watch::default();
        let mut now = Instant::now();
        let mut waits = Vec::new();
        for _ in 0..7 {
            assert_eq!(w.poll(&"old", Read::Value("new"), now), Step::Check("new"));
            let after = w.checked("new", &Checked::Failed("503".into()), now).expect("retried");
            assert_eq!(w.poll(&"old", Read::Value("new"), now + after - secs(1)), Step::Wait);
            waits.push(after.as_secs());
            now += after;
        }
        assert_eq!(waits, vec![15, 30, 60, 120, 240, 300, 300]);
        assert_eq!(w.checked("new", &Checked::Rejected("401".into()), now), Some(REJECTED_RECHECK));
        assert_eq!(recheck_after(false, u32::MAX), REJECTED_RECHECK, "no overflow");
        assert_eq!(recheck_after(false, 0), FAILED_RECHECK_FIRST);
    }

    #[test]
    fn a_401_of_the_credential_in_use_brings_a_waiting_check_forward_at_most_every_30_s() {
        let mut w = Watch::default();
        let t0 = Instant::now();
        assert_eq!(w.poll(&"old", Read::Value("new"), t0), Step::Check("new"));
        assert_eq!(w.checked("new", &Checked::Rejected("401".into()), t0), Some(REJECTED_RECHECK));
        assert_eq!(w.poll(&"old", Read::Value("new"), t0 + secs(5)), Step::Wait, "waits for its recheck");

        // The old token was revoked: its first 401 makes the waiting token due at once.
        assert!(w.in_use_refused(t0 + secs(6)));
        assert_eq!(w.poll(&"old", Read::Value("new"), t0 + secs(6)), Step::Check("new"));
        assert_eq!(w.checked("new", &Checked::Rejected("401".into()), t0 + secs(6)), Some(REJECTED_RECHECK));
        // A flood of 401s: nothing more for 30 s.
        for s in [7, 20, 35] {
            assert!(!w.in_use_refused(t0 + secs(s)), "{s} s");
            assert_eq!(w.poll(&"old", Read::Value("new"), t0 + secs(s)), Step::Wait, "{s} s");
        }
        assert!(w.in_use_refused(t0 + secs(36)), "30 s after the last one");
        assert_eq!(w.poll(&"old", Read::Value("new"), t0 + secs(36)), Step::Check("new"));
        // A value that failed for lack of an answer is brought forward alike.
        w.checked("new", &Checked::Failed("503".into()), t0 + secs(36));
        assert!(w.in_use_refused(t0 + secs(70)));
        assert_eq!(w.poll(&"old", Read::Value("new"), t0 + secs(70)), Step::Check("new"));
        // Nothing waiting: the file is still read at once (it may have just changed).
        let mut fresh: Watch<&str> = Watch::default();
        assert!(fresh.in_use_refused(t0));
        assert_eq!(fresh.poll(&"old", Read::Value("old"), t0), Step::Wait);
    }

    #[test]
    fn a_file_problem_is_reported_once_until_it_changes_or_ends() {
        let mut w: Watch<&str> = Watch::default();
        let t0 = Instant::now();
        let gone = || Read::Unreadable("cannot read \"/t\": No such file".to_owned());
        assert_eq!(
            w.poll(&"old", gone(), t0),
            Step::Problem { unreadable: true, message: "cannot read \"/t\": No such file".into() }
        );
        assert_eq!(w.poll(&"old", gone(), t0), Step::Wait, "reported once");
        assert_eq!(
            w.poll(&"old", Read::Invalid("is empty".into()), t0),
            Step::Problem { unreadable: false, message: "is empty".into() },
            "another problem"
        );
        assert_eq!(w.poll(&"old", Read::Value("old"), t0), Step::Wait, "fine again");
        assert!(matches!(w.poll(&"old", gone(), t0), Step::Problem { .. }), "a new spell is reported again");
    }
}
