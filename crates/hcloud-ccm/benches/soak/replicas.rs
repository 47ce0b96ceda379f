//! The `hcloud-ccm` replicas of the soak: start, find the leader, hand over, and sample their
//! resident memory, open file descriptors and threads from `/proc`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use test_harness::ChildProcess;

use super::common::status_kib;

pub const ACQUIRED: &str = "successfully acquired lease";

/// What a replica needs to start.
pub struct Launch {
    pub kubeconfig: String,
    pub endpoint: String,
    pub cluster_cidr: String,
    /// Replica logs are copied here when it stops.
    pub log_dir: PathBuf,
}

/// One `/proc` sample.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub at: Duration,
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub fds: usize,
    pub threads: usize,
    pub leader: bool,
}

pub struct Replica {
    pub name: String,
    pub token: String,
    pub proc: ChildProcess,
    pub started: Duration,
    pub leader_since: Option<Duration>,
    pub stopped: Option<Duration>,
    pub samples: Vec<Sample>,
    /// Exit status when it ended without being stopped by the soak.
    pub died: Option<String>,
    /// Exit code (128 + N: killed by signal N), once it ended.
    pub exit_code: Option<i32>,
    /// Stopping it failed.
    pub stop_error: Option<String>,
}

fn entries(path: &str) -> usize {
    std::fs::read_dir(path).map(|d| d.count()).unwrap_or(0)
}

impl Replica {
    pub fn start(launch: &Launch, index: usize, t0: Instant) -> Replica {
        let name = format!("replica-{index:02}");
        // 64 characters, distinct per replica: the fake's log tells their requests apart.
        let token = format!("soak{index:060}");
        let metrics = format!("127.0.0.1:{}", super::common::free_port());
        let proc = ChildProcess::spawn(
            Path::new(env!("CARGO_BIN_EXE_hcloud-ccm")),
            &[
                "--cloud-provider=hcloud",
                "--allow-untagged-cloud",
                "--secure-port=0",
                "--allocate-node-cidrs=true",
                &launch.cluster_cidr,
                &launch.kubeconfig,
            ],
            &[
                ("HCLOUD_TOKEN", &token),
                ("HCLOUD_ENDPOINT", &launch.endpoint),
                ("HCLOUD_NETWORK", "k8s"),
                ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
                ("HCLOUD_LOAD_BALANCERS_TYPE", "lb21"),
                ("HCLOUD_METRICS_ADDRESS", &metrics),
                ("RUST_LOG", "warn,cloud_controller_manager=info"),
            ],
            &name,
        )
        .expect("spawn hcloud-ccm");
        Replica {
            name,
            token,
            proc,
            started: t0.elapsed(),
            leader_since: None,
            stopped: None,
            samples: Vec::new(),
            died: None,
            exit_code: None,
            stop_error: None,
        }
    }

    pub fn running(&self) -> bool {
        self.stopped.is_none() && self.died.is_none()
    }

    pub fn is_leader(&self) -> bool {
        self.running() && self.proc.logs().contains(ACQUIRED)
    }

    /// Samples `/proc`, notes leadership and an unexpected exit.
    pub fn sample(&mut self, t0: Instant, launch: &Launch) {
        if !self.running() {
            return;
        }
        if let Some(status) = self.proc.try_exit() {
            self.died = Some(format!("{status:?}"));
            self.exit_code = status.code();
            self.stopped = Some(t0.elapsed());
            self.keep_log(launch);
            println!("[{:>6.0}s] {} EXITED on its own: {status:?}", t0.elapsed().as_secs_f64(), self.name);
            return;
        }
        let leader = self.is_leader();
        if leader && self.leader_since.is_none() {
            self.leader_since = Some(t0.elapsed());
        }
        let pid = self.proc.pid();
        self.samples.push(Sample {
            at: t0.elapsed(),
            rss_kib: status_kib(pid, "VmRSS:"),
            hwm_kib: status_kib(pid, "VmHWM:"),
            fds: entries(&format!("/proc/{pid}/fd")),
            threads: entries(&format!("/proc/{pid}/task")),
            leader,
        });
    }

    pub fn keep_log(&self, launch: &Launch) {
        let _ = std::fs::copy(self.proc.log_path(), launch.log_dir.join(format!("{}.log", self.name)));
    }

