//! Test helper for the "no process survives the test binary" test (not a user tool).
//!
//! Starts a private [`ControlPlane`] and a [`ChildProcess`] (`sleep 600`), prints their process
//! ids and temporary directories as `key=value` lines, then leaves with
//! `std::process::exit(0)`, so nothing is dropped: only the lifelines can clean up.

use std::io::Write;
use std::path::Path;

use test_harness::{ChildProcess, ControlPlane, HarnessError};

#[tokio::main]
async fn main() -> Result<(), HarnessError> {
    let control_plane = ControlPlane::start().await?;
    let child = ChildProcess::spawn(Path::new("sleep"), &["600"], &[], "probe-sleep")?;
    let [apiserver_supervisor, etcd_supervisor] = control_plane.supervisor_pids();
    let report = format!(
        "etcd_pid={}\napiserver_pid={}\nsupervisor_pid={apiserver_supervisor}\nsupervisor_pid={etcd_supervisor}\n\
         child_pid={}\nsupervisor_pid={}\ndir={}\ndir={}\nready_after_ms={}\n",
        control_plane.etcd_pid(),
        control_plane.apiserver_pid(),
        child.pid(),
        child.supervisor_pid(),
        control_plane.dir().display(),
        child.dir().display(),
        control_plane.startup_duration().as_millis(),
    );
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(report.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| HarnessError::Io { context: "writing the report".to_owned(), source: e })?;
    // Leave without running any destructor.
    std::process::exit(0);
}
