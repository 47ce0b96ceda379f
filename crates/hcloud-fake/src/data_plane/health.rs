//! Health-check decisions, pure: the health state machine, status-code patterns, the HTTP
//! request a check sends and the verdict on the answer. The I/O lives in `probe`.
//!
//! State machine ([`HealthTracker`]), per (Load Balancer, service, target):
//! - a target starts `unknown` and stays so until its first check completes;
//! - the first completed check decides: success `healthy`, failure `unhealthy` (a target that
//!   never was healthy has nothing to keep, so no retries apply);
//! - a `healthy` target turns `unhealthy` after `retries` consecutive failures (`retries` 0
//!   counts as 1);
//! - an `unhealthy` target turns `healthy` again on its first successful check.

use crate::wire::HealthCheckHttp;

/// Health of one target for one service, as the API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// No check has completed yet.
    Unknown,
    /// Checks succeed.
    Healthy,
    /// Checks failed `retries` times in a row (or the first one failed).
    Unhealthy,
}

impl Health {
    /// `healthy`, `unhealthy` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Healthy => "healthy",
            Self::Unhealthy => "unhealthy",
        }
    }
}

/// Consecutive results of one target's checks and the health they give (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthTracker {
    health: Health,
    consecutive_failures: u64,
}

impl Default for HealthTracker {
    fn default() -> Self {
        Self { health: Health::Unknown, consecutive_failures: 0 }
    }
}

impl HealthTracker {
    /// Records one completed check; returns the health after it.
    pub fn record(&mut self, success: bool, retries: u64) -> Health {
        if success {
            self.consecutive_failures = 0;
            self.health = Health::Healthy;
        } else {
            self.consecutive_failures = self.consecutive_failures.saturating_add(1);
            self.health = match self.health {
                Health::Unknown | Health::Unhealthy => Health::Unhealthy,
                Health::Healthy if self.consecutive_failures >= retries.max(1) => Health::Unhealthy,
                Health::Healthy => Health::Healthy,
            };
        }
        self.health
    }

    /// The current health.
    pub fn health(&self) -> Health {
        self.health
    }

    /// Failed checks since the last success.
    pub fn consecutive_failures(&self) -> u64 {
        self.consecutive_failures
    }
}

/// The patterns that apply when a health check lists none: any 2xx or 3xx.
pub const DEFAULT_STATUS_CODES: [&str; 2] = ["2??", "3??"];

/// Whether `code` matches one of `patterns` (three characters each, `?` or `x` matching any
/// digit, e.g. `2??`, `404`); an empty list means [`DEFAULT_STATUS_CODES`].
pub fn status_code_matches(patterns: &[String], code: u16) -> bool {
    let code = format!("{code:03}");
    let matches = |pattern: &str| {
        pattern.len() == 3 && pattern.chars().zip(code.chars()).all(|(p, c)| matches!(p, '?' | 'x' | 'X') || p == c)
    };
    if patterns.is_empty() {
        DEFAULT_STATUS_CODES.iter().any(|p| matches(p))
    } else {
        patterns.iter().any(|p| matches(p.trim()))
    }
}

/// The request an `http` check sends: `GET <path>` with `Host` = the configured domain, or the
/// target's address when none is set.
pub fn http_request(http: &HealthCheckHttp, target_host: &str) -> String {
    let host = http.domain.as_deref().filter(|d| !d.is_empty()).unwrap_or(target_host);
    let path = if http.path.starts_with('/') { http.path.clone() } else { format!("/{}", http.path) };
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: hcloud-fake-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    )
}

/// The status code of an HTTP/1.x status line at the start of `response`, once the line is
/// complete.
pub fn parse_status(response: &[u8]) -> Option<u16> {
    let end = response.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&response[..end]).ok()?;
    let mut parts = line.split_whitespace();
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    let code = parts.next()?;
    if code.len() != 3 {
        return None;
    }
    code.parse().ok()
}

/// What is known of an answer read so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpVerdict {
    /// More bytes are needed (no complete status line yet, or the expected body text may
    /// still come).
    NeedMore,
    /// The check passed.
    Pass,
    /// The check failed, with the reason.
    Fail(String),
}

