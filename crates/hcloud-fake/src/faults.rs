//! Fault injection: scripted errors and latency for the next N matching `/v1` requests.
//!
//! A [`FaultRule`] matches on the HTTP method (optional, case-insensitive) and the path.
//! Paths may omit the `/v1` prefix. Pattern segments: `{id}` (or any `{name}`) matches one
//! all-digit segment, `*` matches any one segment, and a trailing `**` matches any rest
//! (including nothing). The query string is not part of the match.
//!
//! Faults are checked after authentication and rate limiting, before the handler runs: the
//! latency is slept first, then the error (if any) is answered instead of calling the handler.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The error a fault answers with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InjectedError {
    /// HTTP status, e.g. 502.
    pub status: u16,
    /// Error code in the envelope, e.g. `server_error`.
    pub code: String,
    /// Error message.
    #[serde(default)]
    pub message: String,
}

fn one() -> u32 {
    1
}

/// One fault: which requests, how many times, and what happens to them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRule {
    /// HTTP method to match; `None` matches all.
    #[serde(default)]
    pub method: Option<String>,
    /// Path or pattern, e.g. `/v1/servers/{id}` or `/load_balancers/*/actions/**`.
    pub path: String,
    /// How many matching requests are affected (default 1; 0 = every one until cleared).
    #[serde(default = "one")]
    pub times: u32,
    /// Error to answer with, if any.
    #[serde(default)]
    pub error: Option<InjectedError>,
    /// Extra latency in milliseconds before answering, if any.
    #[serde(default)]
    pub latency_ms: Option<u64>,
}

impl FaultRule {
    /// The next request matching `method` + `path` gets `status` with `code`.
    pub fn error(method: Option<&str>, path: &str, status: u16, code: &str) -> Self {
        Self {
            method: method.map(str::to_owned),
            path: path.to_owned(),
            times: 1,
            error: Some(InjectedError { status, code: code.to_owned(), message: format!("injected fault: {code}") }),
            latency_ms: None,
        }
    }

    /// The next request matching `method` + `path` is delayed by `latency`.
    pub fn latency(method: Option<&str>, path: &str, latency: Duration) -> Self {
        Self {
            method: method.map(str::to_owned),
            path: path.to_owned(),
            times: 1,
            error: None,
            latency_ms: Some(u64::try_from(latency.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    /// Affects the next `times` matching requests (0 = all until cleared).
    #[must_use]
    pub fn times(mut self, times: u32) -> Self {
        self.times = times;
        self
    }

    /// Adds latency to the fault.
    #[must_use]
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency_ms = Some(u64::try_from(latency.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// Whether the rule applies to a request.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        if let Some(m) = &self.method
            && !m.eq_ignore_ascii_case(method)
        {
            return false;
        }
        path_matches(&self.path, path)
    }
}

/// An installed fault with its remaining count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveFault {
    /// Fault id (for listing).
    pub id: u64,
    /// The rule.
    pub rule: FaultRule,
    /// Remaining matches; `None` = unlimited.
    pub remaining: Option<u32>,
}

/// The installed faults.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    next_id: u64,
    active: Vec<ActiveFault>,
}

impl Faults {
    /// Installs a rule and returns its id.
    pub fn add(&mut self, rule: FaultRule) -> u64 {
        self.next_id += 1;
        let remaining = (rule.times > 0).then_some(rule.times);
        self.active.push(ActiveFault { id: self.next_id, rule, remaining });
        self.next_id
    }

    /// Removes all rules.
    pub fn clear(&mut self) {
        self.active.clear();
    }

    /// The installed rules.
    pub fn list(&self) -> Vec<ActiveFault> {
        self.active.clone()
    }

    /// Consumes one use of the first rule matching the request.
    pub fn take(&mut self, method: &str, path: &str) -> Option<FaultRule> {
        let idx = self.active.iter().position(|f| f.rule.matches(method, path))?;
        let fault = &mut self.active[idx];
        let rule = fault.rule.clone();
        if let Some(n) = fault.remaining.as_mut() {
            *n -= 1;
            if *n == 0 {
                self.active.remove(idx);
            }
        }
        Some(rule)
    }
}

/// Matches a request path against a fault pattern (see the module docs).
pub fn path_matches(pattern: &str, path: &str) -> bool {
    let pattern = normalize(pattern);
    let path = normalize(path);
    let pat: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut i = 0;
    for (pi, p) in pat.iter().enumerate() {
        if *p == "**" && pi == pat.len() - 1 {
            return true;
        }
        let Some(seg) = segs.get(i) else {
            return false;
        };
        let ok = match *p {
            "*" => true,
            p if p.starts_with('{') && p.ends_with('}') => !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()),
            p => p == *seg,
        };
        if !ok {
            return false;
        }
        i += 1;
    }
    i == segs.len()
}

fn normalize(p: &str) -> String {
    let p = p.split('?').next().unwrap_or("");
    if p == "/v1" || p.starts_with("/v1/") {
        p.to_owned()
    } else if p.starts_with('/') {
        format!("/v1{p}")
    } else {
        format!("/v1/{p}")
    }
}

/// Replaces numeric path segments with `{id}` (the counter key of a request).
pub fn path_template(path: &str) -> String {
    path.split('/')
        .map(|s| if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) { "{id}" } else { s })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(path_matches("/v1/servers", "/v1/servers"));
        assert!(path_matches("/servers", "/v1/servers"));
        assert!(path_matches("/v1/servers/{id}", "/v1/servers/42"));
        assert!(!path_matches("/v1/servers/{id}", "/v1/servers/abc"));
        assert!(!path_matches("/v1/servers/{id}", "/v1/servers"));
        assert!(path_matches("/v1/servers/*", "/v1/servers/abc"));
        assert!(!path_matches("/v1/servers/*", "/v1/servers/1/actions/poweron"));
        assert!(path_matches("/v1/servers/**", "/v1/servers/1/actions/poweron"));
        assert!(path_matches("/v1/servers/**", "/v1/servers"));
        assert!(path_matches("/load_balancers/{id}/actions/add_target", "/v1/load_balancers/30001/actions/add_target"));
    }

    #[test]
    fn counts_down() {
        let mut f = Faults::default();
        f.add(FaultRule::error(Some("get"), "/servers", 502, "bad_gateway").times(2));
        assert!(f.take("POST", "/v1/servers").is_none());
        assert!(f.take("GET", "/v1/servers").is_some());
        assert!(f.take("GET", "/v1/servers").is_some());
        assert!(f.take("GET", "/v1/servers").is_none());
        f.add(FaultRule::error(None, "/servers", 502, "x").times(0));
        for _ in 0..5 {
            assert!(f.take("GET", "/v1/servers").is_some());
        }
    }

    #[test]
    fn templates() {
        assert_eq!(
            path_template("/v1/load_balancers/30001/actions/add_target"),
            "/v1/load_balancers/{id}/actions/add_target"
        );
        assert_eq!(path_template("/v1/servers"), "/v1/servers");
    }
}
