//! Hetzner's own Python library (`hcloud` on PyPI) against the fake.
//!
//! The fake starts in-process on 127.0.0.1; `tests/python/conformance.py` runs with the
//! interpreter of the virtualenv that `scripts/provision-python-hcloud` creates (and caches
//! in `~/.cache/hcloud-ccm`; the library version is pinned in that script). If the
//! virtualenv is missing this test runs the script; if it cannot be provisioned the test
//! FAILS with the script's error, it never skips.
//!
//! The suite drives the library through servers with networks and labels, pagination, label
//! selectors, power actions, routes, uploaded and managed certificates, a Load Balancer
//! created with services, targets and network in one request and every action the CCM uses,
//! the error codes the CCM relies on, and deletion. It prints one line per check and
//! `RESULT passed=N failed=M assertions=K`; this test asserts no failure and that the suite
//! really ran (at least [`MIN_CHECKS`] checks and [`MIN_ASSERTIONS`] assertions).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use hcloud_fake::{FakeConfig, FakeServer};

const MIN_CHECKS: usize = 20;
const MIN_ASSERTIONS: usize = 250;
const SUITE_TIMEOUT: Duration = Duration::from_secs(600);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The virtualenv's interpreter (cached, or built by the provisioning script).
fn python() -> PathBuf {
    let script = repo_root().join("scripts/provision-python-hcloud");
    test_harness::provisioned_path(&script, "HCLOUD_PYTHON")
        .unwrap_or_else(|e| panic!("{e}. This test needs Hetzner's Python library and does not skip without it."))
}

fn summary(stdout: &str) -> (usize, usize, usize) {
    let line = stdout.lines().rev().find(|l| l.starts_with("RESULT ")).expect("the suite printed its RESULT line");
    let field = |name: &str| -> usize {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
    };
    (field("passed"), field("failed"), field("assertions"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hetzners_python_library_accepts_the_fake() {
    let python = tokio::task::spawn_blocking(python).await.expect("provisioning thread");
    let config =
        FakeConfig { log_requests: false, ..FakeConfig::default().with_action_delay(Duration::from_millis(20)) };
    let fake = FakeServer::start(config).await.expect("fake starts");
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/conformance.py");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");

    let child = tokio::process::Command::new(&python)
        .arg(&suite)
        .env("HCLOUD_ENDPOINT", fake.base_url())
        .env("HCLOUD_FAKE_CONTROL", fake.control_url())
        .env("HCLOUD_FAKE_FIXTURES", &fixtures)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
    let out = tokio::time::timeout(SUITE_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the Python suite did not finish within {SUITE_TIMEOUT:?}"))
        .expect("the Python suite ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    if !stderr.trim().is_empty() {
        println!("--- stderr ---\n{stderr}");
    }
    fake.shutdown().await;

    let (passed, failed, assertions) = summary(&stdout);
    assert_eq!(failed, 0, "{failed} checks failed (details above)");
    assert!(out.status.success(), "the suite exited with {}", out.status);
    assert!(passed >= MIN_CHECKS, "only {passed} checks ran (minimum {MIN_CHECKS})");
    assert!(assertions >= MIN_ASSERTIONS, "only {assertions} assertions ran (minimum {MIN_ASSERTIONS})");
}
