//! Errors as HTTP responses: the API's JSON error envelope with its status, and the error
//! code attached as a response extension for the request log.

use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, FakeError};

/// The error code of an error response produced by the fake (a response extension).
#[derive(Debug, Clone)]
pub(crate) struct ErrorCode(pub String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        resp.extensions_mut().insert(ErrorCode(self.code));
        resp
    }
}

impl IntoResponse for FakeError {
    fn into_response(self) -> Response {
        match self {
            Self::Api(e) => e.into_response(),
            Self::Io(e) => ApiError::new("server_error", e.to_string()).into_response(),
        }
    }
}
