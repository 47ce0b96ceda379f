//! Pure decisions of the cloud-node controller: node + provider answer in, writes out.
//!
//! A plan's writes are JSON merge patches, built here and sent unchanged by the I/O layer, so
//! tests check exactly what is sent (and the node it produces, by applying the patch the way
//! the API server does) without any API server.

use std::collections::BTreeMap;

use cloud_provider::helpers::address::{NodeIpError, get_node_addresses_from_node_ip, node_addresses_differ};
use cloud_provider::helpers::taints::taint_key_exists;
use cloud_provider::well_known::{
    ANNOTATION_PROVIDED_NODE_IP, LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_REGION, LABEL_REGION_BETA,
    LABEL_ZONE, LABEL_ZONE_BETA, TAINT_EXTERNAL_CLOUD_PROVIDER,
};
use cloud_provider::{AddressType, InstanceMetadata, NodeAddress};
use k8s_openapi::api::core::v1::{Node, Taint};
use serde_json::{Value, json};
use tracing::warn;

/// Everything initialization writes to a node. Applied as: addresses (status subresource)
/// first, then provider ID, labels and the taint removal in one write — so a node becomes
/// schedulable only once it is fully initialized.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InitPlan {
    /// `spec.providerID` to set (only when the node has none; never overwritten).
    pub provider_id: Option<String>,
    /// Labels to set (type/zone/region overwrite; additional labels never overwrite).
    pub labels: BTreeMap<String, String>,
    /// The node's taints without the uninitialized taint.
    pub taints: Vec<Taint>,
    /// `status.addresses` to write, if they change.
    pub addresses: Option<Vec<NodeAddress>>,
}

/// The provided node IP annotation does not fit the cloud's addresses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("provided node ip for node {node:?} is not valid: {source}")]
pub struct InvalidProvidedNodeIp {
    /// Name of the Node whose provided-node-ip annotation is not valid.
    pub node: String,
    /// Why.
    #[source]
    pub source: NodeIpError,
}

/// True if the node still carries the uninitialized taint (any value or effect).
pub fn is_uninitialized(node: &Node) -> bool {
    taint_key_exists(taints(node), TAINT_EXTERNAL_CLOUD_PROVIDER)
}

fn taints(node: &Node) -> &[Taint] {
    node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default()
}

fn labels(node: &Node) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    node.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// The node's current `status.addresses`.
pub fn node_status_addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| a.iter().map(NodeAddress::from).collect())
        .unwrap_or_default()
}

/// True if the label key is in a Kubernetes namespace (`(^|\.)(kubernetes|k8s)\.io/`), which
/// providers must not set through additional labels.
pub fn is_kubernetes_namespace(key: &str) -> bool {
    ["kubernetes.io/", "k8s.io/"]
        .iter()
        .any(|needle| key.match_indices(needle).any(|(i, _)| i == 0 || key.as_bytes()[i - 1] == b'.'))
}

/// Plans the initialization of a tainted node from the provider's metadata (upstream
/// `getNodeModifiersFromCloudProvider` + taint removal + the address update).
pub fn plan_initialization(node: &Node, metadata: &InstanceMetadata) -> Result<InitPlan, InvalidProvidedNodeIp> {
    let name = node.metadata.name.clone().unwrap_or_default();
    // The provided node IP must fit the raw cloud addresses before the taint goes.
    if let Some(ip) = provided_node_ip(node) {
        get_node_addresses_from_node_ip(ip, &metadata.node_addresses)
            .map_err(|source| InvalidProvidedNodeIp { node: name.clone(), source })?;
    }

    let node_pid = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default();
    let provider_id = (node_pid.is_empty() && !metadata.provider_id.is_empty()).then(|| metadata.provider_id.clone());

    let mut planned = BTreeMap::new();
    if !metadata.instance_type.is_empty() {
        planned.insert(LABEL_INSTANCE_TYPE_BETA.to_owned(), metadata.instance_type.clone());
        planned.insert(LABEL_INSTANCE_TYPE.to_owned(), metadata.instance_type.clone());
    }
    if !metadata.zone.is_empty() {
        planned.insert(LABEL_ZONE_BETA.to_owned(), metadata.zone.clone());
        planned.insert(LABEL_ZONE.to_owned(), metadata.zone.clone());
    }
    if !metadata.region.is_empty() {
        planned.insert(LABEL_REGION_BETA.to_owned(), metadata.region.clone());
        planned.insert(LABEL_REGION.to_owned(), metadata.region.clone());
    }
    let existing = labels(node);
    for (k, v) in &metadata.additional_labels {
        if is_kubernetes_namespace(k) {
            warn!(node = %name, label = %k, "discarding node label with kubernetes namespace");
            continue;
        }
        let current = existing.get(k).or_else(|| planned.get(k));
        if let Some(current) = current {
            if current != v {
                warn!(node = %name, label = %k, "discarding node label that is already present");
            }
            continue;
        }
        planned.insert(k.clone(), v.clone());
    }
    // Only labels whose value changes need writing.
    planned.retain(|k, v| existing.get(k) != Some(v));

    let taints = taints(node).iter().filter(|t| t.key != TAINT_EXTERNAL_CLOUD_PROVIDER).cloned().collect();
    let addresses = plan_addresses(node, &metadata.node_addresses).unwrap_or(None);
    Ok(InitPlan { provider_id, labels: planned, taints, addresses })
}

