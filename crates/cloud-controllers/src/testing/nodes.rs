//! Node values and builders, and a node comparison with the API server's notion of equality.

use std::collections::BTreeMap;

use cloud_provider::{AddressType, NodeAddress};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// `node.cloudprovider.kubernetes.io/uninitialized`.
pub(crate) const CLOUD_TAINT: &str = cloud_provider::well_known::TAINT_EXTERNAL_CLOUD_PROVIDER;
/// `alpha.kubernetes.io/provided-node-ip`.
pub(crate) const PROVIDED_IP: &str = cloud_provider::well_known::ANNOTATION_PROVIDED_NODE_IP;

/// A cloud address.
pub(crate) fn addr(kind: AddressType, address: &str) -> NodeAddress {
    NodeAddress::new(kind, address)
}

/// A map from string pairs.
pub(crate) fn map<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

/// `metav1.Date(...)` at whole seconds, UTC (upstream's `time.Local` timestamps in the
/// lifecycle tests only matter to Go's `reflect.DeepEqual`; every instant here is just a value
/// carried through unchanged).
pub(crate) fn time(rfc3339: &str) -> Time {
    Time(rfc3339.parse::<Timestamp>().expect("valid timestamp"))
}

/// A taint with a value (`{Key, Value, Effect}`; no timeAdded).
pub(crate) fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_owned(),
        value: Some(value).filter(|v| !v.is_empty()).map(str::to_owned),
        effect: effect.to_owned(),
        time_added: None,
    }
}

/// Builder for the `Node`s of the upstream tables. Every setter mirrors one field upstream
/// sets; fields left alone stay absent (Go's zero values).
#[derive(Clone)]
pub(crate) struct NodeBuilder(Node);

/// A node named `name`, nothing else set.
pub(crate) fn node(name: &str) -> NodeBuilder {
    let mut n = Node::default();
    n.metadata.name = Some(name.to_owned());
    NodeBuilder(n)
}

impl NodeBuilder {
    /// `CreationTimestamp: metav1.Date(2012, 1, 1, 0, 0, 0, 0, …)`, as in every upstream table.
    pub(crate) fn created_2012(mut self) -> Self {
        self.0.metadata.creation_timestamp = Some(time("2012-01-01T00:00:00Z"));
        self
    }

    /// `Labels: map[string]string{...}` (an empty array gives Go's `map[string]string{}`).
    pub(crate) fn labels<const N: usize>(mut self, pairs: [(&str, &str); N]) -> Self {
        self.0.metadata.labels = Some(map(pairs));
        self
    }

    /// One annotation.
    pub(crate) fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(key.to_owned(), value.to_owned());
        self
    }

    /// `Spec.ProviderID`.
    pub(crate) fn provider_id(mut self, pid: &str) -> Self {
        self.0.spec.get_or_insert_with(NodeSpec::default).provider_id = Some(pid.to_owned());
        self
    }

    /// Appends a taint to `Spec.Taints`.
    pub(crate) fn taint(mut self, t: Taint) -> Self {
        self.0.spec.get_or_insert_with(NodeSpec::default).taints.get_or_insert_with(Vec::new).push(t);
        self
    }

    /// `Spec.Taints: []v1.Taint{}` (present but empty).
    pub(crate) fn no_taints(mut self) -> Self {
        self.0.spec.get_or_insert_with(NodeSpec::default).taints = Some(Vec::new());
        self
    }

    /// `{Key: "ImproveCoverageTaint", Value: "true", Effect: NoSchedule}`.
    pub(crate) fn coverage_taint(self) -> Self {
        self.taint(taint("ImproveCoverageTaint", "true", "NoSchedule"))
    }

    /// `{Key: TaintExternalCloudProvider, Value: "true", Effect: NoSchedule}`.
    pub(crate) fn cloud_taint(self) -> Self {
        self.taint(taint(CLOUD_TAINT, "true", "NoSchedule"))
    }

    /// The `Ready` condition of the upstream tables: the given status, heartbeat and
    /// transition at 2015-01-01 12:00:00.
    pub(crate) fn ready(mut self, status: &str) -> Self {
        let at = time("2015-01-01T12:00:00Z");
        self.0.status.get_or_insert_with(NodeStatus::default).conditions.get_or_insert_with(Vec::new).push(
            NodeCondition {
                type_: "Ready".to_owned(),
                status: status.to_owned(),
                last_heartbeat_time: Some(at.clone()),
                last_transition_time: Some(at),
                message: None,
                reason: None,
            },
        );
        self
    }

    /// Appends to `Status.Addresses`.
    pub(crate) fn address(mut self, kind: AddressType, address: &str) -> Self {
        self.0
            .status
            .get_or_insert_with(NodeStatus::default)
            .addresses
            .get_or_insert_with(Vec::new)
            .push((&addr(kind, address)).into());
        self
    }

    /// The node.
    pub(crate) fn build(self) -> Node {
        self.0
    }
}

/// The node as the API server returns it: absent and empty are the same thing on the wire
/// (every field below is `omitempty`), so `labels: {}` ≡ no labels, `taints: []` ≡ no taints,
/// `providerID: ""` ≡ none, and an all-default spec/status ≡ none.
///
/// Upstream's expected nodes differ in exactly this way from case to case (for example
/// `Taints: []v1.Taint{}` in "provider ID not implemented" but no `Taints` in the other
/// initialized cases) only because go-cmp tells nil from empty and upstream's fake clientset
/// round-trips the object through JSON on PATCH but not on PUT. Comparing normalized nodes
/// keeps every observable value while dropping that artefact.
pub(crate) fn normalize(node: &Node) -> Node {
    fn none_if_empty<T: Default + PartialEq>(v: &mut Option<T>) {
        if v.as_ref().is_some_and(|x| *x == T::default()) {
            *v = None;
        }
    }
    let mut n = node.clone();
    none_if_empty(&mut n.metadata.labels);
    none_if_empty(&mut n.metadata.annotations);
    if let Some(spec) = &mut n.spec {
        none_if_empty(&mut spec.taints);
        none_if_empty(&mut spec.provider_id);
    }
    if let Some(status) = &mut n.status {
        none_if_empty(&mut status.addresses);
        none_if_empty(&mut status.conditions);
    }
    none_if_empty(&mut n.spec);
    none_if_empty(&mut n.status);
    n
}

/// Asserts two nodes are the same object on the wire, naming the case on failure.
#[track_caller]
pub(crate) fn assert_node_eq(case: &str, actual: &Node, expected: &Node) {
    pretty_assertions::assert_eq!(normalize(actual), normalize(expected), "case {case:?}: unexpected node");
}
