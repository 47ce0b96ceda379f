//! The Robot half of [`HcloudInstances`]: existence (confirmed absences only: by number with
//! `GET /server/{n}`, by name with a list requested for it), shutdown through
//! the reset endpoint, metadata, the lookup by name across cloud and Robot, and the CAPH guard.

use std::sync::Arc;

use cloud_provider::events::{EventObject, ProviderEvent};
use cloud_provider::{CloudError, InstanceMetadata, NodeAddress};
use hcloud_api::robot::{RobotErrorCode, RobotServer};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use tracing::warn;

use super::metadata;
use super::{RobotInventory, RobotMode};
use crate::api_error::robot_error;
use crate::instances::{HcloudInstances, LABEL_PROVIDED_BY};
use crate::inventory::Lookup;
use crate::provider_id::ProviderId;

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

impl HcloudInstances {
    fn robot_inventory(&self, node: &Node, number: u64) -> Result<&Arc<RobotInventory>, CloudError> {
        match &self.robot.mode {
            RobotMode::Full(inventory) => Ok(inventory),
            RobotMode::LoadBalancerOnly => Err(CloudError::failed(
                "RobotClientMissing",
                format!(
                    "node {}: Robot server {number}: no robot client configured (ROBOT_ENABLED=true without \
                         ROBOT_USER/ROBOT_PASSWORD is Load Balancer-only mode); the node is left alone",
                    node_name(node)
                ),
            )),
            RobotMode::Off => Err(CloudError::failed(
                "RobotClientMissing",
                format!(
                    "node {} has the providerID of Robot server {number} but Robot support is off (ROBOT_ENABLED); \
                     the node is left alone",
                    node_name(node)
                ),
            )),
        }
    }

    pub(crate) fn publish(&self, event: ProviderEvent) {
        match self.events.get() {
            Some(sink) => sink.publish(event),
            None => warn!(object = %event.object.name, reason = %event.reason, "{}", event.message),
        }
    }

    /// The CAPH guard: Robot server numbers are reused across accounts and clusters, so a
    /// server whose name is not the Node's is not the Node's server.
    fn guard(&self, node: &Node, server: RobotServer) -> Option<RobotServer> {
        if server.server_name == node_name(node) {
            return Some(server);
        }
        self.publish(ProviderEvent::warning(
            EventObject::node(node),
            "PossibleNodeDeletion",
            format!(
                "Robot server {} is named {:?}, not {:?}: it is treated as not this Node's server (server numbers \
                 are reused); the Node may be deleted",
                server.server_number,
                server.server_name,
                node_name(node)
            ),
        ));
        None
    }

    /// Whether the Node's Robot server exists: `false` only when `GET /server/{n}` confirms it
    /// is gone (or the CAPH guard says it is someone else's); errors are errors.
    pub(crate) async fn robot_exists(&self, node: &Node, number: u64) -> Result<bool, CloudError> {
        let inv = self.robot_inventory(node, number)?;
        let what = format!("checking whether Robot server {number} of node {} exists", node_name(node));
        let found = match inv.by_number(number).await.map_err(|e| robot_error(&what, e))? {
            Some(s) => Some(s),
            None => inv.fetch(number).await.map_err(|e| robot_error(&what, e))?,
        };
        Ok(found.and_then(|s| self.guard(node, s)).is_some())
    }

    /// A Node without providerID that neither the cached Robot list nor the cloud knows:
    /// whether a Robot server of its name exists, from a list requested at or after `since`
    /// (the lookup's start; usually one more `GET /server`). `false` only when that list
    /// lacks it too; errors are errors. Without a Robot client, Robot is not asked.
    pub(crate) async fn robot_exists_by_name(
        &self,
        node: &Node,
        name: &str,
        since: tokio::time::Instant,
    ) -> Result<bool, CloudError> {
        let Some(inv) = self.robot.mode.inventory() else {
            return Ok(false);
        };
        let what = format!("confirming that no Robot server is named {name:?} (node {})", node_name(node));
        Ok(inv.by_name_listed_since(name, since).await.map_err(|e| robot_error(&what, e))?.is_some())
    }

    async fn robot_server(&self, node: &Node, number: u64) -> Result<RobotServer, CloudError> {
        let inv = self.robot_inventory(node, number)?;
        let what = format!("looking up Robot server {number} of node {}", node_name(node));
        inv.by_number(number).await.map_err(|e| robot_error(&what, e))?.and_then(|s| self.guard(node, s)).ok_or_else(
            || {
                CloudError::failed(
                    "ServerNotFound",
                    format!("node {}: no Robot server {number} with this name exists in the account", node_name(node)),
                )
            },
        )
    }

    /// Whether the Robot server is shut off (`GET /reset/{n}`, never cached; "not supported"
    /// counts as running).
    pub(crate) async fn robot_shutdown(&self, node: &Node, number: u64) -> Result<bool, CloudError> {
        self.robot_server(node, number).await?;
        let inv = self.robot_inventory(node, number)?;
        match inv.reset(number).await {
            Ok(reset) => Ok(reset.is_shut_off()),
            Err(e) if e.code() == Some(&RobotErrorCode::ResetNotAvailable) => Ok(false),
            Err(e) => Err(robot_error(&format!("reading the reset state of Robot server {number}"), e)),
        }
    }

