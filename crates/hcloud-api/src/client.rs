//! The HTTP core: the builder, the client, and `send` — one logical request with its
//! attempts, retries, overall deadline, request gate, observer calls, rate-limit
//! bookkeeping and debug wire log.
//!
//! One call of `send`:
//! ```text
//!  encode body ─► loop per attempt:
//!                  gate? ── refused ─► Error::NotSent (nothing sent)
//!                  per-attempt timeout = min(timeout, time left until the deadline)
//!                  observer.started ─► HTTP exchange ─► observer.observe
//!                  2xx ─► Answer
//!                  else: retry::Verdict (retry? may it have been applied?)
//!                        DELETE that may have been applied earlier: now `not_found` ─► Answer
//!                        (gone); now `locked` ─► retried (its own deletion still runs)
//!                        retry and the wait (backoff or Retry-After/RateLimit-*) ends before
//!                        the deadline ─► sleep, next attempt
//!                        else ─► the error; a create that may have been applied ─► OutcomeUnknown
//! ```

use std::fmt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};
use sync_lock::{Unpoison as _, UnpoisonRw as _};

use reqwest::{Method, header::HeaderMap};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::warn;

use crate::error::{Error, parse_api_error};
use crate::models::Action;
use crate::observe::{InFlight, RequestGate, RequestObserver, WriteGate, WriteRequest};
use crate::poll::PollPolicy;
use crate::retry::{self, RetryPolicy, Verdict};
pub(crate) use crate::target::Target;
use crate::wire_log;

/// The public API's base URL.
pub const DEFAULT_ENDPOINT: &str = "https://api.hetzner.cloud/v1";

/// Page size used by `list_all` (the API's maximum).
pub const LIST_ALL_PER_PAGE: u32 = 50;

/// How many pages `list_all` fetches at once after it learned the page count.
pub(crate) const LIST_ALL_CONCURRENCY: usize = 4;

/// Default overall deadline of one call (all attempts and waits).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);

/// Default per-attempt timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

/// The latest `RateLimit-*` headers the API sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// `RateLimit-Limit`: the bucket's capacity.
    pub limit: u32,
    /// `RateLimit-Remaining`: requests left.
    pub remaining: u32,
    /// `RateLimit-Reset`: when the bucket is full again (a value too large to be a time makes
    /// the headers count as absent).
    pub reset: SystemTime,
}

impl RateLimit {
    pub(crate) fn from_headers(headers: &HeaderMap) -> Option<RateLimit> {
        let num = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<u64>().ok();
        Some(RateLimit {
            limit: u32::try_from(num("ratelimit-limit")?).unwrap_or(u32::MAX),
            remaining: u32::try_from(num("ratelimit-remaining")?).unwrap_or(u32::MAX),
            reset: retry::reset_time(num("ratelimit-reset")?)?,
        })
    }
}

