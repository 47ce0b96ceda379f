//! The one error type of the client.
//!
//! Every failure is one of: an API error (the server answered with the Hetzner error envelope,
//! or with a non-success status and no envelope), a transport error (connection refused, reset,
//! TLS), a timeout, an undecodable response body, a failed/timed-out action, a request the
//! request gate refused ([`Error::NotSent`]), a call that ran out of its overall deadline
//! ([`Error::DeadlineExceeded`]), or a create whose answer was lost ([`Error::OutcomeUnknown`]).
//!
//! Only a Hetzner error envelope with the code `not_found` means "absent"
//! ([`Error::is_not_found`]); a 404 without the envelope (a proxy, a wrong endpoint) is an
//! ordinary error, so nothing is deleted because of it.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

pub use crate::error_code::ErrorCode;
use crate::models::ActionId;

/// Structured details of an API error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorDetails {
    /// `invalid_input`: the fields that failed validation.
    InvalidInput(Vec<InvalidField>),
    /// Any other details object, kept as JSON text.
    Other(String),
}

/// One field reported by an `invalid_input` error.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InvalidField {
    /// The request field's name, e.g. `name` or `label_selector`.
    pub name: String,
    /// What is wrong with it.
    #[serde(default)]
    pub messages: Vec<String>,
}

/// An error answered by the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status code.
    pub status: u16,
    /// The API error code. Answers without the error envelope get a code derived from the
    /// status (e.g. 502 → `bad_gateway`, 429 → `rate_limit_exceeded`), except 404: without the
    /// envelope it gets `http_404` ([`ErrorCode::Unknown`]), never `not_found`, because only
    /// the API itself can say that a resource does not exist.
    pub code: ErrorCode,
    /// The API's human-readable message.
    pub message: String,
    /// Structured details, if any.
    pub details: Option<ErrorDetails>,
    /// The `X-Correlation-Id` response header, for Hetzner support.
    pub correlation_id: Option<String>,
    /// Method and path of the request, e.g. `POST /load_balancers/7/actions/add_target`.
    pub request: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {} ({}, HTTP {}", self.request, self.message, self.code, self.status)?;
        if let Some(id) = &self.correlation_id {
            write!(f, ", correlation id {id}")?;
        }
        write!(f, ")")?;
        if let Some(ErrorDetails::InvalidInput(fields)) = &self.details {
            for field in fields {
                write!(f, "; field `{}`: {}", field.name, field.messages.join(", "))?;
            }
        }
        Ok(())
    }
}

/// Every way a client call can fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API answered with an error.
    #[error("{0}")]
    Api(Box<ApiError>),
    /// The request did not reach the API or the connection broke.
    #[error("{request}: transport error: {source}")]
    Transport {
        /// Method and path of the request.
        request: String,
        /// The underlying HTTP client error (never contains the token).
        #[source]
        source: reqwest::Error,
    },
    /// No answer within the per-request timeout.
    #[error("{request}: no answer within {after:?}")]
    Timeout {
        /// Method and path of the request.
        request: String,
        /// The per-request timeout.
        after: Duration,
    },
    /// The answer could not be decoded.
    #[error("{request}: could not decode the response: {message}")]
    Decode {
        /// Method and path of the request.
        request: String,
        /// What went wrong.
        message: String,
    },
    /// An action finished with status `error`.
    #[error("action {id} ({command}) failed: {message} ({code})")]
    ActionFailed {
        /// The action.
        id: ActionId,
        /// The action's command, e.g. `add_target`.
        command: String,
        /// The action's error code.
        code: ErrorCode,
        /// The action's error message.
        message: String,
    },
    /// An action was still running at the deadline.
    #[error("action {id} ({command}) still running after {waited:?}")]
    ActionTimeout {
        /// The action.
        id: ActionId,
        /// The action's command.
        command: String,
        /// How long the waiter waited.
        waited: Duration,
    },
    /// The API no longer knows a running action the waiter polled: it finished and was
    /// pruned before the next poll, so whether it succeeded is unknown. Read the resource's
    /// state to find out.
    #[error("action {id} ({command}) is no longer known to the API (finished and pruned); its outcome is unknown")]
    ActionGone {
        /// The action.
        id: ActionId,
        /// The action's command.
        command: String,
    },
    /// A client-side precondition failed (bad endpoint URL, bad argument).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The request gate (see [`crate::ClientBuilder::gate`]) refused the request; nothing was
    /// sent.
    #[error("{request}: not sent: {reason}")]
    NotSent {
        /// Method and path of the request.
        request: String,
        /// Why the gate refused.
        reason: String,
    },
    /// The call's overall deadline (see [`crate::ClientBuilder::deadline`]) passed before it
    /// got an answer; `last` is the failure of the last attempt, if one failed.
    #[error("{request}: no result within the deadline of {after:?}{}", last_suffix(last))]
    DeadlineExceeded {
        /// Method and path of the request.
        request: String,
        /// The deadline.
        after: Duration,
        /// The last attempt's failure, if any.
        last: Option<Box<Error>>,
    },
    /// A create (`POST` of a new resource) may have been applied, but its answer was lost
    /// (5xx, timeout or broken connection after the request was sent). The client does not
    /// repeat it, since that could create a duplicate: look the resource up first (e.g. with
    /// `list_by_labels` and the labels the create request set), then create it if absent.
    #[error(
        "{request}: outcome unknown: the request may have been applied but its answer was lost ({source}); look the \
         resource up (e.g. by its labels) before creating it again"
    )]
    OutcomeUnknown {
        /// Method and path of the request.
        request: String,
        /// The failure that lost the answer.
        source: Box<Error>,
    },
}