    /// Metadata of the Node's Robot server.
    pub(crate) async fn robot_metadata(&self, node: &Node, number: u64) -> Result<InstanceMetadata, CloudError> {
        let server = self.robot_server(node, number).await?;
        Ok(self.robot_metadata_for(node, &server))
    }

    /// The metadata mapping (pure apart from `MisconfiguredInternalIP` events).
    pub(crate) fn robot_metadata_for(&self, node: &Node, server: &RobotServer) -> InstanceMetadata {
        let forward = self.robot.forward_internal_ips;
        let existing: Vec<NodeAddress> = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .map(|a| a.iter().map(NodeAddress::from).collect())
            .unwrap_or_default();
        let (addresses, skipped) = metadata::node_addresses(server, self.family, forward, &existing);
        for s in skipped {
            self.publish(ProviderEvent::warning(
                EventObject::node(node),
                "MisconfiguredInternalIP",
                format!("the kubelet's InternalIP {} is not forwarded: {}", s.address, s.why),
            ));
        }
        let (zone, region) = metadata::zone_and_region(&server.dc);
        let node_prefixes = match metadata::ipv6_net(server) {
            Ok(net) => net.map(IpNet::V6).into_iter().collect(),
            Err(bad) => {
                warn!(
                    node = node_name(node),
                    server_number = server.server_number,
                    server_ipv6_net = bad,
                    "the Robot server's server_ipv6_net is not an IPv6 address; the Node gets no prefix from it"
                );
                Vec::new()
            }
        };
        InstanceMetadata {
            provider_id: ProviderId::Robot(server.server_number).to_string(),
            instance_type: metadata::instance_type(&server.product),
            node_addresses: addresses,
            zone,
            region,
            additional_labels: [(LABEL_PROVIDED_BY.to_owned(), "robot".to_owned())].into_iter().collect(),
            node_prefixes,
        }
    }

    /// A Node without providerID: its Robot server by name, if Robot has a client. A name
    /// that is also a cloud server's is an `InstanceLookupFailed` error, never a guess.
    pub(crate) async fn robot_by_name(
        &self,
        node: &Node,
        name: &str,
        cloud_max_age: std::time::Duration,
    ) -> Result<Option<RobotServer>, CloudError> {
        let Some(inv) = self.robot.mode.inventory() else {
            return Ok(None);
        };
        let what = format!("looking up Robot server named {name:?} for node {}", node_name(node));
        let Some(robot) = inv.by_name(name).await.map_err(|e| robot_error(&what, e))? else {
            return Ok(None);
        };
        let lookup = Lookup::Name(name.to_owned());
        if let (_, Some(cloud)) = self.server_by(node, lookup, cloud_max_age, false).await? {
            return Err(CloudError::failed(
                "InstanceLookupFailed",
                format!(
                    "node {name}: both cloud server {} and Robot server {} are named {name:?}; start the kubelet \
                     with --provider-id (hcloud://{} or hrobot://{}) to choose",
                    cloud.id, robot.server_number, cloud.id, robot.server_number
                ),
            ));
        }
        Ok(Some(robot))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{AddressFamily, CacheMode};
    use crate::inventory::Inventory;

    fn instances() -> HcloudInstances {
        let client = hcloud_api::Client::builder(secrecy::SecretString::from("t"))
            .endpoint("http://127.0.0.1:9/v1")
            .build()
            .expect("client");
        let inv = Arc::new(Inventory::new(client, CacheMode::All));
        HcloudInstances::new(inv, None, AddressFamily::Ipv4, true, Duration::ZERO, Duration::ZERO)
    }

    fn server(ipv6_net: Option<&str>) -> RobotServer {
        let mut s = serde_json::json!({"server_number": 321, "server_name": "bm-1", "server_ip": "123.123.123.123",
                                       "product": "AX41-NVMe", "dc": "FSN1-DC14"});
        if let Some(net) = ipv6_net {
            s["server_ipv6_net"] = net.into();
        }
        serde_json::from_value(s).expect("server")
    }

    fn node() -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("bm-1".into());
        n
    }

    #[test]
    fn node_prefixes_are_the_servers_slash_64() {
        let i = instances();
        // IPv4-only addresses, but the prefix is still the server's /64.
        let m = i.robot_metadata_for(&node(), &server(Some("2a01:f48:111:4221::")));
        assert_eq!(m.node_prefixes, vec!["2a01:f48:111:4221::/64".parse::<IpNet>().expect("net")]);
        assert_eq!(m.provider_id, "hrobot://321");
    }

    #[test]
    fn no_or_unusable_ipv6_net_no_node_prefixes() {
        let i = instances();
        for net in [None, Some(""), Some("garbage"), Some("123.123.123.123")] {
            let m = i.robot_metadata_for(&node(), &server(net));
            assert!(m.node_prefixes.is_empty(), "{net:?}");
            assert_eq!(m.provider_id, "hrobot://321", "the rest of the metadata is unaffected: {net:?}");
        }
    }
}
