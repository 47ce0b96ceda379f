//! Errors providers return, with upstream's sentinel errors as variants.

use std::borrow::Cow;
use std::time::Duration;

/// A boxed error source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error returned by a provider.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// The instance does not exist (upstream `InstanceNotFound`).
    #[error("instance not found")]
    InstanceNotFound,
    /// The provider does not implement this (upstream `NotImplemented`).
    #[error("unimplemented")]
    NotImplemented,
    /// Another controller handles this load balancer (upstream `ImplementedElsewhere`).
    #[error("implemented by alternate to cloud provider")]
    ImplementedElsewhere,
    /// Try again after a fixed delay instead of backing off (upstream `api.RetryError`).
    #[error("{message}")]
    Retry {
        /// What is pending.
        message: String,
        /// When to retry.
        retry_after: Duration,
    },
    /// The provider refuses the request as given and will refuse it again until its input
    /// changes (the object it is about, or the configuration): e.g. a value the cloud cannot
    /// serve, refused before any request. Retrying the same input is pointless, so
    /// controllers report it (a Warning event) and wait for the object to change instead of
    /// retrying with backoff.
    #[error("{message}")]
    Refused {
        /// CamelCase event reason naming the cause.
        reason: Cow<'static, str>,
        /// Human-readable message naming the field and what is accepted.
        message: String,
    },
    /// Any other failure, with a reason usable as a Kubernetes event reason.
    #[error("{message}")]
    Failed {
        /// CamelCase event reason, e.g. `InstanceLookupFailed`.
        reason: Cow<'static, str>,
        /// Human-readable message naming what failed and what is accepted.
        message: String,
        /// True if the failure says nothing about the instance (API outage, rate limit):
        /// callers must not act destructively on it.
        transient: bool,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
}

impl CloudError {
    /// A failure with an event reason and message.
    pub fn failed(reason: impl Into<Cow<'static, str>>, message: impl Into<String>) -> CloudError {
        CloudError::Failed { reason: reason.into(), message: message.into(), transient: false, source: None }
    }

    /// A transient failure (outage, rate limit, timeout) with an event reason and message.
    pub fn transient(
        reason: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
        source: Option<BoxError>,
    ) -> CloudError {
        CloudError::Failed { reason: reason.into(), message: message.into(), transient: true, source }
    }

    /// A refusal that only a change of the input can lift ([`CloudError::Refused`]).
    pub fn refused(reason: impl Into<Cow<'static, str>>, message: impl Into<String>) -> CloudError {
        CloudError::Refused { reason: reason.into(), message: message.into() }
    }

    /// True if retrying with the same input cannot succeed: wait for the input to change.
    pub fn awaits_input_change(&self) -> bool {
        matches!(self, CloudError::Refused { .. })
    }

    /// The reason to use for a Warning event about this error.
    pub fn reason(&self) -> &str {
        match self {
            CloudError::InstanceNotFound => "InstanceNotFound",
            CloudError::NotImplemented => "NotImplemented",
            CloudError::ImplementedElsewhere => "ImplementedElsewhere",
            CloudError::Retry { .. } => "Pending",
            CloudError::Refused { reason, .. } | CloudError::Failed { reason, .. } => reason,
        }
    }

    /// The fixed retry delay, for [`CloudError::Retry`].
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            CloudError::Retry { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}