    /// SIGTERM, wait for the exit, keep the log.
    pub async fn stop(&mut self, t0: Instant, launch: &Launch) {
        self.sample(t0, launch);
        if self.running() {
            match self.proc.stop_with_grace(Duration::from_secs(30)).await {
                Ok(status) => self.exit_code = status.code(),
                Err(e) => self.stop_error = Some(e.to_string()),
            }
            self.stopped = Some(t0.elapsed());
            self.keep_log(launch);
        }
    }

    /// What went wrong with the process itself (see [`exit_problem`]).
    pub fn crash(&self) -> Option<String> {
        if let Some(e) = &self.stop_error {
            return Some(format!("{}: stopping it failed: {e}", self.name));
        }
        let by_soak = self.died.is_none() && self.stopped.is_some();
        exit_problem(self.died.is_some(), by_soak, self.exit_code).map(|p| format!("{}: {p}", self.name))
    }

    /// The first sample as leader at least `warm` after it took over, and the last one.
    pub fn warm_and_end(&self, warm: Duration) -> (Option<Sample>, Option<Sample>) {
        let since = self.leader_since.unwrap_or(Duration::MAX);
        let warm = self.samples.iter().find(|s| s.leader && s.at >= since.saturating_add(warm)).copied();
        (warm, self.samples.last().copied())
    }
}

/// A replica that exited on its own crashed when it panicked (exit code 101) or a signal killed
/// it (128 + N); exiting with an error is not a crash (e.g. the start-up token check hit an
/// injected fault). One the soak stopped must have exited with 0 within the 30 s after SIGTERM
/// (else it was killed: 137).
pub fn exit_problem(died: bool, stopped_by_soak: bool, code: Option<i32>) -> Option<String> {
    if died && code.is_none_or(|c| c == 101 || c >= 128) {
        return Some(format!("crashed: exit code {code:?}"));
    }
    if stopped_by_soak && code != Some(0) {
        return Some(format!("exit code {code:?} after SIGTERM (a clean shutdown is 0)"));
    }
    None
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// One line per replica.
pub fn print_table(replicas: &[Replica], warm: Duration) {
    println!(
        "  {:<11} {:>8} {:>8} {:>8}  {:>10} {:>10} {:>10}  {:>9} {:>11}  exit",
        "replica", "start s", "lead s", "stop s", "RSS warm", "RSS end", "peak", "fds", "threads"
    );
    for r in replicas {
        let (w, end) = r.warm_and_end(warm);
        let fd = (r.samples.iter().map(|s| s.fds).min(), r.samples.iter().map(|s| s.fds).max());
        let th = (r.samples.iter().map(|s| s.threads).min(), r.samples.iter().map(|s| s.threads).max());
        let secs = |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.0}", d.as_secs_f64()));
        println!(
            "  {:<11} {:>8} {:>8} {:>8}  {:>10} {:>10} {:>10}  {:>9} {:>11}  {}",
            r.name,
            format!("{:.0}", r.started.as_secs_f64()),
            secs(r.leader_since),
            secs(r.stopped),
            w.map_or("-".into(), |s| format!("{:.1} MiB", mib(s.rss_kib))),
            end.map_or("-".into(), |s| format!("{:.1} MiB", mib(s.rss_kib))),
            end.map_or("-".into(), |s| format!("{:.1} MiB", mib(s.hwm_kib))),
            format!("{}-{}", fd.0.unwrap_or(0), fd.1.unwrap_or(0)),
            format!("{}-{}", th.0.unwrap_or(0), th.1.unwrap_or(0)),
            r.died.as_deref().unwrap_or(if r.stopped.is_some() { "stopped by soak" } else { "running" }),
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn crashes_and_unclean_shutdowns_are_problems() {
        use super::exit_problem;
        assert_eq!(exit_problem(true, false, Some(101)).as_deref(), Some("crashed: exit code Some(101)"));
        assert!(exit_problem(true, false, Some(134)).is_some(), "SIGABRT");
        assert!(exit_problem(true, false, None).is_some());
        assert_eq!(exit_problem(true, false, Some(1)), None, "an error exit (e.g. the token check) is no crash");
        assert_eq!(exit_problem(false, true, Some(0)), None);
        assert!(exit_problem(false, true, Some(137)).is_some(), "killed after the grace period");
        assert!(exit_problem(false, true, Some(1)).is_some());
        assert_eq!(exit_problem(false, false, None), None, "still running");
    }
}
