//! The HTTP core: building requests, retries, rate-limit bookkeeping, paging, action waiting.

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::{Method, header::HeaderMap};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{debug, warn};

use crate::error::{Error, parse_api_error};
use crate::models::{Action, ActionId, ActionStatus, Meta, Pagination};

/// The public API's base URL.
pub const DEFAULT_ENDPOINT: &str = "https://api.hetzner.cloud/v1";

/// Page size used by `list_all` (the API's maximum).
pub const LIST_ALL_PER_PAGE: u32 = 50;

/// How many pages `list_all` fetches at once after it learned the page count.
const LIST_ALL_CONCURRENCY: usize = 4;

/// Retry policy for failed requests.
///
/// `conflict` answers are retried for every method. HTTP 429, 502, 503, 504, timeouts and
/// broken connections are retried only for idempotent methods (GET, PUT, DELETE), because a
/// retried POST could run an action twice. Connection failures before anything was sent are
/// retried for every method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retries).
    pub max_retries: u32,
    /// Delay before the first retry; doubles each retry.
    pub base_delay: Duration,
    /// Upper bound of one delay.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_retries: 5, base_delay: Duration::from_secs(1), max_delay: Duration::from_secs(60) }
    }
}

impl RetryPolicy {
    /// The delay before retry number `attempt` (0-based): exponential with "equal jitter",
    /// i.e. uniformly in `[d/2, d]` for the capped exponential delay `d`.
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self.base_delay.saturating_mul(1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX));
        let capped = exp.min(self.max_delay);
        let half = capped / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

/// How the action waiter polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollPolicy {
    /// First poll interval.
    pub initial: Duration,
    /// Largest poll interval; the interval grows by 1.5x per poll up to this.
    pub max: Duration,
}

impl Default for PollPolicy {
    fn default() -> Self {
        PollPolicy { initial: Duration::from_millis(250), max: Duration::from_secs(2) }
    }
}

/// The latest `RateLimit-*` headers the API sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// `RateLimit-Limit`: the bucket's capacity.
    pub limit: u32,
    /// `RateLimit-Remaining`: requests left.
    pub remaining: u32,
    /// `RateLimit-Reset`: when the bucket is full again.
    pub reset: SystemTime,
}

impl RateLimit {
    fn from_headers(headers: &HeaderMap) -> Option<RateLimit> {
        let num = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<u64>().ok();
        Some(RateLimit {
            limit: u32::try_from(num("ratelimit-limit")?).unwrap_or(u32::MAX),
            remaining: u32::try_from(num("ratelimit-remaining")?).unwrap_or(u32::MAX),
            reset: UNIX_EPOCH + Duration::from_secs(num("ratelimit-reset")?),
        })
    }
}

/// What one HTTP exchange looked like, for metrics and request accounting.
#[derive(Debug, Clone)]
pub struct RequestEvent<'a> {
    /// HTTP method.
    pub method: &'a Method,
    /// Path template, e.g. `/servers/{id}`.
    pub endpoint: &'static str,
    /// Status, or `None` for transport failures and timeouts.
    pub status: Option<u16>,
    /// Time from sending to the end of the body.
    pub duration: Duration,
    /// 0 for the first attempt, then 1, 2, ... for retries.
    pub attempt: u32,
}

/// Receives one event per HTTP exchange (every attempt, including retries).
pub trait RequestObserver: Send + Sync {
    /// Called after each exchange.
    fn observe(&self, event: &RequestEvent<'_>);
}

impl<F: Fn(&RequestEvent<'_>) + Send + Sync> RequestObserver for F {
    fn observe(&self, event: &RequestEvent<'_>) {
        self(event)
    }
}

/// Builds a [`Client`].
pub struct ClientBuilder {
    token: SecretString,
    endpoint: String,
    user_agent: String,
    timeout: Duration,
    retry: RetryPolicy,
    poll: PollPolicy,
    observer: Option<Arc<dyn RequestObserver>>,
    debug: bool,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("token", &"[redacted]")
            .field("endpoint", &self.endpoint)
            .field("user_agent", &self.user_agent)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("poll", &self.poll)
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

    /// Sets the per-request timeout (default 15 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
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

