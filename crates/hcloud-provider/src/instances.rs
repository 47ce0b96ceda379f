//! InstancesV2 for Hetzner Cloud servers and Robot (dedicated) servers: node → server lookup
//! through the shared inventory (cloud) or the cached Robot list, and the server → node
//! metadata mapping of the official CCM. The Robot half lives in [`crate::robot::instances`].

use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use cloud_provider::events::{EventObject, EventSink};
use cloud_provider::{AddressType, CloudError, InstanceMetadata, InstancesV2, LookupPurpose, NodeAddress};
use hcloud_api::models::{NetworkId, Server, ServerStatus};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use tracing::{debug, warn};

use crate::api_error::api_error;
use crate::config::AddressFamily;
use crate::inventory::{Inventory, Lookup};
use crate::metrics::HcloudMetrics;
use crate::provider_id::{ProviderId, ProviderIdError};
use crate::robot::RobotMode;
use crate::rotation::project::ProjectWitness;

/// Label marking nodes backed by cloud servers (`robot` for dedicated servers).
pub const LABEL_PROVIDED_BY: &str = "instance.hetzner.cloud/provided-by";

/// The zone for a location: the legacy datacenter name (the API dropped datacenters in
/// 2026; this is the official CCM's static map). Unknown locations map to themselves.
pub fn legacy_datacenter(location: &str) -> &str {
    match location {
        "nbg1" => "nbg1-dc3",
        "hel1" => "hel1-dc2",
        "fsn1" => "fsn1-dc14",
        "ash" => "ash-dc1",
        "hil" => "hil-dc1",
        "sin" => "sin-dc1",
        other => other,
    }
}

/// A server's node addresses, in the official CCM's order: Hostname (server name), public
/// IPv4 and/or IPv6 (`<net>::1` of the /64) as ExternalIP by address family, and the IP in
/// the configured network as InternalIP (other networks are ignored).
pub fn node_addresses(server: &Server, family: AddressFamily, network: Option<NetworkId>) -> Vec<NodeAddress> {
    let mut out = vec![NodeAddress::new(AddressType::Hostname, server.name.clone())];
    if matches!(family, AddressFamily::Ipv4 | AddressFamily::DualStack)
        && let Some(v4) = &server.public_net.ipv4
    {
        out.push(NodeAddress::new(AddressType::ExternalIp, v4.ip.to_string()));
    }
    if matches!(family, AddressFamily::Ipv6 | AddressFamily::DualStack)
        && let Some(v6) = &server.public_net.ipv6
        && let IpAddr::V6(net) = v6.ip.network()
    {
        let mut octets = net.octets();
        octets[15] |= 1;
        out.push(NodeAddress::new(AddressType::ExternalIp, Ipv6Addr::from(octets).to_string()));
    }
    if let Some(ip) = network.and_then(|n| server.private_ip_in(n)) {
        out.push(NodeAddress::new(AddressType::InternalIp, ip.to_string()));
    }
    out
}

/// The server's own prefixes, for a cloud CIDR allocator: its public IPv6 network (the /64
/// of its IPv6 Primary IP), whatever `HCLOUD_INSTANCES_ADDRESS_FAMILY` says; none when it has no
/// public IPv6. A network that is not IPv6 is left out with a warning.
pub fn node_prefixes(server: &Server) -> Vec<IpNet> {
    match &server.public_net.ipv6 {
        Some(v6) if matches!(v6.ip, IpNet::V6(_)) => vec![v6.ip.trunc()],
        Some(v6) => {
            warn!(
                server = %server.name, id = %server.id, network = %v6.ip,
                "the server's public_net.ipv6 is not an IPv6 network; the Node gets no prefix from it"
            );
            Vec::new()
        }
        None => Vec::new(),
    }
}

/// Robot support of the instances.
#[derive(Debug, Clone, Default)]
pub struct RobotSupport {
    /// How far Robot support goes: off, Load Balancer-only (Robot Nodes are recognized but
    /// cannot be looked up) or full (with the cached Robot list).
    pub mode: RobotMode,
    /// Whether a Robot Node's InternalIP annotation is kept among its addresses
    /// (`ROBOT_FORWARD_INTERNAL_IPS`).
    pub forward_internal_ips: bool,
}

