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
//!   results (`HCLOUD_CCM_E2E_TABLE=<file>` writes it). `HCLOUD_CCM_E2E_SUBJECTS=hcloud-ccm` (or
//!   `official`) runs only that CCM's half; the other column then says "not run".
//!
//! When a test fails (or the lab does not start), every log of the lab (each node's kubelet,
//! containerd and kube-proxy, the controllers, the CCM, the suites), the cluster's Events and
//! Node changes and the machine's load are kept under `<target dir>/e2e-suites-logs/`
//! ([`keep`]); the test prints where. `HCLOUD_CCM_E2E_KEEP_LOGS=1` keeps them after a pass too.
//!
//! Needs root and cgroup v1, as CI has. A test skipped by name has its reason in
//! [`catalogue`]; every other test must pass.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

mod catalogue;
mod keep;
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

/// Every problem of both runs (and the logs of the runs that had one), or `None`.
fn problems(ccm: Ccm, official: &Results, upstream: &Results, upstream_names: &[&str]) -> Option<String> {
    let official_problems = official.problems(OFFICIAL_TESTS, official_skip);
    let mut upstream_problems = upstream.problems(upstream_names, upstream_skip);
    if let Some((Outcome::Failed(why), _)) = official.tests.get("TestMain") {
        upstream_problems.push(format!("the official suite failed outside a test: {why}"));
    }
    if official_problems.is_empty() && upstream_problems.is_empty() {
        return None;
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
    Some(text)
}

/// When the runs had a problem (or `HCLOUD_CCM_E2E_KEEP_LOGS` is set): keeps the lab's logs
/// with the suites' ([`keep`]); returns the problems, with where the logs are.
fn keep_if_failed(lab: &SuitesLab, official: &Results, upstream: &Results, names: &[&str]) -> Option<String> {
    let text = problems(lab.which, official, upstream, names);
    if text.is_none() && std::env::var_os("HCLOUD_CCM_E2E_KEEP_LOGS").is_none() {
        return None;
    }
    let dir = lab.keep(&[("official-suite.log", &official.log), ("upstream-suite.log", &upstream.log)]);
    text.map(|text| format!("{text}(every log of the lab: {})\n", dir.display()))
}

/// The CCMs `HCLOUD_CCM_E2E_SUBJECTS` names (`hcloud-ccm`, `official`, comma-separated; unset:
/// both), the official CCM first.
fn subjects(value: Option<&str>) -> Result<Vec<Ccm>, String> {
    let Some(value) = value.filter(|v| !v.trim().is_empty()) else { return Ok(vec![Ccm::Official, Ccm::HcloudCcm]) };
    let mut chosen = Vec::new();
    for word in value.split(',').map(str::trim) {
        match word {
            "official" => chosen.push(Ccm::Official),
            "hcloud-ccm" => chosen.push(Ccm::HcloudCcm),
            other => return Err(format!("HCLOUD_CCM_E2E_SUBJECTS: {other:?} is neither hcloud-ccm nor official")),
        }
    }
    Ok([Ccm::Official, Ccm::HcloudCcm].into_iter().filter(|c| chosen.contains(c)).collect())
}

#[test]
fn subjects_are_both_ccms_unless_named() {
    assert_eq!(subjects(None), Ok(vec![Ccm::Official, Ccm::HcloudCcm]));
    assert_eq!(subjects(Some("")), Ok(vec![Ccm::Official, Ccm::HcloudCcm]));
    assert_eq!(subjects(Some("hcloud-ccm")), Ok(vec![Ccm::HcloudCcm]));
    assert_eq!(subjects(Some("hcloud-ccm, official")), Ok(vec![Ccm::Official, Ccm::HcloudCcm]));
    assert!(subjects(Some("hcloud")).is_err());
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
    let failed = keep_if_failed(&lab, &official, &upstream, &chosen);
    lab.shutdown().await;
    if let Some(text) = failed {
        eprintln!("---- hcloud-ccm log (tail) ----\n{}", tail(&ccm_logs, 100));
        panic!("{text}");
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
    let chosen = subjects(std::env::var("HCLOUD_CCM_E2E_SUBJECTS").ok().as_deref()).unwrap_or_else(|e| panic!("{e}"));
    let suites = tokio::task::spawn_blocking(Suites::provision).await.expect("provisioning");
    let mut results = std::collections::HashMap::new();
    let mut failures = None;
    for ccm in chosen {
        let lab = SuitesLab::start(&suites, ccm).await;
        let official = runs::official(&suites, &lab).await;
        let upstream = runs::upstream(&suites, &lab, UPSTREAM_TESTS, 3, &report_dir(&format!("{ccm:?}"))).await;
        let failed = keep_if_failed(&lab, &official, &upstream, UPSTREAM_TESTS);
        lab.shutdown().await;
        if ccm == Ccm::HcloudCcm {
            failures = failed;
        }
        results.insert(ccm, (official, upstream));
    }
    let test = |ccm: Ccm, official: bool, name: &str| {
        results.get(&ccm).and_then(|(o, u)| if official { o.tests.get(name) } else { u.tests.get(name) })
    };
    let mut table = vec!["| test | official CCM v1.35.0 | hcloud-ccm |".to_owned(), "|---|---|---|".to_owned()];
    for name in OFFICIAL_TESTS {
        let (theirs, ours) = (test(Ccm::Official, true, name), test(Ccm::HcloudCcm, true, name));
        table.push(row(&format!("official: `{name}`"), theirs, ours));
    }
    for name in UPSTREAM_TESTS {
        let (theirs, ours) = (test(Ccm::Official, false, name), test(Ccm::HcloudCcm, false, name));
        table.push(row(&format!("upstream: {name}"), theirs, ours));
    }
    let table = table.join("\n");
    println!("{table}");
    if let Ok(path) = std::env::var("HCLOUD_CCM_E2E_TABLE") {
        std::fs::write(&path, format!("{table}\n")).expect("writing the table");
    }
    if let Some(text) = failures {
        panic!("{text}");
    }
}