/// Builds a [`Client`].
pub struct ClientBuilder {
    token: SecretString,
    endpoint: String,
    user_agent: String,
    timeout: Duration,
    deadline: Duration,
    retry: RetryPolicy,
    poll: PollPolicy,
    observer: Option<Arc<dyn RequestObserver>>,
    gate: Option<RequestGate>,
    write_gate: Option<WriteGate>,
    debug: bool,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("token", &"[redacted]")
            .field("endpoint", &self.endpoint)
            .field("user_agent", &self.user_agent)
            .field("timeout", &self.timeout)
            .field("deadline", &self.deadline)
            .field("retry", &self.retry)
            .field("poll", &self.poll)
            .field("gate", &self.gate.is_some())
            .field("debug", &self.debug)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// Sets the base URL (default [`DEFAULT_ENDPOINT`]); `HCLOUD_ENDPOINT` in the CCM.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = endpoint.into().trim_end_matches('/').to_owned();
        self
    }

    /// Sets the User-Agent (default `hcloud-ccm/<version>`).
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// Sets the per-attempt timeout (default [`DEFAULT_TIMEOUT`], 15 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the overall deadline of one call — every attempt, retry and wait together
    /// (default [`DEFAULT_DEADLINE`], 1 min). An attempt never runs past it, and no retry
    /// starts after it; the call then fails with [`Error::DeadlineExceeded`] or its last
    /// error. A list of several pages has the deadline per page; `wait_for_action` has its
    /// own timeout, and each of its polls this deadline.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the retry policy.
    pub fn retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the action poll policy.
    pub fn poll_policy(mut self, poll: PollPolicy) -> Self {
        self.poll = poll;
        self
    }

    /// Installs an observer that sees the start and end of every HTTP exchange.
    pub fn observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Installs the request gate: asked before every HTTP exchange (retries and action polls
    /// included); `Err(reason)` ends the call with [`Error::NotSent`] without touching the
    /// network. Meant as the leader-election fence.
    pub fn gate(mut self, gate: Arc<dyn Fn() -> Result<(), String> + Send + Sync>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Installs the write gate: asked once per call that writes (any method but GET), before
    /// anything is sent; `Err(reason)` ends the call with [`Error::NotSent`]. Meant for a dry
    /// run.
    pub fn write_gate(mut self, gate: WriteGate) -> Self {
        self.write_gate = Some(gate);
        self
    }

    /// Logs every request and response body at debug level (target `hcloud_api::wire`); the
    /// token and secrets in bodies (e.g. a certificate's private key) are never logged.
    pub fn debug(mut self, debug: bool) -> Self {
        self.debug = debug;
        self
    }

    /// Builds the client.
    pub fn build(self) -> Result<Client, Error> {
        let url = reqwest::Url::parse(&self.endpoint)
            .map_err(|e| Error::InvalidArgument(format!("endpoint {:?} is not a URL: {e}", self.endpoint)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::InvalidArgument(format!(
                "endpoint {:?} must start with http:// or https://",
                self.endpoint
            )));
        }
        check_token_format(&self.token)?;
        if self.timeout.is_zero() || self.deadline.is_zero() {
            return Err(Error::InvalidArgument(format!(
                "timeout ({:?}) and deadline ({:?}) must be greater than zero",
                self.timeout, self.deadline
            )));
        }
        let http = reqwest::Client::builder()
            .user_agent(self.user_agent)
            .connect_timeout(self.timeout.min(Duration::from_secs(10)))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::InvalidArgument(format!("cannot build the HTTP client: {e}")))?;
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                endpoint: self.endpoint,
                token: RwLock::new(Arc::new(self.token)),
                timeout: self.timeout,
                deadline: self.deadline,
                retry: self.retry,
                poll: self.poll,
                observer: self.observer,
                gate: self.gate,
                write_gate: self.write_gate,
                debug: self.debug,
                rate_limit: Mutex::new(None),
                trial: false,
            }),
        })
    }
}

/// The token's format: what the API can take in an `Authorization: Bearer` header.
fn check_token_format(token: &SecretString) -> Result<(), Error> {
    let token = token.expose_secret();
    if token.is_empty() || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::InvalidArgument(
            "the API token is empty or contains whitespace/control characters".to_owned(),
        ));
    }
    Ok(())
}

/// A Hetzner Cloud API client. Cheap to clone; clones share the connection pool, the
/// rate-limit view, the observer, the gate and the token (replaced for all of them by
/// [`Client::set_token`]).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    endpoint: String,
    /// Read once per attempt: a token set while a call runs is used from its next attempt on.
    token: RwLock<Arc<SecretString>>,
    timeout: Duration,
    deadline: Duration,
    retry: RetryPolicy,
    poll: PollPolicy,
    observer: Option<Arc<dyn RequestObserver>>,
    gate: Option<RequestGate>,
    write_gate: Option<WriteGate>,
    debug: bool,
    rate_limit: Mutex<Option<RateLimit>>,
    /// Made by [`Client::with_token`]: its exchanges are reported as trials.
    trial: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.inner.endpoint)
            .field("token", &"[redacted]")
            .field("timeout", &self.inner.timeout)
            .field("deadline", &self.inner.deadline)
            .finish_non_exhaustive()
    }
}

/// A raw successful answer.
pub(crate) struct Answer {
    pub(crate) body: bytes::Bytes,
    /// A retried DELETE found the resource gone (an earlier attempt may have deleted it).
    pub(crate) already_gone: bool,
}

enum Attempt {
    Done(Answer),
    Failed { error: Error, verdict: Verdict, hint: Option<Duration> },
}

