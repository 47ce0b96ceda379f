//! The soak's short run (about three minutes; the hour run is `cargo bench --bench soak`): the
//! same code (`benches/soak/mod.rs`) with `Knobs::short` — churn, faults in every mode, a leader
//! handover, and the same assertions: the state converges and stays right, nothing is wrongly
//! deleted, every replica's RSS, fds and threads stay flat after warm-up, no replica crashes.
//! The unit tests of those checks (`flat`, `monitor`, the verdict) run in this binary too.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

#[path = "../benches/soak/mod.rs"]
mod soak;

use std::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_soak_converges_deletes_nothing_wrongly_and_stays_flat() {
    let logs = tempfile::Builder::new().prefix("hcloud-ccm-soak-short-").tempdir().expect("log dir");
    let knobs = soak::Knobs::short(logs.path().to_path_buf());
    let t = Instant::now();
    let outcome = soak::run(&knobs).await;
    println!("short soak: {:.0} s wall", t.elapsed().as_secs_f64());
    if !outcome.failures.is_empty() {
        // Keep the replicas' logs for the failure.
        let kept = logs.keep();
        panic!(
            "the short soak failed ({} problems; replica logs in {}):\n  - {}",
            outcome.failures.len(),
            kept.display(),
            outcome.failures.join("\n  - ")
        );
    }
}
