//! Hooks around every HTTP exchange: the request gate (may this request go out at all?) and
//! the observer (metrics, request accounting).
//!
//! Order per exchange — every attempt of every call, retries and action polls included:
//! 1. the gate is asked; a refusal ends the call with [`crate::Error::NotSent`] and nothing
//!    else happens (no observer call, no network);
//! 2. [`RequestObserver::started`];
//! 3. the exchange;
//! 4. [`RequestObserver::observe`] — exactly once per `started`, also when the caller drops
//!    the call's future mid-exchange (then with `status: None`), so an in-flight gauge
//!    (`started` +1, `observe` −1) never drifts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;

/// The request gate: consulted before every HTTP exchange; `Err(reason)` refuses it.
///
/// Used as a fence, e.g. by leader election: once the process is no longer allowed to act,
/// nothing reaches the API, not even a retry or an action poll already under way.
pub type RequestGate = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// A write about to be sent (any method but GET), as a [`WriteGate`] sees it. No body: bodies
/// may hold secrets (a certificate's private key).
#[derive(Debug, Clone)]
pub struct WriteRequest<'a> {
    /// HTTP method (POST, PUT, DELETE).
    pub method: &'a Method,
    /// Path template, e.g. `/load_balancers/{id}/actions/add_target`.
    pub endpoint: &'static str,
    /// The request's path, e.g. `/load_balancers/42/actions/add_target`.
    pub path: &'a str,
}

/// The write gate: consulted once per call that writes (before its first attempt);
/// `Err(reason)` ends the call with [`crate::Error::NotSent`] and nothing is sent. Meant for a
/// dry run, where every write is reported instead of made; reads go out as usual.
pub type WriteGate = Arc<dyn Fn(&WriteRequest<'_>) -> Result<(), String> + Send + Sync>;

/// An exchange about to start.
#[derive(Debug, Clone)]
pub struct RequestStart<'a> {
    /// HTTP method.
    pub method: &'a Method,
    /// Path template, e.g. `/servers/{id}`.
    pub endpoint: &'static str,
    /// The official clients' `api_endpoint` label, e.g. `/servers/-` (see [`api_endpoint`]).
    pub api_endpoint: &'a str,
    /// 0 for the first attempt, then 1, 2, ... for retries.
    pub attempt: u32,
}

/// What one HTTP exchange looked like, for metrics and request accounting.
#[derive(Debug, Clone)]
pub struct RequestEvent<'a> {
    /// HTTP method.
    pub method: &'a Method,
    /// Path template, e.g. `/servers/{id}`.
    pub endpoint: &'static str,
    /// The official clients' `api_endpoint` label, e.g. `/servers/-/actions/poweroff`: the
    /// label of `hcloud_api_requests_total{code,method,api_endpoint}` (see [`api_endpoint`]).
    pub api_endpoint: &'a str,
    /// Status, or `None` for transport failures, timeouts and exchanges the caller abandoned.
    /// (The official instrumentation counts only exchanges with a status.)
    pub status: Option<u16>,
    /// Time from sending to the end of the body.
    pub duration: Duration,
    /// 0 for the first attempt, then 1, 2, ... for retries.
    pub attempt: u32,
    /// Sent with a credential being tried, not the one in use: by a client made with
    /// [`crate::Client::with_token`] or [`crate::robot::RobotClient::with_credentials`]. A
    /// 401 of such an exchange says nothing about the credential in use.
    pub trial: bool,
}

impl RequestEvent<'_> {
    /// The method as the official metrics label it: lower case (`get`, `post`, ...).
    pub fn method_label(&self) -> String {
        self.method.as_str().to_ascii_lowercase()
    }
}

/// Receives the start and the end of every HTTP exchange (every attempt, including retries
/// and action polls). See the module docs for the order of calls.
pub trait RequestObserver: Send + Sync {
    /// Called right before an exchange starts (after the gate allowed it). Default: nothing.
    fn started(&self, request: &RequestStart<'_>) {
        let _ = request;
    }

    /// Called once after each exchange ends (with or without a status).
    fn observe(&self, event: &RequestEvent<'_>);
}

impl<F: Fn(&RequestEvent<'_>) + Send + Sync> RequestObserver for F {
    fn observe(&self, event: &RequestEvent<'_>) {
        self(event)
    }
}

/// The `api_endpoint` label the official clients (hcloud-go's instrumentation, used by the
/// official CCM) give a request: the operation's path template without the API version, with
/// every id replaced by `-` and no query, e.g. `/servers/{id}/actions/poweroff` →
/// `/servers/-/actions/poweroff`, `/load_balancers` → `/load_balancers`.
pub fn api_endpoint(template: &str) -> String {
    let path = template.strip_prefix("/v1").unwrap_or(template);
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    path.split('/')
        .map(|segment| if segment.starts_with('{') && segment.ends_with('}') { "-" } else { segment })
        .collect::<Vec<_>>()
        .join("/")
}

/// Reports the end of an exchange exactly once: by [`InFlight::finish`], or on drop if the
/// caller abandoned the exchange.
pub(crate) struct InFlight<'a> {
    observer: Option<&'a dyn RequestObserver>,
    method: &'a Method,
    endpoint: &'static str,
    api_endpoint: &'a str,
    attempt: u32,
    trial: bool,
    started: Instant,
    done: bool,
}

impl<'a> InFlight<'a> {
    pub(crate) fn start(
        observer: Option<&'a dyn RequestObserver>,
        method: &'a Method,
        endpoint: &'static str,
        api_endpoint: &'a str,
        attempt: u32,
        trial: bool,
    ) -> InFlight<'a> {
        if let Some(o) = observer {
            o.started(&RequestStart { method, endpoint, api_endpoint, attempt });
        }
        InFlight { observer, method, endpoint, api_endpoint, attempt, trial, started: Instant::now(), done: false }
    }

    /// Reports the end of the exchange.
    pub(crate) fn finish(mut self, status: Option<u16>) {
        self.report(status);
    }

    fn report(&mut self, status: Option<u16>) {
        if self.done {
            return;
        }
        self.done = true;
        if let Some(o) = self.observer {
            o.observe(&RequestEvent {
                method: self.method,
                endpoint: self.endpoint,
                api_endpoint: self.api_endpoint,
                status,
                duration: self.started.elapsed(),
                attempt: self.attempt,
                trial: self.trial,
            });
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.report(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_endpoint_matches_the_official_label() {
        // hcloud-go: SetOpPath("/volumes/%d/actions/attach") -> "/volumes/-/actions/attach".
        assert_eq!(api_endpoint("/servers/{id}/actions/poweroff"), "/servers/-/actions/poweroff");
        assert_eq!(api_endpoint("/servers/{id}"), "/servers/-");
        assert_eq!(api_endpoint("/servers"), "/servers");
        assert_eq!(api_endpoint("/actions"), "/actions");
        assert_eq!(api_endpoint("/load_balancers/{id}/actions/add_target"), "/load_balancers/-/actions/add_target");
        assert_eq!(api_endpoint("/v1/servers/{id}?x=1"), "/servers/-");
    }
}
