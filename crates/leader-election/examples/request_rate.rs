//! Measures the idle API request rate of a leader and of a standby with the default timings
//! (lease 15 s / renew 10 s / retry 2 s), against a real kube-apiserver from test-harness.
//!
//! ```sh
//! cargo run -p leader-election --example request_rate            # 60 s window
//! WINDOW_SECS=300 cargo run -p leader-election --example request_rate
//! ```
//!
//! Requests are counted by a tower layer on each candidate's client (the traffic is TLS, so a
//! proxy cannot count requests).

#[path = "../tests/support/counting.rs"]
mod counting;

use std::time::Duration;

use anyhow::{Context, Result};
use counting::{RequestLog, counted_client};
use leader_election::{ElectionConfig, LeaderElector, LeaderState};
use test_harness::{ControlPlane, unique_name};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<()> {
    let window = Duration::from_secs(std::env::var("WINDOW_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60));
    let control_plane = ControlPlane::shared().await?;
    let name = unique_name("request-rate");
    let shutdown = CancellationToken::new();
    let mut candidates = Vec::new();
    for identity in ["first_1", "second_2"] {
        let log = RequestLog::default();
        let client = counted_client(control_plane.ccm_kubeconfig(), None, &log).await?;
        let elector = LeaderElector::new(client, ElectionConfig::new("kube-system", &name, identity))?;
        let state = elector.state();
        let shutdown = shutdown.clone();
        let task = tokio::spawn(async move {
            if let Some(mut leadership) = elector.acquire(&shutdown).await {
                let _ = leadership.keep(&shutdown).await;
                let _ = leadership.release().await;
            }
        });
        candidates.push((identity, log, state, task));
        // Start the second once the first leads, so the roles are known.
        let (_, _, state, _) = candidates.last_mut().context("just pushed")?;
        if identity == "first_1" {
            state.wait_for(|s| *s == LeaderState::Leading).await?;
        }
    }
    let (_, _, standby_state, _) = &mut candidates[1];
    standby_state.wait_for(|s| matches!(s, LeaderState::Standby { holder: Some(_) })).await?;

    let start = Instant::now();
    println!("measuring for {window:?} (lease 15s / renew 10s / retry 2s)...");
    tokio::time::sleep(window).await;
    let end = Instant::now();
    shutdown.cancel();
    let minutes = window.as_secs_f64() / 60.0;
    for (identity, log, state, task) in candidates {
        let requests: Vec<_> = log.since(start).into_iter().filter(|r| r.at < end).collect();
        let gets = requests.iter().filter(|r| r.method == "GET").count();
        let puts = requests.iter().filter(|r| r.method == "PUT").count();
        let others = requests.len() - gets - puts;
        println!(
            "{identity} ({:?}): {} requests = {:.1}/min (GET {gets}, PUT {puts}, other {others})",
            *state.borrow(),
            requests.len(),
            requests.len() as f64 / minutes,
        );
        task.await?;
    }
    Ok(())
}
