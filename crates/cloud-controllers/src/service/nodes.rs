//! Which nodes back a load balancer and when the set changed (upstream's node predicates,
//! `shouldSyncUpdatedNode`, `nodesSufficientlyEqual`). Pure functions.
//!
//! Upstream's stable node set (`StableLoadBalancerNodeSet`, GA in 1.30): a node backs load
//! balancers unless it is being deleted, is labelled
//! `node.kubernetes.io/exclude-from-external-load-balancers` with a value Go's `ParseBool`
//! does not read as false, or carries the cluster autoscaler's `ToBeDeletedByClusterAutoscaler`
//! taint. Readiness is deliberately ignored, so a flapping kubelet does not churn every load
//! balancer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cloud_provider::helpers::go_syntax::parse_go_bool;
use cloud_provider::well_known::{LABEL_EXCLUDE_FROM_EXTERNAL_LB, TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;

/// A condition a node must meet to back load balancers (upstream `NodeConditionPredicate`).
pub type NodePredicate = fn(&Node) -> bool;

/// The stable node set (upstream `stableNodeSetPredicates`).
pub const STABLE_NODE_SET_PREDICATES: [NodePredicate; 3] =
    [node_not_deleted_predicate, node_included_predicate, node_untainted_predicate];

/// Upstream `allNodePredicates` (with readiness); upstream uses it only in a unit test, and so
/// does this crate.
pub const ALL_NODE_PREDICATES: [NodePredicate; 3] =
    [node_included_predicate, node_untainted_predicate, node_ready_predicate];

/// Upstream `maxNodeNamesToLog`.
const MAX_NODE_NAMES_TO_LOG: usize = 20;

/// True unless the node is labelled for exclusion (upstream `nodeIncludedPredicate`): a label
/// value that Go's `strconv.ParseBool` cannot read (including `""`) excludes, like `true`.
pub fn node_included_predicate(node: &Node) -> bool {
    match node.metadata.labels.as_ref().and_then(|l| l.get(LABEL_EXCLUDE_FROM_EXTERNAL_LB)) {
        None => true,
        Some(v) => parse_go_bool(v) == Some(false),
    }
}

/// True unless the cluster autoscaler is about to remove the node (upstream
/// `nodeUnTaintedPredicate`: any taint with key `ToBeDeletedByClusterAutoscaler`).
pub fn node_untainted_predicate(node: &Node) -> bool {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
    !taints.iter().any(|t| t.key == TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER)
}

/// True if the node's first `Ready` condition is `True` (upstream `nodeReadyPredicate`).
pub fn node_ready_predicate(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// True unless the node has a deletion timestamp (upstream `nodeNotDeletedPredicate`).
pub fn node_not_deleted_predicate(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none()
}

/// True if the node meets every predicate (upstream `respectsPredicates`).
pub fn respects_predicates(node: &Node, predicates: &[NodePredicate]) -> bool {
    predicates.iter().all(|p| p(node))
}

/// The nodes meeting every predicate, in their order (upstream `filterWithPredicates`).
pub fn filter_with_predicates(nodes: &[Arc<Node>], predicates: &[NodePredicate]) -> Vec<Arc<Node>> {
    nodes.iter().filter(|n| respects_predicates(n, predicates)).cloned().collect()
}

/// Where the controller reads nodes from (upstream's node lister). The controller reads the
/// shared informer's cache, which cannot fail; upstream's tests also cover a lister error.
pub trait NodeLister: Send + Sync + 'static {
    /// All nodes.
    fn list(&self) -> Result<Vec<Arc<Node>>, NodeListError>;
}

/// Listing nodes failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to list nodes: {0}")]
pub struct NodeListError(pub String);

impl NodeLister for Store<Node> {
    fn list(&self) -> Result<Vec<Arc<Node>>, NodeListError> {
        Ok(self.state())
    }
}

/// The nodes meeting every predicate (upstream `listWithPredicates`).
pub fn list_with_predicates(
    lister: &dyn NodeLister,
    predicates: &[NodePredicate],
) -> Result<Vec<Arc<Node>>, NodeListError> {
    Ok(filter_with_predicates(&lister.list()?, predicates))
}

fn provider_id(node: &Node) -> &str {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default()
}

fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// True if a node update can change load balancer backends (upstream `shouldSyncUpdatedNode`):
/// the exclusion label's verdict flipped, or the provider ID changed. Readiness, taints,
/// deletion timestamps and other labels do not trigger a node sync (they are applied the next
/// time a sync happens anyway).
pub fn should_sync_updated_node(old: &Node, new: &Node) -> bool {
    node_included_predicate(old) != node_included_predicate(new) || provider_id(old) != provider_id(new)
}

/// True if both sets hold the same nodes by name and provider ID (upstream
/// `nodesSufficientlyEqual`): load balancers are updated only when this changes.
pub fn nodes_sufficiently_equal(old: &[Arc<Node>], new: &[Arc<Node>]) -> bool {
    nodes_equal_for_label_keys(old, new, &[])
}

/// [`nodes_sufficiently_equal`], and every node also has the same values of the labels
/// `keys` (the keys the provider reads for this load balancer,
/// `cloud_provider::LoadBalancer::node_label_keys`).
pub fn nodes_equal_for_label_keys(old: &[Arc<Node>], new: &[Arc<Node>], keys: &[String]) -> bool {
    fn distill<'a>(nodes: &'a [Arc<Node>], keys: &[String]) -> BTreeMap<&'a str, (&'a str, Vec<Option<&'a str>>)> {
        nodes.iter().map(|n| (name(n), (provider_id(n), keys.iter().map(|k| label(n, k)).collect()))).collect()
    }
    old.len() == new.len() && distill(old, keys) == distill(new, keys)
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The label keys added, removed or given another value from `old` to `new`, sorted.
pub fn changed_label_keys(old: &Node, new: &Node) -> BTreeSet<String> {
    let empty = BTreeMap::new();
    let (o, n) = (old.metadata.labels.as_ref().unwrap_or(&empty), new.metadata.labels.as_ref().unwrap_or(&empty));
    o.keys().chain(n.keys()).filter(|k| o.get(*k) != n.get(*k)).cloned().collect()
}

/// The node names for a log line or event (upstream `loggableNodeNames`): sorted, at most the
/// first 20 nodes, then `<N more>`.
pub fn loggable_node_names(nodes: &[Arc<Node>]) -> Vec<String> {
    let shown = &nodes[..nodes.len().min(MAX_NODE_NAMES_TO_LOG)];
    let mut names: Vec<String> =
        shown.iter().map(|n| name(n).to_owned()).collect::<BTreeSet<_>>().into_iter().collect();
    if nodes.len() > MAX_NODE_NAMES_TO_LOG {
        names.push(format!("<{} more>", nodes.len() - MAX_NODE_NAMES_TO_LOG));
    }
    names
}
