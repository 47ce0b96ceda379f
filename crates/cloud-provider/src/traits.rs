//! Provider traits: the Rust shape of upstream's `cloudprovider.Interface`, `InstancesV2`,
//! `LoadBalancer` and `Routes`.
//!
//! Controllers are generic over these traits (static dispatch). Methods return `Send`
//! futures so controllers can run them on a multi-threaded runtime. A provider that lacks a
//! capability returns `None` from the accessor (use [`Unsupported`] as the associated type),
//! and the controller that needs it is not started.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};

use crate::error::CloudError;
use crate::events::EventSink;
use crate::types::{InstanceMetadata, LoadBalancerStatus, NodeAddress, Route};

/// A cloud provider (upstream `cloudprovider.Interface`).
pub trait Cloud: Send + Sync + 'static {
    /// The instances capability (preferred).
    type InstancesV2: InstancesV2;
    /// The legacy instances capability, used only when `instances_v2` is `None`.
    type Instances: Instances;
    /// The legacy zones capability, used with `Instances` only.
    type Zones: Zones;
    /// The load balancer capability.
    type LoadBalancer: LoadBalancer;
    /// The routes capability.
    type Routes: Routes;

    /// The provider's name; the prefix of provider IDs (`<name>://...`).
    fn provider_name(&self) -> &str;

    /// Whether the provider has a cluster ID. Without one the CCM refuses to start unless
    /// `--allow-untagged-cloud` is given.
    fn has_cluster_id(&self) -> bool;

    /// The instances capability, if supported. Controllers prefer it over `instances`.
    fn instances_v2(&self) -> Option<Arc<Self::InstancesV2>>;

    /// The legacy instances capability, if supported.
    fn instances(&self) -> Option<Arc<Self::Instances>>;

    /// The legacy zones capability, if supported.
    fn zones(&self) -> Option<Arc<Self::Zones>>;

    /// The load balancer capability, if supported and enabled.
    fn load_balancer(&self) -> Option<Arc<Self::LoadBalancer>>;

    /// The routes capability, if supported and enabled.
    fn routes(&self) -> Option<Arc<Self::Routes>>;

    /// Called once by the manager before any controller runs (upstream `Initialize`): hands
    /// the provider the sink for the events it raises itself (e.g. a Service port the cloud
    /// cannot serve). The default ignores it.
    fn initialize(&self, events: Arc<dyn EventSink>) {
        let _ = events;
    }
}

/// What a batch of lookups announced with [`InstancesV2::prefetch`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupPurpose {
    /// `instance_metadata` calls (initialization, address refresh).
    Metadata,
    /// `instance_exists`/`instance_shutdown` calls (node lifecycle).
    Lifecycle,
    /// `instance_exists`/`instance_shutdown` calls for nodes whose state just changed (a node
    /// turned NotReady): the caller needs current answers, not cached ones, so a provider
    /// should look these instances up now (one bulk request where that is cheaper).
    Recheck,
}

/// Instance lookups by node (upstream `InstancesV2`). Implementations should use
/// `spec.providerID` first and fall back to the node name.
pub trait InstancesV2: Send + Sync + 'static {
    /// Whether the node's instance exists. `Ok(false)` must mean the instance is definitely
    /// gone: the node-lifecycle controller deletes the Node on it. Any doubt is an error.
    fn instance_exists(&self, node: &Node) -> impl Future<Output = Result<bool, CloudError>> + Send;

    /// Whether the node's instance is shut down.
    fn instance_shutdown(&self, node: &Node) -> impl Future<Output = Result<bool, CloudError>> + Send;

    /// The instance's metadata. `Ok(None)` means "skip this node for now" (upstream's nil
    /// metadata): the node keeps its taint until its next event.
    fn instance_metadata(
        &self,
        node: &Node,
    ) -> impl Future<Output = Result<Option<InstanceMetadata>, CloudError>> + Send;

    /// A hint that the caller is about to look up all of `nodes` for `purpose` (a periodic
    /// sweep, a burst of initializations), so a provider can fetch them in one bulk request
    /// instead of one by one. Optional; the default does nothing. Errors are the provider's
    /// to log; lookups follow regardless.
    fn prefetch(&self, nodes: &[Arc<Node>], purpose: LookupPurpose) -> impl Future<Output = ()> + Send {
        let _ = (nodes, purpose);
        async {}
    }
}