    /// Installs an observer that sees every HTTP exchange.
    pub fn observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Logs every request and response body at debug level (target `hcloud_api::wire`); the
    /// token is never logged.
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
        let token = self.token.expose_secret();
        if token.is_empty() || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::InvalidArgument(
                "the API token is empty or contains whitespace/control characters".to_owned(),
            ));
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
                token: self.token,
                timeout: self.timeout,
                retry: self.retry,
                poll: self.poll,
                observer: self.observer,
                debug: self.debug,
                rate_limit: Mutex::new(None),
            }),
        })
    }
}

/// A Hetzner Cloud API client. Cheap to clone; clones share the connection pool and the
/// rate-limit view.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    endpoint: String,
    token: SecretString,
    timeout: Duration,
    retry: RetryPolicy,
    poll: PollPolicy,
    observer: Option<Arc<dyn RequestObserver>>,
    debug: bool,
    rate_limit: Mutex<Option<RateLimit>>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.inner.endpoint)
            .field("token", &"[redacted]")
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

/// A raw successful answer.
pub(crate) struct Answer {
    pub(crate) body: bytes::Bytes,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The entries.
    pub items: Vec<T>,
    /// Pagination metadata, if the API sent it.
    pub pagination: Option<Pagination>,
}

/// Where a request goes: a path template for accounting and the concrete path.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) template: &'static str,
    pub(crate) path: String,
}

impl Target {
    pub(crate) fn fixed(template: &'static str) -> Target {
        Target { template, path: template.to_owned() }
    }

    pub(crate) fn with_id(template: &'static str, id: impl fmt::Display) -> Target {
        Target { template, path: template.replacen("{id}", &id.to_string(), 1) }
    }
}

enum Attempt {
    Done(Result<Answer, Error>),
    Retry(Error),
}

fn is_idempotent(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::PUT | Method::DELETE | Method::OPTIONS)
}

impl Client {
    /// Starts building a client with the given API token.
    pub fn builder(token: SecretString) -> ClientBuilder {
        ClientBuilder {
            token,
            endpoint: DEFAULT_ENDPOINT.to_owned(),
            user_agent: format!("hcloud-ccm/{}", env!("CARGO_PKG_VERSION")),
            timeout: Duration::from_secs(15),
            retry: RetryPolicy::default(),
            poll: PollPolicy::default(),
            observer: None,
            debug: false,
        }
    }

    /// The configured base URL.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// The most recent rate-limit headers, if any response carried them.
    pub fn rate_limit(&self) -> Option<RateLimit> {
        *self.inner.rate_limit.lock().unwrap_or_else(|e| e.into_inner())
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
        let retry = self.inner.retry;
        let mut attempt = 0;
        loop {
            match self.send_once(&method, target, query, body.as_deref(), attempt, &request_name).await {
                Attempt::Done(result) => return result,
                Attempt::Retry(err) if attempt < retry.max_retries => {
                    let delay = retry.delay(attempt);
                    warn!(request = %request_name, attempt = attempt + 1, ?delay, error = %err, "retrying Hetzner API request");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Attempt::Retry(err) => return Err(err),
            }
        }
    }

    async fn send_once(
        &self,
        method: &Method,
        target: &Target,
        query: &[(&str, String)],
        body: Option<&[u8]>,
        attempt: u32,
        request_name: &str,
    ) -> Attempt {
        let inner = &self.inner;
        let url = format!("{}{}", inner.endpoint, target.path);
        let mut req =
            inner.http.request(method.clone(), &url).bearer_auth(inner.token.expose_secret()).timeout(inner.timeout);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(body) = body {
            req = req.header(reqwest::header::CONTENT_TYPE, "application/json").body(body.to_vec());
            if inner.debug {
                debug!(target: "hcloud_api::wire", request = %request_name, body = %String::from_utf8_lossy(body), "request");
            }
        }
        let started = Instant::now();
        let idempotent = is_idempotent(method);
        let result = async {
            let resp = req.send().await?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let bytes = resp.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, bytes))
        }
        .await;
        let duration = started.elapsed();
        let (status, headers, bytes) = match result {
            Ok(ok) => ok,
            Err(e) => {
                self.observe(method, target, None, duration, attempt);
                let connect = e.is_connect();
                let err = if e.is_timeout() {
                    Error::Timeout { request: request_name.to_owned(), after: inner.timeout }
                } else {
                    Error::Transport { request: request_name.to_owned(), source: e.without_url() }
                };
                return if idempotent || connect { Attempt::Retry(err) } else { Attempt::Done(Err(err)) };
            }
        };
        self.observe(method, target, Some(status.as_u16()), duration, attempt);
        if let Some(rl) = RateLimit::from_headers(&headers) {
            *inner.rate_limit.lock().unwrap_or_else(|e| e.into_inner()) = Some(rl);
        }
        if inner.debug {
            debug!(target: "hcloud_api::wire", request = %request_name, status = status.as_u16(), body = %String::from_utf8_lossy(&bytes), "response");
        }
        if status.is_success() {
            return Attempt::Done(Ok(Answer { body: bytes }));
        }
        let correlation_id = headers.get("x-correlation-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let api = parse_api_error(status.as_u16(), &bytes, correlation_id, request_name.to_owned());
        let retryable =
            api.code == crate::ErrorCode::Conflict || (idempotent && matches!(status.as_u16(), 429 | 502 | 503 | 504));
        let err = Error::from(api);
        if retryable { Attempt::Retry(err) } else { Attempt::Done(Err(err)) }
    }

