//! Running the two suites in a lab and reading what each test did.
//!
//! - The official suite: its `go test -c` binary with `-test.v` (the Hetzner API is the fake,
//!   through the patched `HCLOUD_ENDPOINT`; `ENV_NAME` names the lab's servers and network;
//!   `CERT_DOMAIN` lets the managed-certificate test run against the fake's issuer), read from
//!   its `--- PASS/FAIL/SKIP: <test>` lines.
//! - The upstream suite: `ginkgo` running `e2e.test` in parallel with `--provider=aws` (a null
//!   provider, so that `[Provider:aws,...]` tests are not skipped), read from ginkgo's JSON report.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use test_harness::ChildProcess;

use super::catalogue::{self, UPSTREAM_SKIPS};
use super::lab::{ENV_NAME, Suites, SuitesLab};
use crate::common::TOKEN;

/// What one test did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed(String),
    /// Skipped: by name (ours, with the reason) or by the test itself.
    Skipped(String),
}

impl Outcome {
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Passed => "pass",
            Outcome::Failed(_) => "fail",
            Outcome::Skipped(_) => "skip",
        }
    }
}

/// Results by test name, with the run's log for failures.
#[derive(Debug, Default)]
pub struct Results {
    pub tests: BTreeMap<String, (Outcome, f64)>,
    pub log: String,
}

impl Results {
    /// Failures, and tests that were neither run nor skipped by name, as lines.
    pub fn problems(&self, expected: &[&str], skip: impl Fn(&str) -> Option<&'static str>) -> Vec<String> {
        let mut out = Vec::new();
        for name in expected {
            match self.tests.get(*name) {
                None => out.push(format!("{name}: did not run")),
                Some((Outcome::Failed(why), _)) => out.push(format!("{name}: FAILED: {why}")),
                Some((Outcome::Skipped(why), _)) if skip(name).is_none() => {
                    out.push(format!("{name}: skipped, but it is not on the skip list: {why}"))
                }
                Some((Outcome::Passed, _)) if skip(name).is_some() => {
                    out.push(format!("{name}: ran although it is on the skip list"))
                }
                _ => {}
            }
        }
        out
    }
}

/// The official CCM's suite against the lab, skipping [`catalogue::OFFICIAL_SKIPS`].
pub async fn official(suites: &Suites, lab: &SuitesLab) -> Results {
    let skip =
        format!("^({})$", catalogue::any_of(&catalogue::OFFICIAL_SKIPS.iter().map(|(n, _)| *n).collect::<Vec<_>>()));
    let kubeconfig = lab.lab.control_plane().admin_kubeconfig().display().to_string();
    let endpoint = lab.fake.base_url();
    let env = [
        ("HCLOUD_TOKEN", TOKEN),
        ("HCLOUD_ENDPOINT", endpoint.as_str()),
        ("KUBECONFIG", kubeconfig.as_str()),
        ("ENV_NAME", ENV_NAME),
        ("CERT_DOMAIN", "example.com"),
    ];
    let args = ["-test.v", "-test.timeout=15m", "-test.parallel=4", "-test.skip", skip.as_str()];
    let binary = suites.official.join("hcloud-ccm-e2e.test");
    let run = ChildProcess::spawn(&binary, &args, &env, "official-e2e").expect("the official suite starts");
    let status = run.wait_exit(Duration::from_secs(17 * 60)).await;
    let log = run.logs();
    let _ =
        std::fs::write(std::env::temp_dir().join(format!("hcloud-ccm-e2e-official-{}.log", std::process::id())), &log);
    let mut results = Results { tests: parse_go_test(&log), log: log.clone() };
    for (name, why) in catalogue::OFFICIAL_SKIPS {
        results.tests.entry((*name).to_owned()).or_insert((Outcome::Skipped((*why).to_owned()), 0.0));
    }
    if status.is_none_or(|s| !s.success()) && results.tests.values().all(|(o, _)| !matches!(o, Outcome::Failed(_))) {
        // The suite failed outside a test (TestMain's set-up or clean-up): name it.
        results.tests.insert("TestMain".to_owned(), (Outcome::Failed(format!("exit {status:?}")), 0.0));
    }
    results
}

