//! hcloud-ccm judged by tests we did not write, on real nodes (docs/e2e-suites.md):
//! Kubernetes' own Load Balancer tests (`e2e.test` of v1.37.2) and the official CCM's e2e suite
//! (`tests/e2e` of v1.35.0), both built by `scripts/provision-e2e`, in a lab of three real
//! kubelets whose Load Balancers are the fake's data plane on the lab's own network.
//!
//! - `both_suites_pass_against_hcloud_ccm` (in `cargo test --workspace` and CI): the official
//!   suite whole and the upstream tests of [`catalogue::UPSTREAM_CI`], in one lab.
//!   `HCLOUD_CCM_E2E_UPSTREAM=<text>[|<text>...]` picks other upstream tests (those whose names
//!   contain a text) to run again what the full run found failing.
//! - `side_by_side` (ignored; `scripts/e2e-suites` runs it): every test of both suites against
//!   hcloud-ccm and against the official CCM v1.35.0, each in a fresh lab, and the table of the
//!   results (`HCLOUD_CCM_E2E_TABLE=<file>` writes it).
//!
//! Needs root and cgroup v1, as CI has. A test skipped by name has its reason in
//! [`catalogue`]; every other test must pass.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

mod catalogue;
mod lab;
mod runs;

use std::path::PathBuf;

use catalogue::{OFFICIAL_TESTS, UPSTREAM_CI, UPSTREAM_TESTS, official_skip, upstream_skip};
use lab::{Ccm, Suites, SuitesLab};
use runs::{Outcome, Results};

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Where ginkgo's reports go (kept for a look after a failure).
fn report_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hcloud-ccm-e2e-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Panics with every problem of both runs (and the logs of the runs that had one).
fn assert_clean(ccm: Ccm, official: &Results, upstream: &Results, upstream_names: &[&str]) {
    let official_problems = official.problems(OFFICIAL_TESTS, official_skip);
    let mut upstream_problems = upstream.problems(upstream_names, upstream_skip);
    if let Some((Outcome::Failed(why), _)) = official.tests.get("TestMain") {
        upstream_problems.push(format!("the official suite failed outside a test: {why}"));
    }
    if official_problems.is_empty() && upstream_problems.is_empty() {
        return;
    }
    let mut text = format!("{} against the suites:\n", ccm.name());
    for p in official_problems.iter().chain(&upstream_problems) {
        text.push_str(&format!("  {p}\n"));
    }
    if !official_problems.is_empty() {
        text.push_str(&format!("---- official suite log (tail) ----\n{}\n", tail(&official.log, 150)));
    }
    if !upstream_problems.is_empty() {
        text.push_str(&format!("---- upstream suite log (tail) ----\n{}\n", tail(&upstream.log, 150)));
    }
    panic!("{text}");
}

#[tokio::test]
async fn both_suites_pass_against_hcloud_ccm() {
    let suites = tokio::task::spawn_blocking(Suites::provision).await.expect("provisioning");
    let lab = SuitesLab::start(&suites, Ccm::HcloudCcm).await;
    let official = runs::official(&suites, &lab).await;
    // HCLOUD_CCM_E2E_UPSTREAM=<text>[|<text>...] runs the upstream tests whose names contain one
    // of the texts instead (to run again what the full run found failing).
    let chosen: Vec<&str> = match std::env::var("HCLOUD_CCM_E2E_UPSTREAM") {
        Ok(texts) => UPSTREAM_TESTS.iter().copied().filter(|n| texts.split('|').any(|t| n.contains(t))).collect(),
        Err(_) => UPSTREAM_CI.to_vec(),
    };
    let upstream = runs::upstream(&suites, &lab, &chosen, 3, &report_dir("ci")).await;
    for (name, (outcome, seconds)) in official.tests.iter().chain(&upstream.tests) {
        eprintln!("{:>7.1}s {} {name}", seconds, outcome.word());
    }
    let ccm_logs = lab.ccm.logs();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert_clean(Ccm::HcloudCcm, &official, &upstream, &chosen);
    }));
    lab.shutdown().await;
    if let Err(panic) = result {
        eprintln!("---- hcloud-ccm log (tail) ----\n{}", tail(&ccm_logs, 100));
        std::panic::resume_unwind(panic);
    }
}

/// One row of the side-by-side table.
fn row(name: &str, official: Option<&(Outcome, f64)>, ours: Option<&(Outcome, f64)>) -> String {
    let cell = |r: Option<&(Outcome, f64)>| match r {
        None => "not run".to_owned(),
        Some((Outcome::Passed, s)) => format!("pass ({s:.0} s)"),
        Some((Outcome::Failed(why), _)) => format!("**fail**: {}", why.replace('|', "/").replace('\n', " ")),
        Some((Outcome::Skipped(why), _)) => format!("skip: {}", why.replace('|', "/")),
    };
    format!("| {name} | {} | {} |", cell(official), cell(ours))
}

#[tokio::test]
#[ignore = "the full side-by-side run (~70 min): scripts/e2e-suites"]
async fn side_by_side() {
    let suites = tokio::task::spawn_blocking(Suites::provision).await.expect("provisioning");
    let mut results = Vec::new();
    for ccm in [Ccm::Official, Ccm::HcloudCcm] {
        let lab = SuitesLab::start(&suites, ccm).await;
        let official = runs::official(&suites, &lab).await;
        let upstream = runs::upstream(&suites, &lab, UPSTREAM_TESTS, 3, &report_dir(&format!("{ccm:?}"))).await;
        lab.shutdown().await;
        results.push((ccm, official, upstream));
    }
    let [(_, off_official, off_upstream), (_, our_official, our_upstream)] = &results[..] else { unreachable!() };
    let mut table = vec!["| test | official CCM v1.35.0 | hcloud-ccm |".to_owned(), "|---|---|---|".to_owned()];
    for name in OFFICIAL_TESTS {
        table.push(row(&format!("official: `{name}`"), off_official.tests.get(*name), our_official.tests.get(*name)));
    }
    for name in UPSTREAM_TESTS {
        table.push(row(&format!("upstream: {name}"), off_upstream.tests.get(*name), our_upstream.tests.get(*name)));
    }
    let table = table.join("\n");
    println!("{table}");
    if let Ok(path) = std::env::var("HCLOUD_CCM_E2E_TABLE") {
        std::fs::write(&path, format!("{table}\n")).expect("writing the table");
    }
    assert_clean(Ccm::HcloudCcm, our_official, our_upstream, UPSTREAM_TESTS);
}
