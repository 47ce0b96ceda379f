//! Asking the provider about a node: upstream's `getInstanceMetadata`,
//! `getInstanceNodeAddresses` and `GetInstanceProviderID`, for both the InstancesV2 path
//! and the legacy Instances (+ Zones) path.

use cloud_provider::{Cloud, CloudError, InstanceMetadata, Instances, InstancesV2, NodeAddress, Zones};
use k8s_openapi::api::core::v1::Node;
use tracing::warn;

/// Why metadata could not be obtained.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The provider failed.
    #[error("{0}")]
    Cloud(#[from] CloudError),
    /// InstancesV2 returned metadata without a provider ID and the node has none
    /// (kubernetes/kubernetes#123024: never untaint a node without a provider ID).
    #[error("cloud provider does not set node provider ID for node {0}")]
    MissingProviderId(String),
    /// Neither instances capability is available.
    #[error("failed to get instances from cloud provider")]
    NoInstances,
    /// Legacy path: both lookups of the addresses failed.
    #[error("error fetching node by provider ID: {by_provider_id}, and error by node name: {by_name}")]
    Addresses {
        /// Error of the lookup by provider ID.
        by_provider_id: CloudError,
        /// Error of the lookup by node name.
        by_name: CloudError,
    },
    /// Legacy path: both lookups of the instance type failed.
    #[error("InstanceType: Error fetching by providerID: {by_provider_id} Error fetching by NodeName: {by_name}")]
    InstanceType {
        /// Error of the lookup by provider ID.
        by_provider_id: CloudError,
        /// Error of the lookup by node name.
        by_name: CloudError,
    },
    /// Legacy path: both zone lookups failed.
    #[error(
        "failed to get zone from cloud provider: Zone: Error fetching by providerID: {by_provider_id} Error fetching by NodeName: {by_name}"
    )]
    Zone {
        /// Error of the lookup by provider ID.
        by_provider_id: CloudError,
        /// Error of the lookup by node name.
        by_name: CloudError,
    },
    /// Legacy path: the instance ID lookup failed.
    #[error("failed to get instance ID from cloud provider: {0}")]
    InstanceId(CloudError),
}

impl MetadataError {
    /// The reason to use in a Warning event.
    pub fn reason(&self) -> &str {
        match self {
            MetadataError::Cloud(e) | MetadataError::InstanceId(e) => e.reason(),
            MetadataError::MissingProviderId(_) => "ProviderIDMissing",
            MetadataError::NoInstances => "NotImplemented",
            MetadataError::Addresses { .. } | MetadataError::InstanceType { .. } | MetadataError::Zone { .. } => {
                "InstanceLookupFailed"
            }
        }
    }

