//! [`ChildProcess`]: a binary under test (e.g. `hcloud-ccm`, `hcloud-fake`) run on a lifeline.

use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use tempfile::TempDir;

use crate::error::HarnessError;
use crate::lifeline::{Supervised, tail};

/// How many log lines a [`ChildProcess`] prints when it is dropped during a panic.
const PANIC_LOG_LINES: usize = 200;

/// Default grace period between SIGTERM and SIGKILL in [`ChildProcess::stop`].
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);

/// A long-lived child process tied to the test process by a lifeline.
///
/// - stdout and stderr go to a log file in a private temporary directory ([`Self::logs`]);
/// - the process cannot outlive the test process (see the crate docs, "Lifelines");
/// - dropping the value stops the process (SIGTERM, then SIGKILL after 5 s) and removes the
///   temporary directory; if the drop happens while the thread is panicking, the last 200 log
///   lines are printed to stderr first, so a failing test shows what the process did.
#[derive(Debug)]
pub struct ChildProcess {
    inner: Supervised,
    dir: TempDir,
}

impl ChildProcess {
    /// Start `program` with `args`, the test process's environment plus `env`, and stdin
    /// connected to `/dev/null`. `name` labels logs and error messages.
    ///
    /// A program that cannot be executed does not fail here: the process then exits with code
    /// 126 or 127 and the reason is in [`Self::logs`] (the command is started by bash).
    pub fn spawn(
        program: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        name: &str,
    ) -> Result<ChildProcess, HarnessError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("harness-{}-", sanitize(name)))
            .tempdir()
            .map_err(|e| HarnessError::io(format!("creating a temp dir for {name}"), e))?;
        let log_path = dir.path().join(format!("{}.log", sanitize(name)));
        let inner = Supervised::spawn(name, program, args, env, &log_path, Some(dir.path()))?;
        Ok(ChildProcess { inner, dir })
    }

    /// The label given to [`Self::spawn`].
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The process id of the program itself (not of its supervisor).
    pub fn pid(&self) -> u32 {
        self.inner.pid()
    }

    /// The process id of the lifeline supervisor (a `bash` process).
    pub fn supervisor_pid(&self) -> u32 {
        self.inner.supervisor_pid()
    }

    /// The private temporary directory (holds the log; removed when the process is dropped or
    /// the test process exits). Free for the test to put files in, e.g. a config file.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The log file holding the program's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        self.inner.log_path()
    }

    /// Everything the program wrote to stdout and stderr so far (lossy UTF-8).
    pub fn logs(&self) -> String {
        self.inner.logs()
    }

    /// Whether the program is still running.
    pub fn is_running(&self) -> bool {
        self.inner.is_running()
    }

    /// The exit status if the program has exited, without waiting.
    ///
    /// `code()` is the program's exit code, or 128+N if a signal N killed it.
    pub fn try_exit(&self) -> Option<ExitStatus> {
        self.inner.try_exit()
    }

    /// Wait until the program exits, at most `timeout`; `None` if it is still running.
    ///
    /// `code()` of the result is the program's exit code, or 128+N if a signal N killed it.
    pub async fn wait_exit(&self, timeout: Duration) -> Option<ExitStatus> {
        self.inner.wait_exit(timeout).await
    }

    /// Send a signal to the program, e.g. `"TERM"`, `"HUP"`, `"KILL"` or `"9"`.
    /// Does nothing if it has already exited.
    pub fn signal(&self, signal: &str) -> Result<(), HarnessError> {
        self.inner.signal(signal)
    }

    /// Stop the program: SIGTERM, wait up to [`DEFAULT_STOP_GRACE`], then SIGKILL.
    /// Returns its exit status (already exited: the status it exited with).
    pub async fn stop(&self) -> Result<ExitStatus, HarnessError> {
        self.inner.stop(DEFAULT_STOP_GRACE).await
    }

    /// [`Self::stop`] with a custom grace period before SIGKILL.
    pub async fn stop_with_grace(&self, grace: Duration) -> Result<ExitStatus, HarnessError> {
        self.inner.stop(grace).await
    }

    /// Poll until `needle` appears in the logs, at most `timeout`. On timeout the error shows
    /// the log tail. Handy for "the binary prints a clear message" tests.
    pub async fn wait_for_log(&self, needle: &str, timeout: Duration) -> Result<(), HarnessError> {
        let description = format!("{:?} in the logs of {}", needle, self.name());
        let result = crate::wait::wait_until(timeout, &description, async || self.logs().contains(needle)).await;
        result.map_err(|_| HarnessError::Timeout {
            description,
            timeout,
            last_state: format!(
                "last log lines of {} (running: {}):\n{}",
                self.name(),
                self.is_running(),
                tail(&self.logs(), 40)
            ),
        })
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "----- last {PANIC_LOG_LINES} log lines of {} (pid {}, {}) -----\n{}\n----- end of {} log -----",
                self.name(),
                self.pid(),
                match self.try_exit() {
                    Some(status) => format!("exited: {status}"),
                    None => "still running".to_owned(),
                },
                tail(&self.logs(), PANIC_LOG_LINES),
                self.name(),
            );
        }
        self.inner.shutdown();
    }
}

/// Keep `[A-Za-z0-9_-]`, replace the rest, so a name can be part of a file name.
pub(crate) fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(40)
        .collect();
    if cleaned.is_empty() { "process".to_owned() } else { cleaned }
}
