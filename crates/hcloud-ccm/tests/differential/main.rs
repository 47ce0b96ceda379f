//! The differential suite: each scenario runs once with Hetzner's official CCM (v1.35.0, built
//! by `scripts/provision-oracles`) and once with hcloud-ccm, each on a fresh fake seeded alike
//! and a cleaned cluster of the same real kube-apiserver. After every step both results are
//! normalised (ids, UIDs, handed-out addresses, timestamps) and compared field by field: Nodes
//! (providerID, every label, addresses in order, taints), Services' status, and in the fake every
//! Load Balancer, certificate and route. A difference must be declared in `docs/migration.md`
//! ("What differs", "Checked against the official CCM") with its reason, and every declared difference must
//! show up, so the table cannot drift. Robot stays out (its endpoint cannot be redirected in the
//! official CCM).
//!
//! The official CCM always runs with `HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true` (set in
//! `test_harness::oracle::OfficialCcm`, the one place that starts it).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

use crate::oracle;

mod known;
mod load_balancers;
mod nodes;
mod routes;

use std::collections::BTreeSet;

use oracle::declared::{self, DECLARED};
use oracle::snapshot::{Snapshot, differences};
use oracle::subject::Subject;

/// What one subject produced: a snapshot per step, in order.
pub type Steps = Vec<(String, Snapshot)>;

/// Compares the two subjects' steps of `run` and fails on an undeclared difference or a
/// declared one that did not show up.
pub fn compare(run: &str, official: &Steps, ours: &Steps) {
    let names = |s: &Steps| s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(official), names(ours), "both subjects ran the same steps");
    let steps: Vec<(String, Vec<oracle::snapshot::Difference>)> =
        official.iter().zip(ours).map(|((step, a), (_, b))| (step.clone(), differences(a, b))).collect();
    if std::env::var_os("DIFF_DUMP").is_some() {
        for (step, snap) in official {
            println!("[{run}] {step}: official snapshot\n{}", serde_json::to_string_pretty(snap).unwrap_or_default());
        }
    }
    for (step, diffs) in &steps {
        println!("[{run}] {step}: {} differences", diffs.len());
        for d in diffs {
            println!("    {d}");
        }
    }
    let problems = declared::check(run, &steps);
    if !problems.is_empty() {
        let last = official.last().map(|(_, s)| serde_json::to_string_pretty(s).unwrap_or_default());
        panic!(
            "run {run}: {} problems:\n  {}\n--- the official CCM's last snapshot ---\n{}",
            problems.len(),
            problems.join("\n  "),
            last.unwrap_or_default()
        );
    }
}

/// Runs `scenario` once per subject (official first) and compares.
pub async fn differential(run: &str, scenario: impl AsyncFn(Subject) -> Steps) {
    let official = scenario(Subject::Official).await;
    let ours = scenario(Subject::Ours).await;
    compare(run, &official, &ours);
}

#[test]
fn the_migration_guide_and_the_suite_declare_the_same_differences() {
    let documented = declared::documented_ids();
    let coded: BTreeSet<String> = DECLARED.iter().map(|d| d.id.to_owned()).collect();
    assert_eq!(documented, coded, "docs/migration.md's table vs tests/oracle/declared.rs");
    for d in DECLARED {
        assert!(!d.runs.is_empty(), "`{}` names no run in which it shows up", d.id);
    }
}

/// The comparison can fail: a changed, a missing and an extra field are found, an undeclared
/// difference and a declared one that did not show up are both problems.
#[test]
fn the_comparison_finds_what_differs_and_the_check_can_fail() {
    use serde_json::json;
    let official = json!({"nodes": {"n": {"labels": {"a": "1", "b": "2"}, "taints": []}}});
    let ours = json!({"nodes": {"n": {"labels": {"a": "9", "c": "3"}, "taints": []}}});
    let found: Vec<String> = differences(&official, &ours).iter().map(|d| d.path.clone()).collect();
    assert_eq!(found, ["/nodes/n/labels/a", "/nodes/n/labels/b", "/nodes/n/labels/c"]);
    assert!(differences(&official, &official).is_empty());

    let steps = vec![("step".to_owned(), differences(&official, &ours))];
    let problems = declared::check("where_the_two_differ_on_purpose", &steps);
    assert!(problems.iter().any(|p| p.contains("undeclared difference: /nodes/n/labels/a")), "{problems:?}");
    for d in DECLARED.iter().filter(|d| d.runs.contains(&"where_the_two_differ_on_purpose")) {
        assert!(problems.iter().any(|p| p.contains(&format!("`{}` did not show up", d.id))), "{problems:?}");
    }
}
