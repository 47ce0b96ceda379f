//! The Robot webservice part under `/robot`: `GET /server`, `GET /server/{number}`,
//! `GET /reset/{number}`, behind basic auth, Robot fault injection, counters and the log
//! (keys like `GET /robot/server/{id}`).

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};

use super::conn::ConnHandle;
use super::fault_answer;
use crate::control::RequestRecord;
use crate::faults::{FaultAnswer, path_template};
use crate::handle::FakeHandle;
use crate::robot::error_body;
use crate::time::{now_unix_ms, rfc3339_ms};

fn robot_error(status: u16, code: &str, message: &str) -> Response {
    let s = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (s, axum::Json(error_body(status, code, message))).into_response()
}

async fn list(State(h): State<FakeHandle>) -> Response {
    let servers: Vec<Value> = h.with_robot(|r| r.list().iter().map(|s| json!({"server": s.wire()})).collect());
    if servers.is_empty() {
        // The webservice answers an empty account with 404 SERVER_NOT_FOUND.
        return robot_error(404, "SERVER_NOT_FOUND", "Server not found");
    }
    axum::Json(Value::Array(servers)).into_response()
}

async fn get_server(State(h): State<FakeHandle>, Path(number): Path<String>) -> Response {
    match number.parse::<u64>().ok().and_then(|n| h.with_robot(|r| r.get(n).map(|s| s.wire()))) {
        Some(s) => axum::Json(json!({"server": s})).into_response(),
        None => robot_error(404, "SERVER_NOT_FOUND", "Server not found"),
    }
}

async fn get_reset(State(h): State<FakeHandle>, Path(number): Path<String>) -> Response {
    match number.parse::<u64>().ok().and_then(|n| h.with_robot(|r| r.get(n).map(|s| s.reset_wire()))) {
        Some(s) => axum::Json(json!({"reset": s})).into_response(),
        None => robot_error(404, "SERVER_NOT_FOUND", "Server not found"),
    }
}

async fn not_found() -> Response {
    robot_error(404, "NOT_FOUND", "Not found")
}

/// The `/robot` routes, wrapped in their pipeline.
pub(crate) fn routes(handle: FakeHandle) -> Router<FakeHandle> {
    Router::new()
        .route("/server", get(list))
        .route("/server/{number}", get(get_server))
        .route("/reset/{number}", get(get_reset))
        .fallback(not_found)
        .layer(from_fn_with_state(handle, pipeline))
}

fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(base64_decode(encoded.trim())?).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// Standard base64 (with or without padding); `None` on any other character.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c)? << (18 - 6 * i);
        }
        let n = match chunk.len() {
            4 => 3,
            3 => 2,
            2 => 1,
            _ => return None,
        };
        out.extend_from_slice(&acc.to_be_bytes()[1..1 + n]);
    }
    Some(out)
}

async fn pipeline(State(h): State<FakeHandle>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let unix_ms = now_unix_ms();
    let method = req.method().as_str().to_owned();
    // Inside the nested router the path may or may not still carry the `/robot` prefix.
    let path = req.uri().path();
    let below = path.strip_prefix("/robot").unwrap_or(path).to_owned();
    let full_path = format!("/robot{below}");
    let query = req.uri().query().map(str::to_owned);
    let expected = h.robot_credentials();
    let mut note = None;
    let resp = match basic_credentials(req.headers()) {
        Some((user, password)) if user == expected.user && password == expected.password => {
            match h.take_robot_fault(&method, &below) {
                None => next.run(req).await,
                Some(rule) => {
                    if let Some(ms) = rule.latency_ms {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                    let switch = req.extensions().get::<ConnectInfo<ConnHandle>>().map(|c| c.0.0.clone());
                    match rule.answer() {
                        None => {
                            note = Some("latency".to_owned());
                            next.run(req).await
                        }
                        Some(FaultAnswer::Error(e)) => {
                            note = Some(format!("error {}", e.code));
                            let message =
                                if e.message.is_empty() { format!("injected fault: {}", e.code) } else { e.message };
                            robot_error(e.status, &e.code, &message)
                        }
                        Some(FaultAnswer::Html(status)) => {
                            note = Some(format!("html {status}"));
                            fault_answer::html(status)
                        }
                        Some(FaultAnswer::Reset(_)) => {
                            note = Some("reset before_response".to_owned());
                            fault_answer::reset_before_response(switch)
                        }
                    }
                }
            }
        }
        _ => robot_error(401, "UNAUTHORIZED", "Unauthorized"),
    };
    let status = resp.status().as_u16();
    let endpoint = format!("{method} {}", path_template(&full_path));
    if h.log_requests() {
        tracing::info!(target: "hcloud_fake", method = %method, path = %full_path, status,
            fault = note.as_deref().unwrap_or(""), "{endpoint} -> {status}");
    }
    h.record_request(RequestRecord {
        method,
        path: full_path,
        endpoint,
        query,
        status,
        error_code: None,
        timestamp: rfc3339_ms(unix_ms),
        unix_ms,
        latency_ms: started.elapsed().as_secs_f64() * 1000.0,
        correlation_id: String::new(),
        token_fingerprint: None,
        fault: note,
        handler_status: None,
    });
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_basic_auth() {
        assert_eq!(base64_decode("cm9ib3Q6cm9ib3QtcGFzc3dvcmQ=").as_deref(), Some(&b"robot:robot-password"[..]));
        assert_eq!(base64_decode("YQ==").as_deref(), Some(&b"a"[..]));
        assert_eq!(base64_decode("YWI").as_deref(), Some(&b"ab"[..]));
        assert_eq!(base64_decode("!!!!"), None);
    }
}
