//! A client for the part of the Hetzner Robot webservice (dedicated servers) the CCM uses:
//! `GET /server`, `GET /server/{number}` and `GET /reset/{number}`.
//!
//! ```text
//!  caller ──► RobotClient::servers / server / reset
//!                │ gate (e.g. leader-election fence) ── refused ──► RobotError::NotSent
//!                ▼
//!            observer (optional): RequestObserver::observe once per exchange that got a
//!            status or failed in transport (`started` is not called: no in-flight gauge)
//!                ▼
//!            one HTTP exchange: basic auth (user + password; the password is a SecretString,
//!            never in Debug output, logs or errors), per-request timeout (15 s)
//!                ▼
//!            2xx: `[{"server": {...}}]` / `{"server": {...}}` / `{"reset": {...}}` decoded
//!            else: RobotError::Api { status, code (SERVER_NOT_FOUND, RATE_LIMIT_EXCEEDED,
//!                  UNAUTHORIZED, ...), message } from `{"error": {...}}`
//! ```
//!
//! There are no retries: the webservice's budget is small (a few hundred requests per hour),
//! so callers cache and back off (see hcloud-provider's Robot inventory).

mod error;
mod models;

use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use sync_lock::UnpoisonRw as _;

use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;

pub use error::{RobotError, RobotErrorCode};
pub use models::{RobotReset, RobotServer};

use crate::observe::{RequestEvent, RequestGate, RequestObserver};

/// The Robot webservice's address.
pub const DEFAULT_ROBOT_ENDPOINT: &str = "https://robot-ws.your-server.de";

/// The basic-auth pair.
struct Credentials {
    user: String,
    password: SecretString,
}

/// A Robot webservice client. Cheap to clone; clones share the connections and the
/// credentials (replaced for all of them by [`RobotClient::set_credentials`]).
#[derive(Clone)]
pub struct RobotClient {
    http: reqwest::Client,
    endpoint: String,
    /// Read once per request: credentials set meanwhile are used from the next request on.
    credentials: Arc<RwLock<Arc<Credentials>>>,
    timeout: Duration,
    gate: Option<RequestGate>,
    observer: Option<Arc<dyn RequestObserver>>,
    /// Made by [`RobotClient::with_credentials`]: its exchanges are reported as trials.
    trial: bool,
}

