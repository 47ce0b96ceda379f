//! Hetzner Cloud and Robot API errors as provider errors, with an event reason naming the cause
//! and whether a retry may help (a transient error never makes a controller delete anything).

use cloud_provider::CloudError;
use hcloud_api::ErrorCode;
use hcloud_api::robot::{RobotError, RobotErrorCode};

/// Maps an API error to a provider error with an event reason naming the cause.
///
/// Only the API's own `not_found` ever reaches callers as "absent" (the inventory answers
/// `None` for it); everything else here — including a 404 page of a proxy or a wrong
/// `HCLOUD_ENDPOINT` — is an error, so no Node is deleted because of it. A request the
/// client's gate refused (e.g. after losing leadership) is transient: it says nothing about
/// the node.
pub(crate) fn api_error(what: &str, e: hcloud_api::Error) -> CloudError {
    let (reason, transient) = match e.code() {
        _ if e.is_not_sent() => ("HcloudAPIRequestNotSent", true),
        Some(ErrorCode::RateLimitExceeded) => ("RateLimitExceeded", true),
        Some(ErrorCode::Unauthorized) => ("Unauthorized", false),
        Some(ErrorCode::Forbidden) => ("Forbidden", false),
        _ if e.is_transient() => ("HcloudAPIUnavailable", true),
        _ => ("HcloudAPIError", false),
    };
    let hint = match reason {
        "Unauthorized" => "; the Hetzner Cloud token (HCLOUD_TOKEN) was rejected",
        "RateLimitExceeded" => "; the project's API budget is used up, retrying later",
        _ => "",
    };
    CloudError::Failed {
        reason: reason.into(),
        message: format!("{what}: {e}{hint}"),
        transient,
        source: Some(Box::new(e)),
    }
}

/// Maps a Robot error to a provider error; rate limits, open circuits, 5xx and transport
/// failures are transient (nothing is deleted because of them).
pub(crate) fn robot_error(what: &str, e: RobotError) -> CloudError {
    let reason = if e.is_rate_limit() {
        "RobotRateLimitExceeded"
    } else if e.code() == Some(&RobotErrorCode::Unauthorized) {
        "RobotUnauthorized"
    } else if e.is_transient() {
        "RobotAPIUnavailable"
    } else {
        "RobotAPIError"
    };
    let hint = if reason == "RobotUnauthorized" { "; check ROBOT_USER and ROBOT_PASSWORD" } else { "" };
    CloudError::Failed {
        reason: reason.into(),
        message: format!("{what}: {e}{hint}"),
        transient: e.is_transient(),
        source: Some(Box::new(e)),
    }
}