fn last_suffix(last: &Option<Box<Error>>) -> String {
    last.as_ref().map(|e| format!("; last attempt: {e}")).unwrap_or_default()
}

impl Error {
    /// The API error, if this is one — also the one inside [`Error::OutcomeUnknown`] and
    /// [`Error::DeadlineExceeded`].
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            Error::Api(e) => Some(e),
            Error::OutcomeUnknown { source, .. } => source.api(),
            Error::DeadlineExceeded { last: Some(last), .. } => last.api(),
            _ => None,
        }
    }

    /// The API error code, if this is an API error.
    pub fn code(&self) -> Option<&ErrorCode> {
        self.api().map(|e| &e.code)
    }

    /// True if the API said the resource does not exist: a Hetzner error envelope with the
    /// code `not_found`. A 404 without the envelope (a proxy, a wrong endpoint) is not.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api(e) if e.code == ErrorCode::NotFound)
    }

    /// True if the request gate refused the request (nothing was sent).
    pub fn is_not_sent(&self) -> bool {
        matches!(self, Error::NotSent { .. })
    }

    /// True if a create may have been applied although it failed ([`Error::OutcomeUnknown`]).
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Error::OutcomeUnknown { .. })
    }

    /// True if the API refused because of the rate limit.
    pub fn is_rate_limited(&self) -> bool {
        self.code() == Some(&ErrorCode::RateLimitExceeded)
    }

    /// True for failures that say nothing about the resource and may pass if tried again
    /// later: rate limit, conflict, locked, 5xx, timeouts, transport errors, a passed deadline
    /// and a create with an unknown outcome (look it up before creating it again). A refusal of
    /// the request gate is not transient: the gate decides when requests may go out again.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Api(e) => {
                e.status >= 500
                    || matches!(
                        e.code,
                        ErrorCode::RateLimitExceeded
                            | ErrorCode::Conflict
                            | ErrorCode::Locked
                            | ErrorCode::Timeout
                            | ErrorCode::Maintenance
                            | ErrorCode::ResourceUnavailable
                            | ErrorCode::BadGateway
                    )
            }
            Error::Transport { .. }
            | Error::Timeout { .. }
            | Error::ActionTimeout { .. }
            | Error::ActionGone { .. }
            | Error::DeadlineExceeded { .. }
            | Error::OutcomeUnknown { .. } => true,
            Error::Decode { .. } | Error::ActionFailed { .. } | Error::InvalidArgument(_) | Error::NotSent { .. } => {
                false
            }
        }
    }
}

impl From<ApiError> for Error {
    fn from(e: ApiError) -> Self {
        Error::Api(Box::new(e))
    }
}

/// The fallback code for a status answered without the error envelope.
pub(crate) fn code_for_status(status: u16) -> ErrorCode {
    match status {
        400 => ErrorCode::InvalidInput,
        401 => ErrorCode::Unauthorized,
        403 => ErrorCode::Forbidden,
        409 => ErrorCode::Conflict,
        423 => ErrorCode::Locked,
        429 => ErrorCode::RateLimitExceeded,
        502 => ErrorCode::BadGateway,
        503 => ErrorCode::Unavailable,
        504 => ErrorCode::Timeout,
        500..=599 => ErrorCode::ServerError,
        other => ErrorCode::Unknown(format!("http_{other}")),
    }
}

#[derive(Deserialize)]
struct Envelope {
    error: EnvelopeError,
}

#[derive(Deserialize)]
struct EnvelopeError {
    code: ErrorCode,
    #[serde(default)]
    message: String,
    #[serde(default)]
    details: Option<serde_json::Value>,
}

