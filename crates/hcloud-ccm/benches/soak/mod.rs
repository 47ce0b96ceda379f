//! The soak, shared by the hour-long benchmark (`benches/soak/main.rs`, `cargo bench`) and the
//! short run of the test suite (`tests/soak_short.rs`, `cargo test`): the same churn, chaos,
//! monitor, checks and report; only the [`Knobs`] differ.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, dead_code)]

pub mod chaos;
pub mod churn;
#[path = "../common/mod.rs"]
pub mod common;
pub mod flat;
pub mod monitor;
pub mod replicas;
pub mod report;
pub mod run;
pub mod world;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use run::run;

pub type Shared = Arc<Mutex<world::World>>;

/// How long and how hard the soak runs.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// How long the churn runs.
    pub churn: Duration,
    /// The leader is stopped (and a new replica started) this often.
    pub handover: Duration,
    /// One churn operation this often.
    pub step: Duration,
    /// Target sizes the churn moves around.
    pub nodes: usize,
    pub services: usize,
    /// Hetzner requests answered by a fault.
    pub fault_percent: f64,
    /// After the churn: how long convergence may take.
    pub settle: Duration,
    /// After convergence: how long the monitor keeps watching before the last check.
    pub hold: Duration,
    /// A replica's warm-up, from its start or its taking over (see [`flat`]).
    pub warm: Duration,
    /// `/proc` samples this often during the churn (every 5 s after it).
    pub sample: Duration,
    pub seed: u64,
    /// Replica logs are copied here.
    pub log_dir: PathBuf,
}

impl Knobs {
    /// The hour run, each knob overridable by its `SOAK_*` variable (see `main.rs`).
    pub fn from_env() -> Knobs {
        let env = common::env_or;
        let secs = |key, default| Duration::from_secs(env(key, default));
        Knobs {
            churn: Duration::from_secs(env("SOAK_MINUTES", 60) * 60),
            handover: secs("SOAK_HANDOVER_SECS", 600),
            step: secs("SOAK_STEP_SECS", 8),
            nodes: env("SOAK_NODES", 12) as usize,
            services: env("SOAK_SERVICES", 12) as usize,
            fault_percent: env("SOAK_FAULT_PERCENT", 3) as f64,
            settle: secs("SOAK_SETTLE_SECS", 420),
            hold: secs("SOAK_HOLD_SECS", 60),
            warm: secs("SOAK_WARM_SECS", 120),
            sample: secs("SOAK_SAMPLE_SECS", 30),
            seed: env("SOAK_SEED", 1),
            log_dir: std::env::var("SOAK_LOG_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|_| std::env::temp_dir().join(format!("hcloud-ccm-soak-{}", std::process::id()))),
        }
    }

    /// The short run of the test suite (about three minutes): 150 s of faster churn around
    /// smaller sizes, one handover (at 90 s: both leaders are checked after their warm-up),
    /// more faults, warm-up 45 s, samples every 5 s.
    pub fn short(log_dir: PathBuf) -> Knobs {
        Knobs {
            churn: Duration::from_secs(150),
            handover: Duration::from_secs(90),
            step: Duration::from_secs(3),
            nodes: 6,
            services: 6,
            fault_percent: 5.0,
            settle: Duration::from_secs(90),
            hold: Duration::from_secs(15),
            warm: Duration::from_secs(45),
            sample: Duration::from_secs(5),
            seed: 1,
            log_dir,
        }
    }
}

/// What the soak found wrong (empty: it passed).
#[derive(Debug, Default)]
pub struct Outcome {
    pub failures: Vec<String>,
}

/// The verdict: every state problem of the last check, every wrong deletion the monitor saw
/// (during the churn, the settling, or the hold after the convergence check), every resource
/// bound exceeded and every crash fail the soak.
pub fn verdict(state: &[String], wrong_deletions: &[String], resources: &[String], crashes: &[String]) -> Outcome {
    let mut failures = Vec::new();
    failures.extend(state.iter().map(|p| format!("state: {p}")));
    failures.extend(wrong_deletions.iter().map(|p| format!("wrong deletion: {p}")));
    failures.extend(resources.iter().map(|p| format!("resources: {p}")));
    failures.extend(crashes.iter().map(|p| format!("process: {p}")));
    Outcome { failures }
}

#[cfg(test)]
mod tests {
    // Imports inside the tests: `cargo clippy --all-targets` also builds the bench with
    // cfg(test) but without its (harness-less) tests.

    #[test]
    fn a_wrong_deletion_after_the_convergence_check_fails_the_soak() {
        use super::monitor::{Observed, Seen};
        use super::verdict;
        use super::world::{LiveNode, World};
        let mut w = World::default();
        w.nodes.insert("a".into(), LiveNode { server: 1, pod_cidr: "10.240.0.0/24".into() });
        let mut seen = Seen::default();
        let look = |nodes: &[&str]| Observed {
            nodes: Some(nodes.iter().map(|n| n.to_string()).collect()),
            ..Observed::default()
        };
        seen.judge(&mut w, look(&["a"]), |_| true);
        // The convergence check passed here; during the hold the monitor sees Node a deleted.
        assert!(verdict(&[], &w.wrong, &[], &[]).failures.is_empty());
        seen.judge(&mut w, look(&[]), |_| true);
        let outcome = verdict(&[], &w.wrong, &[], &[]);
        assert_eq!(outcome.failures, vec!["wrong deletion: Node a was deleted (its server Some(1) exists: true)"]);
    }

    #[test]
    fn every_kind_of_problem_fails_the_soak() {
        use super::verdict;
        let one = ["x".to_owned()];
        for outcome in [
            verdict(&one, &[], &[], &[]),
            verdict(&[], &one, &[], &[]),
            verdict(&[], &[], &one, &[]),
            verdict(&[], &[], &[], &one),
        ] {
            assert_eq!(outcome.failures.len(), 1, "{outcome:?}");
        }
    }
}
