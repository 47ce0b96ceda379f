//! Benchmark (not a test): an hour of churn on a real kube-apiserver and the Hetzner fake,
//! through two `hcloud-ccm` replicas with leader election.
//!
//! Churn, one operation every SOAK_STEP_SECS, chosen at random (SOAK_SEED) around the target
//! sizes: Nodes join (a server seeded in the network, then a kubelet-like Node with a pod CIDR)
//! and leave (the server deleted and the Node turning `Ready=Unknown`, for the CCM to delete;
//! or the Node deleted first, as a drain does, then its server); LoadBalancer Services are
//! created, their ports and annotations (`algorithm-type`, `health-check-interval`) changed, and
//! deleted. Meanwhile SOAK_FAULT_PERCENT of the Hetzner requests get a fault, rotating through
//! every mode the fake knows (JSON 5xx, HTML 5xx, 429, client timeouts, connection resets
//! before and in the middle of the answer, conflict, locked, a change applied whose answer is
//! lost, failed actions), and every SOAK_HANDOVER_SECS the leader is stopped and a new replica
//! started right after it exits. The leader releases the lease on SIGTERM, and whichever asks
//! first takes it: the waiting standby (it retries every 2 s) or the new replica (it asks at
//! start-up). The fake's rate limit is the API's (3600 per hour, a full bucket at the start).
//!
//! Reports: RSS, peak RSS, open file descriptors and threads of each replica from `/proc`
//! (tokio tasks are not exposed by the CCM's metrics), Hetzner requests per hour by endpoint
//! and replica, the faults that hit. Fails (exit status 1) when
//! - after the churn stops and the faults are cleared, the state does not converge within
//!   SOAK_SETTLE_SECS, or is no longer right after a further SOAK_HOLD_SECS: every Node,
//!   Load Balancer and route must be what it should be;
//! - a deletion that must not happen was seen (watched every second from before the first replica
//!   starts until after the hold): a Node the churn did not make leave, a Load Balancer of a live
//!   Service, the route of a live Node;
//! - a replica's RSS, open fds or threads grew after its warm-up beyond the bounds of
//!   `flat::BOUNDS` (RSS +max(8 MiB, 25 %), fds +32, threads +8 over the first sample
//!   SOAK_WARM_SECS after it started or took over; see `flat.rs`), or no leader was sampled after
//!   its warm-up;
//! - a replica crashed (panic, signal) or did not exit with 0 within 30 s of SIGTERM.
//!
//! The same code runs for three minutes in the test suite: `tests/soak_short.rs` (`Knobs::short`).
//!
//! Run: `nice -n 5 cargo bench -p hcloud-ccm --bench soak > soak.log 2>&1`
//! Knobs (env): SOAK_MINUTES (default 60), SOAK_HANDOVER_SECS (600), SOAK_STEP_SECS (8),
//! SOAK_NODES (12), SOAK_SERVICES (12), SOAK_FAULT_PERCENT (3), SOAK_SETTLE_SECS (420: longer
//! than the 5 min Load Balancer cache and the 4 min route resync), SOAK_HOLD_SECS (60),
//! SOAK_WARM_SECS (120, after a replica starts or takes over), SOAK_SAMPLE_SECS (30), SOAK_SEED
//! (1), SOAK_LOG_DIR (replica logs; default a temp dir).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

#[path = "mod.rs"]
mod soak;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let outcome = soak::run(&soak::Knobs::from_env()).await;
    if !outcome.failures.is_empty() {
        std::process::exit(1);
    }
}