/// Reads `go test -v` output: top-level `--- PASS|FAIL|SKIP: Name (1.23s)` lines.
pub fn parse_go_test(log: &str) -> BTreeMap<String, (Outcome, f64)> {
    let mut out = BTreeMap::new();
    for line in log.lines() {
        let Some(rest) = line.strip_prefix("--- ") else { continue };
        let Some((word, rest)) = rest.split_once(": ") else { continue };
        let (name, time) = rest.split_once(' ').unwrap_or((rest, ""));
        let seconds = time.trim_matches(|c| c == '(' || c == ')' || c == 's').parse().unwrap_or(0.0);
        let outcome = match word {
            "PASS" => Outcome::Passed,
            "FAIL" => Outcome::Failed(failure_lines(log, name)),
            "SKIP" => Outcome::Skipped(failure_lines(log, name)),
            _ => continue,
        };
        out.insert(name.to_owned(), (outcome, seconds));
    }
    out
}

/// The indented lines `go test` printed for a test (its errors and logs, its failed subtests),
/// shortened.
fn failure_lines(log: &str, name: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .skip_while(|l| !l.starts_with(&format!("--- FAIL: {name}")) && !l.starts_with(&format!("--- SKIP: {name}")))
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .map(str::trim)
        // A passing subtest's line says nothing about the failure.
        .filter(|l| !l.is_empty() && !l.starts_with("--- PASS"))
        .collect();
    let text = lines.join(" | ");
    text.chars().take(600).collect()
}

/// Runs `$@` (ginkgo) in a process group of its own and ends the whole group when it exits or
/// when this script is told to stop: ginkgo's parallel `e2e.test` processes are its children,
/// and a ginkgo stopped by a signal may leave them behind.
const PROCESS_GROUP: &str = r#"setsid "$@" & child=$!
stop() { kill -TERM -- "-$child" 2>/dev/null; sleep 2; kill -KILL -- "-$child" 2>/dev/null; exit 143; }
trap stop TERM INT
wait "$child"; rc=$?
kill -KILL -- "-$child" 2>/dev/null
exit "$rc""#;

/// The upstream tests `names` (minus [`UPSTREAM_SKIPS`], passed as ginkgo's skip) against the lab.
pub async fn upstream(suites: &Suites, lab: &SuitesLab, names: &[&str], nodes: u32, report: &Path) -> Results {
    let focus = catalogue::any_of(names);
    let skip = catalogue::any_of(&UPSTREAM_SKIPS.iter().map(|(n, _)| *n).collect::<Vec<_>>());
    let cp = lab.lab.control_plane();
    std::fs::create_dir_all(report).expect("report directory");
    let report_dir = report.display().to_string();
    let flags = [
        format!("--nodes={nodes}"),
        "--timeout=60m".to_owned(),
        "--no-color".to_owned(),
        "--json-report=report.json".to_owned(),
        format!("--output-dir={report_dir}"),
        format!("--focus={focus}"),
        format!("--skip={skip}"),
        suites.upstream.join("e2e.test").display().to_string(),
        "--".to_owned(),
        format!("--kubeconfig={}", cp.admin_kubeconfig().display()),
        "--provider=aws".to_owned(),
        // The ESIPP tests skip unless the cluster has this many nodes (-1, unknown, otherwise).
        format!("--num-nodes={}", lab.lab.node_names().len()),
        format!("--kubectl-path={}", cp.kubectl_path().display()),
        format!("--report-dir={report_dir}"),
        "--disable-log-dump=true".to_owned(),
        // A failed test's namespace (its Events, its pods' states and logs, the nodes' pods)
        // is printed before it is deleted.
        "--dump-logs-on-failure=true".to_owned(),
        format!("--e2e-output-dir={report_dir}"),
    ];
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    let env = [("KUBECONFIG", cp.admin_kubeconfig().to_str().unwrap_or_default())];
    let ginkgo = suites.upstream.join("ginkgo").display().to_string();
    let mut wrapped = vec!["-c", PROCESS_GROUP, "ginkgo-group", ginkgo.as_str()];
    wrapped.extend(args);
    let run = ChildProcess::spawn(Path::new("bash"), &wrapped, &env, "upstream-e2e").expect("ginkgo starts");
    let _ = run.wait_exit(Duration::from_secs(65 * 60)).await;
    let log = run.logs();
    let _ = std::fs::write(report.join("ginkgo.log"), &log);
    let json = std::fs::read_to_string(report.join("report.json")).unwrap_or_default();
    let mut tests = parse_ginkgo_json(&json, names);
    for (name, why) in UPSTREAM_SKIPS {
        if names.contains(name) {
            tests.insert((*name).to_owned(), (Outcome::Skipped((*why).to_owned()), 0.0));
        }
    }
    Results { tests, log }
}

