//! Long-lived child processes that cannot outlive the test process.
//!
//! Every long-lived process the harness starts runs under a tiny bash supervisor:
//!
//! ```text
//! test process ──(pipe: supervisor's stdin)──▶ bash supervisor ──▶ the command
//!                                                  └─ reader subshell (blocks on the pipe)
//! ```
//!
//! The write end of the pipe exists only in the test process (Rust creates pipes with
//! `O_CLOEXEC`, so no other child inherits it). When the test process exits for any reason —
//! normal return, panic, `std::process::exit`, SIGKILL — the kernel closes it, the reader sees
//! end-of-file and signals the supervisor, which sends SIGTERM to the command, waits up to a
//! grace period, sends SIGKILL, and exits. The reader then removes the cleanup directory (if
//! one was given) once the supervisor is gone. If the command exits on its own, the supervisor
//! exits with the command's exit code (128+N for signal N), so the test process can observe
//! it; the reader stays behind, holding nothing but the pipe, until the lifeline closes and
//! then removes the cleanup directory.
//!
//! Dropping a [`Supervised`] closes the pipe early and waits for the supervisor, which gives the
//! same cleanup for values that are dropped normally.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use sync_lock::Unpoison as _;

use crate::error::HarnessError;

/// How long the supervisor waits after SIGTERM before it sends SIGKILL, in tenths of a second.
const SUPERVISOR_GRACE_TENTHS: u32 = 50;

/// The supervisor. Positional parameters: `$1` cleanup dir (may be empty), `$2` grace period in
/// tenths of a second, `$3...` the command. stdin: the lifeline; stdout: a pipe on which the
/// command's pid is reported once; stderr: the log file (the command's stdout and stderr go
/// there too).
const SUPERVISOR_SCRIPT: &str = r#"
unset HARNESS_LIFELINE_SCRIPT
set -u
dir=$1
grace_tenths=$2
shift 2
exec 3<&0 4>&1 </dev/null 1>&2
alive() {
  local stat
  { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != [ZX] ]]
}
child=
stop_child() {
  [ -n "$child" ] || return 0
  kill -TERM "$child" 2>/dev/null
  local i
  for ((i = 0; i < grace_tenths; i++)); do
    alive "$child" || break
    sleep 0.1
  done
  kill -KILL "$child" 2>/dev/null
  wait "$child"
}
on_stop() {
  trap '' USR1 TERM INT HUP
  stop_child
  exit $?
}
trap on_stop USR1 TERM INT HUP
"$@" 3<&- 4>&- &
child=$!
echo "$child" >&4
exec 4>&-
(
  while read -r -u 3 _; do :; done
  kill -USR1 $$ 2>/dev/null
  while alive $$; do sleep 0.1; done
  [ -z "$dir" ] || rm -rf -- "$dir" 2>/dev/null || { sleep 0.5; rm -rf -- "$dir"; }
) &
exec 3<&-
wait "$child"
exit $?
"#;

/// A command running under a lifeline supervisor (see the module docs).
#[derive(Debug)]
pub(crate) struct Supervised {
    name: String,
    /// The command's pid (a child of the supervisor).
    pid: u32,
    supervisor: Mutex<Child>,
    lifeline: Mutex<Option<ChildStdin>>,
    exit: Mutex<Option<ExitStatus>>,
    log_path: PathBuf,
}

