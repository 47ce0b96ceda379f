//! The official CCM as a second subject of the benchmarks: which subjects run
//! (`BENCH_SUBJECTS`), starting one through the differential suite's launcher (the same flags
//! and environment for both, a token each), its process figures from `/proc`, and the
//! side-by-side table printed at the end.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hcloud_fake::FakeHandle;
use hcloud_fake::control::RequestCounts;
use test_harness::{ChildProcess, ControlPlane};

pub use super::subject::{CHART_ARGS, CHART_NETWORKING_ARGS, Config, Subject};

/// The subjects to run, from `BENCH_SUBJECTS`: `both` (default: the official CCM first),
/// `ours` or `official`.
pub fn subjects() -> Vec<Subject> {
    match std::env::var("BENCH_SUBJECTS").unwrap_or_default().as_str() {
        "" | "both" => Subject::BOTH.to_vec(),
        "ours" | "hcloud-ccm" => vec![Subject::Ours],
        "official" => vec![Subject::Official],
        other => panic!("BENCH_SUBJECTS={other:?}: expected ours, official or both"),
    }
}

/// The chart's default flags (see [`CHART_ARGS`]), plus `extra` (`BENCH_CCM_ARGS`), with
/// upstream's node monitor period and log verbosity: what a chart install runs.
pub fn chart_config(extra: &[String]) -> Config {
    let mut config = Config::default().chart_timings().args(CHART_ARGS);
    config.args.extend(extra.iter().cloned());
    config
}

/// `BENCH_CCM_ARGS`, split at whitespace.
pub fn extra_args() -> Vec<String> {
    std::env::var("BENCH_CCM_ARGS").unwrap_or_default().split_whitespace().map(str::to_owned).collect()
}

/// Starts `subject` against `cp` and the fake at `endpoint` with `config`.
pub fn start(subject: Subject, cp: &ControlPlane, endpoint: &str, config: &Config) -> ChildProcess {
    super::subject::spawn(subject, cp, endpoint, config, subject.label())
}

/// Waits until the CCM's start-up checks are done (it asked for the locations, the token check
/// both make, and for the network when `HCLOUD_NETWORK` is set), then one second more.
pub async fn wait_started(ccm: &ChildProcess, h: &FakeHandle, network: bool) {
    let t = Instant::now();
    loop {
        let counts = h.request_counts();
        let networks = counts.by_endpoint.keys().any(|e| e.starts_with("GET /v1/networks"));
        if counts.get("GET /v1/locations") > 0 && (networks || !network) {
            break;
        }
        assert!(ccm.is_running(), "{} exited:\n{}", ccm.name(), ccm.logs());
        assert!(t.elapsed() < Duration::from_secs(60), "{} did not start:\n{}", ccm.name(), ccm.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Waits until the fake saw no request for `quiet`; returns the time from `since` to the last
/// request seen while waiting (or to the call, if none came).
pub async fn wait_quiet(h: &FakeHandle, since: Instant, quiet: Duration) -> Duration {
    // `Duration::MAX` is never reached, so the `None` arm is only there for the type.
    wait_quiet_within(h, since, quiet, Duration::MAX).await.unwrap_or_default()
}

/// Like [`wait_quiet`], but gives up after `max`: `None` if the fake never went `quiet` for
/// that long (a CCM that polls faster than `quiet`).
pub async fn wait_quiet_within(h: &FakeHandle, since: Instant, quiet: Duration, max: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut last = (h.request_counts().total, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = h.request_counts().total;
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= quiet {
            return Some(last.1.duration_since(since));
        }
        if start.elapsed() >= max {
            return None;
        }
    }
}

/// All requests and the mutating ones (every method but GET).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Requests {
    /// Every `/v1` request.
    pub all: u64,
    /// Every `/v1` request that is not a GET.
    pub mutating: u64,
}

impl Requests {
    /// Of `counts`.
    pub fn of(counts: &RequestCounts) -> Requests {
        let mutating = counts.by_endpoint.iter().filter(|(e, _)| !e.starts_with("GET ")).map(|(_, n)| n).sum();
        Requests { all: counts.total, mutating }
    }
}

/// A CCM process's peak resident memory and CPU time so far, from `/proc`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcFigures {
    /// `VmHWM` in MiB.
    pub peak_rss_mib: f64,
    /// `utime + stime` in seconds.
    pub cpu_secs: f64,
}

/// The figures of process `pid` now (zeros if it is gone).
pub fn proc_figures(pid: u32) -> ProcFigures {
    let peak_rss_mib = super::status_kib(pid, "VmHWM:") as f64 / 1024.0;
    let ticks = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // Fields after the command name (which may hold spaces) in parentheses: state is
            // field 3, utime 14, stime 15.
            let rest = stat.rsplit_once(')')?.1.split_whitespace().collect::<Vec<_>>();
            let utime: u64 = rest.get(11)?.parse().ok()?;
            let stime: u64 = rest.get(12)?.parse().ok()?;
            Some(utime + stime)
        })
        .unwrap_or(0);
    ProcFigures { peak_rss_mib, cpu_secs: ticks as f64 / clock_ticks() }
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 on Linux).
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// One figure's formatting.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    /// A count (no decimals).
    Count,
    /// Seconds, one decimal.
    Secs,
    /// MiB, one decimal.
    Mib,
    /// Per hour, no decimals.
    PerHour,
}

impl Unit {
    fn format(self, v: f64) -> String {
        match self {
            Unit::Count => format!("{v:.0}"),
            Unit::Secs => format!("{v:.1} s"),
            Unit::Mib => format!("{v:.1} MiB"),
            Unit::PerHour => format!("{v:.0}/h"),
        }
    }