/// Judges `response` (everything read so far; `complete` once the target closed): the status
/// code must match, and the body must contain `http.response` when that is set.
pub fn judge_http(http: &HealthCheckHttp, response: &[u8], complete: bool) -> HttpVerdict {
    let Some(code) = parse_status(response) else {
        return if complete {
            HttpVerdict::Fail("no HTTP status line in the answer".to_owned())
        } else {
            HttpVerdict::NeedMore
        };
    };
    if !status_code_matches(&http.status_codes, code) {
        let expected =
            if http.status_codes.is_empty() { DEFAULT_STATUS_CODES.join(",") } else { http.status_codes.join(",") };
        return HttpVerdict::Fail(format!("status {code} does not match {expected}"));
    }
    if http.response.is_empty() {
        return HttpVerdict::Pass;
    }
    let body = response.windows(4).position(|w| w == b"\r\n\r\n").map(|i| &response[i + 4..]);
    let found = body.is_some_and(|b| b.windows(http.response.len()).any(|w| w == http.response.as_bytes()));
    if found {
        HttpVerdict::Pass
    } else if complete {
        HttpVerdict::Fail(format!("the body does not contain '{}'", http.response))
    } else {
        HttpVerdict::NeedMore
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(codes: &[&str], response: &str) -> HealthCheckHttp {
        HealthCheckHttp {
            domain: None,
            path: "/healthz".to_owned(),
            response: response.to_owned(),
            status_codes: codes.iter().map(|c| (*c).to_owned()).collect(),
            tls: false,
        }
    }

    #[test]
    fn status_code_patterns() {
        let p = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(status_code_matches(&p(&["2??"]), 200));
        assert!(status_code_matches(&p(&["2??"]), 299));
        assert!(!status_code_matches(&p(&["2??"]), 300));
        assert!(status_code_matches(&p(&["200", "404"]), 404));
        assert!(!status_code_matches(&p(&["200"]), 201));
        assert!(status_code_matches(&p(&["2xx"]), 204));
        assert!(!status_code_matches(&p(&["2?"]), 200), "patterns have three characters");
        assert!(status_code_matches(&[], 302), "default 2??,3??");
        assert!(!status_code_matches(&[], 500));
        assert!(!status_code_matches(&[], 404));
    }

    #[test]
    fn tracker_transitions() {
        let mut t = HealthTracker::default();
        assert_eq!(t.health(), Health::Unknown);
        assert_eq!(t.record(true, 3), Health::Healthy);
        assert_eq!(t.record(false, 3), Health::Healthy);
        assert_eq!(t.record(false, 3), Health::Healthy);
        assert_eq!(t.consecutive_failures(), 2);
        assert_eq!(t.record(false, 3), Health::Unhealthy, "third consecutive failure");
        assert_eq!(t.record(false, 3), Health::Unhealthy);
        assert_eq!(t.record(true, 3), Health::Healthy, "one success is enough");
        assert_eq!(t.consecutive_failures(), 0);
        // A success in between resets the count.
        t.record(false, 2);
        t.record(true, 2);
        assert_eq!(t.record(false, 2), Health::Healthy);
        assert_eq!(t.record(false, 2), Health::Unhealthy);
        // The first completed check decides; retries 0 counts as 1.
        let mut first = HealthTracker::default();
        assert_eq!(first.record(false, 5), Health::Unhealthy);
        let mut zero = HealthTracker::default();
        zero.record(true, 0);
        assert_eq!(zero.record(false, 0), Health::Unhealthy);
        assert_eq!(Health::Unknown.as_str(), "unknown");
    }

    #[test]
    fn request_uses_domain_or_target() {
        let mut h = http(&[], "");
        assert_eq!(
            http_request(&h, "127.0.0.11"),
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.11\r\nUser-Agent: hcloud-fake-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        h.domain = Some("example.com".to_owned());
        h.path = "ready".to_owned();
        assert!(http_request(&h, "127.0.0.11").starts_with("GET /ready HTTP/1.1\r\nHost: example.com\r\n"));
        h.domain = Some(String::new());
        assert!(http_request(&h, "10.0.0.2").contains("Host: 10.0.0.2\r\n"));
    }

    #[test]
    fn judging_answers() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nalive";
        assert_eq!(parse_status(ok), Some(200));
        assert_eq!(parse_status(b"HTTP/1.1 20"), None);
        assert_eq!(parse_status(b"SSH-2.0-x\r\n"), None);
        assert_eq!(judge_http(&http(&[], ""), ok, false), HttpVerdict::Pass);
        assert_eq!(judge_http(&http(&[], "alive"), ok, false), HttpVerdict::Pass);
        assert_eq!(judge_http(&http(&[], "dead"), ok, false), HttpVerdict::NeedMore);
        assert!(matches!(judge_http(&http(&[], "dead"), ok, true), HttpVerdict::Fail(m) if m.contains("dead")));
        let err = b"HTTP/1.1 500 Internal Server Error\r\n\r\n";
        assert!(matches!(judge_http(&http(&[], ""), err, false), HttpVerdict::Fail(m) if m.contains("500")));
        assert_eq!(judge_http(&http(&["5??"], ""), err, false), HttpVerdict::Pass);
        assert_eq!(judge_http(&http(&[], ""), b"HTTP/1.1 2", false), HttpVerdict::NeedMore);
        assert!(matches!(judge_http(&http(&[], ""), b"garbage", true), HttpVerdict::Fail(_)));
    }
}