/// Builds an [`ApiError`] from a non-success answer.
pub(crate) fn parse_api_error(status: u16, body: &[u8], correlation_id: Option<String>, request: String) -> ApiError {
    match envelope(body) {
        Some(env) => {
            let details = env.error.details.and_then(|d| parse_details(&env.error.code, d));
            ApiError { status, code: env.error.code, message: env.error.message, details, correlation_id, request }
        }
        None => {
            let text = String::from_utf8_lossy(body);
            let snippet: String = text.chars().take(200).collect();
            ApiError {
                status,
                code: code_for_status(status),
                message: if snippet.trim().is_empty() {
                    format!("HTTP {status} without a body")
                } else {
                    format!("HTTP {status}: {}", snippet.trim())
                },
                details: None,
                correlation_id,
                request,
            }
        }
    }
}

/// The API's error envelope, `{"error": {"code": ..., ...}}`: objects only. (serde also reads
/// a struct from a JSON array, so `[["not_found"]]` would pass for one, and only a real
/// `not_found` envelope may make a resource count as absent.)
fn envelope(body: &[u8]) -> Option<Envelope> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    if !value.get("error").is_some_and(serde_json::Value::is_object) {
        return None;
    }
    serde_json::from_value(value).ok()
}

fn parse_details(code: &ErrorCode, details: serde_json::Value) -> Option<ErrorDetails> {
    if details.is_null() || details.as_object().is_some_and(|o| o.is_empty()) {
        return None;
    }
    if *code == ErrorCode::InvalidInput {
        #[derive(Deserialize)]
        struct Fields {
            fields: Vec<InvalidField>,
        }
        if let Ok(f) = serde_json::from_value::<Fields>(details.clone()) {
            return Some(ErrorDetails::InvalidInput(f.fields));
        }
    }
    Some(ErrorDetails::Other(details.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_invalid_input_with_fields() {
        let body = br#"{"error":{"code":"invalid_input","message":"invalid input in field 'name'",
            "details":{"fields":[{"name":"name","messages":["is too long"]}]}}}"#;
        let e = parse_api_error(400, body, Some("abc".into()), "POST /servers".into());
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(
            e.details,
            Some(ErrorDetails::InvalidInput(vec![InvalidField {
                name: "name".into(),
                messages: vec!["is too long".into()]
            }]))
        );
        let text = e.to_string();
        assert!(text.contains("field `name`: is too long"), "{text}");
        assert!(text.contains("correlation id abc"), "{text}");
    }

    #[test]
    fn unknown_code_is_kept() {
        let body = br#"{"error":{"code":"brand_new_code","message":"m","details":null}}"#;
        let e = parse_api_error(422, body, None, "GET /x".into());
        assert_eq!(e.code, ErrorCode::Unknown("brand_new_code".into()));
        assert_eq!(e.code.as_str(), "brand_new_code");
    }

    #[test]
    fn non_json_body_gets_status_code() {
        let e = parse_api_error(502, b"<html>bad gateway</html>", None, "GET /x".into());
        assert_eq!(e.code, ErrorCode::BadGateway);
        assert!(e.message.contains("bad gateway"));
        let e = parse_api_error(504, b"", None, "GET /x".into());
        assert_eq!(e.code, ErrorCode::Timeout);
    }

    #[test]
    fn only_a_json_object_is_an_error_envelope() {
        // Found by fuzzing (fuzz/ hcloud_json): serde reads a struct from a JSON array too, so
        // `[["not_found"]]` was an envelope with code `not_found` — and only a real Hetzner
        // `not_found` envelope may make a resource count as absent.
        for body in [&br#"[["not_found"]]"#[..], br#"{"error":["not_found"]}"#, br#"[{"code":"not_found"}]"#] {
            let e = parse_api_error(404, body, None, "GET /servers/1".into());
            assert_eq!(e.code, ErrorCode::Unknown("http_404".into()), "{}", String::from_utf8_lossy(body));
            assert!(!Error::from(e).is_not_found());
        }
        let e = parse_api_error(404, br#"{"error":{"code":"not_found","message":"gone"}}"#, None, "GET /x".into());
        assert_eq!(e.code, ErrorCode::NotFound);
    }

    #[test]
    fn transient_classification() {
        let api = |status, code| {
            Error::from(ApiError {
                status,
                code,
                message: String::new(),
                details: None,
                correlation_id: None,
                request: String::new(),
            })
        };
        assert!(api(429, ErrorCode::RateLimitExceeded).is_transient());
        assert!(api(423, ErrorCode::Locked).is_transient());
        assert!(api(500, ErrorCode::ServerError).is_transient());
        assert!(!api(404, ErrorCode::NotFound).is_transient());
        assert!(!api(400, ErrorCode::InvalidInput).is_transient());
        assert!(api(404, ErrorCode::NotFound).is_not_found());
    }
}
