//! Test doubles shared by the controller tests: [`FakeCloud`], a port of upstream's
//! `k8s.io/cloud-provider/fake` `Cloud` (what the node, node-lifecycle and service tests use),
//! plus small `Node` builders and a node comparison with the API server's notion of equality.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_provider::{
    AddressType, Cloud, CloudError, InstanceMetadata, Instances, InstancesV2, IpMode, LoadBalancer,
    LoadBalancerIngress, LoadBalancerStatus, NodeAddress, Unsupported, Zone, Zones, default_load_balancer_name,
};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Service, ServicePort, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Upstream `defaultProviderName`.
const DEFAULT_PROVIDER_NAME: &str = "fake";

/// An error the fake returns. `CloudError` is not `Clone`, and Go's fake hands out the same
/// error value on every call, so the fake keeps a recipe and builds a fresh error each time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FakeError {
    /// `cloudprovider.NotImplemented`.
    NotImplemented,
    /// `cloudprovider.InstanceNotFound`.
    InstanceNotFound,
    /// `errors.New(msg)`.
    Msg(&'static str),
    /// A transient failure (an outage): `CloudError::transient`.
    Transient(&'static str),
    /// `api.NewRetryError(msg, delay)`.
    Retry(&'static str, Duration),
    /// `cloudprovider.ImplementedElsewhere`.
    ImplementedElsewhere,
}

impl FakeError {
    pub(crate) fn to_cloud(&self) -> CloudError {
        match self {
            FakeError::NotImplemented => CloudError::NotImplemented,
            FakeError::InstanceNotFound => CloudError::InstanceNotFound,
            FakeError::Msg(msg) => CloudError::failed("FakeError", *msg),
            FakeError::Transient(msg) => CloudError::transient("FakeOutage", *msg, None),
            FakeError::Retry(msg, delay) => CloudError::Retry { message: (*msg).to_owned(), retry_after: *delay },
            FakeError::ImplementedElsewhere => CloudError::ImplementedElsewhere,
        }
    }
}

fn result<T>(value: T, err: &Option<FakeError>) -> Result<T, CloudError> {
    match err {
        Some(e) => Err(e.to_cloud()),
        None => Ok(value),
    }
}

/// Upstream `OverrideInstanceMetadata`.
pub(crate) type MetadataOverride =
    Box<dyn Fn(&Node) -> Result<Option<InstanceMetadata>, CloudError> + Send + Sync + 'static>;

/// Upstream `fakecloud.Balancer`: what `EnsureLoadBalancer` stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Balancer {
    /// `Name` (`GetLoadBalancerName`).
    pub name: String,
    /// `Region` (the fake's zone's region).
    pub region: String,
    /// `LoadBalancerIP` (`spec.loadBalancerIP`).
    pub load_balancer_ip: String,
    /// `Ports` (`spec.ports`).
    pub ports: Vec<ServicePort>,
    /// `Hosts`.
    pub hosts: Vec<Node>,
}

/// Upstream `fakecloud.UpdateBalancerCall`: one `EnsureLoadBalancer` or `UpdateLoadBalancer`
/// call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UpdateBalancerCall {
    /// `Service`.
    pub service: Service,
    /// `Hosts`.
    pub hosts: Vec<Node>,
}

/// Upstream `EnsureCallCb` / `UpdateCallCb`, awaited after the call was recorded.
pub(crate) type CallCallback = Box<dyn Fn(UpdateBalancerCall) -> BoxFuture<'static, ()> + Send + Sync + 'static>;