    fn observe(&self, method: &Method, target: &Target, status: Option<u16>, duration: Duration, attempt: u32) {
        if let Some(o) = &self.inner.observer {
            o.observe(&RequestEvent { method, endpoint: target.template, status, duration, attempt });
        }
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

    /// Fetches one page of a list; `key` is the list's field, e.g. `servers`.
    pub(crate) async fn page<T: DeserializeOwned>(
        &self,
        target: &Target,
        key: &str,
        filters: &[(&str, String)],
        page: u32,
        per_page: u32,
    ) -> Result<Page<T>, Error> {
        let mut query = filters.to_vec();
        query.push(("page", page.to_string()));
        query.push(("per_page", per_page.to_string()));
        let answer = self.send::<()>(Method::GET, target, &query, None).await?;
        let mut de = serde_json::Deserializer::from_slice(&answer.body);
        let page = serde::de::DeserializeSeed::deserialize(PageSeed::<T> { key, marker: PhantomData }, &mut de)
            .and_then(|page| de.end().map(|()| page))
            .map_err(|e| Error::Decode {
                request: format!("GET {}", target.path),
                message: format!("field `{key}`: {e}"),
            })?;
        Ok(page)
    }

    /// Fetches every page of a list with `per_page=50`. After the first page tells how many
    /// pages there are, the rest are fetched a few at a time.
    pub(crate) async fn all<T: DeserializeOwned>(
        &self,
        target: &Target,
        key: &str,
        filters: &[(&str, String)],
    ) -> Result<Vec<T>, Error> {
        use futures::{StreamExt, TryStreamExt};
        let first = self.page::<T>(target, key, filters, 1, LIST_ALL_PER_PAGE).await?;
        let mut items = first.items;
        let Some(p) = first.pagination else { return Ok(items) };
        match p.last_page {
            Some(last) if last > 1 => {
                let pages: Vec<Page<T>> = futures::stream::iter(2..=last)
                    .map(|n| self.page::<T>(target, key, filters, n, LIST_ALL_PER_PAGE))
                    .buffered(LIST_ALL_CONCURRENCY)
                    .try_collect()
                    .await?;
                for page in pages {
                    items.extend(page.items);
                }
            }
            Some(_) => {}
            None => {
                // No last_page: follow next_page one by one.
                let mut next = p.next_page;
                let mut current = p.page;
                while let Some(n) = next.filter(|n| *n > current) {
                    let page = self.page::<T>(target, key, filters, n, LIST_ALL_PER_PAGE).await?;
                    items.extend(page.items);
                    current = n;
                    next = page.pagination.and_then(|p| p.next_page);
                }
            }
        }
        Ok(items)
    }

    /// Waits until `action` finishes, polling `GET /actions/{id}` with growing intervals.
    ///
    /// Returns the finished action, [`Error::ActionFailed`] if it ended with `error`, or
    /// [`Error::ActionTimeout`] after `timeout`.
    pub async fn wait_for_action(&self, action: &Action, timeout: Duration) -> Result<Action, Error> {
        let mut done = self.wait_for_actions(std::slice::from_ref(action), timeout).await?;
        done.pop().ok_or_else(|| Error::Decode {
            request: format!("GET /actions/{}", action.id),
            message: "the API did not return the action".to_owned(),
        })
    }

    /// Waits until all `actions` finish, polling them together with `GET /actions?id=..`.
    /// Fails with the first action that ended with `error`.
    pub async fn wait_for_actions(&self, actions: &[Action], timeout: Duration) -> Result<Vec<Action>, Error> {
        let started = Instant::now();
        let mut current: Vec<Action> = actions.to_vec();
        let mut interval = self.inner.poll.initial;
        loop {
            for a in &current {
                if a.status == ActionStatus::Error {
                    let (code, message) =
                        a.error.as_ref().map(|e| (e.code.clone(), e.message.clone())).unwrap_or_else(|| {
                            (crate::ErrorCode::Unknown("action_failed".into()), "no error details".into())
                        });
                    return Err(Error::ActionFailed { id: a.id, command: a.command.clone(), code, message });
                }
            }
            let pending: Vec<ActionId> =
                current.iter().filter(|a| a.status != ActionStatus::Success).map(|a| a.id).collect();
            if pending.is_empty() {
                return Ok(current);
            }
            if started.elapsed() >= timeout {
                let stuck = current.iter().find(|a| a.status != ActionStatus::Success);
                return Err(Error::ActionTimeout {
                    id: stuck.map(|a| a.id).unwrap_or_default(),
                    command: stuck.map(|a| a.command.clone()).unwrap_or_default(),
                    waited: started.elapsed(),
                });
            }
            let remaining = timeout.saturating_sub(started.elapsed());
            tokio::time::sleep(interval.min(remaining)).await;
            interval = interval.mul_f64(1.5).min(self.inner.poll.max);
            let fresh = self.actions().get_many(&pending).await?;
            for f in fresh {
                if let Some(slot) = current.iter_mut().find(|a| a.id == f.id) {
                    *slot = f;
                }
            }
        }
    }
}

/// Decodes a list page in one pass: the list under `key` straight into `Vec<T>`, `meta`
/// into [`Meta`], everything else skipped (no intermediate JSON tree).
struct PageSeed<'k, T> {
    key: &'k str,
    marker: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> serde::de::DeserializeSeed<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Page<T>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> serde::de::Visitor<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list response with `{}` and `meta`", self.key)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Page<T>, A::Error> {
        let mut items = None;
        let mut meta = Meta::default();
        while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if k == self.key {
                items = Some(map.next_value::<Vec<T>>()?);
            } else if k == "meta" {
                meta = map.next_value::<Option<Meta>>()?.unwrap_or_default();
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(Page { items: items.unwrap_or_default(), pagination: meta.pagination })
    }
}

