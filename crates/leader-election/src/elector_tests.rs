//! Timing of the async loops under `tokio::time::pause()`, with an API server that cannot be
//! reached (requests fail at once, or never answer): no network, no stand-in of the
//! Kubernetes API. Everything involving real answers is tested against a real API server in
//! `tests/apiserver.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::record::{LeaderRecord, Snapshot};

const ME: &str = "me_1";

/// How the unreachable API server behaves.
#[derive(Clone, Copy)]
enum Failure {
    /// Every request fails at once (connection refused).
    Refused,
    /// No request is ever answered.
    Hang,
}

/// A transport to nowhere that records the method and time of every request.
#[derive(Clone)]
struct Unreachable {
    failure: Failure,
    calls: Arc<Mutex<Vec<(http::Method, Instant)>>>,
}

type Response = http::Response<kube::client::Body>;

impl tower::Service<http::Request<kube::client::Body>> for Unreachable {
    type Response = Response;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response, std::io::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        self.calls.lock().expect("lock").push((request.method().clone(), Instant::now()));
        match self.failure {
            Failure::Refused => Box::pin(std::future::ready(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "connection refused",
            )))),
            Failure::Hang => Box::pin(std::future::pending()),
        }
    }
}

struct Setup {
    elector: LeaderElector,
    calls: Arc<Mutex<Vec<(http::Method, Instant)>>>,
}

impl Setup {
    fn new(failure: Failure) -> Setup {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let client = kube::Client::new(Unreachable { failure, calls: calls.clone() }, "default");
        let config = ElectionConfig {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(500),
            ..ElectionConfig::new("ns", "lock", ME)
        };
        Setup { elector: LeaderElector::new(client, config).expect("valid config"), calls }
    }

    /// A leadership as if a write sent at `sent` had just made us leader.
    fn leadership(&self, sent: Instant) -> Leadership {
        let mut lease = Lease::default();
        lease.metadata.name = Some("lock".to_owned());
        lease.metadata.namespace = Some("ns".to_owned());
        lease.metadata.resource_version = Some("1".to_owned());
        LeaderRecord::created(ME, 3, Timestamp::now()).write_into(&mut lease);
        Leadership::start(self.elector.ctx.clone(), Snapshot::new(lease), sent)
    }

    /// Offsets from `t0` of the recorded requests, with their methods.
    fn calls_since(&self, t0: Instant) -> Vec<(String, Duration)> {
        self.calls.lock().expect("lock").iter().map(|(m, t)| (m.to_string(), t.duration_since(t0))).collect()
    }
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

#[tokio::test(start_paused = true)]
async fn keep_reports_lost_at_the_renew_deadline_when_requests_hang() {
    let setup = Setup::new(Failure::Hang);
    let t0 = Instant::now();
    let mut leadership = setup.leadership(t0);
    let fence = leadership.fence();
    let mut state = setup.elector.state();
    assert_eq!(*state.borrow_and_update(), LeaderState::Leading);

    let lost = leadership.keep(&CancellationToken::new()).await.expect_err("lost");
    assert_eq!(t0.elapsed(), ms(2000), "lost exactly at the renew deadline");
    assert_eq!(
        lost.reason,
        LostReason::RenewDeadlineExceeded {
            since_renewal: ms(2000),
            last_error: Some("renewing: no answer within 1.5s".to_owned()),
        }
    );
    // One renewal, sent after one retry period, whose timeout ended at the deadline.
    assert_eq!(setup.calls_since(t0), [("PUT".to_owned(), ms(500))]);
    assert!(!fence.is_current());
    assert!(fence.lost().is_cancelled());
    assert!(matches!(
        *state.borrow_and_update(),
        LeaderState::Lost { reason: LostReason::RenewDeadlineExceeded { .. } }
    ));
    // Sticky.
    assert_eq!(leadership.keep(&CancellationToken::new()).await, Err(lost));
}

#[tokio::test(start_paused = true)]
async fn keep_retries_every_retry_period_until_the_deadline_when_requests_fail() {
    let setup = Setup::new(Failure::Refused);
    let t0 = Instant::now();
    let mut leadership = setup.leadership(t0);
    let lost = leadership.keep(&CancellationToken::new()).await.expect_err("lost");
    assert_eq!(t0.elapsed(), ms(2000));
    let puts: Vec<Duration> = setup
        .calls_since(t0)
        .into_iter()
        .map(|(m, t)| {
            assert_eq!(m, "PUT");
            t
        })
        .collect();
    assert_eq!(puts, [ms(500), ms(1000), ms(1500)]);
    let LostReason::RenewDeadlineExceeded { last_error: Some(error), .. } = &lost.reason else {
        panic!("unexpected reason {lost:?}")
    };
    assert!(error.starts_with("renewing: "), "{error}");
}

#[tokio::test(start_paused = true)]
async fn fence_closes_and_lost_fires_at_the_deadline_even_without_keep() {
    let setup = Setup::new(Failure::Hang);
    let t0 = Instant::now();
    let leadership = setup.leadership(t0);
    let fence = leadership.fence();
    let health = setup.elector.health_check(ms(1000));
    tokio::time::sleep(ms(1999)).await;
    assert!(fence.is_current());
    assert_eq!(fence.remaining(), Some(ms(1)));
    fence.lost().cancelled().await;
    assert_eq!(t0.elapsed(), ms(2000));
    assert!(!fence.is_current());
    assert!(matches!(*setup.elector.state().borrow(), LeaderState::Lost { .. }));
    assert!(setup.calls_since(t0).is_empty(), "nobody asked for a renewal");
    // We still believe we lead (the process should have stopped): unhealthy once the lease
    // expired more than the tolerance ago.
    tokio::time::sleep_until(t0 + ms(4000)).await;
    assert_eq!(health.check(), Ok(()));
    tokio::time::sleep(ms(1)).await;
    assert!(health.check().is_err());
    drop(leadership);
}

#[tokio::test(start_paused = true)]
async fn keep_returns_ok_on_stop_and_the_deadline_still_applies_afterwards() {
    let setup = Setup::new(Failure::Hang);
    let t0 = Instant::now();
    let mut leadership = setup.leadership(t0);
    let fence = leadership.fence();
    let stop = CancellationToken::new();
    let stopper = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ms(700)).await;
            stop.cancel();
        })
    };
    assert_eq!(leadership.keep(&stop).await, Ok(()));
    assert_eq!(t0.elapsed(), ms(700));
    stopper.await.expect("stopper");
    assert!(fence.is_current(), "stopping is not losing");
    assert_eq!(*setup.elector.state().borrow(), LeaderState::Leading);
    // Keeping again continues the same term with the same deadline.
    let lost = leadership.keep(&CancellationToken::new()).await.expect_err("lost");
    assert_eq!(t0.elapsed(), ms(2000));
    assert!(matches!(lost.reason, LostReason::RenewDeadlineExceeded { .. }));
}

