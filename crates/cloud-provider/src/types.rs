//! Neutral types exchanged between controllers and providers.

use std::collections::BTreeMap;
use std::fmt;

use ipnet::IpNet;
use k8s_openapi::api::core::v1 as corev1;

/// Kind of a node address (Kubernetes `NodeAddressType`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AddressType {
    /// `Hostname`.
    Hostname,
    /// `ExternalIP`.
    ExternalIp,
    /// `InternalIP`.
    InternalIp,
    /// `ExternalDNS`.
    ExternalDns,
    /// `InternalDNS`.
    InternalDns,
    /// Any other value, kept verbatim.
    Other(String),
}

impl AddressType {
    /// The Kubernetes spelling.
    pub fn as_str(&self) -> &str {
        match self {
            AddressType::Hostname => "Hostname",
            AddressType::ExternalIp => "ExternalIP",
            AddressType::InternalIp => "InternalIP",
            AddressType::ExternalDns => "ExternalDNS",
            AddressType::InternalDns => "InternalDNS",
            AddressType::Other(s) => s,
        }
    }

    /// Parses the Kubernetes spelling.
    pub fn parse(s: &str) -> AddressType {
        match s {
            "Hostname" => AddressType::Hostname,
            "ExternalIP" => AddressType::ExternalIp,
            "InternalIP" => AddressType::InternalIp,
            "ExternalDNS" => AddressType::ExternalDns,
            "InternalDNS" => AddressType::InternalDns,
            other => AddressType::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for AddressType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One address of a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAddress {
    /// What the address is (`InternalIP`, `ExternalIP`, `Hostname`, ...), i.e. `NodeAddress.type`.
    pub kind: AddressType,
    /// The address (an IP or a name), as the cloud spells it.
    pub address: String,
}

impl NodeAddress {
    /// Builds an address.
    pub fn new(kind: AddressType, address: impl Into<String>) -> NodeAddress {
        NodeAddress { kind, address: address.into() }
    }
}

impl From<&corev1::NodeAddress> for NodeAddress {
    fn from(a: &corev1::NodeAddress) -> Self {
        NodeAddress { kind: AddressType::parse(&a.type_), address: a.address.clone() }
    }
}

impl From<&NodeAddress> for corev1::NodeAddress {
    fn from(a: &NodeAddress) -> Self {
        corev1::NodeAddress { type_: a.kind.as_str().to_owned(), address: a.address.clone() }
    }
}

/// What a provider knows about the instance behind a node (upstream `InstanceMetadata`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceMetadata {
    /// `spec.providerID`, conventionally `<provider>://<id>`. Empty if unknown.
    pub provider_id: String,
    /// Instance type, for `node.kubernetes.io/instance-type`. Empty if unknown.
    pub instance_type: String,
    /// Addresses, for `status.addresses`.
    pub node_addresses: Vec<NodeAddress>,
    /// Zone, for `topology.kubernetes.io/zone`. Empty if unknown.
    pub zone: String,
    /// Region, for `topology.kubernetes.io/region`. Empty if unknown.
    pub region: String,
    /// Extra labels; keys in the `kubernetes.io`/`k8s.io` namespaces are dropped by the
    /// controller, existing keys are never overwritten.
    pub additional_labels: BTreeMap<String, String>,
    /// IP prefixes that belong to the instance itself (for example the IPv6 /64 the cloud
    /// gives each server), from which a cloud CIDR allocator carves the node's pod ranges.
    /// Empty if the instance has none. Beyond upstream's type.
    pub node_prefixes: Vec<IpNet>,
}

/// A route in the cloud's network (upstream `cloudprovider.Route`).
///
/// Two fields go beyond upstream's type, both optional for providers:
/// - [`Route::target_provider_id`] identifies the target node by its `spec.providerID`, so
///   a route still belongs to its node when node and instance names differ or the node was
///   renamed. The controller fills it on create from the node; a provider may fill it in
///   `list_routes`, and the controller then matches the route to the node with that
///   provider ID before it falls back to [`Route::target_node`].
/// - [`Route::gateway`] is the next-hop address a provider reports in `list_routes` for
///   clouds that route to an address. The controller keeps such a route only while the
///   gateway is still one of the target node's addresses, and replaces it otherwise (a node
///   whose private IP changed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    /// Provider-chosen name.
    pub name: String,
    /// The node the route sends traffic to (empty if unknown).
    pub target_node: String,
    /// The target node's `spec.providerID` (empty if unknown).
    pub target_provider_id: String,
    /// Set by the provider in `list_routes` to opt in to address comparison (upstream:
    /// the route's addresses must equal the node's `status.addresses` as a set).
    pub enable_node_addresses: bool,
    /// The target node's addresses.
    pub target_node_addresses: Vec<NodeAddress>,
    /// Destination CIDR (a pod CIDR).
    pub destination_cidr: String,
    /// The next hop the cloud sends the destination's traffic to, if the provider reports
    /// one (an IP address).
    pub gateway: Option<String>,
    /// True if the route's target no longer exists.
    pub blackhole: bool,
}

/// How traffic to a load balancer IP reaches the nodes (`status.loadBalancer.ingress[].ipMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpMode {
    /// The destination IP is the load balancer's IP (kube-proxy may short-circuit).
    Vip,
    /// Traffic is proxied; kube-proxy must not short-circuit it.
    Proxy,
}

impl IpMode {
    /// The Kubernetes spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            IpMode::Vip => "VIP",
            IpMode::Proxy => "Proxy",
        }
    }
}

/// One ingress point of a load balancer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LoadBalancerIngress {
    /// IP address of the ingress point; None for a hostname-only ingress.
    pub ip: Option<String>,
    /// DNS name of the ingress point, for clouds that hand out names instead of (or besides) IPs.
    pub hostname: Option<String>,
    /// Written to `status.loadBalancer.ingress[].ipMode`; None leaves it unset (kube-proxy then
    /// treats the IP as `VIP`).
    pub ip_mode: Option<IpMode>,
}

/// The status a provider reports for a load balancer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalancerStatus {
    /// Ingress points.
    pub ingress: Vec<LoadBalancerIngress>,
}