/// Legacy instance lookups by node name or provider ID (upstream `Instances`). New providers
/// implement [`InstancesV2`]; this exists so providers written against the old interface get
/// upstream's exact behaviour.
pub trait Instances: Send + Sync + 'static {
    /// Addresses of the instance with this node name.
    fn node_addresses(&self, node_name: &str) -> impl Future<Output = Result<Vec<NodeAddress>, CloudError>> + Send;
    /// Addresses of the instance with this provider ID.
    fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> impl Future<Output = Result<Vec<NodeAddress>, CloudError>> + Send;
    /// The cloud's instance ID for this node name; `InstanceNotFound` if there is none.
    fn instance_id(&self, node_name: &str) -> impl Future<Output = Result<String, CloudError>> + Send;
    /// Instance type by node name.
    fn instance_type(&self, node_name: &str) -> impl Future<Output = Result<String, CloudError>> + Send;
    /// Instance type by provider ID.
    fn instance_type_by_provider_id(
        &self,
        provider_id: &str,
    ) -> impl Future<Output = Result<String, CloudError>> + Send;
    /// Whether the instance exists (`Ok(false)` deletes the node).
    fn instance_exists_by_provider_id(
        &self,
        provider_id: &str,
    ) -> impl Future<Output = Result<bool, CloudError>> + Send;
    /// Whether the instance is shut down.
    fn instance_shutdown_by_provider_id(
        &self,
        provider_id: &str,
    ) -> impl Future<Output = Result<bool, CloudError>> + Send;
}

/// A failure domain (upstream `cloudprovider.Zone`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zone {
    /// The zone, written to the Node's `topology.kubernetes.io/zone` label. Empty if unknown.
    pub failure_domain: String,
    /// The region, written to the Node's `topology.kubernetes.io/region` label. Empty if unknown.
    pub region: String,
}

/// Legacy zone lookups (upstream `Zones`), used with [`Instances`] only.
pub trait Zones: Send + Sync + 'static {
    /// Zone by provider ID.
    fn zone_by_provider_id(&self, provider_id: &str) -> impl Future<Output = Result<Zone, CloudError>> + Send;
    /// Zone by node name.
    fn zone_by_node_name(&self, node_name: &str) -> impl Future<Output = Result<Zone, CloudError>> + Send;
}

/// Load balancers for `type: LoadBalancer` services (upstream `LoadBalancer`).
pub trait LoadBalancer: Send + Sync + 'static {
    /// The load balancer's status, or `None` if it does not exist.
    fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> impl Future<Output = Result<Option<LoadBalancerStatus>, CloudError>> + Send;

    /// The name the provider uses for the service's load balancer.
    fn get_load_balancer_name(&self, cluster_name: &str, service: &Service) -> String;

    /// Creates or updates the load balancer and returns its status.
    fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> impl Future<Output = Result<LoadBalancerStatus, CloudError>> + Send;

    /// Updates the load balancer's backends to `nodes`.
    fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Deletes the load balancer if it exists. Must never return `ImplementedElsewhere`.
    fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// The Node label keys the provider reads when it picks the service's backends among the
    /// nodes it is given (for example a node selector the service configures). A change of one
    /// of these labels on a node updates the service's load balancer like a node joining or
    /// leaving does; changes of other labels cost nothing. Pure and cheap: it is asked on
    /// every node label change. Default: none (upstream's behaviour).
    fn node_label_keys(&self, _service: &Service) -> Vec<String> {
        Vec::new()
    }

    /// Whether the controller may call the provider for one Service while another call for
    /// that Service is still running (calls for different Services always may overlap).
    ///
    /// Upstream's service controller never overlaps a Service's own syncs (its workqueue hands
    /// a key to one worker at a time), but its node sync calls `update_load_balancer` (and
    /// `get_load_balancer` after a failed update) from its own goroutine, alongside whatever
    /// `get_load_balancer`, `ensure_load_balancer` or `ensure_load_balancer_deleted` a
    /// Service's sync is running; upstream providers must take that. Default `false`: this
    /// controller holds a lock per Service around each Service sync and each node-sync update,
    /// so no two calls for one Service overlap. `true`: the node sync goes on alongside a
    /// Service's sync, as upstream's does.
    fn calls_for_one_service_may_overlap(&self) -> bool {
        false
    }
}

/// Routes for pod CIDRs (upstream `Routes`).
pub trait Routes: Send + Sync + 'static {
    /// All routes of the cluster.
    fn list_routes(&self, cluster_name: &str) -> impl Future<Output = Result<Vec<Route>, CloudError>> + Send;

    /// Creates a route; `name_hint` is the node's UID.
    fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Deletes a route.
    fn delete_route(&self, cluster_name: &str, route: &Route) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// The canonical form of a provider ID, by which routes are matched to nodes: two
    /// provider IDs naming the same instance must give the same string (a Node's
    /// `spec.providerID` may be written differently from the ID the provider reports, e.g.
    /// with leading zeros in a number). Not a validation: an ID the provider does not
    /// understand is returned as it is. Default: the ID itself.
    fn canonical_provider_id<'a>(&self, provider_id: &'a str) -> Cow<'a, str> {
        Cow::Borrowed(provider_id)
    }
}

