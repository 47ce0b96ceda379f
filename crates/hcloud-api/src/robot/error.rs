//! Robot webservice errors: the `{"error": {"status", "code", "message"}}` envelope mapped to
//! one enum, plus transport and decoding failures.

use std::fmt;

/// A Robot error code (the `code` of the envelope), with the ones the CCM acts on named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RobotErrorCode {
    /// `SERVER_NOT_FOUND`: no server with that number in the account.
    ServerNotFound,
    /// `RESET_NOT_AVAILABLE`: the server has no reset (e.g. tower models).
    ResetNotAvailable,
    /// `RATE_LIMIT_EXCEEDED`: the account's request budget is used up.
    RateLimitExceeded,
    /// `UNAUTHORIZED`: wrong user or password.
    Unauthorized,
    /// `NOT_FOUND`: no such endpoint.
    NotFound,
    /// `INTERNAL_ERROR`.
    InternalError,
    /// Any other code, as sent.
    Other(String),
}

impl RobotErrorCode {
    /// Parses a code as sent.
    pub fn parse(code: &str) -> RobotErrorCode {
        match code {
            "SERVER_NOT_FOUND" => RobotErrorCode::ServerNotFound,
            "RESET_NOT_AVAILABLE" => RobotErrorCode::ResetNotAvailable,
            "RATE_LIMIT_EXCEEDED" => RobotErrorCode::RateLimitExceeded,
            "UNAUTHORIZED" => RobotErrorCode::Unauthorized,
            "NOT_FOUND" => RobotErrorCode::NotFound,
            "INTERNAL_ERROR" => RobotErrorCode::InternalError,
            other => RobotErrorCode::Other(other.to_owned()),
        }
    }

    /// The code as sent.
    pub fn as_str(&self) -> &str {
        match self {
            RobotErrorCode::ServerNotFound => "SERVER_NOT_FOUND",
            RobotErrorCode::ResetNotAvailable => "RESET_NOT_AVAILABLE",
            RobotErrorCode::RateLimitExceeded => "RATE_LIMIT_EXCEEDED",
            RobotErrorCode::Unauthorized => "UNAUTHORIZED",
            RobotErrorCode::NotFound => "NOT_FOUND",
            RobotErrorCode::InternalError => "INTERNAL_ERROR",
            RobotErrorCode::Other(s) => s,
        }
    }
}

impl fmt::Display for RobotErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a Robot request failed.
#[derive(Debug, thiserror::Error)]
pub enum RobotError {
    /// The webservice answered with its error envelope (or a bare error status).
    #[error("Robot webservice: {request} answered {status} {code}: {message}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The envelope's code (`Other("")` for a status without an envelope).
        code: RobotErrorCode,
        /// The envelope's message.
        message: String,
        /// `METHOD /path`.
        request: String,
    },
    /// No answer: connection refused or reset, timeout, DNS.
    #[error("Robot webservice: {request}: {source}")]
    Transport {
        /// `METHOD /path`.
        request: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// A 2xx answer that is not the expected JSON.
    #[error("Robot webservice: {request}: unexpected answer: {message}")]
    Decode {
        /// `METHOD /path`.
        request: String,
        /// What did not parse.
        message: String,
    },
    /// The client could not be built.
    #[error("Robot webservice client: {0}")]
    InvalidArgument(String),
    /// Not sent: the client's gate refused (e.g. leadership lost). Says nothing about servers.
    #[error("Robot webservice: {0}")]
    NotSent(String),
    /// Not sent: an earlier rate-limit answer opened the circuit until the given time.
    #[error("Robot webservice rate limit exceeded, next try in {retry_in:?} (after: {cause})")]
    CircuitOpen {
        /// How long the circuit stays open.
        retry_in: std::time::Duration,
        /// The error that opened it.
        cause: String,
    },
}

impl RobotError {
    /// The envelope's code, if the webservice answered with one.
    pub fn code(&self) -> Option<&RobotErrorCode> {
        match self {
            RobotError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Only `SERVER_NOT_FOUND` means "no such server".
    pub fn is_server_not_found(&self) -> bool {
        self.code() == Some(&RobotErrorCode::ServerNotFound)
    }

    /// A rate-limit answer: `RATE_LIMIT_EXCEEDED` or any HTTP 403 (the webservice answers
    /// 403 when the budget is used up), or an open circuit.
    pub fn is_rate_limit(&self) -> bool {
        match self {
            RobotError::Api { status, code, .. } => *status == 403 || *code == RobotErrorCode::RateLimitExceeded,
            RobotError::CircuitOpen { .. } => true,
            _ => false,
        }
    }

    /// Says nothing about the server: rate limit, open circuit, 5xx, transport failure.
    pub fn is_transient(&self) -> bool {
        match self {
            RobotError::Api { status, .. } => self.is_rate_limit() || *status >= 500 || *status == 429,
            RobotError::Transport { .. } | RobotError::CircuitOpen { .. } | RobotError::NotSent(_) => true,
            RobotError::Decode { .. } | RobotError::InvalidArgument(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, code: &str) -> RobotError {
        RobotError::Api {
            status,
            code: RobotErrorCode::parse(code),
            message: "m".into(),
            request: "GET /server".into(),
        }
    }

    #[test]
    fn codes_round_trip_and_classify() {
        for c in ["SERVER_NOT_FOUND", "RESET_NOT_AVAILABLE", "RATE_LIMIT_EXCEEDED", "UNAUTHORIZED", "NOT_FOUND", "X"] {
            assert_eq!(RobotErrorCode::parse(c).as_str(), c);
        }
        assert!(api(404, "SERVER_NOT_FOUND").is_server_not_found());
        assert!(!api(404, "NOT_FOUND").is_server_not_found(), "a missing endpoint is not a missing server");
        assert!(api(403, "RATE_LIMIT_EXCEEDED").is_rate_limit());
        assert!(api(403, "FORBIDDEN").is_rate_limit(), "any 403 counts, as upstream");
        assert!(!api(401, "UNAUTHORIZED").is_rate_limit());
        assert!(api(503, "").is_transient() && api(403, "RATE_LIMIT_EXCEEDED").is_transient());
        assert!(!api(401, "UNAUTHORIZED").is_transient() && !api(404, "SERVER_NOT_FOUND").is_transient());
    }
}
