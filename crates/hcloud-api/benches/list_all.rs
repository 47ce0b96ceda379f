//! Benchmark: the client's `servers().list_all()` over 1,000 servers served by the in-process
//! fake (50 per page, so 20 requests per call, fetched a few pages at a time).
//!
//! Run with `cargo bench -p hcloud-api --bench list_all`. Prints min/median/p99/max wall time
//! of one full `list_all` and the number of HTTP requests each one made.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hcloud_api::models::ServerListParams;
use hcloud_api::{Client, LIST_ALL_PER_PAGE, RequestEvent, SecretString};
use hcloud_fake::control::{SeedNetwork, SeedServerBatch};
use hcloud_fake::{FakeConfig, FakeServer};

const SERVERS: u32 = 1_000;
const WARMUP: usize = 5;
const RUNS: usize = 50;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    // A bucket that never runs dry, and no per-request log line.
    let config = FakeConfig { log_requests: false, ..FakeConfig::default().with_rate_limit(u32::MAX, 1_000_000.0) };
    let fake = FakeServer::start(config).await.expect("fake starts");
    let h = fake.handle();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central")).unwrap();
    let mut batch = SeedServerBatch::new("node-", SERVERS);
    batch.networks.push(net.into());
    batch.labels.insert("pool".into(), "workers".into());
    let ids = h.seed_servers(&batch).unwrap();

    let requests = Arc::new(AtomicU64::new(0));
    let counter = requests.clone();
    let client = Client::builder(SecretString::from("bench-token"))
        .endpoint(fake.base_url())
        .observer(Arc::new(move |_: &RequestEvent<'_>| {
            counter.fetch_add(1, Ordering::Relaxed);
        }))
        .build()
        .expect("client builds");
    let params = ServerListParams::default();

    for _ in 0..WARMUP {
        let all = client.servers().list_all(&params).await.unwrap();
        assert_eq!(all.len(), ids.len());
    }

    let expected_requests = u64::from(SERVERS.div_ceil(LIST_ALL_PER_PAGE));
    let mut times = Vec::with_capacity(RUNS);
    h.reset_requests();
    for _ in 0..RUNS {
        requests.store(0, Ordering::Relaxed);
        let started = Instant::now();
        let all = client.servers().list_all(&params).await.unwrap();
        let elapsed = started.elapsed();
        assert_eq!(all.len(), ids.len(), "every server listed");
        assert!(all.windows(2).all(|w| w[0].id < w[1].id), "in id order");
        assert_eq!(requests.load(Ordering::Relaxed), expected_requests, "requests per list_all");
        times.push(elapsed);
    }
    let fake_counted = h.request_count("GET /v1/servers");
    assert_eq!(fake_counted, expected_requests * RUNS as u64);

    times.sort_unstable();
    let mean = times.iter().sum::<Duration>() / u32::try_from(RUNS).unwrap();
    println!(
        "list_all over {SERVERS} servers ({RUNS} runs after {WARMUP} warm-up): min {:.2} ms, median {:.2} ms, \
         p99 {:.2} ms, max {:.2} ms, mean {:.2} ms",
        ms(times[0]),
        ms(percentile(&times, 0.50)),
        ms(percentile(&times, 0.99)),
        ms(*times.last().unwrap()),
        ms(mean),
    );
    println!(
        "requests per list_all: {} (client observer), {} (fake counter, {} over {RUNS} runs)",
        expected_requests,
        fake_counted / RUNS as u64,
        fake_counted
    );
    fake.shutdown().await;
}
