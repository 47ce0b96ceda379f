//! Lifelines and child processes: nothing survives, exit codes and logs are captured.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use test_harness::{ChildProcess, process_alive};

/// Poll until `condition` holds or `timeout` passes.
fn poll(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn nothing_survives_an_abrupt_exit_of_the_test_process() -> Result<()> {
    let output = Command::new(env!("CARGO_BIN_EXE_harness-probe")).output().context("running harness-probe")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "probe failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let mut pids = Vec::new();
    let mut dirs = Vec::new();
    for line in stdout.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.ends_with("_pid") {
            pids.push((key.to_owned(), value.parse::<u32>()?));
        } else if key == "dir" {
            dirs.push(PathBuf::from(value));
        }
    }
    // etcd, apiserver, 2 supervisors, child, its supervisor; 2 directories.
    ensure!(pids.len() == 6, "unexpected probe output:\n{stdout}");
    ensure!(dirs.len() == 2, "unexpected probe output:\n{stdout}");

    let all_gone = poll(Duration::from_secs(20), || {
        pids.iter().all(|(_, pid)| !process_alive(*pid)) && dirs.iter().all(|d| !d.exists())
    });
    if !all_gone {
        let alive: Vec<_> = pids.iter().filter(|(_, pid)| process_alive(*pid)).collect();
        let left: Vec<_> = dirs.iter().filter(|d| d.exists()).collect();
        bail!("still alive after 20 s: {alive:?}; directories left: {left:?}");
    }
    Ok(())
}

#[test]
fn a_panicking_scope_stops_its_child_process() -> Result<()> {
    let mut seen: Option<(u32, u32, PathBuf)> = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<()> {
        let child = ChildProcess::spawn(Path::new("sleep"), &["600"], &[], "doomed-sleep")?;
        seen = Some((child.pid(), child.supervisor_pid(), child.dir().to_owned()));
        assert!(child.is_running());
        panic!("deliberate panic with a running child");
    }));
    ensure!(result.is_err(), "the scope did not panic");
    let (pid, supervisor, dir) = seen.context("child was not started")?;
    // Drop is synchronous: the process and its supervisor are gone on return.
    ensure!(!process_alive(pid), "child {pid} survived the panic");
    ensure!(!process_alive(supervisor), "supervisor {supervisor} survived");
    ensure!(poll(Duration::from_secs(5), || !dir.exists()), "{} left behind", dir.display());
    Ok(())
}

#[tokio::test]
async fn exit_code_and_output_are_captured() -> Result<()> {
    let child = ChildProcess::spawn(
        Path::new("sh"),
        &["-c", "echo \"to stdout $GREETING\"; echo to-stderr >&2; exit 3"],
        &[("GREETING", "hello")],
        "exits-3",
    )?;
    let status = child.wait_exit(Duration::from_secs(10)).await.context("did not exit")?;
    assert_eq!(status.code(), Some(3));
    assert!(!child.is_running());
    let logs = child.logs();
    assert!(logs.contains("to stdout hello"), "{logs}");
    assert!(logs.contains("to-stderr"), "{logs}");
    Ok(())
}

#[tokio::test]
async fn stop_terminates_with_sigterm() -> Result<()> {
    let child = ChildProcess::spawn(
        Path::new("sh"),
        &["-c", "trap 'echo got TERM; exit 0' TERM; echo started; while :; do sleep 0.05; done"],
        &[],
        "graceful",
    )?;
    child.wait_for_log("started", Duration::from_secs(10)).await?;
    assert!(child.is_running());
    assert!(child.wait_exit(Duration::from_millis(200)).await.is_none());
    let status = child.stop().await?;
    assert_eq!(status.code(), Some(0), "{}", child.logs());
    assert!(child.logs().contains("got TERM"));
    assert!(!process_alive(child.pid()));

    let stubborn = ChildProcess::spawn(
        Path::new("sh"),
        &["-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"],
        &[],
        "ignores-term",
    )?;
    stubborn.wait_for_log("ready", Duration::from_secs(10)).await?;
    let status = stubborn.stop_with_grace(Duration::from_millis(300)).await?;
    assert_eq!(status.code(), Some(128 + 9), "SIGKILL expected");
    Ok(())
}

#[tokio::test]
async fn a_missing_program_exits_127_with_a_message() -> Result<()> {
    let child = ChildProcess::spawn(Path::new("/nonexistent/hcloud-ccm"), &["--help"], &[], "missing")?;
    let status = child.wait_exit(Duration::from_secs(10)).await.context("did not exit")?;
    assert_eq!(status.code(), Some(127));
    assert!(child.logs().contains("/nonexistent/hcloud-ccm"), "{}", child.logs());
    let timeout = child.wait_for_log("never printed", Duration::from_millis(200)).await;
    let message = timeout.err().context("expected a timeout")?.to_string();
    assert!(message.contains("never printed"), "{message}");
    Ok(())
}