impl Client {
    /// Starts building a client with the given API token.
    pub fn builder(token: SecretString) -> ClientBuilder {
        ClientBuilder {
            token,
            endpoint: DEFAULT_ENDPOINT.to_owned(),
            user_agent: format!("hcloud-ccm/{}", env!("CARGO_PKG_VERSION")),
            timeout: DEFAULT_TIMEOUT,
            deadline: DEFAULT_DEADLINE,
            retry: RetryPolicy::default(),
            poll: PollPolicy::default(),
            observer: None,
            gate: None,
            write_gate: None,
            debug: false,
        }
    }

    /// The configured base URL.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// The overall deadline of one call.
    pub fn deadline(&self) -> Duration {
        self.inner.deadline
    }

    pub(crate) fn poll_policy(&self) -> PollPolicy {
        self.inner.poll
    }

    /// Replaces the API token of this client and of every clone: each HTTP exchange that
    /// starts afterwards (a retry of a running call too) sends `token`. Exchanges already
    /// under way finish with the token they started with. A token the API could not take
    /// (empty, whitespace or control characters) is refused and the old one kept.
    pub fn set_token(&self, token: SecretString) -> Result<(), Error> {
        check_token_format(&token)?;
        *self.inner.token.write_unpoisoned() = Arc::new(token);
        Ok(())
    }

    /// [`token_fingerprint`](crate::fingerprint::token_fingerprint) of the token in use.
    pub fn token_fingerprint(&self) -> String {
        crate::fingerprint::token_fingerprint(self.current_token().expose_secret())
    }

    /// A client for trying `token` before it is put in use with [`Client::set_token`]: it
    /// shares this client's connections, endpoint, timeouts, retry and poll policies, observer
    /// and debug log, has a rate-limit view and a token of its own, and consults **no request
    /// gate** — meant for a read such as `GET /locations` that checks a token, which a
    /// standby replica needs as much as the leader. Its exchanges reach the observer marked
    /// [`RequestEvent::trial`](crate::RequestEvent::trial).
    pub fn with_token(&self, token: SecretString) -> Result<Client, Error> {
        check_token_format(&token)?;
        let inner = &self.inner;
        Ok(Client {
            inner: Arc::new(Inner {
                http: inner.http.clone(),
                endpoint: inner.endpoint.clone(),
                token: RwLock::new(Arc::new(token)),
                timeout: inner.timeout,
                deadline: inner.deadline,
                retry: inner.retry,
                poll: inner.poll,
                observer: inner.observer.clone(),
                gate: None,
                // A token check is a read; the write gate would not ask, but stays in place.
                write_gate: inner.write_gate.clone(),
                debug: inner.debug,
                rate_limit: Mutex::new(None),
                trial: true,
            }),
        })
    }

    fn current_token(&self) -> Arc<SecretString> {
        self.inner.token.read_unpoisoned().clone()
    }

    /// The most recent rate-limit headers, if any response carried them.
    pub fn rate_limit(&self) -> Option<RateLimit> {
        *self.inner.rate_limit.lock_unpoisoned()
    }

