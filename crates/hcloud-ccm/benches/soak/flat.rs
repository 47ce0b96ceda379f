//! Resource flatness: after warm-up, a replica's resident memory, open file descriptors and
//! threads may not grow beyond a stated margin over their warm-up level.
//!
//! A replica's samples fall into a standby part and a leader part (a standby that takes over
//! starts the controllers, which need more). Each part has its own warm-up level: its first
//! sample at least `warm` after the part began (the replica's start, or its taking over). Every
//! later sample of the part must stay within the [`Bounds`] over that level.

use std::time::Duration;

use super::replicas::Sample;

/// How much a later sample may exceed the warm-up level.
///
/// Chosen for a correct CCM on a loaded, shared 2-core machine, with room: in the hour run a
/// leader's RSS grew by at most 0.6 MiB over its ten minutes (19.4–20.0 MiB warm, 19.7–20.3 MiB at
/// the end), a standby's stayed within 0.2 MiB over 40 minutes, the open fds moved within 15–26
/// (connections to the API server and the Hetzner API come and go with the work and the faults'
/// resets) and the threads stayed at 3 (tokio's blocking pool may add a few for a while).
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// RSS: at most this many MiB more than at warm-up ...
    pub rss_mib: u64,
    /// ... or this percentage of the warm-up RSS, whichever is larger.
    pub rss_percent: u64,
    /// Open file descriptors: at most this many more.
    pub fds: usize,
    /// Threads: at most this many more.
    pub threads: usize,
}

/// The soak's bounds (`docs/benchmarks.md` states them too).
pub const BOUNDS: Bounds = Bounds { rss_mib: 8, rss_percent: 25, fds: 32, threads: 8 };

impl Bounds {
    pub fn rss_limit_kib(&self, warm_kib: u64) -> u64 {
        warm_kib + (self.rss_mib * 1024).max(warm_kib * self.rss_percent / 100)
    }

    pub fn describe(&self) -> String {
        format!(
            "RSS +max({} MiB, {} %), fds +{}, threads +{} over the warm-up level",
            self.rss_mib, self.rss_percent, self.fds, self.threads
        )
    }
}

/// One part of a replica's life checked against its warm-up level.
#[derive(Debug, Clone)]
pub struct Part {
    pub replica: String,
    pub leader: bool,
    pub warm: Sample,
    /// Samples after the warm-up one.
    pub later: usize,
    pub max_rss_kib: u64,
    pub max_fds: usize,
    pub max_threads: usize,
    /// Every bound exceeded, with the first sample that did and how many did.
    pub problems: Vec<String>,
}

impl Part {
    pub fn role(&self) -> &'static str {
        if self.leader { "leader" } else { "standby" }
    }
}

/// Checks one replica's samples: `started` is when it started, `leader_since` when it took
/// over. Parts whose warm-up did not end before the replica stopped are not returned.
pub fn check_replica(
    replica: &str,
    samples: &[Sample],
    started: Duration,
    leader_since: Option<Duration>,
    warm: Duration,
    bounds: &Bounds,
) -> Vec<Part> {
    let mut parts = Vec::new();
    for leader in [false, true] {
        let part: Vec<&Sample> = samples.iter().filter(|s| s.leader == leader).collect();
        let begins = if leader {
            match leader_since.or_else(|| part.first().map(|s| s.at)) {
                Some(t) => t,
                None => continue,
            }
        } else {
            started
        };
        let Some(i) = part.iter().position(|s| s.at >= begins.saturating_add(warm)) else { continue };
        let w = *part[i];
        let later = &part[i + 1..];
        let mut problems = Vec::new();
        let role = if leader { "leader" } else { "standby" };
        let mut over = |what: &str,
                        limit: String,
                        show: &dyn Fn(&Sample) -> String,
                        exceeds: &dyn Fn(&Sample) -> bool| {
            let bad: Vec<&&Sample> = later.iter().filter(|s| exceeds(s)).collect();
            if let Some(first) = bad.first() {
                problems.push(format!(
                    "{replica} ({role}): {what} grew from {} at {:.0} s (warm-up) to {} at {:.0} s, over the limit {limit} \
                     ({} of {} later samples over)",
                    show(&w),
                    w.at.as_secs_f64(),
                    show(first),
                    first.at.as_secs_f64(),
                    bad.len(),
                    later.len()
                ));
            }
        };
        let rss_limit = bounds.rss_limit_kib(w.rss_kib);
        over("RSS", mib(rss_limit), &|s| mib(s.rss_kib), &|s| s.rss_kib > rss_limit);
        let fds_limit = w.fds + bounds.fds;
        over("open fds", fds_limit.to_string(), &|s| s.fds.to_string(), &|s| s.fds > fds_limit);
        let threads_limit = w.threads + bounds.threads;
        over("threads", threads_limit.to_string(), &|s| s.threads.to_string(), &|s| s.threads > threads_limit);
        parts.push(Part {
            replica: replica.to_owned(),
            leader,
            warm: w,
            later: later.len(),
            max_rss_kib: later.iter().map(|s| s.rss_kib).max().unwrap_or(w.rss_kib),
            max_fds: later.iter().map(|s| s.fds).max().unwrap_or(w.fds),
            max_threads: later.iter().map(|s| s.threads).max().unwrap_or(w.threads),
            problems,
        });
    }
    parts
}

pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Everything wrong with the parts: the bounds exceeded, and no leader part with a sample after
/// its warm-up (the check would have proven nothing).
pub fn problems(parts: &[Part]) -> Vec<String> {
    let mut problems: Vec<String> = parts.iter().flat_map(|p| p.problems.clone()).collect();
    if !parts.iter().any(|p| p.leader && p.later > 0) {
        problems.push("resources: no leader was sampled after its warm-up; flatness unchecked".to_owned());
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const WARM: Duration = Duration::from_secs(60);

    /// Samples every 10 s from `from` s; `f(i)` gives (RSS KiB, fds, threads).
    fn series(from: u64, n: u64, leader: bool, f: impl Fn(u64) -> (u64, usize, usize)) -> Vec<Sample> {
        (0..n)
            .map(|i| {
                let (rss_kib, fds, threads) = f(i);
                Sample { at: Duration::from_secs(from + i * 10), rss_kib, hwm_kib: rss_kib, fds, threads, leader }
            })
            .collect()
    }

    fn check(samples: &[Sample], leader_since: Option<u64>) -> Vec<Part> {
        check_replica("replica-00", samples, Duration::ZERO, leader_since.map(Duration::from_secs), WARM, &BOUNDS)
    }

    #[test]
    fn a_flat_noisy_leader_passes() {
        // Start-up growth before the warm-up level is taken, then noise within the bounds.
        let s = series(0, 40, true, |i| {
            if i < 6 {
                (8_000 + i * 2_000, 8 + i as usize, 3)
            } else {
                (20_000 + (i % 3) * 700, 15 + (i % 11) as usize, 3 + (i % 2) as usize)
            }
        });
        let parts = check(&s, Some(0));
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].later, 33, "warm-up sample at 60 s, 33 after it");
        assert!(problems(&parts).is_empty(), "{:?}", problems(&parts));
    }

    #[test]
    fn growing_rss_fails() {
        // 20 MiB at warm-up, +300 KiB a sample: 8 MiB more after 28 samples (~5 min).
        let s = series(0, 40, true, |i| (20_480 + i * 300, 16, 3));
        let p = problems(&check(&s, Some(0)));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("RSS grew from 21.8 MiB at 60 s"), "{}", p[0]);
        // Growth that stays below the margin passes.
        let s = series(0, 40, true, |i| (20_480 + i * 100, 16, 3));
        assert!(problems(&check(&s, Some(0))).is_empty());
    }

    #[test]
    fn the_rss_margin_scales_with_a_large_process() {
        assert_eq!(BOUNDS.rss_limit_kib(20 * 1024), 28 * 1024, "8 MiB over 20 MiB");
        assert_eq!(BOUNDS.rss_limit_kib(64 * 1024), 80 * 1024, "25 % over 64 MiB");
    }

    #[test]
    fn leaking_fds_fail() {
        let s = series(0, 40, true, |i| (20_480, 16 + i as usize, 3));
        let p = problems(&check(&s, Some(0)));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("open fds grew from 22"), "{}", p[0]);
        assert!(p[0].contains("over the limit 54"), "{}", p[0]);
    }

    #[test]
    fn leaking_threads_fail() {
        let s = series(0, 30, true, |i| (20_480, 16, 3 + i as usize / 2));
        let p = problems(&check(&s, Some(0)));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("threads grew from 6"), "{}", p[0]);
    }

    #[test]
    fn a_standby_that_takes_over_is_measured_against_each_warm_up_level() {
        // Standby at 18 MiB / 10 fds for 5 min, then leader at 26 MiB / 50 fds: more than the
        // standby's margins, but flat as a leader.
        let mut s = series(0, 30, false, |_| (18_000, 10, 3));
        s.extend(series(300, 30, true, |_| (26_624, 50, 3)));
        let parts = check(&s, Some(300));
        assert_eq!(parts.len(), 2);
        assert!(problems(&parts).is_empty(), "{:?}", problems(&parts));
        assert_eq!((parts[1].warm.at, parts[1].later), (Duration::from_secs(360), 23));
        // The same leader samples against the standby's level fail.
        let mut s = series(0, 30, false, |_| (18_000, 10, 3));
        s.extend(series(300, 30, false, |_| (26_624, 50, 3)));
        let p = problems(&check(&s, None));
        assert_eq!(p.len(), 3, "RSS and fds over, and no leader checked: {p:?}");
    }

    #[test]
    fn without_a_leader_sampled_after_warm_up_nothing_is_proven() {
        // The leader stopped before its warm-up ended.
        let s = series(0, 5, true, |_| (20_480, 16, 3));
        let parts = check(&s, Some(0));
        assert!(parts.is_empty());
        assert_eq!(problems(&parts), vec!["resources: no leader was sampled after its warm-up; flatness unchecked"]);
    }
}
