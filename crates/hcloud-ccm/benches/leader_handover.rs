//! Benchmark (not a test): leader handover between two `hcloud-ccm` replicas with the default
//! leader-election timings (lease 15 s, renew deadline 10 s, retry period 2 s), and what a
//! standby costs while it waits.
//!
//! Measures:
//! 1. SIGTERM on the leader → the standby holds the lease (the leader releases it on the way
//!    out), median of BENCH_ROUNDS;
//! 2. SIGKILL on the leader → the standby holds the lease (it waits out the lease it last saw
//!    renewed), median of BENCH_ROUNDS;
//! 3. a standby's cost over BENCH_WINDOW_SECS: Hetzner requests (from the fake's log, by token)
//!    and Kubernetes API requests (its `rest_client_requests_total`, when the metrics listener
//!    is available).
//!
//! Run: `cargo bench -p hcloud-ccm --bench leader_handover`
//! Knobs (env): BENCH_ROUNDS (default 5), BENCH_WINDOW_SECS (default 60).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::time::{Duration, Instant};

use hcloud_fake::{FakeConfig, FakeServer};
use test_harness::{ChildProcess, ControlPlane};

use common::{env_or, free_port, summary};

const TOKEN_A: &str = "replicaa00000000000000000000000000000000000000000000000000000000";
const TOKEN_B: &str = "replicab00000000000000000000000000000000000000000000000000000000";

/// Waits until `needle` appears in the log `count` times; returns when.
async fn log_count(p: &ChildProcess, needle: &str, count: usize) -> Instant {
    let t = Instant::now();
    loop {
        if p.logs().matches(needle).count() >= count {
            return Instant::now();
        }
        assert!(t.elapsed() < Duration::from_secs(120), "{} never logged {needle:?}:\n{}", p.name(), p.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds = env_or("BENCH_ROUNDS", 5) as usize;
    let window = Duration::from_secs(env_or("BENCH_WINDOW_SECS", 60));
    let cp = ControlPlane::start().await.expect("control plane");
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let h = fake.handle();
    let kubeconfig = format!("--kubeconfig={}", cp.ccm_kubeconfig().display());
    let endpoint = fake.base_url();
    let spawn = |name: &str, token: &str, lease: &str, metrics: &str| {
        let lease = format!("--leader-elect-resource-name={lease}");
        ChildProcess::spawn(
            std::path::Path::new(env!("CARGO_BIN_EXE_hcloud-ccm")),
            &["--cloud-provider=hcloud", "--allow-untagged-cloud", "--secure-port=0", &kubeconfig, &lease],
            &[
                ("HCLOUD_TOKEN", token),
                ("HCLOUD_ENDPOINT", &endpoint),
                ("HCLOUD_METRICS_ADDRESS", metrics),
                ("RUST_LOG", "info"),
            ],
            name,
        )
        .expect("spawn")
    };
    const ACQUIRED: &str = "successfully acquired lease";
    const WAITING: &str = "attempting to acquire leader lease";

    println!("leader_handover: default timings (lease 15s, renew deadline 10s, retry period 2s), {rounds} rounds");
    for (signal, label) in [("TERM", "SIGTERM → standby leads"), ("KILL", "SIGKILL → standby leads")] {
        let mut times = Vec::new();
        for r in 0..rounds {
            let lease = format!("handover-{}-{r}", signal.to_lowercase());
            let a = spawn("replica-a", TOKEN_A, &lease, "127.0.0.1:0");
            log_count(&a, ACQUIRED, 1).await;
            let b = spawn("replica-b", TOKEN_B, &lease, "127.0.0.1:0");
            log_count(&b, WAITING, 1).await;
            // Let the standby observe a few renewals, at a varying phase of its polling.
            tokio::time::sleep(Duration::from_millis(3000 + 400 * r as u64)).await;
            let t0 = Instant::now();
            a.signal(signal).expect("signal");
            let t1 = log_count(&b, ACQUIRED, 1).await;
            times.push((t1 - t0).as_secs_f64());
            a.wait_exit(Duration::from_secs(30)).await.expect("a exits");
            b.stop().await.expect("b stops");
        }
        summary(label, times);
    }

    // A standby's idle cost.
    let a = spawn("replica-a", TOKEN_A, "idle", "127.0.0.1:0");
    log_count(&a, ACQUIRED, 1).await;
    let metrics_port = free_port();
    let b = spawn("replica-b", TOKEN_B, "idle", &format!("127.0.0.1:{metrics_port}"));
    log_count(&b, WAITING, 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let hetzner_before = h.request_log_for_token(TOKEN_B).len();
    let kube_before = kube_requests(metrics_port).await;
    tokio::time::sleep(window).await;
    let hetzner = h.request_log_for_token(TOKEN_B).len() - hetzner_before;
    let kube_after = kube_requests(metrics_port).await;
    println!("\nstandby over {} s:", window.as_secs());
    println!("  Hetzner API requests: {hetzner}");
    match (kube_before, kube_after) {
        (Some(b0), Some(b1)) => println!(
            "  Kubernetes API requests: {} ({:.1}/minute)",
            b1 - b0,
            (b1 - b0) as f64 * 60.0 / window.as_secs_f64()
        ),
        _ => println!("  Kubernetes API requests: not measured (no rest_client_requests_total on /metrics)"),
    }
    b.stop().await.expect("stop");
    a.stop().await.expect("stop");
}

/// The sum of `rest_client_requests_total` on the replica's metrics listener.
async fn kube_requests(port: u16) -> Option<u64> {
    let body = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await.ok()?.text().await.ok()?;
    let total: f64 = body
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    (total > 0.0).then_some(total as u64)
}
