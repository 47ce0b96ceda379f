//! Kubelet-like Node registration: what a kubelet started with `--cloud-provider=external`
//! writes before the cloud-controller-manager initialises the Node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::error::HarnessError;

/// The taint a kubelet with `--cloud-provider=external` puts on its Node until the CCM has
/// initialised it.
pub const UNINITIALIZED_TAINT_KEY: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The annotation a kubelet with `--node-ip` (and an external cloud provider) sets.
pub const PROVIDED_NODE_IP_ANNOTATION: &str = "alpha.kubernetes.io/provided-node-ip";

/// The state of the Node's `Ready` condition as a kubelet would report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// `Ready=True` (reason `KubeletReady`).
    True,
    /// `Ready=False` (reason `KubeletNotReady`).
    False,
    /// `Ready=Unknown` (reason `NodeStatusUnknown`, as the node-lifecycle controller writes
    /// when the kubelet stops posting status).
    Unknown,
    /// No `Ready` condition at all (a kubelet that has not reported yet).
    Absent,
}

impl Ready {
    /// The condition as the kubelet writes it, or `None` for [`Ready::Absent`].
    fn condition(self, last_transition: Option<Time>) -> Option<NodeCondition> {
        let (status, reason, message) = match self {
            Ready::True => ("True", "KubeletReady", "kubelet is posting ready status"),
            Ready::False => ("False", "KubeletNotReady", "container runtime network not ready (set by test-harness)"),
            Ready::Unknown => {
                ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status (set by test-harness).")
            }
            Ready::Absent => return None,
        };
        let now = now();
        Some(NodeCondition {
            type_: "Ready".to_owned(),
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(last_transition.unwrap_or(now)),
        })
    }
}

/// The current time at second precision (what the API server stores).
fn now() -> Time {
    let now = Timestamp::now();
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// Builds and registers a Node the way a kubelet with `--cloud-provider=external` does.
///
/// Defaults: the taint `node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule`,
/// `Ready=True`, no addresses, no podCIDR, no providerID.
#[derive(Debug, Clone)]
pub struct NodeBuilder {
    name: String,
    ready: Ready,
    provided_node_ip: Option<String>,
    pod_cidrs: Vec<String>,
    hostname_address: bool,
    extra_addresses: Vec<NodeAddress>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    uninitialized_taint: bool,
    extra_taints: Vec<Taint>,
    provider_id: Option<String>,
}

impl NodeBuilder {
    /// A Node called `name` with the defaults above.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ready: Ready::True,
            provided_node_ip: None,
            pod_cidrs: Vec::new(),
            hostname_address: false,
            extra_addresses: Vec::new(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            uninitialized_taint: true,
            extra_taints: Vec::new(),
            provider_id: None,
        }
    }

    /// The Node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `Ready` condition to report.
    pub fn ready(mut self, ready: Ready) -> Self {
        self.ready = ready;
        self
    }

    /// Set the annotation `alpha.kubernetes.io/provided-node-ip` (kubelet `--node-ip`).
    pub fn provided_node_ip(mut self, ip: impl Into<String>) -> Self {
        self.provided_node_ip = Some(ip.into());
        self
    }

    /// Set `spec.podCIDR` (the first) and `spec.podCIDRs`, as the node-IPAM controller does.
    pub fn pod_cidrs<I, S>(mut self, cidrs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.pod_cidrs = cidrs.into_iter().map(Into::into).collect();
        self
    }

    /// Whether `status.addresses` gets a `Hostname` entry equal to the node name, as the
    /// kubelet writes it. Default `false` (no addresses at all).
    pub fn kubelet_hostname_address(mut self, enabled: bool) -> Self {
        self.hostname_address = enabled;
        self
    }

    /// Add an arbitrary `status.addresses` entry (`kind` e.g. `InternalIP`).
    pub fn address(mut self, kind: impl Into<String>, address: impl Into<String>) -> Self {
        self.extra_addresses.push(NodeAddress { type_: kind.into(), address: address.into() });
        self
    }

    /// Add a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Add an annotation.
    pub fn annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }

    /// Leave out the `node.cloudprovider.kubernetes.io/uninitialized` taint (a Node the CCM
    /// has already initialised, or a kubelet without `--cloud-provider=external`).
    pub fn without_uninitialized_taint(mut self) -> Self {
        self.uninitialized_taint = false;
        self
    }

    /// Add another taint (`effect`: `NoSchedule`, `PreferNoSchedule` or `NoExecute`).
    pub fn taint(mut self, key: impl Into<String>, value: Option<&str>, effect: impl Into<String>) -> Self {
        self.extra_taints.push(Taint {
            key: key.into(),
            value: value.map(str::to_owned),
            effect: effect.into(),
            time_added: None,
        });
        self
    }

    /// Set `spec.providerID`.
    pub fn provider_id(mut self, provider_id: impl Into<String>) -> Self {
        self.provider_id = Some(provider_id.into());
        self
    }

    /// The Node object, including the status that [`Self::register`] writes.
    pub fn build(&self) -> Node {
        let mut annotations = self.annotations.clone();
        if let Some(ip) = &self.provided_node_ip {
            annotations.insert(PROVIDED_NODE_IP_ANNOTATION.to_owned(), ip.clone());
        }
        let mut taints = Vec::new();
        if self.uninitialized_taint {
            taints.push(Taint {
                key: UNINITIALIZED_TAINT_KEY.to_owned(),
                value: Some("true".to_owned()),
                effect: "NoSchedule".to_owned(),
                time_added: None,
            });
        }
        taints.extend(self.extra_taints.iter().cloned());
        let mut addresses = Vec::new();
        if self.hostname_address {
            addresses.push(NodeAddress { type_: "Hostname".to_owned(), address: self.name.clone() });
        }
        addresses.extend(self.extra_addresses.iter().cloned());
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                annotations: (!annotations.is_empty()).then_some(annotations),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                pod_cidr: self.pod_cidrs.first().cloned(),
                pod_cidrs: (!self.pod_cidrs.is_empty()).then(|| self.pod_cidrs.clone()),
                provider_id: self.provider_id.clone(),
                taints: (!taints.is_empty()).then_some(taints),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                conditions: self.ready.condition(None).map(|c| vec![c]),
                addresses: (!addresses.is_empty()).then_some(addresses),
                ..NodeStatus::default()
            }),
        }
    }

    /// Create the Node with its status in one request, as a registering kubelet does (a Node,
    /// unlike most objects, keeps the status it is created with), so no controller ever sees
    /// it without the `Ready` condition it is built with. Returns the Node as stored.
    pub async fn register(&self, client: &Client) -> Result<Node, HarnessError> {
        let api: Api<Node> = Api::all(client.clone());
        let node = self.build();
        let created = api
            .create(&PostParams::default(), &node)
            .await
            .map_err(|e| HarnessError::kube(format!("creating Node {}", self.name), e))?;
        let expected = node.status.unwrap_or_default();
        let stored = created.status.clone().unwrap_or_default();
        let kept = stored.conditions.as_ref().map(Vec::len) == expected.conditions.as_ref().map(Vec::len)
            && stored.addresses == expected.addresses;
        if kept {
            Ok(created)
        } else {
            Err(HarnessError::Unexpected(format!(
                "the API server dropped the status Node {} was created with (conditions {:?}, addresses {:?}); \
                 kubelets rely on it keeping them",
                self.name, stored.conditions, stored.addresses
            )))
        }
    }
}