impl Supervised {
    /// Start `program args...` under a supervisor, appending its output to `log_path`.
    /// `cleanup_dir` is removed once the lifeline closes and the command is gone.
    pub(crate) fn spawn(
        name: &str,
        program: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        log_path: &Path,
        cleanup_dir: Option<&Path>,
    ) -> Result<Self, HarnessError> {
        let log = open_log(log_path)?;
        let mut command = Command::new("bash");
        command
            // Passed through the environment (and unset at once) to keep `ps` output short.
            .arg("-c")
            .arg(r#"eval "$HARNESS_LIFELINE_SCRIPT""#)
            .env("HARNESS_LIFELINE_SCRIPT", SUPERVISOR_SCRIPT)
            .arg(format!("lifeline[{name}]"))
            .arg(cleanup_dir.map(Path::as_os_str).unwrap_or_default())
            .arg(SUPERVISOR_GRACE_TENTHS.to_string())
            .arg(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        let mut supervisor =
            command.spawn().map_err(|e| HarnessError::io(format!("spawning the supervisor for {name} (bash)"), e))?;
        let lifeline = supervisor.stdin.take();
        let pid_line = supervisor
            .stdout
            .take()
            .map(|stdout| {
                let mut line = String::new();
                BufReader::new(stdout).read_line(&mut line).map(|_| line)
            })
            .transpose()
            .map_err(|e| HarnessError::io(format!("reading the pid of {name}"), e))?
            .unwrap_or_default();
        let Ok(pid) = pid_line.trim().parse::<u32>() else {
            let _ = supervisor.kill();
            let _ = supervisor.wait();
            return Err(HarnessError::Command {
                command: format!("lifeline supervisor for {name}"),
                detail: format!("did not report a pid (got {pid_line:?}); log:\n{}", tail_file(log_path, 20)),
            });
        };
        Ok(Self {
            name: name.to_owned(),
            pid,
            supervisor: Mutex::new(supervisor),
            lifeline: Mutex::new(lifeline),
            exit: Mutex::new(None),
            log_path: log_path.to_owned(),
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    pub(crate) fn supervisor_pid(&self) -> u32 {
        self.supervisor.lock_unpoisoned().id()
    }

    pub(crate) fn log_path(&self) -> &Path {
        &self.log_path
    }

    pub(crate) fn logs(&self) -> String {
        std::fs::read(&self.log_path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default()
    }

    /// The exit status of the supervisor (= the command's exit code), if it has exited.
    pub(crate) fn try_exit(&self) -> Option<ExitStatus> {
        let mut exit = self.exit.lock_unpoisoned();
        if exit.is_none() {
            // An error here means the child was already reaped, which only we do.
            *exit = self.supervisor.lock_unpoisoned().try_wait().ok().flatten();
        }
        *exit
    }

    /// Whether the command is still running.
    pub(crate) fn is_running(&self) -> bool {
        self.try_exit().is_none() && pid_alive(self.pid)
    }

    /// Send a signal (a name such as `TERM` or a number) to the command via the `kill` utility.
    pub(crate) fn signal(&self, signal: &str) -> Result<(), HarnessError> {
        if self.try_exit().is_some() {
            return Ok(());
        }
        send_signal(self.pid, signal)
    }

    /// Wait (polling) until the supervisor has exited or `timeout` passed.
    pub(crate) async fn wait_exit(&self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Blocking variant of [`Self::wait_exit`], for `Drop`.
    fn wait_exit_blocking(&self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM the command, wait up to `grace`, then SIGKILL it; returns its exit status.
    pub(crate) async fn stop(&self, grace: Duration) -> Result<ExitStatus, HarnessError> {
        if let Some(status) = self.try_exit() {
            return Ok(status);
        }
        self.signal("TERM")?;
        if let Some(status) = self.wait_exit(grace).await {
            return Ok(status);
        }
        self.signal("KILL")?;
        self.wait_exit(Duration::from_secs(10)).await.ok_or_else(|| HarnessError::Command {
            command: format!("kill -KILL {} ({})", self.pid, self.name),
            detail: "the process did not exit within 10 s of SIGKILL".to_owned(),
        })
    }

    /// Close the lifeline (the supervisor then stops the command) and wait for the supervisor.
    /// As a last resort, SIGKILL both. Never fails; used from `Drop`.
    pub(crate) fn shutdown(&self) {
        drop(self.lifeline.lock_unpoisoned().take());
        let grace = Duration::from_millis(u64::from(SUPERVISOR_GRACE_TENTHS) * 100);
        if self.wait_exit_blocking(grace + Duration::from_secs(5)).is_none() {
            let _ = send_signal(self.pid, "KILL");
            let mut supervisor = self.supervisor.lock_unpoisoned();
            let _ = supervisor.kill();
            if let Ok(status) = supervisor.wait() {
                *self.exit.lock_unpoisoned() = Some(status);
            }
        }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn open_log(path: &Path) -> Result<File, HarnessError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| HarnessError::io(format!("opening log file {}", path.display()), e))
}

/// Send `signal` to `pid` with the `kill` utility (this crate forbids `unsafe`, so no libc).
pub(crate) fn send_signal(pid: u32, signal: &str) -> Result<(), HarnessError> {
    let command = format!("kill -{signal} {pid}");
    let output = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .output()
        .map_err(|e| HarnessError::io(format!("running `{command}`"), e))?;
    if output.status.success() || !pid_alive(pid) {
        Ok(())
    } else {
        Err(HarnessError::Command {
            command,
            detail: format!("{}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim()),
        })
    }
}

/// Whether a process with this pid exists and is not a zombie.
///
/// Zombies count as gone: they hold no resources but a pid, and on machines whose pid 1 does
/// not reap orphans they linger forever.
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // Format: `pid (comm) state ...`; comm may contain spaces and parentheses.
    let state = stat.rfind(')').and_then(|i| stat.get(i + 1..)).and_then(|rest| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

/// The last `lines` lines of a file, or a note that it could not be read.
pub(crate) fn tail_file(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => tail(&String::from_utf8_lossy(&bytes), lines),
        Err(e) => format!("(could not read {}: {e})", path.display()),
    }
}

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    all.get(start..).unwrap_or_default().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
        assert_eq!(tail("", 5), "");
    }

    #[test]
    fn own_pid_is_alive_and_bogus_pid_is_not() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(u32::MAX));
    }
}
