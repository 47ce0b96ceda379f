//! What the lifecycle controller does with one node: provider answers in, decision out.
//! No Kubernetes API calls happen here.

use cloud_provider::helpers::taints::taint_exists;
use cloud_provider::helpers::taints::{add_or_update_taint, remove_taint};
use cloud_provider::well_known::TAINT_NODE_SHUTDOWN;
use cloud_provider::{Cloud, CloudError, Instances, InstancesV2};
use k8s_openapi::api::core::v1::{Node, Taint};
use serde_json::{Value, json};
use tracing::error;

use super::metrics::{InstanceOp, LifecycleMetrics, call_result, exists_result, metadata_result};
use crate::node::metadata::{MetadataError, get_provider_id};

/// The decision for one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleDecision {
    /// Leave the node as it is.
    Keep,
    /// The node is Ready and carries the shutdown taint: remove it.
    RemoveShutdownTaint,
    /// The node is not Ready and its instance is gone: delete the Node.
    Delete,
    /// The node is not Ready and its instance is shut down: taint it.
    AddShutdownTaint,
}

/// The API write a decision comes down to.
#[derive(Debug, Clone, PartialEq)]
pub enum LifecycleWrite {
    /// A merge patch of the node (the complete taint list, guarded by `resourceVersion`).
    Patch(Value),
    /// Delete the node, on condition that it is still the object with this UID.
    Delete {
        /// The UID precondition.
        uid: Option<String>,
    },
}

impl LifecycleDecision {
    /// The write this decision makes to `node` as it is now; `None` if nothing changes.
    /// Taint changes replace the whole list and carry the `resourceVersion` they were computed
    /// from, so a concurrent change fails with 409 and is re-planned from a fresh read.
    pub fn write(&self, node: &Node) -> Option<LifecycleWrite> {
        let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
        let (new, changed) = match self {
            LifecycleDecision::Keep => return None,
            LifecycleDecision::Delete => return Some(LifecycleWrite::Delete { uid: node.metadata.uid.clone() }),
            LifecycleDecision::RemoveShutdownTaint => remove_taint(taints, &shutdown_taint()),
            LifecycleDecision::AddShutdownTaint => add_or_update_taint(taints, &shutdown_taint()),
        };
        if !changed {
            return None;
        }
        let mut patch = json!({ "spec": { "taints": new } });
        if let Some(rv) = node.metadata.resource_version.as_deref().filter(|rv| !rv.is_empty()) {
            patch["metadata"] = json!({ "resourceVersion": rv });
        }
        Some(LifecycleWrite::Patch(patch))
    }
}

/// `node.cloudprovider.kubernetes.io/shutdown:NoSchedule` (no value, no timeAdded).
pub fn shutdown_taint() -> Taint {
    Taint { key: TAINT_NODE_SHUTDOWN.to_owned(), effect: "NoSchedule".to_owned(), value: None, time_added: None }
}

/// The status of the node's Ready condition (`Unknown` if absent).
pub fn ready_status(node: &Node) -> &str {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str())
        .unwrap_or("Unknown")
}

/// True if the Ready condition is `True`.
pub fn is_ready(node: &Node) -> bool {
    ready_status(node) == "True"
}

fn has_shutdown_taint(node: &Node) -> bool {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
    taint_exists(taints, &shutdown_taint())
}

/// Upstream `MonitorNodes` for one node. Ready nodes are never deleted or tainted, whatever
/// the provider says. For the others, an error from the existence check keeps the node; an
/// error from the shutdown check is logged and leaves it untainted. Every provider call is
/// counted in `metrics`.
pub async fn decide<C: Cloud>(
    cloud: &C,
    node: &Node,
    metrics: &LifecycleMetrics,
) -> Result<LifecycleDecision, MetadataError> {
    if is_ready(node) {
        return Ok(if has_shutdown_taint(node) {
            LifecycleDecision::RemoveShutdownTaint
        } else {
            LifecycleDecision::Keep
        });
    }
    if !ensure_node_exists(cloud, node, metrics).await? {
        return Ok(LifecycleDecision::Delete);
    }
    match shutdown_in_cloud(cloud, node, metrics).await {
        Ok(true) => {
            let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
            let identical = taints.iter().any(|t| *t == shutdown_taint());
            Ok(if identical { LifecycleDecision::Keep } else { LifecycleDecision::AddShutdownTaint })
        }
        Ok(false) => Ok(LifecycleDecision::Keep),
        Err(e) => {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            error!(node = name, error = %e, "error checking if node is shutdown");
            Ok(LifecycleDecision::Keep)
        }
    }
}

/// Upstream `ensureNodeExistsByProviderID`.
pub async fn ensure_node_exists<C: Cloud>(
    cloud: &C,
    node: &Node,
    metrics: &LifecycleMetrics,
) -> Result<bool, MetadataError> {
    if let Some(v2) = cloud.instances_v2() {
        let exists = v2.instance_exists(node).await;
        metrics.call(InstanceOp::Exists, exists_result(&exists));
        return Ok(exists?);
    }
    let instances = cloud.instances().ok_or(MetadataError::NoInstances)?;
    let pid = match provider_id(cloud, node, metrics).await {
        Ok(pid) => pid,
        Err(MetadataError::Cloud(CloudError::InstanceNotFound)) => return Ok(false),
        Err(e) => return Err(e),
    };
    let exists = instances.instance_exists_by_provider_id(&pid).await;
    metrics.call(InstanceOp::Exists, exists_result(&exists));
    Ok(exists?)
}

/// Upstream `getProviderID`; a lookup (the node has none) is counted as `instance_metadata`.
async fn provider_id<C: Cloud>(cloud: &C, node: &Node, metrics: &LifecycleMetrics) -> Result<String, MetadataError> {
    let own = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default();
    if !own.is_empty() {
        return Ok(own.to_owned());
    }
    let looked_up = get_provider_id(cloud, node).await;
    metrics.call(InstanceOp::Metadata, metadata_result(&looked_up));
    looked_up
}

/// Upstream `shutdownInCloudProvider`.
pub async fn shutdown_in_cloud<C: Cloud>(
    cloud: &C,
    node: &Node,
    metrics: &LifecycleMetrics,
) -> Result<bool, MetadataError> {
    if let Some(v2) = cloud.instances_v2() {
        let shutdown = v2.instance_shutdown(node).await;
        metrics.call(InstanceOp::Shutdown, call_result(shutdown.as_ref().err()));
        return Ok(shutdown?);
    }
    let instances = cloud.instances().ok_or(MetadataError::NoInstances)?;
    let pid = match provider_id(cloud, node, metrics).await {
        Ok(pid) => pid,
        Err(MetadataError::Cloud(CloudError::InstanceNotFound)) => return Ok(false),
        Err(e) => return Err(e),
    };
    let shutdown = instances.instance_shutdown_by_provider_id(&pid).await;
    metrics.call(InstanceOp::Shutdown, call_result(shutdown.as_ref().err()));
    match shutdown {
        Err(CloudError::NotImplemented) => Ok(false),
        other => Ok(other?),
    }
}
