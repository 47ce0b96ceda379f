//! Fault injection: scripted errors, lost answers, resets and latency for the next N
//! matching `/v1` requests.
//!
//! A [`FaultRule`] matches on the HTTP method (optional, case-insensitive) and the path.
//! Paths may omit the `/v1` prefix. Pattern segments: `{id}` (or any `{name}`) matches one
//! all-digit segment, `*` matches any one segment, and a trailing `**` matches any rest
//! (including nothing). The query string is not part of the match.
//!
//! Faults are checked after authentication and rate limiting, before the handler runs: the
//! latency is slept first, then the rule's answer replaces the handler's. Answers:
//!
//! | answer | what the client sees |
//! |---|---|
//! | `error` | the API's JSON error envelope with that status and code (e.g. `locked` 423, `conflict` 409, `bad_gateway` 502); the status defaults to the one the API uses for the code |
//! | `html` | a `text/html` 5xx page, as a proxy or load balancer in front of the API sends it (no envelope, no rate-limit headers) |
//! | `reset: before_response` | the TCP connection is reset before any byte of the answer |
//! | `reset: mid_body` | the handler's status line, headers (with the full `Content-Length`) and half of its body, then a TCP reset |
//! | none | only the latency |
//!
//! With `apply: true` the handler runs first, so the change takes effect, and then the client
//! gets the rule's answer instead of the handler's: "applied, but the answer was lost".
//! `reset: mid_body` always applies (the server had started answering). Without `apply` the
//! request is rejected before anything changes, as the API does for `locked` and `conflict`.
//!
//! Genuine TCP resets need the connection, so they work on [`crate::FakeServer`]; a router
//! served by other means (see [`crate::FakeHandle::router`]) closes the connection instead.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{ApiError, status_for_code};

/// The JSON error envelope a fault answers with.
///
/// JSON: `{"status"?, "code", "message"?}`; without `status` the API's status for the code
/// is used (see [`crate::error::status_for_code`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InjectedError {
    /// HTTP status, e.g. 502.
    pub status: u16,
    /// Error code in the envelope, e.g. `server_error`.
    pub code: String,
    /// Error message (empty: `injected fault: <code>`).
    pub message: String,
}

impl<'de> Deserialize<'de> for InjectedError {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default)]
            status: Option<u16>,
            code: String,
            #[serde(default)]
            message: String,
        }
        let raw = Raw::deserialize(d)?;
        let status = raw.status.unwrap_or_else(|| status_for_code(&raw.code).as_u16());
        Ok(Self { status, code: raw.code, message: raw.message })
    }
}

/// A `text/html` error page, as a proxy in front of the API would send it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtmlError {
    /// HTTP status, 500-599 (e.g. 502 Bad Gateway).
    pub status: u16,
}

/// Where a connection reset happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetPoint {
    /// Before any byte of the response.
    BeforeResponse,
    /// After the status line, the headers and half of the body.
    MidBody,
}

impl ResetPoint {
    /// The wire name (`before_response`, `mid_body`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BeforeResponse => "before_response",
            Self::MidBody => "mid_body",
        }
    }
}

fn one() -> u32 {
    1
}

/// One fault: which requests, how many times, and what happens to them.
///
/// At most one of `error`, `html` and `reset` is set; the HTTP control surface rejects
/// rules with several (`invalid_input`). If a rule built by hand has several anyway, `reset`
/// wins over `html`, and `html` over `error`.
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
    /// Answer with the API's JSON error envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<InjectedError>,
    /// Answer with a `text/html` 5xx page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<HtmlError>,
    /// Reset the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<ResetPoint>,
    /// Run the handler before answering (the change takes effect; the answer is lost).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub apply: bool,
    /// Extra latency in milliseconds before answering, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
}

