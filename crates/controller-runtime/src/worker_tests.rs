use super::*;
use crate::workqueue::ExponentialBackoff;
use k8s_openapi::api::core::v1::Node;
use std::collections::HashMap;

fn key(name: &str) -> ObjectRef<Node> {
    ObjectRef::new(name)
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct TestError(&'static str);

impl ReconcileError for TestError {
    fn event_reason(&self) -> Option<&str> {
        Some("TestFailed")
    }
    fn is_transient(&self) -> bool {
        self.0 == "outage"
    }
    fn retry_after(&self) -> Option<Duration> {
        (self.0 == "pending").then_some(Duration::from_secs(42))
    }
}

/// Answers per key from a script; records every call with its (paused) time.
#[derive(Default)]
struct Scripted {
    answers: Mutex<HashMap<&'static str, Vec<Result<Reconciled, &'static str>>>>,
    calls: Mutex<Vec<(String, tokio::time::Instant)>>,
}

impl Reconciler for Scripted {
    type Resource = Node;
    type Error = TestError;
    async fn reconcile(&self, key: &ObjectRef<Node>) -> Result<Reconciled, TestError> {
        self.calls.lock().expect("lock").push((key.name.clone(), tokio::time::Instant::now()));
        let mut answers = self.answers.lock().expect("lock");
        let script = answers.get_mut(key.name.as_str()).expect("scripted key");
        let next = if script.len() > 1 { script.remove(0) } else { script[0] };
        next.map_err(TestError)
    }
    fn regarding(&self, _: &ObjectRef<Node>) -> Option<ObjectReference> {
        None
    }
}

fn calls_of(r: &Scripted, key: &str) -> Vec<tokio::time::Instant> {
    r.calls.lock().expect("lock").iter().filter(|(k, _)| k == key).map(|(_, t)| *t).collect()
}

type Script = Vec<(&'static str, Vec<Result<Reconciled, &'static str>>)>;

/// An hour-long backoff: a key that failed is not retried by its backoff during a test.
const SLOW: ExponentialBackoff = ExponentialBackoff { base: Duration::from_secs(3600), max: Duration::from_secs(3600) };

async fn start(
    script: Script,
    backoff: ExponentialBackoff,
) -> (Arc<Scripted>, WorkQueue<ObjectRef<Node>>, CancellationToken) {
    let r = Arc::new(Scripted { answers: Mutex::new(script.into_iter().collect()), ..Default::default() });
    let token = CancellationToken::new();
    let queue = WorkQueue::new("test", backoff, token.clone());
    tokio::spawn(Workers::new(r.clone(), queue.clone(), WorkerConfig::new("test", 2)).run());
    (r, queue, token)
}

async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn errors_back_off_per_key_and_success_forgets() {
    let (r, q, token) = start(
        vec![("k", vec![Err("bad"), Err("bad"), Err("bad"), Ok(Reconciled::DONE)])],
        ExponentialBackoff::CONTROLLER_DEFAULT,
    )
    .await;
    q.add(key("k"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let calls = calls_of(&r, "k");
    assert_eq!(calls.len(), 4, "three failures, then success");
    // client-go's per-key backoff: 5 ms, 10 ms, 20 ms between attempts.
    let gaps: Vec<Duration> = calls.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, vec![Duration::from_millis(5), Duration::from_millis(10), Duration::from_millis(20)]);
    assert_eq!(q.failures(&key("k")), 0, "success forgets the failures");
    token.cancel();
}

#[tokio::test(start_paused = true)]
async fn retry_after_waits_exactly_that_long_without_counting_a_failure() {
    let (r, q, token) = start(vec![("svc", vec![Err("pending"), Ok(Reconciled::DONE)])], SLOW).await;
    q.add(key("svc"));
    settle().await;
    assert_eq!(q.failures(&key("svc")), 0, "upstream RetryError: no rate-limited requeue");
    tokio::time::sleep(Duration::from_secs(41)).await;
    assert_eq!(calls_of(&r, "svc").len(), 1, "not before 42 s");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls = calls_of(&r, "svc");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1] - calls[0], Duration::from_secs(42));
    token.cancel();
}

#[tokio::test(start_paused = true)]
async fn requeue_after_reconciles_again_later() {
    let requeue = Reconciled { remote_answered: false, requeue_after: Some(Duration::from_secs(10)) };
    let (r, q, token) = start(vec![("k", vec![Ok(requeue), Ok(Reconciled::DONE)])], SLOW).await;
    q.add(key("k"));
    tokio::time::sleep(Duration::from_secs(11)).await;
    let calls = calls_of(&r, "k");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1] - calls[0], Duration::from_secs(10));
    token.cancel();
}

#[tokio::test(start_paused = true)]
async fn an_answer_from_the_remote_side_retries_every_transient_failure_at_once() {
    let (r, q, token) = start(
        vec![
            ("a", vec![Err("outage"), Ok(Reconciled::DONE)]),
            ("b", vec![Err("outage"), Ok(Reconciled::DONE)]),
            ("c", vec![Ok(Reconciled::ANSWERED)]),
        ],
        SLOW,
    )
    .await;
    // a and b fail: their backoff is an hour.
    q.add(key("a"));
    q.add(key("b"));
    settle().await;
    assert_eq!((calls_of(&r, "a").len(), calls_of(&r, "b").len()), (1, 1));
    // c's reconcile reaches the remote side: a and b are retried now, not in an hour.
    q.add(key("c"));
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!((calls_of(&r, "a").len(), calls_of(&r, "b").len()), (2, 2));
    assert_eq!(q.failures(&key("a")), 0, "the retry succeeded");
    token.cancel();
}

