use std::collections::VecDeque;

use super::*;

#[derive(Debug, thiserror::Error)]
#[error("{0:?}")]
struct TestError(Answer);

impl ReconcileError for TestError {
    fn event_reason(&self) -> Option<&str> {
        None
    }
    fn is_transient(&self) -> bool {
        self.0 == Answer::Outage
    }
    fn retry_after(&self) -> Option<Duration> {
        (self.0 == Answer::Pending).then_some(Duration::from_secs(42))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Done,
    Failed,
    Outage,
    Pending,
    Panic,
}

/// Answers passes from a script (then `Done`), each taking `takes`; records when each started,
/// as seconds since the test began.
struct Script {
    answers: Mutex<VecDeque<Answer>>,
    starts: Mutex<Vec<u64>>,
    takes: Duration,
    t0: Instant,
}

impl Script {
    async fn pass(&self) -> Result<Reconciled, TestError> {
        self.starts.lock_unpoisoned().push((Instant::now() - self.t0).as_secs());
        tokio::time::sleep(self.takes).await;
        let answer = self.answers.lock_unpoisoned().pop_front().unwrap_or(Answer::Done);
        match answer {
            Answer::Done => Ok(Reconciled::DONE),
            Answer::Panic => panic!("the pass hit a bug"),
            other => Err(TestError(other)),
        }
    }

    fn starts(&self) -> Vec<u64> {
        self.starts.lock_unpoisoned().clone()
    }
}

const SEC: Duration = Duration::from_secs(1);

fn config(min_interval: u64, timer: PassTimer) -> PassConfig {
    PassConfig {
        min_interval: Duration::from_secs(min_interval),
        timer,
        backoff: ExponentialBackoff { base: 10 * SEC, max: 40 * SEC },
        ..PassConfig::new("test")
    }
}

struct Running {
    script: Arc<Script>,
    trigger: PassTrigger,
    token: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Triggers at `at` seconds since the test began.
    async fn trigger_at(&self, at: u64) {
        tokio::time::sleep_until(self.script.t0 + Duration::from_secs(at)).await;
        self.trigger.trigger();
    }