#[tokio::test(start_paused = true)]
async fn release_closes_the_fence_before_it_writes_and_is_bounded() {
    let setup = Setup::new(Failure::Hang);
    let t0 = Instant::now();
    let leadership = setup.leadership(t0);
    let fence = leadership.fence();
    let release = tokio::spawn(leadership.release());
    // Let the release start its (never answered) PUT.
    while setup.calls_since(t0).is_empty() {
        tokio::task::yield_now().await;
    }
    assert!(!fence.is_current(), "the fence closed before the release was sent");
    assert!(fence.lost().is_cancelled());
    let result = release.await.expect("task");
    assert!(matches!(result, Err(Error::Timeout { operation: "releasing", .. })), "{result:?}");
    assert_eq!(t0.elapsed(), ms(2000), "bounded by the renew deadline");
    assert_eq!(setup.calls_since(t0), [("PUT".to_owned(), ms(0))]);
    // A failed release does not claim to have released; the health check no longer blames us.
    assert_eq!(*setup.elector.state().borrow(), LeaderState::Stopped);
    assert_eq!(setup.elector.health_check(Duration::ZERO).check(), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn dropping_a_leadership_ends_its_term() {
    let setup = Setup::new(Failure::Hang);
    let leadership = setup.leadership(Instant::now());
    let fence = leadership.fence();
    drop(leadership);
    assert!(!fence.is_current());
    assert!(fence.lost().is_cancelled());
    assert_eq!(*setup.elector.state().borrow(), LeaderState::Stopped);
}

#[tokio::test(start_paused = true)]
async fn standby_polls_every_retry_period_plus_at_most_twenty_percent() {
    let setup = Setup::new(Failure::Refused);
    let t0 = Instant::now();
    let shutdown = CancellationToken::new();
    let stopper = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            shutdown.cancel();
        })
    };
    assert!(setup.elector.acquire(&shutdown).await.is_none(), "never acquired");
    assert_eq!(t0.elapsed(), Duration::from_secs(60), "returns as soon as shutdown fires");
    stopper.await.expect("stopper");
    let calls = setup.calls_since(t0);
    assert!(calls.iter().all(|(method, _)| method == "GET"), "a standby that cannot read never writes");
    assert_eq!(calls[0].1, Duration::ZERO, "the first read is immediate");
    let intervals: Vec<Duration> = calls.windows(2).map(|w| w[1].1 - w[0].1).collect();
    for interval in &intervals {
        // Tokio's timer rounds up to whole milliseconds, so 0.5999 s fires at 0.6 s.
        assert!(*interval >= ms(500) && *interval <= ms(600), "interval {interval:?} outside [0.5s, 0.6s]");
    }
    // 60 s at 0.5–0.6 s per poll: 100 to 121 reads, and the jitter is not constant.
    assert!((100..=121).contains(&calls.len()), "{} reads", calls.len());
    assert!(intervals.iter().any(|i| *i != intervals[0]), "jittered");
    assert_eq!(*setup.elector.state().borrow(), LeaderState::Standby { holder: None });
}

#[tokio::test(start_paused = true)]
async fn acquire_returns_none_at_once_when_shutdown_already_fired() {
    let setup = Setup::new(Failure::Hang);
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    let t0 = Instant::now();
    assert!(setup.elector.acquire(&shutdown).await.is_none());
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert!(setup.calls_since(t0).is_empty());
}

#[tokio::test(start_paused = true)]
async fn shutdown_interrupts_a_hanging_standby_read() {
    let setup = Setup::new(Failure::Hang);
    let shutdown = CancellationToken::new();
    let t0 = Instant::now();
    let stopper = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ms(300)).await;
            shutdown.cancel();
        })
    };
    assert!(setup.elector.acquire(&shutdown).await.is_none());
    assert_eq!(t0.elapsed(), ms(300));
    stopper.await.expect("stopper");
    assert_eq!(setup.calls_since(t0), [("GET".to_owned(), Duration::ZERO)]);
}