/// The load balancer state of the fake, behind a lock because upstream's tests change it
/// between steps (`cloud.Err = ...`, `cloud.UpdateCalls = nil`).
#[derive(Debug, Default)]
pub(crate) struct FakeBalancers {
    /// `Exists` (answer of `GetLoadBalancer`).
    pub exists: bool,
    /// `Err` as the load balancer methods see it (upstream shares one `Err` with the address
    /// and zone lookups; those read [`Fake::err`]).
    pub err: Option<FakeError>,
    /// Only for `UpdateLoadBalancer`, overriding `err` (not upstream's: its fake cannot fail
    /// an update while `GetLoadBalancer` answers).
    pub update_err: Option<FakeError>,
    /// Only for `EnsureLoadBalancerDeleted`, overriding `err` (not upstream's, likewise).
    pub delete_err: Option<FakeError>,
    /// `ExternalIP` (the ingress IP of every status; upstream's zero value prints `<nil>`,
    /// which an API server refuses, so tests set one).
    pub external_ip: Option<String>,
    /// `BalancerIPMode`.
    pub ip_mode: Option<IpMode>,
    /// `Balancers`, by name.
    pub balancers: BTreeMap<String, Balancer>,
    /// `UpdateCalls`.
    pub update_calls: Vec<UpdateBalancerCall>,
    /// `EnsureCalls`.
    pub ensure_calls: Vec<UpdateBalancerCall>,
}

/// The state and knobs of the fake (upstream `fakecloud.Cloud`'s fields, snake_case).
/// Build one with struct-update syntax (`Fake { enable_instances_v2: true, ..Fake::default() }`)
/// and wrap it in a [`FakeCloud`].
#[derive(Default)]
pub(crate) struct Fake {
    /// `Provider`; empty means `"fake"`.
    pub provider: String,
    /// `EnableInstancesV2`: `instances_v2()` is `Some` only when set.
    pub enable_instances_v2: bool,
    /// `DisableInstances`.
    pub disable_instances: bool,
    /// `DisableZones`.
    pub disable_zones: bool,
    /// `DisableLoadBalancers`.
    pub disable_load_balancers: bool,
    /// The load balancer state (`Exists`, `Err`, `ExternalIP`, `Balancers`, the call logs).
    pub lb: Mutex<FakeBalancers>,
    /// `EnsureCallCb`.
    pub ensure_call_cb: Option<CallCallback>,
    /// `UpdateCallCb`.
    pub update_call_cb: Option<CallCallback>,
    /// `ExistsByProviderID` (answer of `InstanceExists` and `InstanceExistsByProviderID`).
    pub exists_by_provider_id: bool,
    /// `ErrByProviderID` (error of the same two calls).
    pub err_by_provider_id: Option<FakeError>,
    /// `NodeShutdown` (answer of `InstanceShutdown` and `InstanceShutdownByProviderID`).
    pub node_shutdown: bool,
    /// `ErrShutdownByProviderID`.
    pub err_shutdown_by_provider_id: Option<FakeError>,
    /// `MetadataErr` (error of `InstanceMetadata`).
    pub metadata_err: Option<FakeError>,
    /// `Addresses`.
    pub addresses: Vec<NodeAddress>,
    /// `Err` (error of the address and zone lookups).
    pub err: Option<FakeError>,
    /// `ExtID`: `InstanceID` by node name (missing ⇒ `""`, no error).
    pub ext_id: BTreeMap<String, String>,
    /// `ExtIDErr`: `InstanceID` errors by node name.
    pub ext_id_err: BTreeMap<String, FakeError>,
    /// `InstanceTypes`. Keyed like upstream: `InstanceType` looks up the node name,
    /// `InstanceTypeByProviderID` and V2 `InstanceMetadata` look up the provider ID string.
    pub instance_types: BTreeMap<String, String>,
    /// `ProviderID`: V2 metadata's provider ID by node name (missing ⇒ `""`).
    pub provider_id: BTreeMap<String, String>,
    /// The embedded `cloudprovider.Zone`.
    pub zone: Zone,
    /// `AdditionalLabels`.
    pub additional_labels: BTreeMap<String, String>,
    /// `OverrideInstanceMetadata`: when set, `InstanceMetadata` returns its answer (and, as
    /// upstream, records no call).
    pub override_instance_metadata: Option<MetadataOverride>,
    /// `RequestDelay`: every recorded call sleeps this long first.
    pub request_delay: Duration,
    /// `Calls`: every call, by upstream's names.
    pub calls: Mutex<Vec<String>>,
}

