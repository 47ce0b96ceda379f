//! Shared helpers of the failure-mode tests: a fake on 127.0.0.1, a client for it with
//! test-sized retry/poll policies, and an observer that records starts and ends.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hcloud_api::models::{LoadBalancerId, NetworkId, ServerId};
use hcloud_api::{Client, ClientBuilder, PollPolicy, RequestEvent, RequestObserver, RequestStart, RetryPolicy};
use hcloud_api::{Error, SecretString};
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};

pub const TOKEN: &str = "hcloud-test-token-0d9c8b7a6f5e4d3c2b1a";

/// Generous bound for waits that are expected to succeed.
pub const WAIT: Duration = Duration::from_secs(10);

/// Action delay where the test finishes actions itself.
pub const FOREVER: Duration = Duration::from_secs(3600);

/// Action delay where actions finish on their own.
pub const SHORT_ACTION: Duration = Duration::from_millis(40);

/// One exchange as the observer saw it: (method, template, api_endpoint, status, attempt).
pub type Seen = (String, &'static str, String, Option<u16>, u32);

/// Records `started` and `observe` calls and keeps an in-flight gauge.
#[derive(Debug, Default)]
pub struct Recorder {
    pub started: Mutex<Vec<(String, String, u32)>>,
    pub finished: Mutex<Vec<Seen>>,
    /// (status, trial) of every ended exchange.
    pub trials: Mutex<Vec<(Option<u16>, bool)>>,
    pub in_flight: AtomicI64,
    pub max_in_flight: AtomicI64,
}

impl RequestObserver for Recorder {
    fn started(&self, r: &RequestStart<'_>) {
        self.started.lock().unwrap().push((r.method.to_string(), r.api_endpoint.to_owned(), r.attempt));
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
    }

    fn observe(&self, e: &RequestEvent<'_>) {
        self.finished.lock().unwrap().push((
            e.method.to_string(),
            e.endpoint,
            e.api_endpoint.to_owned(),
            e.status,
            e.attempt,
        ));
        self.trials.lock().unwrap().push((e.status, e.trial));
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Recorder {
    pub fn take(&self) -> Vec<Seen> {
        self.started.lock().unwrap().clear();
        std::mem::take(&mut *self.finished.lock().unwrap())
    }
}

pub fn retry(max_retries: u32) -> RetryPolicy {
    RetryPolicy { max_retries, base_delay: Duration::from_millis(10), max_delay: Duration::from_millis(40) }
}

pub fn poll() -> PollPolicy {
    PollPolicy { initial: Duration::from_millis(20), max: Duration::from_millis(50) }
}

/// A running fake, a client for it and the client's recorder.
pub struct Env {
    pub fake: FakeServer,
    pub h: FakeHandle,
    pub client: Client,
    pub rec: Arc<Recorder>,
}

impl Env {
    /// A fake with `config` and a client with 3 quick retries, 5 s timeout, default deadline.
    pub async fn start(config: FakeConfig) -> Env {
        Env::with(config, |b| b).await
    }

    /// Like [`Env::start`], with the client builder adjusted by `adjust`.
    pub async fn with(config: FakeConfig, adjust: impl FnOnce(ClientBuilder) -> ClientBuilder) -> Env {
        let fake = FakeServer::start(FakeConfig { log_requests: false, ..config }).await.expect("fake starts");
        let h = fake.handle();
        let rec = Arc::new(Recorder::default());
        let builder = Client::builder(SecretString::from(TOKEN))
            .endpoint(fake.base_url())
            .retry_policy(retry(3))
            .poll_policy(poll())
            .timeout(Duration::from_secs(5))
            .observer(rec.clone());
        let client = adjust(builder).build().expect("client builds");
        Env { fake, h, client, rec }
    }

    /// Requests the fake counted for `endpoint`, e.g. `GET /v1/servers/{id}`.
    pub fn count(&self, endpoint: &str) -> u64 {
        self.h.request_count(endpoint)
    }

    /// Statuses of the fake's requests to `endpoint`, in order.
    pub fn statuses(&self, endpoint: &str) -> Vec<u16> {
        self.h.request_log().iter().filter(|r| r.endpoint == endpoint).map(|r| r.status).collect()
    }
}

pub fn sid(id: u64) -> ServerId {
    ServerId(i64::try_from(id).unwrap())
}

pub fn nid(id: u64) -> NetworkId {
    NetworkId(i64::try_from(id).unwrap())
}

pub fn lbid(id: u64) -> LoadBalancerId {
    LoadBalancerId(i64::try_from(id).unwrap())
}

pub fn raw(id: impl Into<i64>) -> u64 {
    u64::try_from(id.into()).unwrap()
}

pub fn labels(pairs: &[(&str, &str)]) -> hcloud_api::models::Labels {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// Polls `cond` until it holds (bounded by [`WAIT`]).
pub async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub fn api_err(e: &Error) -> &hcloud_api::ApiError {
    e.api().unwrap_or_else(|| panic!("expected an API error, got {e:?}"))
}
