//! Leader election against a real kube-apiserver (test-harness): creation, renewal with one
//! PUT per period, conflicts, takeovers, release, RBAC, and the fence under partitions.
//!
//! Timings are short (lease 3 s / renew 2 s / retry 0.5 s) unless a test needs otherwise;
//! waits are bounded polls or watch-channel waits with generous deadlines.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use leader_election::{ElectionConfig, LeaderElector, LeaderState, LostReason};
use support::{
    Candidate, Outcome, PATIENCE, RequestLog, counted_client, holder, init_tracing, read_lease, short_config,
    wait_state,
};
use test_harness::{ControlPlane, TcpProxy, unique_name};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "default";

async fn setup() -> Result<(&'static ControlPlane, kube::Client)> {
    init_tracing();
    let control_plane = ControlPlane::shared().await?;
    let admin = control_plane.admin_client().await?;
    Ok((control_plane, admin))
}

fn spec(lease: &Lease) -> LeaseSpec {
    lease.spec.clone().unwrap_or_default()
}

/// Writes `holder` with `seconds` into the Lease as the admin (a replace with the Lease's
/// current resourceVersion), optionally with a remote renewTime; returns the written Lease.
async fn write_holder(
    admin: &kube::Client,
    name: &str,
    holder: &str,
    seconds: i32,
    renew_time: Option<Timestamp>,
) -> Result<Lease> {
    let api = Api::<Lease>::namespaced(admin.clone(), NAMESPACE);
    let mut lease = api.get(name).await?;
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(holder.to_owned());
    spec.lease_duration_seconds = Some(seconds);
    spec.renew_time = Some(MicroTime(renew_time.unwrap_or_else(Timestamp::now)));
    Ok(api.replace(name, &PostParams::default(), &lease).await?)
}

/// Creates a Lease held by `holder` as the admin.
async fn create_held(admin: &kube::Client, name: &str, holder: &str, seconds: i32, renew: Timestamp) -> Result<Lease> {
    let lease = Lease {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(MicroTime(renew)),
            renew_time: Some(MicroTime(renew)),
            lease_transitions: Some(4),
            ..LeaseSpec::default()
        }),
    };
    Ok(Api::<Lease>::namespaced(admin.clone(), NAMESPACE).create(&PostParams::default(), &lease).await?)
}