/// What a Node refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeRef {
    /// A cloud server (providerID `hcloud://<id>`).
    Cloud(Lookup),
    /// A Robot server (`hrobot://<n>` or legacy `hcloud://bm-<n>`).
    Robot(u64),
    /// No providerID yet: by node name, in the cloud and (with Robot) among Robot servers.
    Name(String),
}

/// InstancesV2 backed by the shared inventory.
pub struct HcloudInstances {
    pub(crate) inventory: Arc<Inventory>,
    network: Option<NetworkId>,
    pub(crate) family: AddressFamily,
    zone_label_enabled: bool,
    pub(crate) max_age: Duration,
    pub(crate) lifecycle_max_age: Duration,
    metrics: HcloudMetrics,
    pub(crate) robot: RobotSupport,
    pub(crate) events: OnceLock<Arc<dyn EventSink>>,
    /// Told about every Node's server found (and confirmed gone): what a rotated token must see.
    witness: Arc<ProjectWitness>,
}

impl HcloudInstances {
    /// Instances answering from `inventory`.
    pub fn new(
        inventory: Arc<Inventory>,
        network: Option<NetworkId>,
        family: AddressFamily,
        zone_label_enabled: bool,
        max_age: Duration,
        lifecycle_max_age: Duration,
    ) -> Self {
        HcloudInstances {
            inventory,
            network,
            family,
            zone_label_enabled,
            max_age,
            lifecycle_max_age,
            metrics: HcloudMetrics::default(),
            robot: RobotSupport::default(),
            events: OnceLock::new(),
            witness: Arc::default(),
        }
    }

    /// Tells `witness` about every Node's server found or confirmed gone (see
    /// [`crate::rotation::project`]).
    pub fn with_witness(mut self, witness: Arc<ProjectWitness>) -> Self {
        self.witness = witness;
        self
    }

    /// Supports Robot servers too.
    pub fn with_robot(mut self, robot: RobotSupport) -> Self {
        self.robot = robot;
        self
    }

    /// Where events about Nodes go (`PossibleNodeDeletion`, `MisconfiguredInternalIP`); set
    /// once, by the cloud's `initialize`. Until then they are only logged.
    pub fn set_events(&self, events: Arc<dyn EventSink>) {
        let _ = self.events.set(events);
    }

