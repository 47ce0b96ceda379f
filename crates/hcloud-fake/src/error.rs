//! Errors: the Hetzner error envelope ([`ApiError`]) and the library error ([`FakeError`]).
//! How they become HTTP responses is the HTTP layer's business (`http/respond.rs`).
//!
//! # Status codes
//!
//! Every error code maps to one HTTP status through [`status_for_code`]:
//!
//! | status | codes |
//! |---|---|
//! | 400 | `invalid_input`, `json_error` |
//! | 401 | `unauthorized` |
//! | 403 | `forbidden`, `protected`, `resource_limit_exceeded`, `resource_unavailable`, `token_readonly` |
//! | 404 | `not_found` |
//! | 405 | `method_not_allowed` |
//! | 409 | `conflict`, `uniqueness_error`, `load_balancer_already_attached`, `source_port_already_used`, `target_already_defined` |
//! | 422 | every other operation-specific code: `server_already_attached`, `ip_not_available`, `no_subnet_available`, `load_balancer_not_attached_to_network`, `server_not_attached_to_network`, `invalid_load_balancer_type`, `missing_ipv4`, `load_balancer_public_interface_disabled`, `cloud_resource_ip_not_allowed`, `resource_in_use`, ... |
//! | 410 | `deprecated_api_endpoint` (a removed endpoint, e.g. `/datacenters`) |
//! | 423 | `locked` |
//! | 429 | `rate_limit_exceeded` |
//! | 500 | `server_error` |
//! | 502 | `bad_gateway` |
//! | 503 | `service_error`, `maintenance`, `unavailable` |
//! | 504 | `timeout` |
//!
//! Choice for the operation-specific codes: where the OpenAPI description states a status
//! explicitly we follow it (it lists `422` for `server_already_attached`, `ip_not_available`
//! and `no_subnet_available` on `POST /servers/{id}/actions/attach_to_network`). Where it leaves
//! the status blank (the Load Balancer tables) conflicts of state (`load_balancer_already_attached`,
//! `source_port_already_used`, `target_already_defined`) answer `409`, and everything else `422`.
//! Clients should branch on `error.code`, never on the status alone.

use http::StatusCode;
use serde_json::{Value, json};

/// An error answered in Hetzner's envelope `{"error":{"code","message","details"}}`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} ({status}): {message}")]
pub struct ApiError {
    /// HTTP status of the response.
    pub status: StatusCode,
    /// Machine-readable error code, e.g. `invalid_input`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// `details` object (`{}` unless the code defines details).
    pub details: Value,
}

/// The HTTP status the fake uses for an error code (see the module docs for the table).
pub fn status_for_code(code: &str) -> StatusCode {
    match code {
        "invalid_input" | "json_error" => StatusCode::BAD_REQUEST,
        "unauthorized" => StatusCode::UNAUTHORIZED,
        "forbidden" | "protected" | "resource_limit_exceeded" | "resource_unavailable" | "token_readonly" => {
            StatusCode::FORBIDDEN
        }
        "not_found" => StatusCode::NOT_FOUND,
        "method_not_allowed" => StatusCode::METHOD_NOT_ALLOWED,
        "conflict"
        | "uniqueness_error"
        | "load_balancer_already_attached"
        | "source_port_already_used"
        | "target_already_defined" => StatusCode::CONFLICT,
        "deprecated_api_endpoint" => StatusCode::GONE,
        "locked" => StatusCode::LOCKED,
        "rate_limit_exceeded" => StatusCode::TOO_MANY_REQUESTS,
        "server_error" => StatusCode::INTERNAL_SERVER_ERROR,
        "bad_gateway" => StatusCode::BAD_GATEWAY,
        "service_error" | "maintenance" | "unavailable" => StatusCode::SERVICE_UNAVAILABLE,
        "timeout" => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

impl ApiError {
    /// An error with the status taken from [`status_for_code`] and empty details.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self { status: status_for_code(code), code: code.to_owned(), message: message.into(), details: json!({}) }
    }

    /// An error with an explicit status (used by fault injection).
    pub fn with_status(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self { status, code: code.to_owned(), message: message.into(), details: json!({}) }
    }

    /// `invalid_input` naming one field: `details.fields = [{name, messages:[message]}]`.
    pub fn invalid_input(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_input".to_owned(),
            message: format!("invalid input in field '{field}'"),
            details: json!({"fields": [{"name": field, "messages": [message]}]}),
        }
    }

    /// `json_error`: the body is not valid JSON.
    pub fn json_error(message: impl Into<String>) -> Self {
        Self::new("json_error", message)
    }

    /// `not_found` for a resource kind (e.g. `server`) and id.
    pub fn not_found(kind: &str, id: u64) -> Self {
        Self::new("not_found", format!("{kind} with ID '{id}' not found"))
    }

    /// `uniqueness_error` on a field: `details.fields = [{name}]`.
    pub fn uniqueness(field: &str) -> Self {
        let mut err = Self::new("uniqueness_error", format!("{field} is already used"));
        err.details = json!({"fields": [{"name": field}]});
        err
    }

    /// `locked`: another action is running on the resource (or it was locked by a test).
    pub fn locked(kind: &str, id: u64) -> Self {
        Self::new("locked", format!("{kind} {id} is locked by a running action"))
    }

    /// `protected`: delete protection is enabled.
    pub fn protected(kind: &str, id: u64) -> Self {
        Self::new("protected", format!("{kind} {id} is protected against deletion"))
    }

    /// `resource_limit_exceeded`.
    pub fn limit(message: impl Into<String>) -> Self {
        Self::new("resource_limit_exceeded", message)
    }

    /// `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new("unauthorized", message)
    }

    /// The JSON envelope of this error.
    pub fn body(&self) -> Value {
        json!({"error": {"code": self.code, "message": self.message, "details": self.details}})
    }
}

/// Errors of the library API ([`crate::FakeHandle`], [`crate::FakeServer`]).
#[derive(Debug, thiserror::Error)]
pub enum FakeError {
    /// The operation was rejected the same way the HTTP API would reject it.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// Binding or serving the listener failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_table() {
        assert_eq!(status_for_code("invalid_input"), StatusCode::BAD_REQUEST);
        assert_eq!(status_for_code("protected"), StatusCode::FORBIDDEN);
        assert_eq!(status_for_code("source_port_already_used"), StatusCode::CONFLICT);
        assert_eq!(status_for_code("server_already_attached"), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(status_for_code("locked"), StatusCode::LOCKED);
        assert_eq!(status_for_code("rate_limit_exceeded"), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(status_for_code("timeout"), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(status_for_code("bad_gateway"), StatusCode::BAD_GATEWAY);
        assert_eq!(status_for_code("deprecated_api_endpoint"), StatusCode::GONE);
    }

    #[test]
    fn invalid_input_names_field() {
        let e = ApiError::invalid_input("label_selector", "bad");
        assert_eq!(e.body()["error"]["details"]["fields"][0]["name"], "label_selector");
    }
}
