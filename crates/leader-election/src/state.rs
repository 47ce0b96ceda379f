//! Published state, loss reasons and errors.

use std::time::Duration;

use crate::decide::Loss;

/// What this replica is doing, published on [`crate::LeaderElector::state`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderState {
    /// Not leading. `holder` is the leader we last observed (`None`: nobody, no Lease yet, or
    /// not read yet).
    Standby {
        /// The current holder as last observed.
        holder: Option<String>,
    },
    /// We hold the lease.
    Leading,
    /// We held the lease and lost it; the process should stop acting (fail-stop).
    Lost {
        /// Why.
        reason: LostReason,
    },
    /// We gave the lease up on purpose.
    Released,
    /// We stopped renewing without releasing (the [`crate::Leadership`] was dropped); other
    /// replicas take over once the lease expires.
    Stopped,
}

/// Why leadership was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// No renewal succeeded within `renew_deadline` of the last successful one.
    RenewDeadlineExceeded {
        /// Time since the send time of the last successful renewal.
        since_renewal: Duration,
        /// The last failure, if a renewal failed (rather than not being attempted in time).
        last_error: Option<String>,
    },
    /// The Lease names another holder (or none): someone else took it over.
    HolderChanged {
        /// The holder now, if any.
        holder: Option<String>,
    },
}

impl LostReason {
    pub(crate) fn from_loss(loss: Loss, last_error: Option<String>) -> LostReason {
        match loss {
            Loss::Deadline { since_renewal } => LostReason::RenewDeadlineExceeded { since_renewal, last_error },
            Loss::HolderChanged { holder } => LostReason::HolderChanged { holder },
        }
    }
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LostReason::RenewDeadlineExceeded { since_renewal, last_error: Some(error) } => {
                write!(f, "no renewal succeeded for {since_renewal:?} (renew deadline passed); last error: {error}")
            }
            LostReason::RenewDeadlineExceeded { since_renewal, last_error: None } => {
                write!(f, "no renewal succeeded for {since_renewal:?} (renew deadline passed)")
            }
            LostReason::HolderChanged { holder: Some(holder) } => write!(f, "the lease is now held by {holder:?}"),
            LostReason::HolderChanged { holder: None } => write!(f, "the lease no longer names us as holder"),
        }
    }
}

/// Leadership was lost; see [`LostReason`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("leadership of lease {lease} lost: {reason}")]
pub struct Lost {
    /// The Lease, `namespace/name`.
    pub lease: String,
    /// Why.
    pub reason: LostReason,
}

/// A failed Lease operation (currently only from [`crate::Leadership::release`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server answered with an error or could not be reached.
    #[error("{operation} lease {lease}: {source}")]
    Api {
        /// What was being done (`"releasing"`, ...).
        operation: &'static str,
        /// The Lease, `namespace/name`.
        lease: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The API server did not answer in time.
    #[error("{operation} lease {lease}: no answer within {timeout:?}")]
    Timeout {
        /// What was being done.
        operation: &'static str,
        /// The Lease, `namespace/name`.
        lease: String,
        /// How long the unanswered request was given (what was left of `renew_deadline`), or the
        /// whole `renew_deadline` when it ran out between attempts.
        timeout: Duration,
    },
    /// The write kept conflicting with other writers.
    #[error("{operation} lease {lease}: still conflicting after {attempts} attempts")]
    Conflicts {
        /// What was being done.
        operation: &'static str,
        /// The Lease, `namespace/name`.
        lease: String,
        /// How many writes were tried.
        attempts: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_messages_say_why() {
        let lost = Lost {
            lease: "kube-system/ccm".to_owned(),
            reason: LostReason::HolderChanged { holder: Some("b_1".to_owned()) },
        };
        assert_eq!(lost.to_string(), "leadership of lease kube-system/ccm lost: the lease is now held by \"b_1\"");
        let reason = LostReason::from_loss(
            Loss::Deadline { since_renewal: Duration::from_secs(10) },
            Some("PUT timed out".to_owned()),
        );
        assert_eq!(
            reason.to_string(),
            "no renewal succeeded for 10s (renew deadline passed); last error: PUT timed out"
        );
        assert_eq!(LostReason::HolderChanged { holder: None }.to_string(), "the lease no longer names us as holder");
    }
}