    /// The pass starts once the clock reached `until` seconds.
    async fn starts_until(&self, until: u64) -> Vec<u64> {
        tokio::time::sleep_until(self.script.t0 + Duration::from_secs(until)).await;
        self.script.starts()
    }
}

/// Runs passes answered by `answers` (each taking `takes_secs`) with `config` and `metrics`;
/// the runner is triggered once before it starts, as controllers do.
fn start(config: PassConfig, answers: &[Answer], takes_secs: u64, metrics: RuntimeMetrics) -> Running {
    let script = Arc::new(Script {
        answers: Mutex::new(answers.iter().copied().collect()),
        starts: Mutex::default(),
        takes: Duration::from_secs(takes_secs),
        t0: Instant::now(),
    });
    let token = CancellationToken::new();
    let passes = Passes::new(config, token.clone()).metrics(metrics);
    let trigger = passes.trigger();
    trigger.trigger();
    let s = script.clone();
    let task = tokio::spawn(passes.run(move || {
        let s = s.clone();
        async move { s.pass().await }
    }));
    Running { script, trigger, token, task }
}

#[tokio::test(start_paused = true)]
async fn triggered_passes_start_at_least_the_min_interval_apart() {
    let r = start(config(10, PassTimer::None), &[], 0, RuntimeMetrics::default());
    r.trigger_at(1).await;
    r.trigger_at(25).await;
    assert_eq!(r.starts_until(100).await, vec![0, 10, 25], "at once, then paced, then at once again");
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_triggers_is_one_pass() {
    let r = start(config(10, PassTimer::None), &[], 0, RuntimeMetrics::default());
    tokio::time::sleep(SEC).await;
    for _ in 0..50 {
        r.trigger.trigger();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(r.starts_until(100).await, vec![0, 10]);
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_trigger_during_a_pass_brings_exactly_one_more_pass() {
    // Passes take 5 s; three triggers during the first one.
    let r = start(config(0, PassTimer::None), &[], 5, RuntimeMetrics::default());
    for at in [1, 2, 3] {
        r.trigger_at(at).await;
    }
    assert_eq!(r.starts_until(100).await, vec![0, 5], "one pass right after the first, then none");

    // Paced: the follow-up waits for the min interval after the start of the pass.
    let r = start(config(10, PassTimer::None), &[], 5, RuntimeMetrics::default());
    r.trigger_at(3).await;
    assert_eq!(r.starts_until(100).await, vec![0, 10]);
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_pass_that_started_after_a_trigger_covers_it() {
    // The first pass fails; its retry (4 s) comes before the paced pass a trigger at 1 s asks
    // for (10 s): the retry read the cache with the change in it, so no pass at 10 s.
    let config =
        PassConfig { backoff: ExponentialBackoff { base: 4 * SEC, max: 40 * SEC }, ..config(10, PassTimer::None) };
    let r = start(config, &[Answer::Failed], 0, RuntimeMetrics::default());
    r.trigger_at(1).await;
    assert_eq!(r.starts_until(60).await, vec![0, 4]);
    // A trigger after that pass started is not covered by it: it gets the next slot.
    r.trigger_at(61).await;
    assert_eq!(r.starts_until(100).await, vec![0, 4, 61]);
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_safety_resync_runs_when_no_pass_started_for_the_resync_period() {
    let r = start(config(10, PassTimer::Resync(60 * SEC)), &[], 0, RuntimeMetrics::default());
    r.trigger_at(30).await;
    assert_eq!(r.starts_until(200).await, vec![0, 30, 90, 150], "resync counted from the last pass");
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn periodic_passes_do_not_slide() {
    // Passes take 5 s; the period counts from the start, not from the end of a pass.
    let r = start(config(10, PassTimer::Every(30 * SEC)), &[], 5, RuntimeMetrics::default());
    assert_eq!(r.starts_until(100).await, vec![0, 30, 60, 90]);
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn sliding_passes_start_a_period_after_the_previous_one_ended() {
    // Passes take 5 s; the next starts 30 s after one ended (upstream's `wait.Until`).
    let r = start(config(10, PassTimer::Sliding(30 * SEC)), &[], 5, RuntimeMetrics::default());
    assert_eq!(r.starts_until(100).await, vec![0, 35, 70]);
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_sliding_pass_that_panics_is_retried_with_backoff_not_a_period_later() {
    let metrics = RuntimeMetrics::default();
    let r = start(config(0, PassTimer::Sliding(3600 * SEC)), &[Answer::Panic], 0, metrics.clone());
    assert_eq!(r.starts_until(100).await, vec![0, 10], "the retry after the 10 s backoff");
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    assert!(text.contains("controller_reconcile_panics_total{controller=\"test\"} 1\n"), "{text}");
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn failures_back_off_and_a_success_resets_the_backoff() {
    use Answer::{Done, Failed};
    // 10 s doubling up to 40 s; after the success, a new failure starts again at 10 s.
    let r = start(config(0, PassTimer::None), &[Failed, Failed, Failed, Failed, Done], 0, RuntimeMetrics::default());
    assert_eq!(r.starts_until(200).await, vec![0, 10, 30, 70, 110], "delays 10, 20, 40, 40");
    r.script.answers.lock_unpoisoned().push_back(Failed);
    r.trigger_at(200).await;
    assert_eq!(r.starts_until(300).await, vec![0, 10, 30, 70, 110, 200, 210]);
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn transient_failures_are_retried_at_least_every_recovery_probe() {
    use Answer::Outage;
    let config = PassConfig {
        backoff: ExponentialBackoff { base: 10 * SEC, max: 3600 * SEC },
        recovery_probe: 30 * SEC,
        ..config(0, PassTimer::None)
    };
    let r = start(config, &[Outage, Outage, Outage, Outage], 0, RuntimeMetrics::default());
    assert_eq!(r.starts_until(200).await, vec![0, 10, 30, 60, 90], "delays 10, 20, then the probe's 30");
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_requested_retry_delay_is_waited_exactly_without_backoff() {
    let r = start(config(0, PassTimer::None), &[Answer::Pending, Answer::Failed], 0, RuntimeMetrics::default());
    assert_eq!(r.starts_until(100).await, vec![0, 42, 52], "42 s, then the first backoff step");
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_panicking_pass_is_counted_and_retried_with_backoff() {
    let metrics = RuntimeMetrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let r = start(config(0, PassTimer::None), &[Answer::Panic], 0, metrics);
    assert_eq!(r.starts_until(100).await, vec![0, 10], "the runner goes on after the panic");
    assert!(!r.task.is_finished());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    for needle in [
        "controller_reconcile_panics_total{controller=\"test\"} 1\n",
        "controller_reconcile_total{controller=\"test\",result=\"error\"} 1\n",
        "controller_reconcile_total{controller=\"test\",result=\"success\"} 1\n",
        "workqueue_adds_total{name=\"test\"} 1\n",
        "workqueue_retries_total{name=\"test\"} 1\n",
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }
    r.token.cancel();
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_the_runner_during_a_pass_and_between_passes() {
    // During a pass that would take an hour.
    let r = start(config(0, PassTimer::None), &[], 3600, RuntimeMetrics::default());
    tokio::time::sleep(SEC).await;
    r.token.cancel();
    tokio::time::timeout(SEC, r.task).await.expect("ends at once").expect("no panic");

    // Between passes, with a resync pending.
    let r = start(config(0, PassTimer::Resync(60 * SEC)), &[], 0, RuntimeMetrics::default());
    tokio::time::sleep(SEC).await;
    r.token.cancel();
    tokio::time::timeout(SEC, r.task).await.expect("ends at once").expect("no panic");
    assert_eq!(r.script.starts(), vec![0]);
}
