//! Unit tests of the pure decisions over synthetic instants.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use pretty_assertions::assert_eq;
use tokio::time::Instant;

use super::*;
use crate::record::LeaderRecord;

const ME: &str = "me_1";
const OTHER: &str = "other_2";

fn timing() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// A Lease snapshot held by `holder` with `resourceVersion` `rv`, the given duration and a
/// remote renewTime `renew_unix` (seconds since the epoch).
fn snapshot(holder: &str, rv: &str, duration_seconds: i32, renew_unix: i64) -> Snapshot {
    let mut lease = Lease::default();
    lease.metadata.name = Some("lock".to_owned());
    lease.metadata.resource_version = Some(rv.to_owned());
    let when = Timestamp::from_second(renew_unix).expect("valid timestamp");
    LeaderRecord {
        holder: holder.to_owned(),
        lease_duration_seconds: duration_seconds,
        acquire_time: Some(when),
        renew_time: Some(when),
        transitions: 3,
    }
    .write_into(&mut lease);
    Snapshot::new(lease)
}

fn present(snapshot: Snapshot, changed_at: Instant) -> View {
    View::Present { snapshot: Box::new(snapshot), changed_at }
}

fn standby(next_poll: Instant) -> Role {
    Role::Standby { next_poll }
}

fn leader(renewed_at: Instant, next_renewal: Instant) -> Role {
    Role::Leader { renewed_at, next_renewal }
}

/// "Now" for a standby whose next poll is far away, so the decision is about the lease.
fn far(t0: Instant) -> Role {
    standby(t0 + secs(3600.0))
}

#[test]
fn empty_holder_is_acquired_at_once() {
    let t0 = Instant::now();
    let view = present(snapshot("", "7", 1, 0), t0);
    assert_eq!(next_step(&view, far(t0), t0, ME, &timing()), Step::Acquire);
}

#[test]
fn fresh_lease_of_another_holder_is_waited_for() {
    let t0 = Instant::now();
    let view = present(snapshot(OTHER, "7", 15, 0), t0);
    let now = t0 + secs(1.0);
    // The poll comes first.
    assert_eq!(next_step(&view, standby(t0 + secs(2.0)), now, ME, &timing()), Step::Wait { until: t0 + secs(2.0) });
    // With no poll before it, the expiry.
    assert_eq!(next_step(&view, far(t0), now, ME, &timing()), Step::Wait { until: t0 + secs(15.0) });
    assert_eq!(view.holder(), Some(OTHER));
    assert_eq!(view.expiry(), Some(t0 + secs(15.0)));
}

#[test]
fn lease_unchanged_for_its_duration_is_acquired() {
    let t0 = Instant::now();
    let view = present(snapshot(OTHER, "7", 15, 0), t0);
    assert_eq!(next_step(&view, far(t0), t0 + secs(14.999), ME, &timing()), Step::Wait { until: t0 + secs(15.0) });
    assert_eq!(next_step(&view, far(t0), t0 + secs(15.0), ME, &timing()), Step::Acquire);
}

#[test]
fn the_records_duration_counts_not_ours() {
    let t0 = Instant::now();
    let view = present(snapshot(OTHER, "7", 60, 0), t0);
    assert!(matches!(next_step(&view, far(t0), t0 + secs(59.0), ME, &timing()), Step::Wait { .. }));
    assert_eq!(next_step(&view, far(t0), t0 + secs(60.0), ME, &timing()), Step::Acquire);
    // Absent or negative durations count as zero (client-go): expired at once.
    for duration in [0, -5] {
        let view = present(snapshot(OTHER, "7", duration, 0), t0);
        assert_eq!(next_step(&view, far(t0), t0, ME, &timing()), Step::Acquire, "duration {duration}");
    }
}

#[test]
fn remote_renew_time_in_the_past_does_not_make_a_fresh_lease_expired() {
    // A holder whose clock is 50 years behind: its renewTime looks ancient, but we just saw it
    // change, so it is live.
    let t0 = Instant::now();
    let view = observe(&View::Unknown, Some(snapshot(OTHER, "7", 15, 1)), t0, ME);
    assert!(matches!(next_step(&view, far(t0), t0 + secs(14.0), ME, &timing()), Step::Wait { .. }));
}

#[test]
fn remote_renew_time_in_the_future_does_not_keep_a_dead_lease_alive() {
    // A holder whose clock is 50 years ahead stopped renewing: we take over one lease duration
    // after we last saw a change, whatever its renewTime says.
    let t0 = Instant::now();
    let far_future = 4_000_000_000; // year 2096
    let first = observe(&View::Unknown, Some(snapshot(OTHER, "7", 15, far_future)), t0, ME);
    // Polls keep returning the same record: the change time stays t0.
    let second = observe(&first, Some(snapshot(OTHER, "7", 15, far_future)), t0 + secs(10.0), ME);
    let View::Present { changed_at, .. } = &second else { panic!("present") };
    assert_eq!(*changed_at, t0);
    assert_eq!(next_step(&second, far(t0), t0 + secs(15.0), ME, &timing()), Step::Acquire);
}

