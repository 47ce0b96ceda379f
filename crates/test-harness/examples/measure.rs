//! Measures the control plane: start-to-ready time (median of N starts, default 3) and the
//! resident memory of etcd and kube-apiserver right after each start.
//!
//! ```text
//! cargo run -p test-harness --example measure --release [-- <starts>]
//! ```

use anyhow::{Context, Result};
use test_harness::ControlPlane;

/// `VmRSS` of a process in MiB.
fn rss_mib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .context("no VmRSS line")?
        .parse()?;
    Ok(kib / 1024.0)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

#[tokio::main]
async fn main() -> Result<()> {
    let starts: usize = std::env::args().nth(1).map(|n| n.parse()).transpose()?.unwrap_or(3);
    let (mut total, mut readyz, mut etcd, mut apiserver) = (vec![], vec![], vec![], vec![]);
    for i in 1..=starts {
        let control_plane = ControlPlane::start().await?;
        let (t, r) = (control_plane.startup_duration(), control_plane.time_to_readyz());
        let (e, a) = (rss_mib(control_plane.etcd_pid())?, rss_mib(control_plane.apiserver_pid())?);
        println!(
            "start {i}: start() {:.2} s (etcd spawn -> /readyz {:.2} s); RSS etcd {e:.0} MiB, kube-apiserver {a:.0} MiB",
            t.as_secs_f64(),
            r.as_secs_f64()
        );
        total.push(t.as_secs_f64());
        readyz.push(r.as_secs_f64());
        etcd.push(e);
        apiserver.push(a);
        // Synchronous: both processes are gone before the next start.
        drop(control_plane);
    }
    println!(
        "median of {starts}: start() {:.2} s, etcd spawn -> /readyz {:.2} s, RSS etcd {:.0} MiB, kube-apiserver {:.0} MiB",
        median(total),
        median(readyz),
        median(etcd),
        median(apiserver)
    );
    Ok(())
}