#[tokio::test]
async fn creates_the_lease_renews_with_one_put_per_period_and_releases() -> Result<()> {
    let (control_plane, admin) = setup().await?;
    let name = unique_name("le-create");
    let log = RequestLog::default();
    let client = counted_client(control_plane.admin_kubeconfig(), None, &log).await?;
    let elector = LeaderElector::new(client, short_config(NAMESPACE, &name, "a_1"))?;
    let shutdown = CancellationToken::new();

    let mut leadership = elector.acquire(&shutdown).await.context("acquired")?;
    let acquired_at = Instant::now();
    assert_eq!(*elector.state().borrow(), LeaderState::Leading);
    let fence = leadership.fence();
    assert!(fence.is_current());
    // A missing Lease: one GET (404), one POST.
    let summary: Vec<_> = log.requests().into_iter().map(|r| (r.method, r.status)).collect();
    assert_eq!(summary, [("GET".to_owned(), Some(404)), ("POST".to_owned(), Some(201))]);
    let created = read_lease(&admin, NAMESPACE, &name).await?;
    let created_spec = spec(&created);
    assert_eq!(created_spec.holder_identity.as_deref(), Some("a_1"));
    assert_eq!(created_spec.lease_duration_seconds, Some(3));
    assert_eq!(created_spec.lease_transitions, Some(0));
    assert!(created_spec.acquire_time.is_some() && created_spec.renew_time.is_some());

    // Renew for a while: the happy path is exactly one PUT per renewal, each answered 200.
    let stop = CancellationToken::new();
    let keeper = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let result = leadership.keep(&stop).await;
            (leadership, result)
        })
    };
    test_harness::wait_until(PATIENCE, "four renewals", async || {
        log.since(acquired_at).iter().filter(|r| r.status == Some(200)).count() >= 4
    })
    .await?;
    let renewals = log.since(acquired_at);
    assert!(renewals.iter().all(|r| r.method == "PUT"), "only PUTs while leading: {renewals:?}");
    assert!(
        renewals.iter().all(|r| r.status.is_none_or(|s| s == 200)),
        "no conflicts without other writers: {renewals:?}"
    );
    // Renewals are scheduled one retry period (500 ms) after the previous one was sent; the log
    // records each request further down the client's stack, a few milliseconds later by an amount
    // that varies with the machine's load (a gap of 489 ms was seen with the other core busy). A
    // renewal too many shows as a gap far below the period, and a too-fast schedule in the span.
    let gaps: Vec<Duration> = renewals.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(gaps.iter().all(|g| *g >= Duration::from_millis(400)), "one renewal per retry period: {gaps:?}");
    let span = renewals.last().map(|r| r.at).zip(renewals.first().map(|r| r.at)).map(|(l, f)| l - f);
    let periods = u32::try_from(gaps.len()).expect("a few renewals");
    assert!(
        span >= Some(Duration::from_millis(500) * periods - Duration::from_millis(25)),
        "{periods} retry periods take at least {periods} × 500 ms: {span:?} ({gaps:?})"
    );
    let renewed = read_lease(&admin, NAMESPACE, &name).await?;
    let renewed_spec = spec(&renewed);
    assert!(renewed_spec.renew_time > created_spec.renew_time, "renewTime advances");
    assert_eq!(renewed_spec.acquire_time, created_spec.acquire_time, "acquireTime is kept");
    assert_eq!(renewed_spec.lease_transitions, Some(0));

    // Stop: Ok, the lease is still held and the fence still current; then release.
    stop.cancel();
    let (leadership, result) = keeper.await?;
    assert_eq!(result, Ok(()));
    assert!(fence.is_current(), "stopping is not losing");
    assert_eq!(holder(&read_lease(&admin, NAMESPACE, &name).await?), "a_1");
    leadership.release().await?;
    assert!(!fence.is_current());
    assert!(fence.lost().is_cancelled());
    assert_eq!(*elector.state().borrow(), LeaderState::Released);
    let released = spec(&read_lease(&admin, NAMESPACE, &name).await?);
    assert_eq!(released.holder_identity.as_deref(), Some(""));
    assert_eq!(released.lease_duration_seconds, Some(1));
    assert_eq!(released.lease_transitions, Some(0));
    assert!(released.renew_time > renewed_spec.renew_time);
    Ok(())
}