#[test]
fn any_change_restarts_the_expiry_clock() {
    let t0 = Instant::now();
    let view = observe(&View::Unknown, Some(snapshot(OTHER, "7", 15, 100)), t0, ME);
    // Same record, new resourceVersion (someone touched the object).
    let touched = observe(&view, Some(snapshot(OTHER, "8", 15, 100)), t0 + secs(10.0), ME);
    assert_eq!(touched.expiry(), Some(t0 + secs(25.0)));
    // New renewTime at the same version would be a server bug, but still counts as a change.
    let renewed = observe(&touched, Some(snapshot(OTHER, "8", 15, 101)), t0 + secs(12.0), ME);
    assert_eq!(renewed.expiry(), Some(t0 + secs(27.0)));
    // New holder.
    let taken = observe(&renewed, Some(snapshot("third_3", "8", 15, 101)), t0 + secs(13.0), ME);
    assert_eq!(taken.expiry(), Some(t0 + secs(28.0)));
    assert_eq!(taken.holder(), Some("third_3"));
}

#[test]
fn our_own_record_is_reacquired_at_once() {
    let t0 = Instant::now();
    let view = present(snapshot(ME, "7", 15, 0), t0);
    assert_eq!(next_step(&view, far(t0), t0, ME, &timing()), Step::Acquire);
}

#[test]
fn standby_reads_when_the_poll_is_due() {
    let t0 = Instant::now();
    let view = present(snapshot(OTHER, "7", 15, 0), t0);
    assert_eq!(next_step(&view, standby(t0 + secs(2.0)), t0 + secs(2.0), ME, &timing()), Step::Read);
    assert_eq!(next_step(&View::Unknown, standby(t0), t0, ME, &timing()), Step::Read);
    // An outdated view waits for the poll (an error backs off instead of spinning).
    assert_eq!(
        next_step(&View::Unknown, standby(t0 + secs(2.0)), t0, ME, &timing()),
        Step::Wait { until: t0 + secs(2.0) }
    );
}

#[test]
fn missing_lease_is_created_at_once_when_nobody_held_it() {
    let t0 = Instant::now();
    let view = observe(&View::Unknown, None, t0, ME);
    assert_eq!(next_step(&view, far(t0), t0, ME, &timing()), Step::Create);
    // Released or expired before it vanished: at once too.
    let released = present(snapshot("", "7", 1, 0), t0);
    assert!(
        matches!(observe(&released, None, t0 + secs(1.0), ME), View::Absent { not_before } if not_before == t0 + secs(1.0))
    );
    let expired = present(snapshot(OTHER, "7", 15, 0), t0);
    let now = t0 + secs(20.0);
    assert!(matches!(observe(&expired, None, now, ME), View::Absent { not_before } if not_before == now));
}

#[test]
fn lease_deleted_under_a_live_holder_is_created_one_lease_duration_later() {
    let t0 = Instant::now();
    let held = present(snapshot(OTHER, "7", 15, 0), t0);
    let gone = observe(&held, None, t0 + secs(4.0), ME);
    let View::Absent { not_before } = gone else { panic!("absent") };
    assert_eq!(not_before, t0 + secs(19.0));
    assert_eq!(next_step(&gone, far(t0), t0 + secs(18.0), ME, &timing()), Step::Wait { until: t0 + secs(19.0) });
    // Later reads of the absence keep the first deadline.
    let still_gone = observe(&gone, None, t0 + secs(10.0), ME);
    assert_eq!(next_step(&still_gone, far(t0), t0 + secs(19.0), ME, &timing()), Step::Create);
}

#[test]
fn leader_renews_every_retry_period() {
    let t0 = Instant::now();
    let view = present(snapshot(ME, "7", 15, 0), t0);
    let role = leader(t0, t0 + secs(2.0));
    assert_eq!(next_step(&view, role, t0 + secs(1.0), ME, &timing()), Step::Wait { until: t0 + secs(2.0) });
    assert_eq!(next_step(&view, role, t0 + secs(2.0), ME, &timing()), Step::Renew);
}

#[test]
fn leader_retries_no_later_than_the_deadline() {
    let t0 = Instant::now();
    let view = present(snapshot(ME, "7", 15, 0), t0);
    // After failures the next attempt may lie beyond the deadline: wake up at the deadline.
    let role = leader(t0, t0 + secs(11.0));
    assert_eq!(next_step(&view, role, t0 + secs(9.0), ME, &timing()), Step::Wait { until: t0 + secs(10.0) });
}

