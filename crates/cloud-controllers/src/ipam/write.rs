//! What a failed pod CIDR write means for the ranges it carried. Pure.
//!
//! Upstream's range allocator sends the patch up to three times (`cidrUpdateRetries`) and
//! releases the ranges after the last failure unless it was a server timeout
//! (`apierrors.IsServerTimeout`): "we may leak CIDRs here … safer than releasing them in case
//! when we don't know if request went through". This goes further on the same rule: the
//! ranges are kept whenever any attempt may have been stored (a 5xx answer, or no answer at
//! all: a reset after sending, a client timeout), and instead of leaking until a restart, the
//! same write is sent again (it is idempotent: the API server accepts the same pod CIDRs
//! again and refuses different ones).

/// Attempts of one write in one reconcile (upstream `cidrUpdateRetries`).
pub const WRITE_ATTEMPTS: usize = 3;

/// What a failed write attempt says about the API server's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteFailure {
    /// 404: the node is gone; nothing was stored.
    NodeGone,
    /// 422: the node has other pod CIDRs (they cannot change once set); ours were not stored.
    OtherCidrs,
    /// Any other 4xx answer: refused, nothing stored.
    Refused,
    /// A 5xx answer (`ServerTimeout`, `Timeout`, an internal error) or none at all: the
    /// write may have been stored.
    Unknown,
}

/// Classifies one failed attempt.
pub fn classify(e: &kube::Error) -> WriteFailure {
    match e {
        kube::Error::Api(status) => match status.code {
            404 => WriteFailure::NodeGone,
            422 => WriteFailure::OtherCidrs,
            400..=499 => WriteFailure::Refused,
            _ => WriteFailure::Unknown,
        },
        // No answer (connection, TLS, timeout, a body that could not be read): unknown.
        _ => WriteFailure::Unknown,
    }
}

/// Whether another attempt may help after `failure`: only when the outcome is unknown.
pub fn retry(failure: WriteFailure) -> bool {
    failure == WriteFailure::Unknown
}

/// Whether the ranges are released after the attempts failed with `failures` (in order):
/// when the last answer says ours were not stored (the node is gone, or has other pod
/// CIDRs), or when no attempt may have been stored.
pub fn release(failures: &[WriteFailure]) -> bool {
    match failures.last() {
        None => false,
        Some(WriteFailure::NodeGone | WriteFailure::OtherCidrs) => true,
        Some(_) => !failures.contains(&WriteFailure::Unknown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status::failure("test", reason).with_code(code)))
    }

    #[test]
    fn only_answers_that_stored_nothing_release() {
        use WriteFailure::*;
        assert_eq!(classify(&api(404, "NotFound")), NodeGone);
        assert_eq!(classify(&api(422, "Invalid")), OtherCidrs);
        assert_eq!(classify(&api(403, "Forbidden")), Refused);
        assert_eq!(classify(&api(429, "TooManyRequests")), Refused);
        assert_eq!(classify(&api(500, "ServerTimeout")), Unknown, "upstream's IsServerTimeout");
        assert_eq!(classify(&api(504, "Timeout")), Unknown);
        assert_eq!(classify(&api(500, "InternalError")), Unknown);
        assert_eq!(classify(&kube::Error::LinesCodecMaxLineLengthExceeded), Unknown, "no answer read");
        assert!(retry(Unknown) && !retry(Refused) && !retry(NodeGone) && !retry(OtherCidrs));
        assert!(release(&[Refused]));
        assert!(release(&[NodeGone]));
        assert!(release(&[Unknown, OtherCidrs]), "422: the node holds other pod CIDRs, not ours");
        assert!(release(&[Unknown, Unknown, NodeGone]));
        assert!(!release(&[Unknown, Unknown, Unknown]));
        assert!(!release(&[Unknown, Refused]), "the first attempt may have been stored");
        assert!(!release(&[]));
    }
}
