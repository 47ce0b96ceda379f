//! What the soak prints: a progress line per sample, the report at the end (churn, handovers,
//! Hetzner requests and faults, resources, wrong deletions) and the verdict.

use std::collections::BTreeMap;
use std::time::Duration;

use hcloud_fake::FakeHandle;

use super::chaos::Armed;
use super::flat::{self, Part};
use super::replicas::{self, Replica};
use super::world::World;
use super::{Knobs, Outcome, Shared, common};

/// One line: sizes, requests, faults, and each running replica's last sample.
pub fn progress(stamp: &str, world: &Shared, h: &FakeHandle, replicas: &[Replica]) {
    let (live_nodes, live_services) = {
        let w = world.lock().unwrap();
        (w.nodes.len(), w.services.len())
    };
    let rss: Vec<String> = replicas
        .iter()
        .filter(|r| r.running())
        .filter_map(|r| r.samples.last().map(|s| (r, s)))
        .map(|(r, s)| {
            format!(
                "{}{} {} {} fds {} thr",
                r.name,
                if s.leader { "*" } else { "" },
                flat::mib(s.rss_kib),
                s.fds,
                s.threads
            )
        })
        .collect();
    println!(
        "{stamp} {live_nodes} nodes, {live_services} Services, {} Hetzner requests, {} faulted; {}",
        h.request_counts().total,
        h.request_log().iter().filter(|r| r.fault.is_some()).count(),
        rss.join(", ")
    );
}

pub struct Report<'a> {
    pub knobs: &'a Knobs,
    pub kubernetes: String,
    /// The expected state and tallies after the monitor's last look.
    pub world: World,
    /// How many wrong deletions the monitor had seen when the convergence check passed (or the
    /// settling gave up).
    pub wrong_at_convergence: usize,
    /// How long after the churn the state was as expected (`None`: not within the settling).
    pub converged: Option<Duration>,
    pub handovers: Vec<f64>,
    pub churn_secs: f64,
    pub requests_churn: u64,
    pub armed: Armed,
}

impl Report<'_> {
    pub fn print(&self, h: &FakeHandle, replicas: &[Replica]) {
        let counts = h.request_counts();
        let log = h.request_log();
        let w = &self.world;
        println!("\n== soak report ({:.1} min of churn, Kubernetes {}) ==", self.churn_secs / 60.0, self.kubernetes);
        println!("churn operations: {:?}", w.ops);
        println!(
            "observed: {} Nodes deleted by the CCM (server gone), {} Load Balancers deleted with their Service, \
             {} routes of departed Nodes deleted",
            w.ccm_node_deletions, w.lb_deletions, w.route_deletions
        );
        println!("end state: {} Nodes, {} Services", w.nodes.len(), w.services.len());
        common::summary(
            "leader handover (SIGTERM → another replica leads)",
            if self.handovers.is_empty() { vec![0.0] } else { self.handovers.clone() },
        );
        println!(
            "Hetzner requests during the churn: {} in {:.1} min = {:.0} per hour; {} in all (incl. settle)",
            self.requests_churn,
            self.churn_secs / 60.0,
            self.requests_churn as f64 * 3600.0 / self.churn_secs,
            counts.total
        );
        for (endpoint, n) in &counts.by_endpoint {
            println!("  {n:>7}  {endpoint}");
        }
        if log.len() as u64 == counts.total {
            let mut hit: BTreeMap<String, u64> = BTreeMap::new();
            for r in &log {
                if let Some(f) = &r.fault {
                    *hit.entry(f.clone()).or_insert(0) += 1;
                }
            }
            let organic_429 = log.iter().filter(|r| r.status == 429 && r.fault.is_none()).count();
            println!(
                "faults that hit ({} requests = {:.1}%): {hit:?}",
                hit.values().sum::<u64>(),
                hit.values().sum::<u64>() as f64 * 100.0 / counts.total as f64
            );
            println!("armed by mode: {:?}; rate-limit 429s (not injected): {organic_429}", self.armed);
            // Errors the fake itself answered (not injected): what the CCM asked for in vain.
            let mut refused: BTreeMap<String, u64> = BTreeMap::new();
            for r in log.iter().filter(|r| r.fault.is_none() && r.status >= 400) {
                let code = r.error_code.as_deref().unwrap_or("-");
                *refused.entry(format!("{} → {} {code}", r.endpoint, r.status)).or_insert(0) += 1;
            }
            println!("errors answered by the fake itself (not injected):");
            for (what, n) in &refused {
                println!("  {n:>7}  {what}");
            }
            for r in replicas {
                let fp = hcloud_fake::token_fingerprint(&r.token);
                let mine = log.iter().filter(|x| x.token_fingerprint.as_deref() == Some(fp.as_str())).count();
                println!("  {}: {mine} Hetzner requests", r.name);
            }
        } else {
            println!("armed by mode: {:?} (the fake's request log overflowed; no per-fault tallies)", self.armed);
        }
        println!("resources (/proc; warm = the first sample {} s after taking over):", self.knobs.warm.as_secs());
        replicas::print_table(replicas, self.knobs.warm);
        let after = w.wrong.len().saturating_sub(self.wrong_at_convergence);
        println!(
            "wrong deletions (Nodes, Load Balancers, routes; watched every second): {} ({} after the convergence check)",
            w.wrong.len(),
            after
        );
        for (i, p) in w.wrong.iter().enumerate() {
            let when = if i >= self.wrong_at_convergence { " [after the convergence check]" } else { "" };
            println!("  - {p}{when}");
        }
    }
}

/// Each replica's standby and leader parts: warm-up level, the highest later sample, the limit.
pub fn print_flatness(parts: &[Part], warm: Duration) {
    println!("resource flatness after a warm-up of {} s ({}):", warm.as_secs(), flat::BOUNDS.describe());
    for p in parts {
        println!(
            "  {:<11} {:<7} warm at {:>5.0} s: RSS {} → max {} (limit {}), fds {} → {} (≤ {}), threads {} → {} (≤ {}); \
             {} later samples{}",
            p.replica,
            p.role(),
            p.warm.at.as_secs_f64(),
            flat::mib(p.warm.rss_kib),
            flat::mib(p.max_rss_kib),
            flat::mib(flat::BOUNDS.rss_limit_kib(p.warm.rss_kib)),
            p.warm.fds,
            p.max_fds,
            p.warm.fds + flat::BOUNDS.fds,
            p.warm.threads,
            p.max_threads,
            p.warm.threads + flat::BOUNDS.threads,
            p.later,
            if p.problems.is_empty() { "" } else { "  OVER" }
        );
    }
}

pub fn print_verdict(outcome: &Outcome, report: &Report<'_>, wall: Duration) {
    let settled =
        report.converged.map_or("not within the settling".to_owned(), |d| format!("{:.0} s", d.as_secs_f64()));
    if outcome.failures.is_empty() {
        println!(
            "\nCHECK PASSED ({:.1} min wall): every Node, Load Balancer and route as expected (converged {settled} after \
             the churn, still so after a {} s hold); nothing wrongly deleted; resources flat; no crash",
            wall.as_secs_f64() / 60.0,
            report.knobs.hold.as_secs()
        );
    } else {
        println!(
            "\nCHECK FAILED ({:.1} min wall; converged: {settled}; {} problems):",
            wall.as_secs_f64() / 60.0,
            outcome.failures.len()
        );
        for p in &outcome.failures {
            println!("  - {p}");
        }
    }
}