/// Reads ginkgo's JSON report: for each of `names`, the spec whose full text contains it.
pub fn parse_ginkgo_json(json: &str, names: &[&str]) -> BTreeMap<String, (Outcome, f64)> {
    let mut out = BTreeMap::new();
    let suites: Vec<serde_json::Value> = serde_json::from_str(json).unwrap_or_default();
    for spec in suites.iter().flat_map(|s| s["SpecReports"].as_array().cloned().unwrap_or_default()) {
        if spec["LeafNodeType"] != "It" {
            continue;
        }
        let mut texts: Vec<String> = spec["ContainerHierarchyTexts"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        texts.push(spec["LeafNodeText"].as_str().unwrap_or_default().to_owned());
        let full = texts.join(" ");
        let Some(name) = names.iter().find(|n| full.contains(**n)) else { continue };
        let message = spec["Failure"]["Message"].as_str().unwrap_or_default().chars().take(600).collect::<String>();
        let outcome = match spec["State"].as_str().unwrap_or_default() {
            "passed" => Outcome::Passed,
            "skipped" => Outcome::Skipped(message),
            other => Outcome::Failed(format!("{other}: {message}")),
        };
        let seconds = spec["RunTime"].as_f64().unwrap_or(0.0) / 1e9;
        out.insert((*name).to_owned(), (outcome, seconds));
    }
    out
}

#[test]
fn go_test_lines_are_read_with_their_time_and_failure_text() {
    let log = "=== RUN   TestA\n--- PASS: TestA (1.50s)\n--- FAIL: TestB (2.00s)\n    helper.go:1: boom\n        more\n\
               --- SKIP: TestC (0.00s)\n    cloud_test.go:9: no domain\n    --- PASS: TestA/sub (0.1s)\nFAIL\n";
    let got = parse_go_test(log);
    assert_eq!(got["TestA"], (Outcome::Passed, 1.5));
    assert_eq!(got["TestB"], (Outcome::Failed("helper.go:1: boom | more".to_owned()), 2.0));
    assert_eq!(got["TestC"].0, Outcome::Skipped("cloud_test.go:9: no domain".to_owned()));
    assert!(!got.contains_key("TestA/sub"), "subtests are part of their test");
}

#[test]
fn ginkgo_specs_are_matched_by_the_end_of_their_name() {
    let json = r#"[{"SpecReports": [
        {"LeafNodeType": "It", "ContainerHierarchyTexts": ["[sig-network] LoadBalancers"], "LeafNodeText": "should work for type=LoadBalancer", "State": "passed", "RunTime": 2000000000},
        {"LeafNodeType": "It", "ContainerHierarchyTexts": ["x"], "LeafNodeText": "should only target nodes with endpoints", "State": "failed", "Failure": {"Message": "boom"}},
        {"LeafNodeType": "BeforeSuite", "LeafNodeText": "", "State": "passed"},
        {"LeafNodeType": "It", "ContainerHierarchyTexts": [], "LeafNodeText": "something else", "State": "skipped"}
    ]}]"#;
    let got =
        parse_ginkgo_json(json, &["should work for type=LoadBalancer", "should only target nodes with endpoints"]);
    assert_eq!(got.len(), 2);
    assert_eq!(got["should work for type=LoadBalancer"], (Outcome::Passed, 2.0));
    assert_eq!(got["should only target nodes with endpoints"].0, Outcome::Failed("failed: boom".to_owned()));
}
