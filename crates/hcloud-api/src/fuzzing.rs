//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`): the parsers of outside
//! input that are private to this crate — API answers, error envelopes, the `RateLimit-*` and
//! `Retry-After` headers, HTTP dates and the Robot webservice's answers. Not a stable API.

use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use reqwest::header::HeaderMap;
use serde::de::DeserializeOwned;

use crate::robot::{RobotError, RobotReset, RobotServer};
use crate::{Action, ApiError, Page, RateLimit};

/// A list answer (`{"<key>": [...], "meta": {...}}`), as `list`/`list_all` decode it.
pub fn decode_page<T: DeserializeOwned>(body: &[u8], key: &str) -> Result<Page<T>, String> {
    crate::paging::decode_page(body, key)
}

/// A DELETE answer: no body, or `{"action": {...}}`.
pub fn decode_optional_action(body: &[u8]) -> Result<Option<Action>, String> {
    crate::client::decode_optional_action(body)
}

/// The error of a non-2xx answer.
pub fn parse_api_error(status: u16, body: &[u8], correlation_id: Option<String>) -> ApiError {
    crate::error::parse_api_error(status, body, correlation_id, "GET /fuzz".to_owned())
}

/// The `RateLimit-*` headers of an answer.
pub fn rate_limit(headers: &HeaderMap) -> Option<RateLimit> {
    RateLimit::from_headers(headers)
}

/// How long an answer asks to wait before the next request.
pub fn wait_hint(status: u16, headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    crate::retry::wait_hint(status, headers, now)
}

/// `Retry-After`: seconds or an HTTP date.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    crate::retry::parse_retry_after(value, now)
}

/// An HTTP date (RFC 9110 §5.6.7); `now` places an RFC 850 date's two-digit year.
pub fn parse_http_date(value: &str, now: Timestamp) -> Option<Timestamp> {
    crate::http_date::parse(value, now)
}

/// The Robot webservice's answer to `GET /server`.
pub fn robot_servers(status: u16, body: &[u8]) -> Result<Vec<RobotServer>, RobotError> {
    crate::robot::servers_answer(status, body, "GET /server".to_owned())
}

/// The Robot webservice's answer to `GET /server/{number}`.
pub fn robot_server(status: u16, body: &[u8]) -> Result<Option<RobotServer>, RobotError> {
    crate::robot::server_answer(status, body, "GET /server/1".to_owned())
}

/// The Robot webservice's answer to `GET /reset/{number}`.
pub fn robot_reset(status: u16, body: &[u8]) -> Result<RobotReset, RobotError> {
    crate::robot::reset_answer(status, body, "GET /reset/1".to_owned())
}