    /// True if the underlying provider error says the cloud was unreachable or throttling.
    pub fn is_transient(&self) -> bool {
        matches!(self, MetadataError::Cloud(CloudError::Failed { transient: true, .. }))
    }
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

fn provider_id(node: &Node) -> &str {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default()
}

/// `<provider>://<InstanceID(name)>` (upstream `GetInstanceProviderID`): `NotImplemented` and
/// `InstanceNotFound` pass through unwrapped, other errors are wrapped.
pub async fn get_instance_provider_id<C: Cloud>(cloud: &C, node_name: &str) -> Result<String, MetadataError> {
    let instances = cloud.instances().ok_or(MetadataError::NoInstances)?;
    match instances.instance_id(node_name).await {
        Ok(id) => Ok(format!("{}://{}", cloud.provider_name(), id)),
        Err(e @ (CloudError::NotImplemented | CloudError::InstanceNotFound)) => Err(MetadataError::Cloud(e)),
        Err(e) => Err(MetadataError::InstanceId(e)),
    }
}

/// Upstream `getInstanceMetadata`: the metadata used to initialize a node.
///
/// InstancesV2: the provider's metadata; a missing provider ID is filled from the node, or
/// is an error if the node has none either. Legacy Instances: provider ID from the node or
/// `InstanceID` (`NotImplemented` tolerated), addresses and type by provider ID then by name,
/// zone/region from Zones if available.
pub async fn get_instance_metadata<C: Cloud>(
    cloud: &C,
    node: &Node,
) -> Result<Option<InstanceMetadata>, MetadataError> {
    let mut pid = provider_id(node).to_owned();
    let name = node_name(node);
    if let Some(v2) = cloud.instances_v2() {
        let metadata = v2.instance_metadata(node).await?;
        return match metadata {
            Some(mut m) if m.provider_id.is_empty() => {
                if pid.is_empty() {
                    return Err(MetadataError::MissingProviderId(name.to_owned()));
                }
                m.provider_id = pid;
                Ok(Some(m))
            }
            other => Ok(other),
        };
    }

    let instances = cloud.instances().ok_or(MetadataError::NoInstances)?;
    if pid.is_empty() {
        match get_instance_provider_id(cloud, name).await {
            Ok(id) => pid = id,
            Err(MetadataError::Cloud(CloudError::NotImplemented)) => {
                warn!(node = name, "cloud provider does not set node provider ID, using node name to discover node");
            }
            Err(e) => return Err(e),
        }
    }

    let node_addresses = addresses_by_provider_id_or_name(&*instances, &pid, name).await?;
    let instance_type = match instances.instance_type_by_provider_id(&pid).await {
        Ok(t) => t,
        Err(by_provider_id) => instances
            .instance_type(name)
            .await
            .map_err(|by_name| MetadataError::InstanceType { by_provider_id, by_name })?,
    };
    let mut metadata =
        InstanceMetadata { provider_id: pid.clone(), instance_type, node_addresses, ..Default::default() };
    if let Some(zones) = cloud.zones() {
        let zone = match zones.zone_by_provider_id(&pid).await {
            Ok(z) => z,
            Err(by_provider_id) => zones
                .zone_by_node_name(name)
                .await
                .map_err(|by_name| MetadataError::Zone { by_provider_id, by_name })?,
        };
        metadata.zone = zone.failure_domain;
        metadata.region = zone.region;
    }
    Ok(Some(metadata))
}

async fn addresses_by_provider_id_or_name<I: Instances>(
    instances: &I,
    pid: &str,
    name: &str,
) -> Result<Vec<NodeAddress>, MetadataError> {
    match instances.node_addresses_by_provider_id(pid).await {
        Ok(a) => Ok(a),
        Err(by_provider_id) => {
            instances.node_addresses(name).await.map_err(|by_name| MetadataError::Addresses { by_provider_id, by_name })
        }
    }
}

/// Upstream `getInstanceNodeAddresses`: what the periodic address refresh asks for. One
/// provider call per node in the happy path. `Ok(None)` if the provider has nothing.
pub async fn get_instance_node_addresses<C: Cloud>(
    cloud: &C,
    node: &Node,
) -> Result<Option<Vec<NodeAddress>>, MetadataError> {
    if let Some(v2) = cloud.instances_v2() {
        return Ok(v2.instance_metadata(node).await?.map(|m| m.node_addresses));
    }
    let instances = cloud.instances().ok_or(MetadataError::NoInstances)?;
    Ok(Some(addresses_by_provider_id_or_name(&*instances, provider_id(node), node_name(node)).await?))
}

/// Upstream node-lifecycle `getProviderID`: the node's, else the provider's.
pub async fn get_provider_id<C: Cloud>(cloud: &C, node: &Node) -> Result<String, MetadataError> {
    let pid = provider_id(node);
    if !pid.is_empty() {
        return Ok(pid.to_owned());
    }
    if let Some(v2) = cloud.instances_v2() {
        return Ok(v2.instance_metadata(node).await?.map(|m| m.provider_id).unwrap_or_default());
    }
    get_instance_provider_id(cloud, node_name(node)).await
}