#[test]
fn renew_deadline_reached_means_lost() {
    let t0 = Instant::now();
    let view = present(snapshot(ME, "7", 15, 0), t0);
    let role = leader(t0, t0);
    assert_eq!(next_step(&view, role, t0 + secs(9.999), ME, &timing()), Step::Renew);
    assert_eq!(
        next_step(&view, role, t0 + secs(10.0), ME, &timing()),
        Step::Lost(Loss::Deadline { since_renewal: secs(10.0) })
    );
    // The deadline wins over everything else, even a view that still names us.
    assert!(matches!(
        next_step(&View::Unknown, role, t0 + secs(12.0), ME, &timing()),
        Step::Lost(Loss::Deadline { .. })
    ));
}

#[test]
fn leader_seeing_another_holder_has_lost_at_once() {
    let t0 = Instant::now();
    let role = leader(t0, t0 + secs(2.0));
    let view = present(snapshot(OTHER, "9", 15, 0), t0);
    assert_eq!(
        next_step(&view, role, t0 + secs(0.5), ME, &timing()),
        Step::Lost(Loss::HolderChanged { holder: Some(OTHER.to_owned()) })
    );
    let released = present(snapshot("", "9", 1, 0), t0);
    assert_eq!(
        next_step(&released, role, t0 + secs(0.5), ME, &timing()),
        Step::Lost(Loss::HolderChanged { holder: None })
    );
}

#[test]
fn leader_reads_an_outdated_copy_and_recreates_a_deleted_lease() {
    let t0 = Instant::now();
    let role = leader(t0, t0 + secs(1.0));
    assert_eq!(next_step(&View::Unknown, role, t0 + secs(1.0), ME, &timing()), Step::Read);
    assert_eq!(
        next_step(&View::Absent { not_before: t0 + secs(99.0) }, role, t0 + secs(1.0), ME, &timing()),
        Step::Create
    );
}

#[test]
fn fence_closes_before_any_other_replica_can_take_over() {
    let timing = timing();
    let t0 = Instant::now();
    // Our renewal is sent at t0; the fence closes at t0 + renew_deadline.
    let fence = fence_until(t0, &timing);
    assert_eq!(fence, t0 + secs(10.0));
    // A standby cannot observe that write before it was sent; whenever it observes it, it may
    // take over only a lease duration later, which is after our fence closed.
    for observed_after in [0.0, 0.001, 1.0, 7.5] {
        let observed_at = t0 + secs(observed_after);
        let view = observe(&View::Unknown, Some(snapshot(ME, "7", 15, 0)), observed_at, OTHER);
        let at_fence = next_step(&view, far(t0), fence, OTHER, &timing);
        assert!(matches!(at_fence, Step::Wait { .. }), "observed after {observed_after}s: {at_fence:?}");
        let takeover = view.expiry().expect("present");
        assert!(takeover > fence);
        assert_eq!(next_step(&view, far(t0), takeover, OTHER, &timing), Step::Acquire);
    }
}

#[test]
fn call_timeouts_never_outlast_the_renew_deadline() {
    let timing = timing();
    let t0 = Instant::now();
    assert_eq!(call_timeout(standby(t0), t0, &timing), Some(secs(10.0)));
    assert_eq!(call_timeout(leader(t0, t0), t0 + secs(2.0), &timing), Some(secs(8.0)));
    assert_eq!(call_timeout(leader(t0, t0), t0 + secs(9.5), &timing), Some(secs(0.5)));
    assert_eq!(call_timeout(leader(t0, t0), t0 + secs(10.0), &timing), None);
}

#[test]
fn poll_interval_jitter_is_at_most_twenty_percent() {
    let timing = timing();
    assert_eq!(poll_interval(&timing, 0.0), secs(2.0));
    assert_eq!(poll_interval(&timing, 0.5), secs(2.2));
    assert!(poll_interval(&timing, 0.999_999) < secs(2.4));
    assert_eq!(poll_interval(&timing, 7.0), secs(2.4));
    assert_eq!(poll_interval(&timing, -1.0), secs(2.0));
}

#[test]
fn lease_transitions_count_holder_changes_across_a_history() {
    // A creates; B takes over after expiry; B releases; A acquires the free lease.
    let at = |s: i64| Timestamp::from_second(s).expect("valid timestamp");
    let created = LeaderRecord::created("a", 15, at(0));
    let renewed = created.held_by("a", 15, at(2));
    let taken = renewed.held_by("b", 15, at(20));
    let released = taken.held_by("b", 15, at(22)).released(at(23));
    let reacquired = released.held_by("a", 15, at(24));
    let transitions: Vec<i32> =
        [&created, &renewed, &taken, &released, &reacquired].iter().map(|r| r.transitions).collect();
    assert_eq!(transitions, [0, 0, 1, 1, 2]);
    assert_eq!(reacquired.acquire_time, Some(at(24)));
    assert_eq!(renewed.acquire_time, Some(at(0)));
}