/// Set (or, with [`Ready::Absent`], remove) the `Ready` condition of Node `name` through the
/// `/status` subresource, keeping the other conditions. `lastTransitionTime` changes only if
/// the status does, like the kubelet.
pub async fn set_ready(client: &Client, name: &str, ready: Ready) -> Result<Node, HarnessError> {
    let api: Api<Node> = Api::all(client.clone());
    let node = api.get(name).await.map_err(|e| HarnessError::kube(format!("reading Node {name}"), e))?;
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    let previous = conditions.iter().find(|c| c.type_ == "Ready").cloned();
    let mut conditions: Vec<NodeCondition> = conditions.into_iter().filter(|c| c.type_ != "Ready").collect();
    let keep_transition = previous.as_ref().and_then(|p| {
        let same = ready.condition(None).is_some_and(|new| new.status == p.status);
        same.then(|| p.last_transition_time.clone()).flatten()
    });
    if let Some(condition) = ready.condition(keep_transition) {
        conditions.push(condition);
    }
    let patch = json!({ "status": { "conditions": conditions } });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| HarnessError::kube(format!("setting Ready={ready:?} on Node {name}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_an_uninitialised_ready_node() {
        let node = NodeBuilder::new("n1").build();
        let spec = node.spec.unwrap_or_default();
        let taints = spec.taints.unwrap_or_default();
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0].key, UNINITIALIZED_TAINT_KEY);
        assert_eq!(taints[0].value.as_deref(), Some("true"));
        assert_eq!(taints[0].effect, "NoSchedule");
        let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].type_, "Ready");
        assert_eq!(conditions[0].status, "True");
        assert!(spec.pod_cidr.is_none());
    }

    #[test]
    fn options_show_up_in_the_object() {
        let node = NodeBuilder::new("n2")
            .ready(Ready::Absent)
            .provided_node_ip("10.0.0.2")
            .pod_cidrs(["10.244.1.0/24", "fd00::/64"])
            .kubelet_hostname_address(true)
            .label("a", "b")
            .provider_id("hcloud://42")
            .without_uninitialized_taint()
            .build();
        let annotations = node.metadata.annotations.unwrap_or_default();
        assert_eq!(annotations.get(PROVIDED_NODE_IP_ANNOTATION).map(String::as_str), Some("10.0.0.2"));
        let spec = node.spec.unwrap_or_default();
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.244.1.0/24"));
        assert_eq!(spec.pod_cidrs.map(|c| c.len()), Some(2));
        assert_eq!(spec.provider_id.as_deref(), Some("hcloud://42"));
        assert!(spec.taints.is_none());
        let status = node.status.unwrap_or_default();
        assert!(status.conditions.is_none());
        let addresses = status.addresses.unwrap_or_default();
        assert_eq!(addresses.len(), 1);
        assert_eq!(addresses[0].type_, "Hostname");
        assert_eq!(addresses[0].address, "n2");
    }
}