impl Fake {
    async fn add_call(&self, desc: &str) {
        if !self.request_delay.is_zero() {
            tokio::time::sleep(self.request_delay).await;
        }
        self.calls.lock().expect("calls lock").push(desc.to_owned());
    }

    /// The calls recorded so far.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("calls lock").clone()
    }

    /// `ClearCalls`.
    pub(crate) fn clear_calls(&self) {
        self.calls.lock().expect("calls lock").clear();
    }

    /// The load balancer state.
    pub(crate) fn lb(&self) -> std::sync::MutexGuard<'_, FakeBalancers> {
        self.lb.lock().expect("lb lock")
    }

    fn lb_result<T>(&self, value: T) -> Result<T, CloudError> {
        result(value, &self.lb().err)
    }

    fn status(&self) -> LoadBalancerStatus {
        let lb = self.lb();
        LoadBalancerStatus {
            ingress: vec![LoadBalancerIngress { ip: lb.external_ip.clone(), hostname: None, ip_mode: lb.ip_mode }],
        }
    }
}

/// The fake as a [`Cloud`]. Every capability handle is the same shared [`Fake`], so the test
/// can read [`Fake::calls`] through this value (it derefs to the [`Fake`]).
#[derive(Clone)]
pub(crate) struct FakeCloud(Arc<Fake>);

impl From<Fake> for FakeCloud {
    fn from(fake: Fake) -> Self {
        FakeCloud(Arc::new(fake))
    }
}

impl Deref for FakeCloud {
    type Target = Fake;
    fn deref(&self) -> &Fake {
        &self.0
    }
}

impl Cloud for FakeCloud {
    type InstancesV2 = Fake;
    type Instances = Fake;
    type Zones = Fake;
    type LoadBalancer = Fake;
    type Routes = Unsupported;

    fn provider_name(&self) -> &str {
        if self.0.provider.is_empty() { DEFAULT_PROVIDER_NAME } else { &self.0.provider }
    }

    fn has_cluster_id(&self) -> bool {
        true
    }

    fn instances_v2(&self) -> Option<Arc<Fake>> {
        self.0.enable_instances_v2.then(|| self.0.clone())
    }

    fn instances(&self) -> Option<Arc<Fake>> {
        (!self.0.disable_instances).then(|| self.0.clone())
    }

    fn zones(&self) -> Option<Arc<Fake>> {
        (!self.0.disable_zones).then(|| self.0.clone())
    }

    fn load_balancer(&self) -> Option<Arc<Fake>> {
        (!self.0.disable_load_balancers).then(|| self.0.clone())
    }

    fn routes(&self) -> Option<Arc<Unsupported>> {
        None
    }
}

impl InstancesV2 for Fake {
    async fn instance_exists(&self, _node: &Node) -> Result<bool, CloudError> {
        self.add_call("instance-exists").await;
        result(self.exists_by_provider_id, &self.err_by_provider_id)
    }

    async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
        self.add_call("instance-shutdown").await;
        result(self.node_shutdown, &self.err_shutdown_by_provider_id)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        if let Some(f) = &self.override_instance_metadata {
            return f(node);
        }
        self.add_call("instance-metadata-by-provider-id").await;
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let node_pid = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default();
        let metadata = InstanceMetadata {
            provider_id: self.provider_id.get(name).cloned().unwrap_or_default(),
            instance_type: self.instance_types.get(node_pid).cloned().unwrap_or_default(),
            node_addresses: self.addresses.clone(),
            zone: self.zone.failure_domain.clone(),
            region: self.zone.region.clone(),
            additional_labels: self.additional_labels.clone(),
        };
        result(Some(metadata), &self.metadata_err)
    }
}

impl Instances for Fake {
    async fn node_addresses(&self, _node_name: &str) -> Result<Vec<NodeAddress>, CloudError> {
        self.add_call("node-addresses").await;
        result(self.addresses.clone(), &self.err)
    }

