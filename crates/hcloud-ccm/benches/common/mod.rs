//! Helpers shared by the benchmarks: knobs from the environment, free ports, medians, the
//! fake's request counts by endpoint, `/proc` figures of a process, and (in [`compare`]) the
//! official CCM as a second subject.

#![allow(dead_code, unused_imports, clippy::expect_used)]

/// Cleaning the cluster between subjects, as the differential suite does.
#[path = "../../tests/oracle/clean.rs"]
pub mod clean;
pub mod compare;
/// The differential suite's launcher of the two CCMs (one place that starts them).
#[path = "../../tests/oracle/subject.rs"]
pub mod subject;

use hcloud_fake::FakeHandle;

/// `key` from the environment as a number, else `default`.
pub fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Prints the median, minimum and maximum of `v` (seconds; at least one value).
pub fn summary(label: &str, mut v: Vec<f64>) {
    v.sort_by(|a, b| a.total_cmp(b));
    println!(
        "  {label}: median {:.2} s (min {:.2} s, max {:.2} s, {} rounds)",
        v[v.len() / 2],
        v[0],
        v[v.len() - 1],
        v.len()
    );
}

/// Prints the fake's request count since its last reset, by endpoint; returns the total.
pub fn print_counts(label: &str, h: &FakeHandle) -> u64 {
    let counts = h.request_counts();
    println!("  {label}: {} Hetzner API requests", counts.total);
    for (endpoint, n) in &counts.by_endpoint {
        println!("    {n:>6}  {endpoint}");
    }
    counts.total
}

/// A `/proc/<pid>/status` figure in KiB (`VmRSS:`: now, `VmHWM:`: peak); 0 if unreadable.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}
