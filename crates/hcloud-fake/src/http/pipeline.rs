//! The request pipeline of `/v1`, as an axum middleware:
//! the token's project ([`crate::projects`]) -> settle its actions -> authentication -> rate
//! limit -> fault injection -> handler (working on that project), then
//! rate-limit and correlation headers, counters, log and one tracing line.
//! A fault may run the handler and still answer something else (see [`crate::faults`]).
//! Other paths (the control surface) only get the correlation header.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, header};

use super::conn::ConnHandle;
use super::extract::RequestProject;
use super::fault_answer;
use super::respond::ErrorCode;
use crate::control::{RequestRecord, token_fingerprint};
use crate::error::ApiError;
use crate::faults::{FaultAnswer, FaultRule, ResetPoint, path_template};
use crate::handle::FakeHandle;
use crate::rate_limit::RateLimitStatus;
use crate::time::{now_unix_ms, rfc3339_ms};

static CORRELATION: AtomicU64 = AtomicU64::new(1);
static PROCESS_TAG: OnceLock<u64> = OnceLock::new();

fn correlation_id() -> String {
    let n = CORRELATION.fetch_add(1, Ordering::Relaxed);
    // The process tag differs between runs; the counter makes ids unique within one.
    let tag = PROCESS_TAG.get_or_init(|| u64::try_from(now_unix_ms()).unwrap_or(0) & 0xffff_ffff);
    format!("{tag:08x}{n:08x}")
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") { Some(token.trim()) } else { None }
}

fn set_header(resp: &mut Response, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(name, v);
    }
}

/// What the fault stage decided, for headers and the log.
#[derive(Debug, Default)]
struct FaultOutcome {
    /// Description for [`RequestRecord::fault`].
    note: Option<String>,
    /// The handler's status when a fault ran it and answered something else.
    handler_status: Option<u16>,
    /// The answer comes from "a proxy": no API headers.
    proxy: bool,
    /// The client gets no status (reset before the response).
    no_status: bool,
}

/// Runs the handler, or the fault's answer instead (after running it, with `apply`).
async fn answer(fault: FaultRule, req: Request, next: Next, out: &mut FaultOutcome) -> Response {
    if let Some(ms) = fault.latency_ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let Some(answer) = fault.answer() else {
        out.note = Some("latency".to_owned());
        return next.run(req).await;
    };
    let switch = req.extensions().get::<ConnectInfo<ConnHandle>>().map(|c| c.0.0.clone());
    let handled = if fault.applies() { Some(next.run(req).await) } else { None };
    out.handler_status = handled.as_ref().map(|r| r.status().as_u16());
    match (answer, handled) {
        (FaultAnswer::Error(e), _) => {
            out.note = Some(format!("error {}", e.code));
            fault_answer::envelope(e)
        }
        (FaultAnswer::Html(status), _) => {
            out.note = Some(format!("html {status}"));
            out.proxy = true;
            fault_answer::html(status)
        }
        (FaultAnswer::Reset(ResetPoint::MidBody), Some(resp)) => {
            out.note = Some(format!("reset {}", ResetPoint::MidBody.as_str()));
            fault_answer::reset_mid_body(resp, switch).await
        }
        (FaultAnswer::Reset(point), _) => {
            out.note = Some(format!("reset {}", point.as_str()));
            out.no_status = true;
            fault_answer::reset_before_response(switch)
        }
    }
}

/// The middleware (see the module docs).
pub(crate) async fn pipeline(State(h): State<FakeHandle>, req: Request, next: Next) -> Response {
    let correlation = correlation_id();
    let path = req.uri().path().to_owned();
    if !(path == "/v1" || path.starts_with("/v1/")) {
        let mut resp = next.run(req).await;
        set_header(&mut resp, "x-correlation-id", &correlation);
        return resp;
    }
    let started = Instant::now();
    let unix_ms = now_unix_ms();
    let method = req.method().as_str().to_owned();
    let query = req.uri().query().map(str::to_owned);
    let token_fingerprint = bearer(req.headers()).filter(|t| !t.is_empty()).map(token_fingerprint);
    // The project the token sees (the default one without a token of another project):
    // settled now, and the handlers work on it.
    let project = h.project_of(bearer(req.headers()).unwrap_or_default());
    h.in_project(project.clone()).with_state(|_| ());
    let mut req = req;
    req.extensions_mut().insert(RequestProject(project));

    let mut fault = FaultOutcome::default();
    let (rate, mut resp): (RateLimitStatus, Response) = match bearer(req.headers()) {
        None => {
            (h.peek_rate(), ApiError::unauthorized("missing or malformed Authorization: Bearer header").into_response())
        }
        Some(token) if !h.token_accepted(token) => {
            (h.peek_rate(), ApiError::unauthorized("unable to authenticate").into_response())
        }
        Some(_) => {
            let rate = h.acquire_rate();
            if rate.allowed {
                let resp = match h.take_fault(&method, &path) {
                    Some(rule) => answer(rule, req, next, &mut fault).await,
                    None => next.run(req).await,
                };
                (rate, resp)
            } else {
                (rate, ApiError::new("rate_limit_exceeded", "rate limit exceeded").into_response())
            }
        }
    };

    if !fault.proxy {
        set_header(&mut resp, "ratelimit-limit", &rate.limit.to_string());
        set_header(&mut resp, "ratelimit-remaining", &rate.remaining.to_string());
        set_header(&mut resp, "ratelimit-reset", &rate.reset.to_string());
        set_header(&mut resp, "x-correlation-id", &correlation);
    }

    let status = if fault.no_status { 0 } else { resp.status().as_u16() };
    let error_code = resp.extensions().get::<ErrorCode>().map(|c| c.0.clone());
    let latency = started.elapsed();
    let endpoint = format!("{method} {}", path_template(&path));
    if h.log_requests() {
        tracing::info!(
            target: "hcloud_fake",
            method = %method,
            path = %path,
            query = query.as_deref().unwrap_or(""),
            status,
            error = error_code.as_deref().unwrap_or(""),
            fault = fault.note.as_deref().unwrap_or(""),
            token = token_fingerprint.as_deref().unwrap_or(""),
            latency_ms = latency.as_secs_f64() * 1000.0,
            correlation_id = %correlation,
            "{endpoint} -> {status}"
        );
    }
    h.record_request(RequestRecord {
        method,
        path,
        endpoint,
        query,
        status,
        error_code,
        timestamp: rfc3339_ms(unix_ms),
        unix_ms,
        latency_ms: latency.as_secs_f64() * 1000.0,
        correlation_id: correlation,
        token_fingerprint,
        fault: fault.note,
        handler_status: fault.handler_status,
    });
    resp
}