#[tokio::test]
async fn two_candidates_with_the_ccm_identity_exactly_one_leads() -> Result<()> {
    // The CCM's RBAC (leases: create, get, list, watch, update; no patch) suffices.
    let (control_plane, admin) = setup().await?;
    let namespace = test_harness::rbac::CCM_NAMESPACE;
    let name = unique_name("le-two");
    let mut a = Candidate::spawn(control_plane.ccm_client().await?, short_config(namespace, &name, "a_1"))?;
    let mut b = Candidate::spawn(control_plane.ccm_client().await?, short_config(namespace, &name, "b_2"))?;
    let deadline = Instant::now() + PATIENCE;
    while !a.is_leading() && !b.is_leading() {
        ensure!(Instant::now() < deadline, "nobody leads: a {:?}, b {:?}", *a.state.borrow(), *b.state.borrow());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (leader, standby) = if a.is_leading() { (&mut a, &mut b) } else { (&mut b, &mut a) };
    let leader_id = leader.identity.clone();
    let leader_fence = leader.wait_leading(PATIENCE).await?;
    let expected = LeaderState::Standby { holder: Some(leader_id.clone()) };
    standby.wait_state(PATIENCE, "observes the leader", |s| *s == expected).await?;

    // For six retry periods (more than a lease duration): never two leaders, never two open
    // fences, the Lease names the leader.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert!(!(a.is_leading() && b.is_leading()), "two leaders");
        let open = [a.current_fence(), b.current_fence()].iter().flatten().filter(|f| f.is_current()).count();
        assert_eq!(open, 1, "exactly one open fence");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(leader_fence.is_current());
    let lease = Api::<Lease>::namespaced(admin.clone(), namespace).get(&name).await?;
    assert_eq!(holder(&lease), leader_id);
    assert_eq!(spec(&lease).lease_transitions, Some(0));
    a.stop().await?;
    b.stop().await?;
    Ok(())
}

#[tokio::test]
async fn release_hands_over_to_the_standby_within_one_retry_period() -> Result<()> {
    let (control_plane, admin) = setup().await?;
    let name = unique_name("le-release");
    // A long lease: a takeover by expiry would take 20 s; a release must not wait for it.
    let config = |identity: &str| ElectionConfig {
        lease_duration: Duration::from_secs(20),
        ..short_config(NAMESPACE, &name, identity)
    };
    let mut a = Candidate::spawn(control_plane.admin_client().await?, config("a_1"))?;
    let a_fence = a.wait_leading(PATIENCE).await?;
    let mut b = Candidate::spawn(control_plane.admin_client().await?, config("b_2"))?;
    let expected = LeaderState::Standby { holder: Some("a_1".to_owned()) };
    b.wait_state(PATIENCE, "observes a", |s| *s == expected).await?;

    let outcome = a.stop().await?;
    let released_at = Instant::now();
    assert!(matches!(outcome, Outcome::Released(Ok(()))), "{outcome:?}");
    assert!(!a_fence.is_current());
    let b_leading_at = b.wait_state(PATIENCE, "leading", |s| *s == LeaderState::Leading).await?;
    let handover = b_leading_at - released_at;
    tracing::info!(?handover, "standby took over after the release");
    let bound = Duration::from_millis(500) + Duration::from_secs(1);
    assert!(handover <= bound, "the standby took {handover:?} (> retry period + 1 s) to take over");
    let lease = read_lease(&admin, NAMESPACE, &name).await?;
    assert_eq!(holder(&lease), "b_2");
    assert_eq!(spec(&lease).lease_transitions, Some(1), "one holder change");
    assert_eq!(spec(&lease).lease_duration_seconds, Some(20));
    b.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_foreign_write_conflicts_and_the_leader_retries_with_the_fresh_version() -> Result<()> {
    let (control_plane, admin) = setup().await?;
    let name = unique_name("le-conflict");
    let log = RequestLog::default();
    let client = counted_client(control_plane.admin_kubeconfig(), None, &log).await?;
    let mut a = Candidate::spawn(client, short_config(NAMESPACE, &name, "a_1"))?;
    let fence = a.wait_leading(PATIENCE).await?;

    // Someone touches the object (an annotation) between two renewals: the leader's cached
    // resourceVersion is stale, its next PUT gets 409.
    let api = Api::<Lease>::namespaced(admin.clone(), NAMESPACE);
    let mut lease = api.get(&name).await?;
    lease.metadata.annotations = Some(BTreeMap::from([("example.com/touched".to_owned(), "yes".to_owned())]));
    let touched = api.replace(&name, &PostParams::default(), &lease).await?;
    let touched_at = Instant::now();
    let touched_renew = spec(&touched).renew_time;

    // The leader's next PUT conflicts; it re-reads and renews on top of the foreign write.
    let pattern = |requests: &[(String, Option<u16>)]| {
        let conflict = requests.iter().position(|r| *r == ("PUT".to_owned(), Some(409)))?;
        let next: Vec<_> = requests.iter().skip(conflict + 1).take(2).cloned().collect();
        Some(next)
    };
    test_harness::wait_until(PATIENCE, "a conflict and two answered requests after it", async || {
        pattern(&log.summary_since(touched_at))
            .is_some_and(|next| next.len() == 2 && next.iter().all(|r| r.1.is_some()))
    })
    .await?;
    let after = log.summary_since(touched_at);
    assert_eq!(
        pattern(&after),
        Some(vec![("GET".to_owned(), Some(200)), ("PUT".to_owned(), Some(200))]),
        "409 → re-read → renew: {after:?}"
    );
    let renewed = api.get(&name).await?;
    assert_eq!(holder(&renewed), "a_1");
    assert!(spec(&renewed).renew_time > touched_renew, "renewed after the foreign write");
    assert_eq!(
        renewed.metadata.annotations.as_ref().and_then(|a| a.get("example.com/touched")).map(String::as_str),
        Some("yes"),
        "the renewal was built on the fresh object"
    );
    assert!(fence.is_current() && a.is_leading(), "a conflict on our own lease is not a loss");
    a.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_foreign_holder_makes_the_leader_lose_within_the_deadline() -> Result<()> {
    let (control_plane, admin) = setup().await?;
    let name = unique_name("le-foreign");
    let mut a = Candidate::spawn(control_plane.admin_client().await?, short_config(NAMESPACE, &name, "a_1"))?;
    let fence = a.wait_leading(PATIENCE).await?;
    write_holder(&admin, &name, "intruder_9", 3, None).await?;
    let written_at = Instant::now();
    let outcome = a.outcome(PATIENCE).await?;
    let detected = written_at.elapsed();
    let Outcome::Lost(lost) = outcome else { panic!("expected a loss, got {outcome:?}") };
    assert_eq!(lost.reason, LostReason::HolderChanged { holder: Some("intruder_9".to_owned()) });
    assert!(detected < Duration::from_secs(2), "detected after {detected:?}, not within the renew deadline");
    assert!(!fence.is_current() && fence.lost().is_cancelled());
    assert!(matches!(*a.state.borrow(), LeaderState::Lost { .. }));
    assert_eq!(holder(&read_lease(&admin, NAMESPACE, &name).await?), "intruder_9", "the loser writes nothing");
    Ok(())
}

#[tokio::test]
async fn a_standby_whose_takeover_conflicts_waits_for_the_live_holder() -> Result<()> {
    let (control_plane, admin) = setup().await?;
    let name = unique_name("le-ghost");
    create_held(&admin, &name, "ghost_0", 2, Timestamp::now()).await?;
    // The ghost keeps writing (every 100 ms) with a 2 s lease; b polls only every 4 s, so it
    // tries to take over at each local expiry with an outdated resourceVersion.
    let ghost_stop = CancellationToken::new();
    let ghost = {
        let admin = admin.clone();
        let name = name.clone();
        let stop = ghost_stop.clone();
        tokio::spawn(async move {
            let mut writes = 0u32;
            while !stop.is_cancelled() {
                if write_holder(&admin, &name, "ghost_0", 2, None).await.is_ok() {
                    writes += 1;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            writes
        })
    };
    let log = RequestLog::default();
    let config = ElectionConfig {
        lease_duration: Duration::from_secs(10),
        renew_deadline: Duration::from_secs(6),
        retry_period: Duration::from_secs(4),
        ..ElectionConfig::new(NAMESPACE, &name, "b_2")
    };
    let started = Instant::now();
    let mut b = Candidate::spawn(counted_client(control_plane.admin_kubeconfig(), None, &log).await?, config)?;
    test_harness::wait_until(PATIENCE, "two conflicting takeover attempts", async || {
        log.since(started).iter().filter(|r| r.method == "PUT" && r.status == Some(409)).count() >= 2
    })
    .await?;
    assert!(!b.is_leading(), "no takeover while the holder keeps writing");
    assert_eq!(*b.state.borrow(), LeaderState::Standby { holder: Some("ghost_0".to_owned()) });
    ghost_stop.cancel();
    let ghost_writes = ghost.await?;
    ensure!(ghost_writes > 10, "the ghost wrote only {ghost_writes} times");
    // Once the ghost is silent, b takes over one record duration (2 s) after its last change.
    b.wait_leading(PATIENCE).await?;
    let lease = read_lease(&admin, NAMESPACE, &name).await?;
    assert_eq!(holder(&lease), "b_2");
    assert_eq!(spec(&lease).lease_transitions, Some(5), "ghost's 4 + 1");
    b.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_dead_holder_is_taken_over_by_local_observation_whatever_its_clock_says() -> Result<()> {
    let (control_plane, admin) = setup().await?;
    for (label, renew) in [("future", "2096-01-01T00:00:00Z"), ("past", "1971-01-01T00:00:00Z")] {
        let name = unique_name(&format!("le-skew-{label}"));
        let renew: Timestamp = renew.parse()?;
        create_held(&admin, &name, "dead_0", 2, renew).await?;
        let started = Instant::now();
        let mut b = Candidate::spawn(control_plane.admin_client().await?, short_config(NAMESPACE, &name, "b_2"))?;
        let expected = LeaderState::Standby { holder: Some("dead_0".to_owned()) };
        b.wait_state(PATIENCE, "observes the dead holder", |s| *s == expected).await?;
        b.wait_leading(PATIENCE).await?;
        let waited = started.elapsed();
        // Taken over after its 2 s record duration counted from our first observation: not at
        // once (a renewTime in the past does not mean expired) and not never (a renewTime in
        // the future does not mean alive).
        assert!(waited >= Duration::from_secs(2), "{label}: took over after {waited:?}, before the lease expired");
        let lease = read_lease(&admin, NAMESPACE, &name).await?;
        assert_eq!(holder(&lease), "b_2");
        assert_eq!(spec(&lease).lease_transitions, Some(5));
        b.stop().await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_deleted_lease_is_recreated_by_its_leader_and_not_taken_by_the_standby() -> Result<()> {
    let (control_plane, admin) = setup().await?;
    let name = unique_name("le-deleted");
    let mut a = Candidate::spawn(control_plane.admin_client().await?, short_config(NAMESPACE, &name, "a_1"))?;
    let fence = a.wait_leading(PATIENCE).await?;
    let mut b = Candidate::spawn(control_plane.admin_client().await?, short_config(NAMESPACE, &name, "b_2"))?;
    let expected = LeaderState::Standby { holder: Some("a_1".to_owned()) };
    b.wait_state(PATIENCE, "observes a", |s| *s == expected).await?;
    let api = Api::<Lease>::namespaced(admin.clone(), NAMESPACE);
    let old_uid = api.get(&name).await?.metadata.uid;
    api.delete(&name, &DeleteParams::default()).await?;
    let recreated = test_harness::wait_for(&api, &name, PATIENCE, "the Lease to be recreated", |l| {
        l.is_some_and(|l| l.metadata.uid != old_uid)
    })
    .await?
    .context("lease")?;
    assert_eq!(holder(&recreated), "a_1", "the leader recreated it");
    // For longer than a lease duration: a keeps leading, b stays standby.
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        assert!(a.is_leading() && fence.is_current(), "a lost: {:?}", *a.state.borrow());
        assert!(!b.is_leading(), "b took over a deleted lease whose holder was alive");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.stop().await?;
    b.stop().await?;
    Ok(())
}

#[tokio::test]
async fn without_lease_rights_a_candidate_keeps_trying_and_stops_cleanly() -> Result<()> {
    let (control_plane, admin) = setup().await?;
    let name = unique_name("le-forbidden");
    let log = RequestLog::default();
    let client = counted_client(control_plane.restricted_kubeconfig(), None, &log).await?;
    let started = Instant::now();
    let b = Candidate::spawn(client, short_config(NAMESPACE, &name, "b_2"))?;
    test_harness::wait_until(PATIENCE, "three forbidden reads", async || {
        log.since(started).iter().filter(|r| r.status == Some(403)).count() >= 3
    })
    .await?;
    assert!(log.since(started).iter().all(|r| r.method == "GET"), "never writes without having read");
    assert_eq!(*b.state.borrow(), LeaderState::Standby { holder: None });
    let outcome = b.stop().await?;
    assert!(matches!(outcome, Outcome::NeverLed), "{outcome:?}");
    assert!(Api::<Lease>::namespaced(admin, NAMESPACE).get_opt(&name).await?.is_none());
    Ok(())
}

/// A leader behind `proxy`, a standby connected directly; `partition` breaks the leader's
/// connection. The leader must report Lost before the lease could expire, its fence must
/// close no later than renew_deadline after its last successful renewal, and it must be closed
/// before the standby leads.
async fn partitioned_leader_loses_before_anyone_takes_over(partition: fn(&TcpProxy)) -> Result<()> {
    let (control_plane, admin) = setup().await?;
    let name = unique_name("le-partition");
    let proxy = control_plane.apiserver_proxy()?;
    let leader_client = control_plane.client_via(control_plane.admin_kubeconfig(), &proxy).await?;
    let mut a = Candidate::spawn(leader_client, short_config(NAMESPACE, &name, "a_1"))?;
    let fence = a.wait_leading(PATIENCE).await?;
    let mut b = Candidate::spawn(control_plane.admin_client().await?, short_config(NAMESPACE, &name, "b_2"))?;
    let expected = LeaderState::Standby { holder: Some("a_1".to_owned()) };
    b.wait_state(PATIENCE, "observes a", |s| *s == expected).await?;
    // Wait until a renewed through the proxy at least twice.
    let first_valid_until = fence.valid_until().context("open fence")?;
    test_harness::wait_until(PATIENCE, "two renewals through the proxy", async || {
        fence.valid_until().is_some_and(|v| v >= first_valid_until + Duration::from_millis(1000))
    })
    .await?;
    assert!(fence.is_current());

    partition(&proxy);
    let partitioned_at = Instant::now();
    // Watch a's fence closely; every successful renewal was sent before the partition.
    let watcher = {
        let fence = fence.clone();
        tokio::spawn(async move {
            let mut last_valid_until = None;
            while let Some(valid_until) = fence.valid_until().filter(|_| fence.is_current()) {
                last_valid_until = Some(valid_until);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (last_valid_until, Instant::now())
        })
    };
    let mut b_state = b.state.clone();
    let b_leading =
        tokio::spawn(
            async move { wait_state(&mut b_state, PATIENCE, "b leading", |s| *s == LeaderState::Leading).await },
        );

    let outcome = a.outcome(PATIENCE).await?;
    let lost_after = partitioned_at.elapsed();
    let Outcome::Lost(lost) = outcome else { panic!("expected a loss, got {outcome:?}") };
    assert!(matches!(lost.reason, LostReason::RenewDeadlineExceeded { .. }), "{lost}");
    let (last_valid_until, closed_seen_at) = watcher.await?;
    let last_valid_until = last_valid_until.context("the fence was open at the partition")?;
    let renew_deadline = Duration::from_secs(2);
    let lease_duration = Duration::from_secs(3);
    assert!(
        last_valid_until <= partitioned_at + renew_deadline,
        "the fence stayed open past renew_deadline after the partition"
    );
    assert!(closed_seen_at <= last_valid_until + Duration::from_millis(250), "the fence closed late");
    assert!(
        lost_after < lease_duration,
        "Lost reported {lost_after:?} after the partition, not before the lease ran out"
    );

    let b_leading_at = b_leading.await??;
    assert!(!fence.is_current(), "b leads while a's fence is open");
    assert!(b_leading_at > last_valid_until, "b led before a's fence closed");
    let lease = read_lease(&admin, NAMESPACE, &name).await?;
    assert_eq!(holder(&lease), "b_2");
    assert_eq!(spec(&lease).lease_transitions, Some(1));
    tracing::info!(?lost_after, "partitioned leader reported the loss");
    proxy.restore();
    b.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_leader_cut_off_from_the_apiserver_loses_before_anyone_takes_over() -> Result<()> {
    partitioned_leader_loses_before_anyone_takes_over(TcpProxy::cut).await
}

#[tokio::test]
async fn a_leader_whose_connection_hangs_loses_before_anyone_takes_over() -> Result<()> {
    partitioned_leader_loses_before_anyone_takes_over(TcpProxy::blackhole).await
}