#[tokio::test(start_paused = true)]
async fn the_recovery_probe_retries_one_transient_failure_per_interval() {
    let (r, q, token) = start(vec![("a", vec![Err("outage")]), ("x", vec![Err("bad")])], SLOW).await;
    q.add(key("a"));
    q.add(key("x"));
    settle().await;
    let start = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(61)).await;
    let calls = calls_of(&r, "a");
    assert_eq!(calls.len(), 3, "probed at 30 s and 60 s although its backoff is an hour");
    assert_eq!(calls[1] - start, Duration::from_secs(30));
    assert_eq!(calls_of(&r, "x").len(), 1, "a non-transient failure is not probed");
    token.cancel();
}

/// Panics the first time it reconciles `boom`; everything else succeeds.
#[derive(Default)]
struct PanicsOnce {
    calls: Mutex<Vec<(String, tokio::time::Instant)>>,
}

impl Reconciler for PanicsOnce {
    type Resource = Node;
    type Error = TestError;
    async fn reconcile(&self, key: &ObjectRef<Node>) -> Result<Reconciled, TestError> {
        let first = {
            let mut calls = self.calls.lock().expect("lock");
            calls.push((key.name.clone(), tokio::time::Instant::now()));
            calls.iter().filter(|(k, _)| *k == key.name).count() == 1
        };
        if key.name == "boom" && first {
            panic!("reconciling boom hit a bug");
        }
        Ok(Reconciled::DONE)
    }
    fn regarding(&self, _: &ObjectRef<Node>) -> Option<ObjectReference> {
        None
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_reconcile_is_counted_and_its_key_retried_with_backoff() {
    let metrics = RuntimeMetrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let r = Arc::new(PanicsOnce::default());
    let token = CancellationToken::new();
    let q = WorkQueue::new("test", ExponentialBackoff::CONTROLLER_DEFAULT, token.clone());
    // One worker: if the panic took it down, nothing else would ever be reconciled.
    tokio::spawn(Workers::new(r.clone(), q.clone(), WorkerConfig::new("test", 1)).metrics(metrics).run());
    q.add(key("boom"));
    q.add(key("other"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t0 = r.calls.lock().expect("lock").first().map(|(_, t)| *t);
    let calls: Vec<(String, Duration)> =
        r.calls.lock().expect("lock").iter().map(|(k, t)| (k.clone(), t.duration_since(t0.unwrap_or(*t)))).collect();
    // The panic released the key: `other` is reconciled, then `boom` again after the first
    // backoff step (5 ms), and its success forgets the failure.
    assert_eq!(
        calls,
        vec![
            ("boom".to_owned(), Duration::ZERO),
            ("other".to_owned(), Duration::ZERO),
            ("boom".to_owned(), Duration::from_millis(5))
        ]
    );
    assert_eq!(q.failures(&key("boom")), 0);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    for needle in [
        "controller_reconcile_panics_total{controller=\"test\"} 1\n",
        "controller_reconcile_total{controller=\"test\",result=\"error\"} 1\n",
        "controller_reconcile_total{controller=\"test\",result=\"success\"} 2\n",
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }
    token.cancel();
}

/// Fails every key, and panics when asked which object a failure is about.
struct BrokenRegarding;

impl Reconciler for BrokenRegarding {
    type Resource = Node;
    type Error = TestError;
    async fn reconcile(&self, _: &ObjectRef<Node>) -> Result<Reconciled, TestError> {
        Err(TestError("bad"))
    }
    fn regarding(&self, _: &ObjectRef<Node>) -> Option<ObjectReference> {
        panic!("regarding hit a bug");
    }
}

#[tokio::test(start_paused = true)]
async fn a_panic_outside_a_reconcile_ends_run_with_that_panic() {
    let token = CancellationToken::new();
    let q = WorkQueue::new("test", SLOW, token.clone());
    let run = tokio::spawn(Workers::new(Arc::new(BrokenRegarding), q.clone(), WorkerConfig::new("test", 2)).run());
    q.add(key("k"));
    let joined = tokio::time::timeout(Duration::from_secs(1), run).await.expect("run ends with the panic");
    let panic = joined.err().filter(|e| e.is_panic()).map(|e| e.into_panic());
    assert_eq!(panic.as_deref().map(panic_message), Some("regarding hit a bug"));
    assert!(!token.is_cancelled(), "ended by the panic, not by shutdown");
}

#[test]
fn keys_show_as_namespace_slash_name() {
    use k8s_openapi::api::core::v1::Service;
    let mut svc = Service::default();
    svc.metadata.name = Some("web".into());
    assert_eq!(KeyName(&key_of(&svc)).to_string(), "web");
    svc.metadata.namespace = Some(String::new());
    assert_eq!(key_of(&svc), ObjectRef::new("web"), "an empty namespace is none");
    svc.metadata.namespace = Some("shop".into());
    svc.metadata.uid = Some("u-1".into());
    assert_eq!(key_of(&svc), ObjectRef::new("web").within("shop"));
    assert_eq!(KeyName(&key_of(&svc)).to_string(), "shop/web");
    assert_eq!(key_of(&Node::default()).name, "", "no panic without a name");
}

#[test]
fn panic_messages_of_literals_and_format_strings() {
    let literal = std::panic::catch_unwind(|| panic!("plain")).err();
    assert_eq!(literal.as_deref().map(panic_message), Some("plain"));
    let formatted = std::panic::catch_unwind(|| panic!("key {}", 7)).err();
    assert_eq!(formatted.as_deref().map(panic_message), Some("key 7"));
    let other = std::panic::catch_unwind(|| std::panic::panic_any(42_u8)).err();
    assert_eq!(other.as_deref().map(panic_message), Some("a panic without a message"));
}