    /// What the node refers to.
    pub(crate) fn node_ref(node: &Node) -> Result<NodeRef, CloudError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let pid = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default();
        if pid.is_empty() {
            return Ok(NodeRef::Name(name.to_owned()));
        }
        match ProviderId::parse(pid) {
            Ok(ProviderId::Cloud(id)) => Ok(NodeRef::Cloud(Lookup::Id(id))),
            Ok(ProviderId::Robot(n) | ProviderId::LegacyRobot(n)) => Ok(NodeRef::Robot(n)),
            Err(e @ ProviderIdError::UnknownPrefix(_)) => {
                Err(CloudError::failed("UnknownProviderIDPrefix", format!("node {name}: {e}")))
            }
            Err(e @ ProviderIdError::InvalidId(_)) => {
                Err(CloudError::failed("InvalidProviderID", format!("node {name}: {e}")))
            }
        }
    }

    /// Counts operations in `metrics`.
    pub fn with_metrics(mut self, metrics: HcloudMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// How to find the node's cloud server: by providerID, else by node name. A Robot
    /// providerID is an error here (see [`HcloudInstances::instance_exists`] for Robot Nodes).
    pub fn lookup_for(node: &Node) -> Result<Lookup, CloudError> {
        match Self::node_ref(node)? {
            NodeRef::Cloud(lookup) => Ok(lookup),
            NodeRef::Name(name) => Ok(Lookup::Name(name)),
            NodeRef::Robot(n) => Err(CloudError::failed(
                "RobotProviderID",
                format!(
                    "node {} has providerID of Robot server {n}, not a cloud server",
                    node.metadata.name.as_deref().unwrap_or_default()
                ),
            )),
        }
    }

    pub(crate) fn not_found(node: &Node, lookup: &Lookup) -> CloudError {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let message = match lookup {
            Lookup::Id(id) => format!(
                "node {name}: no server with id {id} (providerID hcloud://{id}) exists in the Hetzner Cloud project of \
                 HCLOUD_TOKEN"
            ),
            Lookup::Name(server) => format!(
                "node {name}: no server named {server:?} exists in the Hetzner Cloud project of HCLOUD_TOKEN; the node \
                 name must equal the server name (or start the kubelet with --provider-id=hcloud://<server-id>)"
            ),
        };
        CloudError::failed("ServerNotFound", message)
    }

    /// The node's server as of data at most `max_age` old; with `addresses_only`, data
    /// confirmed by the action lists will do (its status may be older; see
    /// [`Inventory::get_addresses`]).
    pub(crate) async fn server_by(
        &self,
        node: &Node,
        lookup: Lookup,
        max_age: Duration,
        addresses_only: bool,
    ) -> Result<(Lookup, Option<Arc<Server>>), CloudError> {
        let what = format!("looking up the server of node {}", node.metadata.name.as_deref().unwrap_or_default());
        let server = match addresses_only {
            true => self.inventory.get_addresses(&lookup, max_age).await,
            false => self.inventory.get(&lookup, max_age).await,
        }
        .map_err(|e| api_error(&what, e))?;
        if let Some(s) = &server {
            self.witness.found(s.id, EventObject::node(node));
        }
        Ok((lookup, server))
    }

    /// Whether the cloud server exists (`false` only on a direct lookup's answer).
    async fn cloud_exists(&self, node: &Node, lookup: Lookup) -> Result<bool, CloudError> {
        let what =
            format!("checking whether the server of node {} exists", node.metadata.name.as_deref().unwrap_or_default());
        let exists = self.inventory.exists(&lookup, self.lifecycle_max_age).await.map_err(|e| api_error(&what, e))?;
        debug!(?lookup, exists, "server existence");
        if let Lookup::Id(id) = lookup {
            if exists {
                self.witness.found(id, EventObject::node(node));
            } else {
                self.witness.gone(id);
            }
        }
        Ok(exists)
    }

    /// The node's metadata from its server.
    pub fn metadata_for(&self, server: &Server) -> InstanceMetadata {
        InstanceMetadata {
            provider_id: ProviderId::Cloud(server.id).to_string(),
            instance_type: server.server_type.name.clone(),
            node_addresses: node_addresses(server, self.family, self.network),
            zone: if self.zone_label_enabled {
                legacy_datacenter(&server.location.name).to_owned()
            } else {
                String::new()
            },
            region: server.location.name.clone(),
            additional_labels: [(LABEL_PROVIDED_BY.to_owned(), "cloud".to_owned())].into_iter().collect(),
            node_prefixes: node_prefixes(server),
        }
    }
}