pub(crate) fn decode<T: DeserializeOwned>(body: &[u8], method: &Method, target: &Target) -> Result<T, Error> {
    serde_json::from_slice(body)
        .map_err(|e| Error::Decode { request: format!("{method} {}", target.path), message: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_grows_and_is_capped_with_jitter() {
        let p = RetryPolicy { max_retries: 5, base_delay: Duration::from_secs(1), max_delay: Duration::from_secs(10) };
        for _ in 0..100 {
            let d0 = p.delay(0);
            assert!(d0 >= Duration::from_millis(500) && d0 <= Duration::from_secs(1), "{d0:?}");
            let d3 = p.delay(3);
            assert!(d3 >= Duration::from_secs(4) && d3 <= Duration::from_secs(8), "{d3:?}");
            let d10 = p.delay(10);
            assert!(d10 >= Duration::from_secs(5) && d10 <= Duration::from_secs(10), "{d10:?}");
            let d_huge = p.delay(u32::MAX);
            assert!(d_huge <= Duration::from_secs(10));
        }
    }

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
    fn rejects_bad_endpoint_and_token() {
        let err = Client::builder(SecretString::from("t")).endpoint("ftp://x").build().unwrap_err();
        assert!(err.to_string().contains("http://"), "{err}");
        let err = Client::builder(SecretString::from("t")).endpoint("not a url").build().unwrap_err();
        assert!(err.to_string().contains("not a URL"), "{err}");
        let err = Client::builder(SecretString::from("a b")).build().unwrap_err();
        assert!(err.to_string().contains("token"), "{err}");
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
}
