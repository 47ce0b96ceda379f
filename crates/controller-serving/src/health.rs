//! The health registry: named checks, each registered for one or more probes, and the report
//! format of kube-apiserver's healthz handler (`k8s.io/apiserver/pkg/server/healthz`).

use std::collections::BTreeSet;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, RwLock};
use sync_lock::UnpoisonRw as _;

use http::StatusCode;

/// The name of the implicit check a probe runs when no check is registered for it.
pub const PING: &str = "ping";

/// A health probe, served at `/<name>` (for example `/healthz`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Probe {
    /// `/healthz`: the classic combined health endpoint.
    Healthz,
    /// `/livez`: whether the process should be restarted.
    Livez,
    /// `/readyz`: whether the process is ready to serve.
    Readyz,
}

impl Probe {
    /// Every probe.
    pub const ALL: [Probe; 3] = [Probe::Healthz, Probe::Livez, Probe::Readyz];

    /// The probe's name as used in paths and messages: `healthz`, `livez`, `readyz`.
    pub fn name(self) -> &'static str {
        match self {
            Probe::Healthz => "healthz",
            Probe::Livez => "livez",
            Probe::Readyz => "readyz",
        }
    }

    /// The probe with this name, if any.
    pub fn from_name(name: &str) -> Option<Probe> {
        Probe::ALL.into_iter().find(|probe| probe.name() == name)
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

type CheckFn = dyn Fn() -> Result<(), String> + Send + Sync;

struct Entry {
    name: String,
    probes: Vec<Probe>,
    check: Arc<CheckFn>,
}

/// A registry of named health checks, shared by everything that registers checks and by the
/// servers that answer the probes.
///
/// Cloning is cheap and every clone sees the same checks; checks may be registered at any time,
/// also after serving started (controllers start later, on leadership). Checks run in
/// registration order, synchronously, so they should be cheap (read an atomic, compare a
/// timestamp).
#[derive(Clone, Default)]
pub struct Health {
    entries: Arc<RwLock<Vec<Entry>>>,
}

impl fmt::Debug for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.entries.read_unpoisoned();
        f.debug_map().entries(entries.iter().map(|entry| (&entry.name, &entry.probes))).finish()
    }
}

impl Health {
    /// An empty registry: every probe answers with the implicit [`PING`] check.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `check` under `name` for `probes`. The check returns `Err(reason)` when
    /// unhealthy; the reason is logged, never sent to the client.
    ///
    /// Registering a name again replaces the earlier check (and its probes) in place. The name
    /// appears in reports and in the single-check path `/<probe>/<name>`, so it should be a
    /// plain word such as `leaderElection` or `node-controller`.
    pub fn register(
        &self,
        name: &str,
        probes: &[Probe],
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        let mut unique: Vec<Probe> = Vec::with_capacity(probes.len());
        for probe in probes {
            if !unique.contains(probe) {
                unique.push(*probe);
            }
        }
        let entry = Entry { name: name.to_owned(), probes: unique, check: Arc::new(check) };
        let mut entries = self.entries.write_unpoisoned();
        match entries.iter_mut().find(|existing| existing.name == name) {
            Some(existing) => *existing = entry,
            None => entries.push(entry),
        }
    }

    /// Remove the check called `name`; whether there was one.
    pub fn unregister(&self, name: &str) -> bool {
        let mut entries = self.entries.write_unpoisoned();
        let before = entries.len();
        entries.retain(|entry| entry.name != name);
        entries.len() != before
    }

    /// Names of the checks registered for `probe`, in the order they run (empty when only the
    /// implicit [`PING`] check would run).
    pub fn names(&self, probe: Probe) -> Vec<String> {
        self.checks(probe).into_iter().map(|(name, _)| name).collect()
    }

    /// Run every check of `probe` except those named in `exclude`.
    ///
    /// With no check registered for `probe`, the report holds one passing [`PING`] check.
    /// A check that panics counts as failed.
    pub fn run(&self, probe: Probe, exclude: &[&str]) -> Report {
        let mut excluded: BTreeSet<&str> = exclude.iter().copied().collect();
        let checks = self.checks_or_ping(probe);
        let mut reports = Vec::with_capacity(checks.len());
        for (name, check) in checks {
            let outcome = if excluded.remove(name.as_str()) { Outcome::Excluded } else { call(&*check) };
            reports.push(CheckReport { name, outcome });
        }
        Report { probe, checks: reports, unmatched_excludes: excluded.into_iter().map(str::to_owned).collect() }
    }

    /// Run the single check `name` of `probe` (the path `/<probe>/<name>`); `None` when `probe`
    /// has no such check. [`PING`] exists exactly when no check is registered for `probe`.
    pub fn run_one(&self, probe: Probe, name: &str) -> Option<Outcome> {
        self.checks_or_ping(probe).into_iter().find(|(candidate, _)| candidate == name).map(|(_, check)| call(&*check))
    }