    async fn node_addresses_by_provider_id(&self, _provider_id: &str) -> Result<Vec<NodeAddress>, CloudError> {
        self.add_call("node-addresses-by-provider-id").await;
        result(self.addresses.clone(), &self.err)
    }

    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError> {
        self.add_call("instance-id").await;
        if let Some(e) = self.ext_id_err.get(node_name) {
            return Err(e.to_cloud());
        }
        Ok(self.ext_id.get(node_name).cloned().unwrap_or_default())
    }

    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError> {
        self.add_call("instance-type").await;
        Ok(self.instance_types.get(node_name).cloned().unwrap_or_default())
    }

    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError> {
        self.add_call("instance-type-by-provider-id").await;
        Ok(self.instance_types.get(provider_id).cloned().unwrap_or_default())
    }

    async fn instance_exists_by_provider_id(&self, _provider_id: &str) -> Result<bool, CloudError> {
        self.add_call("instance-exists-by-provider-id").await;
        result(self.exists_by_provider_id, &self.err_by_provider_id)
    }

    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError> {
        self.add_call("instance-shutdown-by-provider-id").await;
        if provider_id.is_empty() {
            return Err(CloudError::failed("FakeError", "cannot shutdown instance with empty providerID"));
        }
        result(self.node_shutdown, &self.err_shutdown_by_provider_id)
    }
}

impl Zones for Fake {
    async fn zone_by_provider_id(&self, _provider_id: &str) -> Result<Zone, CloudError> {
        self.add_call("get-zone-by-provider-id").await;
        result(self.zone.clone(), &self.err)
    }

    async fn zone_by_node_name(&self, _node_name: &str) -> Result<Zone, CloudError> {
        self.add_call("get-zone-by-node-name").await;
        result(self.zone.clone(), &self.err)
    }
}

impl LoadBalancer for Fake {
    async fn get_load_balancer(
        &self,
        _cluster: &str,
        _service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let exists = self.lb().exists;
        self.lb_result(exists.then(|| self.status()))
    }

    fn get_load_balancer_name(&self, _cluster: &str, service: &Service) -> String {
        default_load_balancer_name(service)
    }

    async fn ensure_load_balancer(
        &self,
        cluster: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        self.add_call("create").await;
        let call = UpdateBalancerCall { service: service.clone(), hosts: nodes.to_vec() };
        self.lb().ensure_calls.push(call.clone());
        if let Some(cb) = &self.ensure_call_cb {
            cb(call).await;
        }
        // Upstream reads the region through `GetZone`, which fails with `Err`.
        self.lb_result(())?;
        let name = self.get_load_balancer_name(cluster, service);
        let spec = service.spec.clone().unwrap_or_default();
        let balancer = Balancer {
            name: name.clone(),
            region: self.zone.region.clone(),
            load_balancer_ip: spec.load_balancer_ip.unwrap_or_default(),
            ports: spec.ports.unwrap_or_default(),
            hosts: nodes.to_vec(),
        };
        self.lb().balancers.insert(name, balancer);
        Ok(self.status())
    }

    async fn update_load_balancer(&self, _cluster: &str, service: &Service, nodes: &[Node]) -> Result<(), CloudError> {
        self.add_call("update").await;
        let call = UpdateBalancerCall { service: service.clone(), hosts: nodes.to_vec() };
        self.lb().update_calls.push(call.clone());
        if let Some(cb) = &self.update_call_cb {
            cb(call).await;
        }
        let update_err = self.lb().update_err.clone();
        match update_err {
            Some(e) => Err(e.to_cloud()),
            None => self.lb_result(()),
        }
    }