impl InstancesV2 for HcloudInstances {
    /// `false` only when a direct lookup confirms the server is gone; any doubt is an error.
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.metrics.operation("hcloud/instancesv2.InstanceExists");
        match Self::node_ref(node)? {
            NodeRef::Cloud(lookup) => self.cloud_exists(node, lookup).await,
            NodeRef::Robot(n) => self.robot_exists(node, n).await,
            NodeRef::Name(name) => {
                let since = tokio::time::Instant::now();
                if self.robot_by_name(node, &name, self.lifecycle_max_age).await?.is_some() {
                    return Ok(true);
                }
                if self.cloud_exists(node, Lookup::Name(name.clone())).await? {
                    return Ok(true);
                }
                // The cached Robot list missed the name: confirmed with a fresh list.
                self.robot_exists_by_name(node, &name, since).await
            }
        }
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.metrics.operation("hcloud/instancesv2.InstanceShutdown");
        let lookup = match Self::node_ref(node)? {
            NodeRef::Cloud(lookup) => lookup,
            NodeRef::Robot(n) => return self.robot_shutdown(node, n).await,
            NodeRef::Name(name) => match self.robot_by_name(node, &name, self.lifecycle_max_age).await? {
                Some(s) => return self.robot_shutdown(node, s.server_number).await,
                None => Lookup::Name(name),
            },
        };
        let (lookup, server) = self.server_by(node, lookup, self.lifecycle_max_age, false).await?;
        let server = server.ok_or_else(|| Self::not_found(node, &lookup))?;
        Ok(server.status == ServerStatus::Off)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        self.metrics.operation("hcloud/instancesv2.InstanceMetadata");
        let lookup = match Self::node_ref(node)? {
            NodeRef::Cloud(lookup) => lookup,
            NodeRef::Robot(n) => return self.robot_metadata(node, n).await.map(Some),
            NodeRef::Name(name) => match self.robot_by_name(node, &name, self.max_age).await? {
                Some(s) => return Ok(Some(self.robot_metadata_for(node, &s))),
                None => Lookup::Name(name),
            },
        };
        let (lookup, server) = self.server_by(node, lookup, self.max_age, true).await?;
        let server = server.ok_or_else(|| Self::not_found(node, &lookup))?;
        Ok(Some(self.metadata_for(&server)))
    }

    async fn prefetch(&self, nodes: &[Arc<Node>], purpose: cloud_provider::LookupPurpose) {
        let lookups: Vec<Lookup> = nodes.iter().filter_map(|n| Self::lookup_for(n).ok()).collect();
        match purpose {
            LookupPurpose::Metadata => self.inventory.prefetch_addresses(&lookups, self.max_age).await,
            LookupPurpose::Lifecycle => self.inventory.prefetch(&lookups, self.lifecycle_max_age).await,
            LookupPurpose::Recheck => self.inventory.recheck(&lookups).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(json: serde_json::Value) -> Server {
        serde_json::from_value(json).expect("server")
    }

    fn sample() -> Server {
        server(serde_json::json!({
            "id": 42, "name": "node-1", "status": "running",
            "server_type": {"name": "cpx11"},
            "location": {"name": "fsn1", "network_zone": "eu-central"},
            "public_net": {"ipv4": {"ip": "198.18.0.7"}, "ipv6": {"ip": "2001:db8:7::/64"}},
            "private_net": [{"network": 7, "ip": "10.0.0.2"}, {"network": 8, "ip": "192.168.0.9"}]
        }))
    }

    fn addrs(v: &[(AddressType, &str)]) -> Vec<NodeAddress> {
        v.iter().map(|(k, a)| NodeAddress::new(k.clone(), *a)).collect()
    }

    #[test]
    fn addresses_follow_family_and_network() {
        use AddressType::*;
        let s = sample();
        assert_eq!(
            node_addresses(&s, AddressFamily::Ipv4, None),
            addrs(&[(Hostname, "node-1"), (ExternalIp, "198.18.0.7")])
        );
        assert_eq!(
            node_addresses(&s, AddressFamily::Ipv6, None),
            addrs(&[(Hostname, "node-1"), (ExternalIp, "2001:db8:7::1")])
        );
        assert_eq!(
            node_addresses(&s, AddressFamily::DualStack, Some(NetworkId(7))),
            addrs(&[
                (Hostname, "node-1"),
                (ExternalIp, "198.18.0.7"),
                (ExternalIp, "2001:db8:7::1"),
                (InternalIp, "10.0.0.2")
            ])
        );
        // Other networks are ignored.
        assert_eq!(
            node_addresses(&s, AddressFamily::Ipv4, Some(NetworkId(99))),
            addrs(&[(Hostname, "node-1"), (ExternalIp, "198.18.0.7")])
        );
    }

    #[test]
    fn servers_without_public_ips_get_hostname_and_internal_ip() {
        use AddressType::*;
        let s = server(serde_json::json!({"id": 1, "name": "priv", "public_net": {"ipv4": null, "ipv6": null},
                                          "private_net": [{"network": 7, "ip": "10.0.0.3"}]}));
        assert_eq!(
            node_addresses(&s, AddressFamily::DualStack, Some(NetworkId(7))),
            addrs(&[(Hostname, "priv"), (InternalIp, "10.0.0.3")])
        );
    }

    #[test]
    fn metadata_mapping_matches_the_official_ccm() {
        let inv = Arc::new(Inventory::new(
            hcloud_api::Client::builder(secrecy::SecretString::from("t"))
                .endpoint("http://127.0.0.1:9/v1")
                .build()
                .expect("client"),
            crate::config::CacheMode::All,
        ));
        let i = HcloudInstances::new(inv.clone(), None, AddressFamily::Ipv4, true, Duration::ZERO, Duration::ZERO);
        let m = i.metadata_for(&sample());
        assert_eq!(m.provider_id, "hcloud://42");
        assert_eq!(m.instance_type, "cpx11");
        assert_eq!(m.region, "fsn1");
        assert_eq!(m.zone, "fsn1-dc14");
        assert_eq!(m.additional_labels.get(LABEL_PROVIDED_BY).map(String::as_str), Some("cloud"));
        let no_zone = HcloudInstances::new(inv, None, AddressFamily::Ipv4, false, Duration::ZERO, Duration::ZERO);
        assert_eq!(no_zone.metadata_for(&sample()).zone, "");
    }

    #[test]
    fn node_prefixes_are_the_public_ipv6_network_whatever_the_family() {
        let inv = Arc::new(Inventory::new(
            hcloud_api::Client::builder(secrecy::SecretString::from("t"))
                .endpoint("http://127.0.0.1:9/v1")
                .build()
                .expect("client"),
            crate::config::CacheMode::All,
        ));
        let v6: IpNet = "2001:db8:7::/64".parse().expect("net");
        for family in [AddressFamily::Ipv4, AddressFamily::Ipv6, AddressFamily::DualStack] {
            let i = HcloudInstances::new(inv.clone(), None, family, true, Duration::ZERO, Duration::ZERO);
            assert_eq!(i.metadata_for(&sample()).node_prefixes, vec![v6], "{family:?}");
        }
        // As the API sends it.
        let real = server(serde_json::json!({"id": 3, "name": "n", "public_net": {"ipv4": null,
            "ipv6": {"id": 9, "ip": "2a01:4f9:c012:fa81::/64", "blocked": false, "dns_ptr": []}}}));
        assert_eq!(node_prefixes(&real), vec!["2a01:4f9:c012:fa81::/64".parse::<IpNet>().expect("net")]);
        // Host bits are dropped.
        let host =
            server(serde_json::json!({"id": 4, "name": "h", "public_net": {"ipv6": {"ip": "2001:db8:9::1/64"}}}));
        assert_eq!(node_prefixes(&host), vec!["2001:db8:9::/64".parse::<IpNet>().expect("net")]);
    }

    #[test]
    fn no_public_ipv6_no_node_prefixes() {
        let null = server(serde_json::json!({"id": 1, "name": "v4-only",
            "public_net": {"ipv4": {"ip": "198.18.0.8"}, "ipv6": null}}));
        assert!(node_prefixes(&null).is_empty());
        let absent = server(serde_json::json!({"id": 2, "name": "bare"}));
        assert!(node_prefixes(&absent).is_empty());
        // Not an IPv6 network (the model takes any IP network): left out, with a warning.
        let wrong =
            server(serde_json::json!({"id": 5, "name": "odd", "public_net": {"ipv6": {"ip": "198.18.0.0/24"}}}));
        assert!(node_prefixes(&wrong).is_empty());
    }

    #[test]
    fn legacy_datacenters() {
        for (loc, dc) in [
            ("nbg1", "nbg1-dc3"),
            ("hel1", "hel1-dc2"),
            ("fsn1", "fsn1-dc14"),
            ("ash", "ash-dc1"),
            ("hil", "hil-dc1"),
            ("sin", "sin-dc1"),
            ("xyz9", "xyz9"),
        ] {
            assert_eq!(legacy_datacenter(loc), dc);
        }
    }

    #[test]
    fn lookups_from_nodes() {
        let mut n = Node::default();
        n.metadata.name = Some("w1".into());
        assert_eq!(HcloudInstances::lookup_for(&n).expect("by name"), Lookup::Name("w1".into()));
        n.spec =
            Some(k8s_openapi::api::core::v1::NodeSpec { provider_id: Some("hcloud://5".into()), ..Default::default() });
        assert_eq!(HcloudInstances::lookup_for(&n).expect("by id"), Lookup::Id(hcloud_api::models::ServerId(5)));
        n.spec.as_mut().expect("spec").provider_id = Some("hrobot://5".into());
        assert_eq!(HcloudInstances::node_ref(&n).expect("robot"), NodeRef::Robot(5));
        assert_eq!(HcloudInstances::lookup_for(&n).unwrap_err().reason(), "RobotProviderID");
        n.spec.as_mut().expect("spec").provider_id = Some("hcloud://bm-7".into());
        assert_eq!(HcloudInstances::node_ref(&n).expect("legacy robot"), NodeRef::Robot(7));
        n.spec.as_mut().expect("spec").provider_id = Some("aws://x".into());
        assert_eq!(HcloudInstances::lookup_for(&n).unwrap_err().reason(), "UnknownProviderIDPrefix");
        n.spec.as_mut().expect("spec").provider_id = Some("hcloud://abc".into());
        assert_eq!(HcloudInstances::lookup_for(&n).unwrap_err().reason(), "InvalidProviderID");
    }
}