    /// The checks of `probe` (cloned out of the lock so that they run without holding it).
    fn checks(&self, probe: Probe) -> Vec<(String, Arc<CheckFn>)> {
        let entries = self.entries.read_unpoisoned();
        entries
            .iter()
            .filter(|entry| entry.probes.contains(&probe))
            .map(|entry| (entry.name.clone(), Arc::clone(&entry.check)))
            .collect()
    }

    fn checks_or_ping(&self, probe: Probe) -> Vec<(String, Arc<CheckFn>)> {
        let checks = self.checks(probe);
        if checks.is_empty() {
            let ping: Arc<CheckFn> = Arc::new(|| Ok(()));
            vec![(PING.to_owned(), ping)]
        } else {
            checks
        }
    }
}

fn call(check: &CheckFn) -> Outcome {
    // A panicking check must not take the endpoint down with it; the closure's state is not
    // touched again by us after a panic, so unwind safety does not matter here.
    match catch_unwind(AssertUnwindSafe(check)) {
        Ok(Ok(())) => Outcome::Passed,
        Ok(Err(reason)) => Outcome::Failed(reason),
        Err(_) => Outcome::Failed("the check panicked".to_owned()),
    }
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The check passed.
    Passed,
    /// The check failed for this reason (logged, never sent to clients).
    Failed(String),
    /// The check was skipped by `?exclude=`.
    Excluded,
}

/// One check's line in a [`Report`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The check's name.
    pub name: String,
    /// What it returned.
    pub outcome: Outcome,
}

/// The result of running a probe: every check's outcome, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The probe that ran.
    pub probe: Probe,
    /// One entry per check (the implicit [`PING`] when none is registered).
    pub checks: Vec<CheckReport>,
    /// Names given to `exclude` that match no check, sorted.
    pub unmatched_excludes: Vec<String>,
}

impl Report {
    /// Whether no check failed.
    pub fn passed(&self) -> bool {
        !self.checks.iter().any(|check| matches!(check.outcome, Outcome::Failed(_)))
    }

    /// `200 OK` when the probe passed, `500 Internal Server Error` otherwise.
    pub fn status(&self) -> StatusCode {
        if self.passed() { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR }
    }