    /// Sends a request with retries and returns the successful answer.
    pub(crate) async fn send<B: Serialize + ?Sized>(
        &self,
        method: Method,
        target: &Target,
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<Answer, Error> {
        let request_name = format!("{} {}", method, target.path);
        let body =
            match body {
                Some(b) => Some(serde_json::to_vec(b).map_err(|e| {
                    Error::InvalidArgument(format!("{request_name}: cannot encode the request body: {e}"))
                })?),
                None => None,
            };
        let inner = &self.inner;
        if method != Method::GET
            && let Some(gate) = &inner.write_gate
            && let Err(reason) = gate(&WriteRequest { method: &method, endpoint: target.template, path: &target.path })
        {
            return Err(Error::NotSent { request: request_name, reason });
        }
        let started = Instant::now();
        let mut attempt = 0;
        let mut maybe_applied = false;
        loop {
            if let Some(gate) = &inner.gate
                && let Err(reason) = gate()
            {
                return Err(Error::NotSent { request: request_name, reason });
            }
            let left = inner.deadline.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(Error::DeadlineExceeded { request: request_name, after: inner.deadline, last: None });
            }
            let per_attempt = inner.timeout.min(left);
            let (error, mut verdict, hint) = match self
                .send_once(&method, target, query, body.as_deref(), attempt, per_attempt, &request_name)
                .await
            {
                Attempt::Done(answer) => return Ok(answer),
                Attempt::Failed { error, verdict, hint } => (error, verdict, hint),
            };
            if method == Method::DELETE && maybe_applied {
                if error.is_not_found() {
                    // An earlier attempt may have deleted it; the resource is gone either way.
                    warn!(request = %request_name, "retried DELETE answered not_found: an earlier attempt deleted it");
                    return Ok(Answer { body: bytes::Bytes::new(), already_gone: true });
                }
                if let Some(code) = error.code() {
                    verdict = retry::for_repeated_delete(verdict, code);
                }
            }
            maybe_applied |= verdict.maybe_applied;
            let finish = |error: Error| {
                if target.create && maybe_applied {
                    Error::OutcomeUnknown { request: request_name.clone(), source: Box::new(error) }
                } else {
                    error
                }
            };
            if per_attempt < inner.timeout && matches!(error, Error::Timeout { .. }) {
                // The attempt was cut short by the deadline.
                return Err(finish(Error::DeadlineExceeded {
                    request: request_name.clone(),
                    after: inner.deadline,
                    last: Some(Box::new(error)),
                }));
            }
            if !verdict.retry || attempt >= inner.retry.max_retries {
                return Err(finish(error));
            }
            let delay = inner.retry.delay_with_hint(attempt, hint);
            if started.elapsed() + delay >= inner.deadline {
                warn!(request = %request_name, ?delay, deadline = ?inner.deadline, error = %error,
                    "not retrying Hetzner API request: the next attempt would start after the deadline");
                return Err(finish(error));
            }
            warn!(request = %request_name, attempt = attempt + 1, ?delay, error = %error, "retrying Hetzner API request");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn send_once(
        &self,
        method: &Method,
        target: &Target,
        query: &[(&str, String)],
        body: Option<&[u8]>,
        attempt: u32,
        timeout: Duration,
        request_name: &str,
    ) -> Attempt {
        let inner = &self.inner;
        let url = format!("{}{}", inner.endpoint, target.path);
        let token = self.current_token();
        let mut req = inner.http.request(method.clone(), &url).bearer_auth(token.expose_secret()).timeout(timeout);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(body) = body {
            req = req.header(reqwest::header::CONTENT_TYPE, "application/json").body(body.to_vec());
            if inner.debug {
                wire_log::request(request_name, body);
            }
        }
        let flight = InFlight::start(
            inner.observer.as_deref(),
            method,
            target.template,
            &target.api_endpoint,
            attempt,
            inner.trial,
        );
        let result = async {
            let resp = req.send().await?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let bytes = resp.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, bytes))
        }
        .await;
        let (status, headers, bytes) = match result {
            Ok(ok) => ok,
            Err(e) => {
                flight.finish(None);
                let verdict = retry::for_transport(method, e.is_connect());
                let error = if e.is_timeout() {
                    Error::Timeout { request: request_name.to_owned(), after: timeout }
                } else {
                    Error::Transport { request: request_name.to_owned(), source: e.without_url() }
                };
                return Attempt::Failed { error, verdict, hint: None };
            }
        };
        flight.finish(Some(status.as_u16()));
        if let Some(rl) = RateLimit::from_headers(&headers) {
            *inner.rate_limit.lock_unpoisoned() = Some(rl);
        }
        if inner.debug {
            wire_log::response(request_name, status.as_u16(), &bytes);
        }
        if status.is_success() {
            return Attempt::Done(Answer { body: bytes, already_gone: false });
        }
        let correlation_id = headers.get("x-correlation-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let api = parse_api_error(status.as_u16(), &bytes, correlation_id, request_name.to_owned());
        let verdict = retry::for_status(method, status.as_u16(), &api.code);
        let hint = retry::wait_hint(status.as_u16(), &headers, SystemTime::now());
        Attempt::Failed { error: Error::from(api), verdict, hint }
    }

    /// Sends a request and decodes the JSON answer.
    pub(crate) async fn json<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        method: Method,
        target: &Target,
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<T, Error> {
        let answer = self.send(method.clone(), target, query, body).await?;
        decode(&answer.body, &method, target)
    }

    /// Sends a DELETE that the API answers with `204` and no body, or `200` with an action;
    /// `None` if there was no action (or the resource was already gone after a lost answer).
    pub(crate) async fn delete(&self, target: &Target) -> Result<Option<Action>, Error> {
        let answer = self.send::<()>(Method::DELETE, target, &[], None).await?;
        if answer.already_gone {
            return Ok(None);
        }
        decode_optional_action(&answer.body)
            .map_err(|message| Error::Decode { request: format!("DELETE {}", target.path), message })
    }
}

pub(crate) fn decode<T: DeserializeOwned>(body: &[u8], method: &Method, target: &Target) -> Result<T, Error> {
    serde_json::from_slice(body)
        .map_err(|e| Error::Decode { request: format!("{method} {}", target.path), message: e.to_string() })
}

/// An empty body (`204`) is no action; a JSON body must be `{"action": {...}}`.
pub(crate) fn decode_optional_action(body: &[u8]) -> Result<Option<Action>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    struct Envelope {
        action: Option<Action>,
    }
    let env: Envelope = serde_json::from_slice(body).map_err(|e| format!("expected no body or an action: {e}"))?;
    Ok(env.action)
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::models::{ActionId, ActionStatus};