impl fmt::Debug for RobotClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotClient")
            .field("endpoint", &self.endpoint)
            .field("user", &self.user())
            .field("password", &"[redacted]")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RobotClient {
    /// A client for `endpoint` (e.g. [`DEFAULT_ROBOT_ENDPOINT`]) with basic-auth credentials.
    pub fn new(endpoint: &str, user: &str, password: SecretString) -> Result<RobotClient, RobotError> {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(RobotError::InvalidArgument(format!("endpoint {endpoint:?} is not an http(s) URL")));
        }
        let http = reqwest::Client::builder()
            .user_agent(concat!("hcloud-ccm/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| RobotError::InvalidArgument(format!("cannot build the HTTP client: {e}")))?;
        Ok(RobotClient {
            http,
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            credentials: Arc::new(RwLock::new(Arc::new(Credentials { user: user.to_owned(), password }))),
            timeout: crate::DEFAULT_TIMEOUT,
            gate: None,
            observer: None,
            trial: false,
        })
    }

    /// Sets the per-request timeout (default 15 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Consults `gate` before every request; a refusal keeps the request from being sent.
    pub fn with_gate(mut self, gate: RequestGate) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Reports every exchange to `observer` (metrics). The events' `endpoint` and
    /// `api_endpoint` are the path templates `/server`, `/server/{number}`, `/reset/{number}`.
    pub fn with_observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The user name in use.
    pub fn user(&self) -> String {
        self.credentials.read_unpoisoned().user.clone()
    }

    /// Replaces the credentials of this client and of every clone: each request that starts
    /// afterwards sends them; requests under way finish with the old ones.
    pub fn set_credentials(&self, user: &str, password: SecretString) {
        *self.credentials.write_unpoisoned() = Arc::new(Credentials { user: user.to_owned(), password });
    }

    /// A client for trying credentials before they are put in use with
    /// [`RobotClient::set_credentials`]: it shares this client's connections, endpoint,
    /// timeout and observer, has credentials of its own and consults **no request gate** (a
    /// read that checks credentials, which a standby replica needs as much as the leader).
    /// Its exchanges reach the observer marked [`RequestEvent::trial`].
    pub fn with_credentials(&self, user: &str, password: SecretString) -> RobotClient {
        RobotClient {
            credentials: Arc::new(RwLock::new(Arc::new(Credentials { user: user.to_owned(), password }))),
            gate: None,
            trial: true,
            ..self.clone()
        }
    }

    /// Every server of the account (`GET /server`; the webservice answers an account without
    /// servers with `SERVER_NOT_FOUND`, which is an empty list here).
    pub async fn servers(&self) -> Result<Vec<RobotServer>, RobotError> {
        let (status, body, request) = self.get("/server", "/server").await?;
        servers_answer(status, &body, request)
    }

    /// One server (`GET /server/{number}`); `None` on `SERVER_NOT_FOUND`.
    pub async fn server(&self, number: u64) -> Result<Option<RobotServer>, RobotError> {
        let (status, body, request) = self.get(&format!("/server/{number}"), "/server/{number}").await?;
        server_answer(status, &body, request)
    }

    /// The reset state of a server (`GET /reset/{number}`), never cached.
    pub async fn reset(&self, number: u64) -> Result<RobotReset, RobotError> {
        let (status, body, request) = self.get(&format!("/reset/{number}"), "/reset/{number}").await?;
        reset_answer(status, &body, request)
    }

    /// Reports one finished exchange to the observer.
    fn observe(&self, template: &'static str, status: Option<u16>, started: Instant) {
        if let Some(observer) = &self.observer {
            observer.observe(&RequestEvent {
                method: &reqwest::Method::GET,
                endpoint: template,
                api_endpoint: template,
                status,
                duration: started.elapsed(),
                attempt: 0,
                trial: self.trial,
            });
        }
    }

    /// One exchange: the status, the body and the request's name (for errors).
    async fn get(&self, path: &str, template: &'static str) -> Result<(u16, bytes::Bytes, String), RobotError> {
        let request = format!("GET {path}");
        if let Some(gate) = &self.gate {
            gate().map_err(|why| RobotError::NotSent(format!("{request} not sent: {why}")))?;
        }
        let started = Instant::now();
        let credentials = self.credentials.read_unpoisoned().clone();
        let resp = match self
            .http
            .get(format!("{}{path}", self.endpoint))
            .basic_auth(&credentials.user, Some(credentials.password.expose_secret()))
            .timeout(self.timeout)
            .send()
            .await
        {
            Ok(resp) => resp,
            Err(source) => {
                self.observe(template, None, started);
                return Err(RobotError::Transport { request, source: source.without_url() });
            }
        };
        let status = resp.status().as_u16();
        let body = resp.bytes().await;
        self.observe(template, Some(status), started);
        let body =
            body.map_err(|source| RobotError::Transport { request: request.clone(), source: source.without_url() })?;
        tracing::debug!(target: "robot_api", %request, status, bytes = body.len(), "Robot webservice request");
        Ok((status, body, request))
    }
}

/// The answer of `GET /server`: `[{"server": {...}}]`; `SERVER_NOT_FOUND` (an account
/// without servers) is an empty list.
pub(crate) fn servers_answer(status: u16, body: &[u8], request: String) -> Result<Vec<RobotServer>, RobotError> {
    match decode_answer::<Vec<models::ServerWrap>>(status, body, request) {
        Ok(list) => Ok(list.into_iter().map(|w| w.server).collect()),
        Err(e) if e.is_server_not_found() => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The answer of `GET /server/{number}`: `{"server": {...}}`; `None` on `SERVER_NOT_FOUND`.
pub(crate) fn server_answer(status: u16, body: &[u8], request: String) -> Result<Option<RobotServer>, RobotError> {
    match decode_answer::<models::ServerWrap>(status, body, request) {
        Ok(w) => Ok(Some(w.server)),
        Err(e) if e.is_server_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The answer of `GET /reset/{number}`: `{"reset": {...}}`.
pub(crate) fn reset_answer(status: u16, body: &[u8], request: String) -> Result<RobotReset, RobotError> {
    decode_answer::<models::ResetWrap>(status, body, request).map(|w| w.reset)
}

/// The answer of a Robot request, pure: a 2xx body decoded into `T`, anything else the
/// error from its `{"error": {...}}` envelope (or a generic one without it).
pub(crate) fn decode_answer<T: DeserializeOwned>(status: u16, body: &[u8], request: String) -> Result<T, RobotError> {
    if (200..300).contains(&status) {
        return serde_json::from_slice(body).map_err(|e| RobotError::Decode { request, message: e.to_string() });
    }
    Err(match error_envelope(body) {
        Some(w) => RobotError::Api {
            status: if w.error.status == 0 { status } else { w.error.status },
            code: RobotErrorCode::parse(&w.error.code),
            message: w.error.message,
            request,
        },
        None => RobotError::Api {
            status,
            code: RobotErrorCode::Other(String::new()),
            message: format!("HTTP {status} without an error envelope"),
            request,
        },
    })
}

/// The webservice's error envelope, `{"error": {...}}`: objects only. (serde also reads a
/// struct from a JSON array, so `[[404, "SERVER_NOT_FOUND"]]` would pass for one, and
/// `SERVER_NOT_FOUND` makes a server count as absent.)
fn error_envelope(body: &[u8]) -> Option<models::ErrorWrap> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    if !value.get("error").is_some_and(serde_json::Value::is_object) {
        return None;
    }
    serde_json::from_value(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_json_object_is_an_error_envelope() {
        // Like the Cloud API's envelope (found by fuzzing there): an array is no envelope, so
        // it can never say SERVER_NOT_FOUND, which makes a server count as absent.
        for body in [&br#"[[404,"SERVER_NOT_FOUND"]]"#[..], br#"{"error":[404,"SERVER_NOT_FOUND","gone"]}"#] {
            let e = server_answer(404, body, "GET /server/1".into()).expect_err("no envelope");
            assert!(
                matches!(&e, RobotError::Api { code: RobotErrorCode::Other(c), .. } if c.is_empty()),
                "{e:?} from {}",
                String::from_utf8_lossy(body)
            );
        }
        let real = br#"{"error":{"status":404,"code":"SERVER_NOT_FOUND","message":"Server not found"}}"#;
        assert_eq!(server_answer(404, real, "GET /server/1".into()).expect("absent"), None);
    }

    #[test]
    fn password_is_not_in_debug_output() {
        let c = RobotClient::new("http://127.0.0.1:9", "user", SecretString::from("hunter2-secret")).expect("client");
        let d = format!("{c:?}");
        assert!(!d.contains("hunter2-secret") && d.contains("user"), "{d}");
        assert!(RobotClient::new("ftp://x", "u", SecretString::from("p")).is_err());
    }
}