fn provided_node_ip(node: &Node) -> Option<&str> {
    node.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION_PROVIDED_NODE_IP)).map(String::as_str)
}

/// Upstream `updateNodeAddress` without the taint check: the `status.addresses` the node
/// should have given the cloud's addresses, or `None` if nothing is to be written (no cloud
/// addresses, or no change). The kubelet's hostname is kept when the cloud gives none; with
/// a provided node IP, its addresses lead and others of the same type are dropped.
pub fn plan_addresses(node: &Node, cloud: &[NodeAddress]) -> Result<Option<Vec<NodeAddress>>, NodeIpError> {
    if cloud.is_empty() {
        return Ok(None);
    }
    let current = node_status_addresses(node);
    let mut new = cloud.to_vec();
    if !new.iter().any(|a| a.kind == AddressType::Hostname) {
        new.extend(current.iter().filter(|a| a.kind == AddressType::Hostname).cloned());
    }
    if let Some(ip) = provided_node_ip(node) {
        new = get_node_addresses_from_node_ip(ip, &new)?;
    }
    Ok(node_addresses_differ(&current, &new).then_some(new))
}

/// Upstream `reconcileNodeLabels`: for initialized nodes, copy each deprecated (beta) label's
/// value to its GA label when the GA label is missing or differs. Returns the labels to set.
pub fn plan_label_reconcile(node: &Node) -> BTreeMap<String, String> {
    let existing = labels(node);
    [(LABEL_ZONE_BETA, LABEL_ZONE), (LABEL_REGION_BETA, LABEL_REGION), (LABEL_INSTANCE_TYPE_BETA, LABEL_INSTANCE_TYPE)]
        .into_iter()
        .filter_map(|(primary, secondary)| {
            let value = existing.get(primary)?;
            (existing.get(secondary) != Some(value)).then(|| (secondary.to_owned(), value.clone()))
        })
        .collect()
}

impl InitPlan {
    /// The write to the `status` subresource, if the addresses change: a merge patch that
    /// replaces `status.addresses` as a whole (a strategic merge would merge entries by type).
    pub fn status_patch(&self) -> Option<Value> {
        self.addresses.as_deref().map(addresses_patch)
    }

    /// The write that completes initialization: provider ID, labels and the complete taint list
    /// (without the uninitialized taint) in one merge patch, guarded by the `resourceVersion`
    /// the plan was computed from, so a concurrent change fails with 409 instead of being
    /// overwritten.
    pub fn spec_patch(&self, resource_version: Option<&str>) -> Value {
        let mut spec = json!({ "taints": self.taints });
        if let Some(pid) = &self.provider_id {
            spec["providerID"] = json!(pid);
        }
        let mut metadata = json!({});
        if let Some(rv) = resource_version.filter(|rv| !rv.is_empty()) {
            metadata["resourceVersion"] = json!(rv);
        }
        if !self.labels.is_empty() {
            metadata["labels"] = json!(self.labels);
        }
        json!({ "metadata": metadata, "spec": spec })
    }
}

/// A merge patch (for the `status` subresource) replacing `status.addresses`.
pub fn addresses_patch(addresses: &[NodeAddress]) -> Value {
    let list: Vec<k8s_openapi::api::core::v1::NodeAddress> = addresses.iter().map(Into::into).collect();
    json!({ "status": { "addresses": list } })
}

/// A merge patch setting `labels` (other labels are untouched).
pub fn labels_patch(labels: &BTreeMap<String, String>) -> Value {
    json!({ "metadata": { "labels": labels } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_namespace_detection() {
        for k in ["kubernetes.io/x", "k8s.io/x", "topology.kubernetes.io/zone", "node.k8s.io/x", "a.b.k8s.io/c"] {
            assert!(is_kubernetes_namespace(k), "{k}");
        }
        for k in ["app.k8snio/bar", "k8snio/bar", "my.custom.label/foo", "topology.k8s.cp/zone-id", "xk8s.io/a"] {
            assert!(!is_kubernetes_namespace(k), "{k}");
        }
    }
}