    #[test]
    fn debug_output_never_contains_the_token() {
        let token = "supersecrettoken1234567890";
        let builder = Client::builder(SecretString::from(token));
        assert!(!format!("{builder:?}").contains(token));
        let client = builder.endpoint("http://127.0.0.1:1/v1").build().expect("builds");
        let text = format!("{client:?}");
        assert!(!text.contains(token), "{text}");
        assert!(text.contains("redacted"));
    }

    #[test]
    fn rejects_bad_endpoint_token_and_durations() {
        let err = Client::builder(SecretString::from("t")).endpoint("ftp://x").build().unwrap_err();
        assert!(err.to_string().contains("http://"), "{err}");
        let err = Client::builder(SecretString::from("t")).endpoint("not a url").build().unwrap_err();
        assert!(err.to_string().contains("not a URL"), "{err}");
        let err = Client::builder(SecretString::from("a b")).build().unwrap_err();
        assert!(err.to_string().contains("token"), "{err}");
        let err = Client::builder(SecretString::from("t")).deadline(Duration::ZERO).build().unwrap_err();
        assert!(err.to_string().contains("deadline"), "{err}");
    }

    #[test]
    fn rate_limit_headers_parse() {
        let mut h = HeaderMap::new();
        h.insert("RateLimit-Limit", "3600".parse().expect("header"));
        h.insert("RateLimit-Remaining", "3599".parse().expect("header"));
        h.insert("RateLimit-Reset", "1700000000".parse().expect("header"));
        let rl = RateLimit::from_headers(&h).expect("parsed");
        assert_eq!(rl.limit, 3600);
        assert_eq!(rl.remaining, 3599);
        assert_eq!(rl.reset, UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        assert_eq!(RateLimit::from_headers(&HeaderMap::new()), None);
    }

    #[test]
    fn a_rate_limit_reset_beyond_any_time_is_treated_as_absent() {
        // `UNIX_EPOCH + u64::MAX seconds` overflowed and panicked (the http_headers fuzz target
        // finds it from an empty corpus in about 4 million runs).
        let mut h = HeaderMap::new();
        h.insert("RateLimit-Limit", "3600".parse().expect("header"));
        h.insert("RateLimit-Remaining", "0".parse().expect("header"));
        h.insert("RateLimit-Reset", u64::MAX.to_string().parse().expect("header"));
        assert_eq!(RateLimit::from_headers(&h), None);
    }

    #[test]
    fn delete_answers_with_and_without_an_action() {
        assert_eq!(decode_optional_action(b""), Ok(None), "204 No Content");
        let a = decode_optional_action(br#"{"action":{"id":7,"command":"delete_load_balancer","status":"running"}}"#)
            .expect("decodes")
            .expect("an action");
        assert_eq!((a.id, a.command.as_str(), a.status), (ActionId(7), "delete_load_balancer", ActionStatus::Running));
        assert!(decode_optional_action(b"<html>ok</html>").unwrap_err().contains("expected no body or an action"));
    }
}
