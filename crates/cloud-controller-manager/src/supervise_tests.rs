use std::time::Duration;

use controller_runtime::Informer;
use controller_serving::Outcome;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::watcher;

use super::*;

/// Polls `check` until it holds or `within` passed.
async fn eventually(within: Duration, check: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while !check() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// A flag and the callback that raises it.
fn raised_flag() -> (Arc<AtomicBool>, impl FnOnce() + Send + 'static) {
    let flag = Arc::new(AtomicBool::new(false));
    let raise = flag.clone();
    (flag, move || raise.store(true, Ordering::Relaxed))
}

fn passes(health: &Health, probe: Probe) -> bool {
    health.run(probe, &[]).passed()
}

#[tokio::test]
async fn a_controller_that_panics_turns_healthz_red() {
    let health = Health::new();
    let task = async { panic!("the controller's loop hit a bug") };
    let (flag, stopped) = raised_flag();
    let supervised = Supervised::controller("panicky-controller", CancellationToken::new());
    let supervised = tokio::spawn(supervise(supervised, task, &health, stopped));
    assert!(
        eventually(Duration::from_secs(5), || !passes(&health, Probe::Healthz)).await,
        "/healthz stays green after the panic"
    );
    assert!(flag.load(Ordering::Relaxed), "the controller is reported as no longer running");
    assert_eq!(
        health.run_one(Probe::Healthz, "panicky-controller"),
        Some(Outcome::Failed("panicky-controller stopped".to_owned()))
    );
    assert!(passes(&health, Probe::Readyz), "a controller is not part of readiness");
    assert!(supervised.await.is_ok(), "the supervisor itself does not panic");
}

#[tokio::test]
async fn a_controller_that_returns_early_turns_healthz_red_but_not_one_stopped_on_purpose() {
    let health = Health::new();
    let (flag, stopped) = raised_flag();
    let supervised = Supervised::controller("early-controller", CancellationToken::new());
    tokio::spawn(supervise(supervised, async {}, &health, stopped)).await.expect("the supervisor does not panic");
    assert!(!passes(&health, Probe::Healthz));
    assert!(flag.load(Ordering::Relaxed));

    let health = Health::new();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let (flag, stopped) = raised_flag();
    let supervised = Supervised::controller("stopped-controller", stop.clone());
    let supervised = tokio::spawn(supervise(supervised, async move { token.cancelled().await }, &health, stopped));
    assert!(passes(&health, Probe::Healthz));
    stop.cancel();
    supervised.await.expect("the supervisor does not panic");
    assert!(passes(&health, Probe::Healthz), "a controller stopped by the manager is not a failure");
    assert!(!flag.load(Ordering::Relaxed));
}

#[tokio::test]
async fn an_informer_that_ends_or_panics_turns_healthz_and_readyz_red() {
    let health = Health::new();
    let shutdown = CancellationToken::new();
    let (_, stopped) = raised_flag();
    tokio::spawn(supervise(Supervised::informer("Node", shutdown.clone()), async {}, &health, stopped))
        .await
        .expect("the supervisor does not panic");
    for probe in [Probe::Healthz, Probe::Readyz] {
        assert_eq!(
            health.run_one(probe, "node-informer"),
            Some(Outcome::Failed("the Node informer stopped".to_owned())),
            "{probe}"
        );
    }

    let health = Health::new();
    let (_, stopped) = raised_flag();
    let task = async { panic!("the watch hit a bug") };
    tokio::spawn(supervise(Supervised::informer("Service", shutdown.clone()), task, &health, stopped))
        .await
        .expect("the supervisor does not panic");
    assert!(!passes(&health, Probe::Healthz) && !passes(&health, Probe::Readyz));
    assert_eq!(health.names(Probe::Readyz), ["service-informer"]);
}

#[tokio::test]
async fn an_event_queue_that_ends_turns_healthz_and_readyz_red_but_not_at_shutdown() {
    let health = Health::new();
    let (_, stopped) = raised_flag();
    let supervised = Supervised::event_queue(CancellationToken::new());
    tokio::spawn(supervise(supervised, async {}, &health, stopped)).await.expect("the supervisor does not panic");
    for probe in [Probe::Healthz, Probe::Readyz] {
        assert_eq!(
            health.run_one(probe, "provider-events"),
            Some(Outcome::Failed("the provider's event queue stopped".to_owned())),
            "{probe}"
        );
    }

    let health = Health::new();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let (_, stopped) = raised_flag();
    let supervised = Supervised::event_queue(shutdown.clone());
    let queue = tokio::spawn(supervise(supervised, async move { token.cancelled().await }, &health, stopped));
    shutdown.cancel();
    queue.await.expect("the supervisor does not panic");
    assert!(passes(&health, Probe::Healthz) && passes(&health, Probe::Readyz), "ending at shutdown is no failure");
}

#[tokio::test]
async fn informer_sync_fails_until_every_informer_synced_and_once_one_stopped() {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
    let client = kube::Client::try_from(config).expect("a client");
    let informer = Informer::<Node>::new(Api::all(client), watcher::Config::default());
    let synced = [("Node", informer.synced())];
    assert_eq!(informers_synced(&synced), Err("the Node informer has not synced yet".to_owned()));
    // Its task ended (the informer is dropped with it, however it ended).
    drop(informer);
    assert_eq!(informers_synced(&synced), Err("the Node informer stopped".to_owned()));
    assert_eq!(informers_synced(&[]), Ok(()));
}