/// The associated type for a capability a provider does not have. It has no values, so its
/// methods can never be called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {}

impl InstancesV2 for Unsupported {
    async fn instance_exists(&self, _: &Node) -> Result<bool, CloudError> {
        match *self {}
    }
    async fn instance_shutdown(&self, _: &Node) -> Result<bool, CloudError> {
        match *self {}
    }
    async fn instance_metadata(&self, _: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        match *self {}
    }
}

impl Instances for Unsupported {
    async fn node_addresses(&self, _: &str) -> Result<Vec<NodeAddress>, CloudError> {
        match *self {}
    }
    async fn node_addresses_by_provider_id(&self, _: &str) -> Result<Vec<NodeAddress>, CloudError> {
        match *self {}
    }
    async fn instance_id(&self, _: &str) -> Result<String, CloudError> {
        match *self {}
    }
    async fn instance_type(&self, _: &str) -> Result<String, CloudError> {
        match *self {}
    }
    async fn instance_type_by_provider_id(&self, _: &str) -> Result<String, CloudError> {
        match *self {}
    }
    async fn instance_exists_by_provider_id(&self, _: &str) -> Result<bool, CloudError> {
        match *self {}
    }
    async fn instance_shutdown_by_provider_id(&self, _: &str) -> Result<bool, CloudError> {
        match *self {}
    }
}

impl Zones for Unsupported {
    async fn zone_by_provider_id(&self, _: &str) -> Result<Zone, CloudError> {
        match *self {}
    }
    async fn zone_by_node_name(&self, _: &str) -> Result<Zone, CloudError> {
        match *self {}
    }
}

impl LoadBalancer for Unsupported {
    async fn get_load_balancer(&self, _: &str, _: &Service) -> Result<Option<LoadBalancerStatus>, CloudError> {
        match *self {}
    }
    fn get_load_balancer_name(&self, _: &str, _: &Service) -> String {
        match *self {}
    }
    async fn ensure_load_balancer(&self, _: &str, _: &Service, _: &[Node]) -> Result<LoadBalancerStatus, CloudError> {
        match *self {}
    }
    async fn update_load_balancer(&self, _: &str, _: &Service, _: &[Node]) -> Result<(), CloudError> {
        match *self {}
    }
    async fn ensure_load_balancer_deleted(&self, _: &str, _: &Service) -> Result<(), CloudError> {
        match *self {}
    }
}

impl Routes for Unsupported {
    async fn list_routes(&self, _: &str) -> Result<Vec<Route>, CloudError> {
        match *self {}
    }
    async fn create_route(&self, _: &str, _: &str, _: &Route) -> Result<(), CloudError> {
        match *self {}
    }
    async fn delete_route(&self, _: &str, _: &Route) -> Result<(), CloudError> {
        match *self {}
    }
}

/// `"a"` + the UID without dashes, cut to 32 bytes (upstream `DefaultLoadBalancerName`; a
/// UID is ASCII, anything else is cut before the character that would pass byte 32).
pub fn default_load_balancer_name(service: &Service) -> String {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    let mut name: String = std::iter::once('a').chain(uid.chars().filter(|c| *c != '-')).collect();
    let cut = (0..=32.min(name.len())).rev().find(|i| name.is_char_boundary(*i)).unwrap_or(0);
    name.truncate(cut);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_lb_name_matches_upstream() {
        let mut svc = Service::default();
        svc.metadata.uid = Some("1c5a4b1d-9a6e-4a80-8b4f-0e5e8a0c9f11".into());
        assert_eq!(default_load_balancer_name(&svc), "a1c5a4b1d9a6e4a808b4f0e5e8a0c9f1");
        assert_eq!(default_load_balancer_name(&svc).len(), 32);
    }

    #[test]
    fn default_lb_name_of_a_non_ascii_uid_is_cut_at_a_character() {
        // Found by fuzzing (fuzz/ service_spec): `String::truncate(32)` panicked when byte 32
        // fell inside a character. A UID is a UUID in practice, but this is outside input.
        let mut svc = Service::default();
        svc.metadata.uid = Some(format!("{}é-tail", "0".repeat(30)));
        assert_eq!(default_load_balancer_name(&svc), format!("a{}", "0".repeat(30)), "é would end at byte 33");
    }
}