    async fn ensure_load_balancer_deleted(&self, _cluster: &str, _service: &Service) -> Result<(), CloudError> {
        self.add_call("delete").await;
        let delete_err = self.lb().delete_err.clone();
        match delete_err {
            Some(e) => Err(e.to_cloud()),
            None => self.lb_result(()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Values and builders.

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

// ---------------------------------------------------------------------------------------------
// Routes: a port of upstream's fake `RouteMap` (`ListRoutes`, `CreateRoute`, `DeleteRoute`).

/// Upstream's `fakecloud.Route`: a route and the cluster it belongs to.
#[derive(Debug, Clone)]
pub(crate) struct FakeRoute {
    pub cluster_name: String,
    pub route: cloud_provider::Route,
}

/// The routes capability of upstream's fake, plus scripted failures.
///
/// Differences from upstream: a failed call does not make every later call fail (upstream
/// keeps the error in `f.Err`, so after one failed create its `ListRoutes` fails forever);
/// `fail_creates` fails the next creations with a transient error (a busy network).
#[derive(Default)]
pub(crate) struct FakeRoutes {
    /// `RouteMap`, by route name.
    pub route_map: Mutex<BTreeMap<String, FakeRoute>>,
    /// Every call, by upstream's names.
    pub calls: Mutex<Vec<String>>,
    /// How many of the next `CreateRoute` calls fail transiently.
    pub fail_creates: Mutex<u32>,
    /// `ListRoutes` fails with this message while set.
    pub list_error: Mutex<Option<&'static str>>,
}

impl FakeRoutes {
    /// A fake holding `routes` of `cluster` (keyed by their names, as upstream's tests do).
    pub(crate) fn with_routes(cluster: &str, routes: &[cloud_provider::Route]) -> Self {
        let fake = FakeRoutes::default();
        {
            let mut map = fake.route_map.lock().expect("lock");
            for r in routes {
                map.insert(r.name.clone(), FakeRoute { cluster_name: cluster.to_owned(), route: r.clone() });
            }
        }
        fake
    }

    fn add_call(&self, desc: &str) {
        self.calls.lock().expect("calls lock").push(desc.to_owned());
    }

    /// The calls recorded so far.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("calls lock").clone()
    }

    /// The routes of `cluster` now.
    pub(crate) fn routes(&self, cluster: &str) -> Vec<cloud_provider::Route> {
        self.route_map
            .lock()
            .expect("lock")
            .values()
            .filter(|r| r.cluster_name == cluster)
            .map(|r| r.route.clone())
            .collect()
    }
}

impl cloud_provider::Routes for FakeRoutes {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<cloud_provider::Route>, CloudError> {
        self.add_call("list-routes");
        if let Some(msg) = *self.list_error.lock().expect("lock") {
            return Err(CloudError::transient("FakeError", msg, None));
        }
        Ok(self.routes(cluster_name))
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        _name_hint: &str,
        route: &cloud_provider::Route,
    ) -> Result<(), CloudError> {
        self.add_call("create-route");
        {
            let mut fail = self.fail_creates.lock().expect("lock");
            if *fail > 0 {
                *fail -= 1;
                return Err(CloudError::transient("FakeBusy", "the network is busy", None));
            }
        }
        let name = format!("{cluster_name}-{}-{}", route.target_node, route.destination_cidr);
        let mut map = self.route_map.lock().expect("lock");
        if map.contains_key(&name) {
            return Err(CloudError::failed("FakeError", format!("route {name:?} already exists")));
        }
        let mut stored = route.clone();
        stored.name = name.clone();
        map.insert(name, FakeRoute { cluster_name: cluster_name.to_owned(), route: stored });
        Ok(())
    }

    async fn delete_route(&self, cluster_name: &str, route: &cloud_provider::Route) -> Result<(), CloudError> {
        self.add_call("delete-route");
        let mut map = self.route_map.lock().expect("lock");
        let key = map
            .iter()
            .find(|(_, saved)| {
                route.destination_cidr == saved.route.destination_cidr
                    && route.target_node == saved.route.target_node
                    && cluster_name == saved.cluster_name
            })
            .map(|(k, _)| k.clone());
        match key {
            Some(k) => {
                map.remove(&k);
                Ok(())
            }
            None => Err(CloudError::failed(
                "FakeError",
                format!(
                    "no route found for node:{} with DestinationCIDR== {}",
                    route.target_node, route.destination_cidr
                ),
            )),
        }
    }
}
