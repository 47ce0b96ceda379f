//! Benchmark: list 1,000 seeded servers 50 per page over HTTP keep-alive.
//!
//! Run with `cargo bench -p hcloud-fake --bench list_servers`. Prints p50/p99/max latency
//! and requests per second for sequential requests on one connection, and for 4
//! concurrent clients.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use hcloud_fake::control::{SeedNetwork, SeedServerBatch};
use hcloud_fake::{FakeConfig, FakeServer};

const SERVERS: u32 = 1_000;
const REQUESTS: usize = 2_000;
const WARMUP: usize = 100;
const PER_PAGE: usize = 50;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn report(label: &str, mut latencies: Vec<Duration>, wall: Duration) {
    latencies.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label}: {} requests in {:.2} s -> {:.0} req/s; latency p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        latencies.len(),
        wall.as_secs_f64(),
        latencies.len() as f64 / wall.as_secs_f64(),
        ms(percentile(&latencies, 0.50)),
        ms(percentile(&latencies, 0.99)),
        ms(*latencies.last().unwrap()),
    );
}

async fn get_page(client: &reqwest::Client, base: &str, page: usize) -> Duration {
    let started = Instant::now();
    let resp = client
        .get(format!("{base}/servers?per_page={PER_PAGE}&page={page}"))
        .bearer_auth("bench")
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), 200);
    let body = resp.bytes().await.expect("body");
    let elapsed = started.elapsed();
    assert!(body.len() > 10_000, "a page of 50 servers");
    elapsed
}

#[tokio::main]
async fn main() {
    let config = FakeConfig { log_requests: false, ..FakeConfig::default().with_rate_limit(u32::MAX, 1_000_000.0) };
    let fake = FakeServer::start(config).await.expect("fake starts");
    let h = fake.handle();
    let seed_started = Instant::now();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central")).unwrap();
    let mut batch = SeedServerBatch::new("node-", SERVERS);
    batch.networks.push(net.into());
    batch.labels.insert("pool".into(), "workers".into());
    h.seed_servers(&batch).unwrap();
    println!(
        "seeded {SERVERS} servers (each with a private IP) in {:.1} ms",
        seed_started.elapsed().as_secs_f64() * 1000.0
    );

    let base = fake.base_url();
    let pages = (SERVERS as usize).div_ceil(PER_PAGE);
    let client = reqwest::Client::builder().pool_max_idle_per_host(4).build().unwrap();

    // Check one page's shape.
    let first: serde_json::Value = client
        .get(format!("{base}/servers?per_page={PER_PAGE}&page=2"))
        .bearer_auth("bench")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(first["servers"].as_array().unwrap().len(), PER_PAGE);
    assert_eq!(first["meta"]["pagination"]["total_entries"], SERVERS);

    for i in 0..WARMUP {
        get_page(&client, &base, i % pages + 1).await;
    }

    let started = Instant::now();
    let mut latencies = Vec::with_capacity(REQUESTS);
    for i in 0..REQUESTS {
        latencies.push(get_page(&client, &base, i % pages + 1).await);
    }
    report("sequential, 1 connection", latencies, started.elapsed());

    let started = Instant::now();
    let tasks: Vec<_> = (0..4)
        .map(|t| {
            let client = client.clone();
            let base = base.clone();
            tokio::spawn(async move {
                let mut l = Vec::with_capacity(REQUESTS / 4);
                for i in 0..REQUESTS / 4 {
                    l.push(get_page(&client, &base, (i + t * 5) % pages + 1).await);
                }
                l
            })
        })
        .collect();
    let mut all = Vec::with_capacity(REQUESTS);
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    report("4 concurrent clients", all, started.elapsed());

    let counted = h.request_count("GET /v1/servers");
    println!("fake counted {counted} list requests");
    fake.shutdown().await;
}