    /// Without the unit (for ranges).
    fn format_bare(self, v: f64) -> String {
        match self {
            Unit::Count | Unit::PerHour => format!("{v:.0}"),
            Unit::Secs | Unit::Mib => format!("{v:.1}"),
        }
    }
}

/// The side-by-side table of one benchmark: a row per figure, a column per subject (the
/// median over the rounds, with the range when there were several), and the ratio of the
/// medians, official/ours.
#[derive(Debug, Default)]
pub struct Table {
    title: String,
    rows: Vec<(String, Unit, BTreeMap<Subject, Vec<f64>>)>,
}

/// The median of `v` (the mean of the middle two for an even count); `None` if empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

impl Table {
    /// An empty table.
    pub fn new(title: impl Into<String>) -> Table {
        Table { title: title.into(), rows: Vec::new() }
    }

    /// Adds one round's value of the figure `label` for `subject` (rows keep the order they
    /// were first set in).
    pub fn set(&mut self, label: &str, unit: Unit, subject: Subject, value: f64) {
        if let Some(row) = self.rows.iter_mut().find(|(l, _, _)| l == label) {
            row.2.entry(subject).or_default().push(value);
        } else {
            self.rows.push((label.to_owned(), unit, BTreeMap::from([(subject, vec![value])])));
        }
    }

    /// Adds the request figures `label` (all) and `label, mutating`.
    pub fn requests(&mut self, label: &str, subject: Subject, r: Requests) {
        self.set(label, Unit::Count, subject, r.all as f64);
        self.set(&format!("{label}, of which mutating (non-GET)"), Unit::Count, subject, r.mutating as f64);
    }

    /// Adds a process's peak RSS and CPU seconds.
    pub fn process(&mut self, what: &str, subject: Subject, p: ProcFigures) {
        self.set(&format!("{what}: peak RSS (VmHWM)"), Unit::Mib, subject, p.peak_rss_mib);
        self.set(&format!("{what}: CPU time (utime+stime)"), Unit::Secs, subject, p.cpu_secs);
    }

    /// Prints the table (Markdown).
    pub fn print(&self) {
        let rounds = self.rows.iter().flat_map(|(_, _, v)| v.values().map(Vec::len)).max().unwrap_or(0);
        println!("\n## {} (median of {rounds} round(s){})\n", self.title, if rounds > 1 { "; min–max" } else { "" });
        println!("| | official v1.35.0 | hcloud-ccm | official/ours |");
        println!("|---|---:|---:|---:|");
        for (label, unit, values) in &self.rows {
            let cell = |s: Subject| match values.get(&s) {
                Some(v) if v.len() > 1 => {
                    let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
                    let m = median(v).unwrap_or_default();
                    format!("{} ({}–{})", unit.format(m), unit.format_bare(lo), unit.format_bare(hi))
                }
                Some(v) => median(v).map_or_else(|| "–".to_owned(), |m| unit.format(m)),
                None => "–".to_owned(),
            };
            let med = |s: Subject| values.get(&s).and_then(|v| median(v));
            let ratio = match (med(Subject::Official), med(Subject::Ours)) {
                (Some(o), Some(u)) if u > 0.0 => format!("{:.2}", o / u),
                (Some(o), Some(_)) if o > 0.0 => "∞".to_owned(),
                (Some(_), Some(_)) => "=".to_owned(),
                _ => "–".to_owned(),
            };
            println!("| {label} | {} | {} | {ratio} |", cell(Subject::Official), cell(Subject::Ours));
        }
    }
}

/// Prints the request counts by endpoint of each subject side by side.
pub fn print_endpoints(title: &str, counts: &[(Subject, RequestCounts)]) {
    println!("\n{title}: Hetzner requests by endpoint");
    let mut endpoints: Vec<&String> = counts.iter().flat_map(|(_, c)| c.by_endpoint.keys()).collect();
    endpoints.sort();
    endpoints.dedup();
    let header: Vec<String> = counts.iter().map(|(s, _)| format!("{:>10}", s.label())).collect();
    println!("  {}  endpoint", header.join(" "));
    for e in endpoints {
        let cells: Vec<String> = counts.iter().map(|(_, c)| format!("{:>10}", c.get(e))).collect();
        println!("  {}  {e}", cells.join(" "));
    }
    let totals: Vec<String> = counts.iter().map(|(_, c)| format!("{:>10}", c.total)).collect();
    println!("  {}  total", totals.join(" "));
}

/// With `BENCH_REQUEST_LOG_DIR` set, writes the fake's request log (one request a line:
/// milliseconds since the first, method, path and query, status) to `<dir>/<name>.log`.
pub fn dump_request_log(h: &FakeHandle, name: &str) {
    let Some(dir) = std::env::var_os("BENCH_REQUEST_LOG_DIR") else { return };
    let log = h.request_log();
    let first = log.first().map_or(0, |r| r.unix_ms);
    let lines: Vec<String> = log
        .iter()
        .map(|r| {
            let query = r.query.as_deref().map(|q| format!("?{q}")).unwrap_or_default();
            format!("{:>8} {} {}{query} {}", r.unix_ms - first, r.method, r.path, r.status)
        })
        .collect();
    let path = std::path::Path::new(&dir).join(format!("{name}.log"));
    std::fs::create_dir_all(&dir).expect("BENCH_REQUEST_LOG_DIR");
    std::fs::write(&path, lines.join("\n") + "\n").expect("request log");
    println!("  (request log: {})", path.display());
}