    /// The response body, as kube-apiserver writes it: `ok` when everything passed (one line
    /// per check and `<probe> check passed` with `verbose`); on failure always one line per check,
    /// failures as `reason withheld`, then `<probe> check failed`.
    pub fn body(&self, verbose: bool) -> String {
        let passed = self.passed();
        if passed && !verbose {
            return "ok".to_owned();
        }
        let mut body = String::new();
        for check in &self.checks {
            let line = match &check.outcome {
                Outcome::Passed => format!("[+]{} ok\n", check.name),
                Outcome::Excluded => format!("[+]{} excluded: ok\n", check.name),
                Outcome::Failed(_) => format!("[-]{} failed: reason withheld\n", check.name),
            };
            body.push_str(&line);
        }
        if !self.unmatched_excludes.is_empty() {
            let quoted: Vec<String> = self.unmatched_excludes.iter().map(|name| format!("{name:?}")).collect();
            body.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for {}\n",
                quoted.join(",")
            ));
        }
        let verdict = if passed { "passed" } else { "failed" };
        body.push_str(&format!("{} check {verdict}\n", self.probe));
        body
    }

    /// The failed checks with their real reasons, one `[-]<name> failed: <reason>` per line (for
    /// the log; empty when the probe passed).
    pub fn failure_details(&self) -> String {
        self.checks
            .iter()
            .filter_map(|check| match &check.outcome {
                Outcome::Failed(reason) => Some(format!("[-]{} failed: {reason}", check.name)),
                Outcome::Passed | Outcome::Excluded => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn failing(reason: &'static str) -> impl Fn() -> Result<(), String> + Send + Sync + 'static {
        move || Err(reason.to_owned())
    }

    #[test]
    fn no_checks_means_an_implicit_ping() {
        let health = Health::new();
        let report = health.run(Probe::Healthz, &[]);
        assert_eq!(report.checks, vec![CheckReport { name: PING.to_owned(), outcome: Outcome::Passed }]);
        assert_eq!(report.status(), StatusCode::OK);
        assert_eq!(report.body(false), "ok");
        assert_eq!(report.body(true), "[+]ping ok\nhealthz check passed\n");
        assert_eq!(health.run_one(Probe::Readyz, PING), Some(Outcome::Passed));
        assert!(health.names(Probe::Healthz).is_empty());
    }

    #[test]
    fn ping_disappears_once_a_check_is_registered_for_that_probe() {
        let health = Health::new();
        health.register("leaderElection", &[Probe::Healthz], || Ok(()));
        assert_eq!(health.run_one(Probe::Healthz, PING), None);
        assert_eq!(health.run_one(Probe::Healthz, "leaderElection"), Some(Outcome::Passed));
        // Other probes still answer with the ping.
        assert_eq!(health.run(Probe::Livez, &[]).body(true), "[+]ping ok\nlivez check passed\n");
    }

    #[test]
    fn all_passing_is_ok_and_verbose_lists_every_check_in_order() {
        let health = Health::new();
        health.register("b-second", &[Probe::Healthz, Probe::Readyz], || Ok(()));
        health.register("a-first", &[Probe::Healthz], || Ok(()));
        let report = health.run(Probe::Healthz, &[]);
        assert!(report.passed());
        assert_eq!(report.body(false), "ok");
        assert_eq!(report.body(true), "[+]b-second ok\n[+]a-first ok\nhealthz check passed\n");
        assert_eq!(health.run(Probe::Readyz, &[]).body(true), "[+]b-second ok\nreadyz check passed\n");
    }

    #[test]
    fn a_failure_is_500_with_every_line_and_the_reason_withheld() {
        let health = Health::new();
        health.register("ping-a", &[Probe::Healthz], || Ok(()));
        health.register("leaderElection", &[Probe::Healthz], failing("lease expired 30s ago"));
        let report = health.run(Probe::Healthz, &[]);
        assert!(!report.passed());
        assert_eq!(report.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let expected = "[+]ping-a ok\n[-]leaderElection failed: reason withheld\nhealthz check failed\n";
        // Verbose or not: failures are always listed.
        assert_eq!(report.body(false), expected);
        assert_eq!(report.body(true), expected);
        assert!(!report.body(true).contains("lease expired"));
        assert_eq!(report.failure_details(), "[-]leaderElection failed: lease expired 30s ago");
    }

    #[test]
    fn exclude_skips_checks_and_reports_unknown_names() {
        let health = Health::new();
        health.register("good", &[Probe::Readyz], || Ok(()));
        health.register("bad", &[Probe::Readyz], failing("broken"));
        let report = health.run(Probe::Readyz, &["bad", "zeta", "alpha"]);
        assert!(report.passed());
        assert_eq!(report.body(false), "ok");
        assert_eq!(
            report.body(true),
            "[+]good ok\n[+]bad excluded: ok\nwarn: some health checks cannot be excluded: no matches for \
             \"alpha\",\"zeta\"\nreadyz check passed\n"
        );
        assert_eq!(report.unmatched_excludes, vec!["alpha".to_owned(), "zeta".to_owned()]);
    }

    #[test]
    fn single_check_runs_only_that_check() {
        let health = Health::new();
        let other_ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&other_ran);
        health.register("other", &[Probe::Livez], move || {
            flag.store(true, Ordering::SeqCst);
            Ok(())
        });
        health.register("broken", &[Probe::Livez], failing("disk full"));
        assert_eq!(health.run_one(Probe::Livez, "broken"), Some(Outcome::Failed("disk full".to_owned())));
        assert!(!other_ran.load(Ordering::SeqCst));
        assert_eq!(health.run_one(Probe::Livez, "missing"), None);
        // A check registered for another probe is not reachable under this one.
        assert_eq!(health.run_one(Probe::Healthz, "broken"), None);
    }

    #[test]
    fn registering_again_replaces_and_unregister_removes() {
        let health = Health::new();
        health.register("c", &[Probe::Healthz], failing("old"));
        health.register("d", &[Probe::Healthz], || Ok(()));
        health.register("c", &[Probe::Healthz, Probe::Healthz, Probe::Livez], || Ok(()));
        assert_eq!(health.names(Probe::Healthz), vec!["c".to_owned(), "d".to_owned()]);
        assert_eq!(health.names(Probe::Livez), vec!["c".to_owned()]);
        assert!(health.run(Probe::Healthz, &[]).passed());
        assert!(health.unregister("c"));
        assert!(!health.unregister("c"));
        assert_eq!(health.names(Probe::Healthz), vec!["d".to_owned()]);
    }

    #[test]
    fn clones_share_checks_registered_later() {
        let health = Health::new();
        let served = health.clone();
        health.register("late", &[Probe::Readyz], failing("not yet"));
        assert!(!served.run(Probe::Readyz, &[]).passed());
    }

    #[test]
    fn a_panicking_check_fails_instead_of_unwinding() {
        let health = Health::new();
        health.register("panics", &[Probe::Healthz], || panic!("boom"));
        let report = health.run(Probe::Healthz, &[]);
        assert_eq!(report.checks[0].outcome, Outcome::Failed("the check panicked".to_owned()));
        // The registry still works afterwards.
        assert_eq!(health.names(Probe::Healthz), vec!["panics".to_owned()]);
    }

    #[test]
    fn probe_names_round_trip() {
        for probe in Probe::ALL {
            assert_eq!(Probe::from_name(probe.name()), Some(probe));
        }
        assert_eq!(Probe::from_name("metrics"), None);
    }
}
