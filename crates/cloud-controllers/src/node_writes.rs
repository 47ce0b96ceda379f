//! The thin I/O layer for Node writes. Every write is a PATCH; writes that replace lists
//! (taints) carry the `resourceVersion` they were computed from, so a concurrent change makes
//! them fail with 409 instead of being overwritten, and the caller re-plans from a fresh read.

use std::collections::BTreeMap;
use std::time::Duration;

use cloud_provider::NodeAddress;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Field manager name for our writes.
pub const FIELD_MANAGER: &str = "hcloud-ccm";

fn params() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..Default::default() }
}

/// Replaces `status.addresses` (JSON merge patch on the `status` subresource replaces the
/// whole list; a strategic merge would merge entries by type).
pub async fn patch_addresses(api: &Api<Node>, name: &str, addresses: &[NodeAddress]) -> Result<Node, kube::Error> {
    let list: Vec<k8s_openapi::api::core::v1::NodeAddress> = addresses.iter().map(Into::into).collect();
    api.patch_status(name, &params(), &Patch::Merge(json!({ "status": { "addresses": list } }))).await
}

/// Sets labels (merge patch; other labels are untouched).
pub async fn patch_labels(api: &Api<Node>, name: &str, labels: &BTreeMap<String, String>) -> Result<Node, kube::Error> {
    api.patch(name, &params(), &Patch::Merge(json!({ "metadata": { "labels": labels } }))).await
}

/// Writes provider ID, labels and the complete taint list in one patch, guarded by the
/// `resourceVersion` the plan was computed from.
pub async fn patch_spec_and_labels(
    api: &Api<Node>,
    name: &str,
    resource_version: &str,
    provider_id: Option<&str>,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
) -> Result<Node, kube::Error> {
    let mut spec = json!({ "taints": taints });
    if let Some(pid) = provider_id {
        spec["providerID"] = json!(pid);
    }
    let mut metadata = json!({ "resourceVersion": resource_version });
    if !labels.is_empty() {
        metadata["labels"] = json!(labels);
    }
    api.patch(name, &params(), &Patch::Merge(json!({ "metadata": metadata, "spec": spec }))).await
}

/// Replaces the taint list, guarded by `resourceVersion`.
pub async fn patch_taints(
    api: &Api<Node>,
    name: &str,
    resource_version: &str,
    taints: &[Taint],
) -> Result<Node, kube::Error> {
    api.patch(
        name,
        &params(),
        &Patch::Merge(json!({ "metadata": { "resourceVersion": resource_version }, "spec": { "taints": taints } })),
    )
    .await
}

/// True if the error is a 409 Conflict.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// True if the error is a 404 Not Found.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Retries `attempt` on 409 Conflict like client-go's `RetryOnConflict`: up to `steps`
/// attempts, sleeping `base` with full jitter (factor 1.0) between them. `attempt` gets the
/// attempt number (0 = first) so it can read fresh state on retries.
pub async fn retry_on_conflict<T, F, Fut>(steps: u32, base: Duration, mut attempt: F) -> Result<T, kube::Error>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut n = 0;
    loop {
        match attempt(n).await {
            Err(e) if is_conflict(&e) && n + 1 < steps => {
                let jitter = base.mul_f64(fastrand::f64());
                tokio::time::sleep(base + jitter).await;
                n += 1;
            }
            other => return other,
        }
    }
}