/// What a matching request gets instead of the handler's answer (see [`FaultRule::answer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAnswer {
    /// The JSON error envelope.
    Error(InjectedError),
    /// A `text/html` page with this status.
    Html(u16),
    /// A connection reset.
    Reset(ResetPoint),
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl FaultRule {
    fn new(method: Option<&str>, path: &str) -> Self {
        Self {
            method: method.map(str::to_owned),
            path: path.to_owned(),
            times: 1,
            error: None,
            html: None,
            reset: None,
            apply: false,
            latency_ms: None,
        }
    }

    /// The next request matching `method` + `path` gets `status` with `code` (JSON envelope).
    pub fn error(method: Option<&str>, path: &str, status: u16, code: &str) -> Self {
        Self {
            error: Some(InjectedError { status, code: code.to_owned(), message: format!("injected fault: {code}") }),
            ..Self::new(method, path)
        }
    }

    /// `423 locked`: the resource is busy with another action (nothing is changed).
    pub fn locked(method: Option<&str>, path: &str) -> Self {
        Self::error(method, path, 423, "locked")
    }

    /// `409 conflict`: the resource was changed concurrently (nothing is changed).
    pub fn conflict(method: Option<&str>, path: &str) -> Self {
        Self::error(method, path, 409, "conflict")
    }

    /// A `text/html` page with `status` (500-599), like a proxy in front of the API sends.
    pub fn html(method: Option<&str>, path: &str, status: u16) -> Self {
        Self { html: Some(HtmlError { status }), ..Self::new(method, path) }
    }

    /// The connection is reset before any byte of the answer.
    pub fn reset(method: Option<&str>, path: &str) -> Self {
        Self { reset: Some(ResetPoint::BeforeResponse), ..Self::new(method, path) }
    }

    /// The handler runs, its headers and half of its body are sent, then the connection is
    /// reset.
    pub fn reset_mid_body(method: Option<&str>, path: &str) -> Self {
        Self { reset: Some(ResetPoint::MidBody), apply: true, ..Self::new(method, path) }
    }

    /// The next request matching `method` + `path` is delayed by `latency`.
    pub fn latency(method: Option<&str>, path: &str, latency: Duration) -> Self {
        Self { latency_ms: Some(millis(latency)), ..Self::new(method, path) }
    }

    /// Runs the handler first: the change takes effect, the client gets this rule's answer.
    #[must_use]
    pub fn applied(mut self) -> Self {
        self.apply = true;
        self
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
        self.latency_ms = Some(millis(latency));
        self
    }

    /// The answer that replaces the handler's, if any (precedence: reset, html, error).
    pub fn answer(&self) -> Option<FaultAnswer> {
        if let Some(r) = self.reset {
            Some(FaultAnswer::Reset(r))
        } else if let Some(h) = self.html {
            Some(FaultAnswer::Html(h.status))
        } else {
            self.error.clone().map(FaultAnswer::Error)
        }
    }

    /// Whether the handler runs before the answer (`apply`, implied by `reset: mid_body`).
    pub fn applies(&self) -> bool {
        self.apply || self.reset == Some(ResetPoint::MidBody)
    }

    /// Checks the rule as the control surface does: a path, at most one answer, a 5xx
    /// status for `html`, a valid status for `error`, and `apply` only with an answer.
    pub fn validate(&self) -> Result<(), ApiError> {
        if self.path.trim().is_empty() {
            return Err(ApiError::invalid_input("path", "path is required"));
        }
        let answers =
            usize::from(self.error.is_some()) + usize::from(self.html.is_some()) + usize::from(self.reset.is_some());
        if answers > 1 {
            return Err(ApiError::invalid_input("error", "give at most one of error, html and reset"));
        }
        if let Some(h) = self.html
            && !(500..=599).contains(&h.status)
        {
            return Err(ApiError::invalid_input("html.status", format!("{} is not a 5xx status", h.status)));
        }
        if let Some(e) = &self.error {
            if !(400..=599).contains(&e.status) {
                return Err(ApiError::invalid_input("error.status", format!("{} is not an error status", e.status)));
            }
            if e.code.is_empty() {
                return Err(ApiError::invalid_input("error.code", "code is required"));
            }
        }
        if self.apply && answers == 0 {
            return Err(ApiError::invalid_input("apply", "apply needs an answer (error, html or reset)"));
        }
        Ok(())
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
    /// Which requests the fault matches and what it answers them with, as installed.
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
    fn answers_and_validation() {
        let lost = FaultRule::html(Some("POST"), "/load_balancers", 502).applied();
        assert_eq!(lost.answer(), Some(FaultAnswer::Html(502)));
        assert!(lost.applies());
        assert!(lost.validate().is_ok());
        assert!(FaultRule::reset_mid_body(None, "/servers").applies());
        assert!(!FaultRule::reset(None, "/servers").applies());
        assert_eq!(FaultRule::locked(None, "/**").error.map(|e| (e.status, e.code)), Some((423, "locked".into())));
        assert_eq!(FaultRule::conflict(None, "/**").error.map(|e| e.status), Some(409));
        assert!(FaultRule::latency(None, "/x", Duration::from_millis(5)).answer().is_none());

        let mut both = FaultRule::html(None, "/x", 502);
        both.error = FaultRule::locked(None, "/x").error;
        assert_eq!(both.validate().map_err(|e| e.code), Err("invalid_input".to_owned()));
        assert_eq!(both.answer(), Some(FaultAnswer::Html(502)), "html wins over error");
        assert!(FaultRule::html(None, "/x", 404).validate().is_err());
        assert!(FaultRule::latency(None, "/x", Duration::ZERO).applied().validate().is_err());

        // JSON: the status defaults to the API's status for the code.
        let rule: FaultRule = serde_json::from_value(serde_json::json!(
            {"path": "/networks/{id}/actions/add_route", "error": {"code": "conflict"}}
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rule.error.as_ref().map(|e| e.status), Some(409));
        let rule: FaultRule = serde_json::from_value(serde_json::json!(
            {"path": "/servers", "reset": "mid_body", "times": 0}
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rule.answer(), Some(FaultAnswer::Reset(ResetPoint::MidBody)));
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
