//! The service controller's writes, planned as data: what to do with a Service (ensure or
//! delete its load balancer) and the exact JSON merge patches sent to its `status`
//! subresource (upstream sends every Service write there too, so the controller needs no
//! write access to Services themselves).
//!
//! - The finalizer patch replaces `metadata.finalizers` as a whole, so it carries the
//!   `resourceVersion` it was computed from: a concurrent change (another controller's
//!   finalizer) fails with 409 and is re-planned from a fresh read instead of being
//!   overwritten.
//! - Every patch carries `metadata.uid`: a write planned for a Service is refused by the API
//!   server if that Service was deleted and re-created under the same name meanwhile.
//! - The status patch replaces `status.loadBalancer.ingress` and is sent only when the
//!   ingress differs semantically (upstream `LoadBalancerStatusEqual`). An API server may
//!   store something other than what was sent: one that predates a field drops it
//!   (`ipMode` before 1.29), one with the `LoadBalancerIPMode` feature defaults `ipMode: VIP`
//!   for IPs sent without one. Upstream then patches again on every sync; here the
//!   controller remembers what the server made of its last patch ([`StatusEcho`]) and does
//!   not resend a status the server has already normalised.

use cloud_provider::helpers::service::{has_lb_finalizer, ingress_equal};
use cloud_provider::well_known::FINALIZER_LOAD_BALANCER_CLEANUP;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Service};
use serde_json::{Map, Value, json};

use super::filter::{needs_cleanup, wants_load_balancer};

/// What a sync does with the Service's load balancer (upstream `loadBalancerOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Delete the load balancer (if any), then remove the finalizer and clear the status.
    Delete,
    /// Add the finalizer, then create or update the load balancer and record its status.
    Ensure,
}

/// Upstream `syncLoadBalancerIfNeeded`'s choice: delete if the Service no longer wants a load
/// balancer (of this controller's class) or needs cleanup, else ensure.
pub fn operation(service: &Service, class: Option<&str>) -> Operation {
    if !wants_load_balancer(service, class) || needs_cleanup(service) { Operation::Delete } else { Operation::Ensure }
}

/// `metadata` preconditions of every patch: the UID, plus the `resourceVersion` when the patch
/// replaces a list other writers share.
fn metadata_guard(service: &Service, with_resource_version: bool) -> Map<String, Value> {
    let mut meta = Map::new();
    if let Some(uid) = service.metadata.uid.as_deref().filter(|u| !u.is_empty()) {
        meta.insert("uid".to_owned(), json!(uid));
    }
    if with_resource_version && let Some(rv) = service.metadata.resource_version.as_deref().filter(|r| !r.is_empty()) {
        meta.insert("resourceVersion".to_owned(), json!(rv));
    }
    meta
}

fn finalizers_patch(service: &Service, finalizers: Vec<String>) -> Value {
    let mut meta = metadata_guard(service, true);
    let value = if finalizers.is_empty() { Value::Null } else { json!(finalizers) };
    meta.insert("finalizers".to_owned(), value);
    json!({ "metadata": meta })
}

/// The patch adding the cleanup finalizer (appended after any others); `None` if present
/// (upstream `addFinalizer`).
pub fn add_finalizer_patch(service: &Service) -> Option<Value> {
    if has_lb_finalizer(service) {
        return None;
    }
    let mut finalizers = service.metadata.finalizers.clone().unwrap_or_default();
    finalizers.push(FINALIZER_LOAD_BALANCER_CLEANUP.to_owned());
    Some(finalizers_patch(service, finalizers))
}

/// The patch removing the cleanup finalizer (others kept in order); `None` if absent
/// (upstream `removeFinalizer`).
pub fn remove_finalizer_patch(service: &Service) -> Option<Value> {
    if !has_lb_finalizer(service) {
        return None;
    }
    let finalizers = service
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != FINALIZER_LOAD_BALANCER_CLEANUP)
        .cloned()
        .collect();
    Some(finalizers_patch(service, finalizers))
}

/// A provider's status as `status.loadBalancer` (ingress points in the provider's order).
pub fn to_kube_status(status: &cloud_provider::LoadBalancerStatus) -> LoadBalancerStatus {
    let ingress = status
        .ingress
        .iter()
        .map(|i| LoadBalancerIngress {
            ip: i.ip.clone(),
            hostname: i.hostname.clone(),
            ip_mode: i.ip_mode.map(|m| m.as_str().to_owned()),
            ports: None,
        })
        .collect();
    LoadBalancerStatus { ingress: Some(ingress) }
}

/// What the API server stored the last time the controller patched a Service's status.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusEcho {
    /// The Service incarnation patched.
    pub uid: Option<String>,
    /// The ingress sent.
    pub sent: Vec<LoadBalancerIngress>,
    /// The ingress the server returned after the patch.
    pub stored: Vec<LoadBalancerIngress>,
}

impl StatusEcho {
    /// The echo of a patch of `service` that sent `sent` and got back `stored`.
    pub fn new(service: &Service, sent: &LoadBalancerStatus, stored: &Service) -> Self {
        StatusEcho {
            uid: service.metadata.uid.clone(),
            sent: ingress(sent).to_vec(),
            stored: observed(stored).to_vec(),
        }
    }
}

fn ingress(status: &LoadBalancerStatus) -> &[LoadBalancerIngress] {
    status.ingress.as_deref().unwrap_or_default()
}

fn observed(service: &Service) -> &[LoadBalancerIngress] {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_deref())
        .unwrap_or_default()
}

/// The patch setting `status.loadBalancer` to `desired`, or `None` if the Service's ingress is
/// already semantically equal (upstream `patchStatus`), or is exactly what the server made of
/// the same desired status last time (`echo`).
pub fn status_patch(service: &Service, desired: &LoadBalancerStatus, echo: Option<&StatusEcho>) -> Option<Value> {
    let (current, wanted) = (observed(service), ingress(desired));
    if ingress_equal(current, wanted) {
        return None;
    }
    if let Some(echo) = echo
        && echo.uid == service.metadata.uid
        && ingress_equal(&echo.sent, wanted)
        && ingress_equal(&echo.stored, current)
    {
        return None;
    }
    let ingress = if wanted.is_empty() { Value::Null } else { json!(wanted) };
    Some(json!({
        "metadata": metadata_guard(service, false),
        "status": { "loadBalancer": { "ingress": ingress } },
    }))
}
