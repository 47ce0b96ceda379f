//! The capability's errors: each failed operation as a [`CloudError`] whose reason leads its
//! message (the reason is what the service controller's Warning shows).

use cloud_provider::CloudError;
use hcloud_api::models::{LoadBalancer, LoadBalancerId};

use crate::api_error::api_error;
use crate::load_balancers::catalog::CatalogError;
use crate::load_balancers::lb_inventory::LookupError;
use crate::load_balancers::sharing::{Conflict, Group};
use crate::load_balancers::spec::InvalidService;
use crate::load_balancers::tracker::WaitError;

/// The reason of errors caused by the Service's own configuration.
pub(super) const INVALID: &str = "InvalidLoadBalancerConfiguration";

/// `e` with its reason in front of its message. The service controller reports a failed sync
/// as upstream's `SyncLoadBalancerFailed` (or `DeleteLoadBalancerFailed`,
/// `UpdateLoadBalancerFailed`) Warning, whose only text is the error's message: the reason
/// (`LoadBalancerOwnedElsewhere`, `InvalidLoadBalancerConfiguration`, an API error's, ...)
/// goes there so the events can be searched by it. Every error of the capability passes here.
pub(super) fn reason_in_message(e: CloudError) -> CloudError {
    match e {
        CloudError::Failed { reason, message, transient, source } => {
            CloudError::Failed { message: format!("{reason}: {message}"), reason, transient, source }
        }
        CloudError::Refused { reason, message } => {
            CloudError::Refused { message: format!("{reason}: {message}"), reason }
        }
        other => other,
    }
}

pub(super) fn invalid(e: InvalidService) -> CloudError {
    CloudError::failed(INVALID, e.to_string())
}

pub(super) fn catalog_error(service: &str, e: CatalogError) -> CloudError {
    match e {
        CatalogError::Invalid(inv) => CloudError::failed(
            INVALID,
            format!(
                "Service {service} has an invalid load balancer configuration, so its Load Balancer is left unchanged: {inv}"
            ),
        ),
        CatalogError::Conflict(m) => {
            CloudError::failed("ManagedCertificateConflict", format!("Service {service}: {m}"))
        }
        CatalogError::Api { what, source } => api_error(&format!("Service {service}: {what}"), source),
    }
}

pub(super) fn wait_error(id: LoadBalancerId) -> impl FnOnce(WaitError) -> CloudError {
    move |e| match e {
        WaitError::Failed(f) => CloudError::failed("LoadBalancerActionFailed", f.0),
        WaitError::Poll(e) => api_error(&format!("Load Balancer {id}: waiting for its actions"), e),
        // Says nothing about the Load Balancer itself: transient, retried with backoff.
        e @ WaitError::Timeout { .. } => CloudError::transient("LoadBalancerActionTimeout", e.to_string(), None),
    }
}

pub(super) fn lookup_error(service: &str, e: LookupError) -> CloudError {
    match e {
        e @ LookupError::NotUnique { .. } => {
            CloudError::failed("NonUniqueLoadBalancer", format!("Service {service}: {e}"))
        }
        LookupError::Api(e) => api_error(&format!("Service {service}: looking up its Load Balancer"), e),
    }
}

/// The error of a member whose sync found conflicts: the first one's reason, every conflict in
/// the message.
pub(super) fn conflict_error(service: &str, lb: &LoadBalancer, group: &Group, conflicts: &[Conflict]) -> CloudError {
    let reason = conflicts.first().map_or("SharedLoadBalancerConflict", Conflict::reason);
    let list: Vec<String> = conflicts.iter().map(ToString::to_string).collect();
    CloudError::failed(
        reason,
        format!(
            "Service {service} cannot use the Load Balancer {} ({}) of its {group} as it asks, nothing of it was \
             changed: {}",
            lb.name,
            lb.id,
            list.join("; ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_reason_leads_the_message_of_failures_and_refusals_only() {
        let failed = reason_in_message(CloudError::transient("HcloudAPIUnavailable", "Service a/b: boom", None));
        assert_eq!(failed.to_string(), "HcloudAPIUnavailable: Service a/b: boom");
        assert!(matches!(failed, CloudError::Failed { transient: true, .. }), "still transient");
        assert_eq!(failed.reason(), "HcloudAPIUnavailable");
        let refused = reason_in_message(CloudError::refused("Nope", "no"));
        assert_eq!((refused.to_string(), refused.awaits_input_change()), ("Nope: no".to_owned(), true));
        let retry = CloudError::Retry { message: "soon".into(), retry_after: Duration::from_secs(1) };
        assert_eq!(reason_in_message(retry).to_string(), "soon", "a retry has no reason of its own");
        assert!(matches!(reason_in_message(CloudError::ImplementedElsewhere), CloudError::ImplementedElsewhere));
    }
}
