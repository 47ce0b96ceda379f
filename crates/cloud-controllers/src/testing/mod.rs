//! Test doubles shared by the controller tests: [`FakeCloud`], a port of upstream's
//! `k8s.io/cloud-provider/fake` `Cloud` (what the node, node-lifecycle and service tests use),
//! plus small `Node` builders and a node comparison with the API server's notion of equality.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_provider::{
    Cloud, CloudError, InstanceMetadata, Instances, InstancesV2, IpMode, LoadBalancer, LoadBalancerIngress,
    LoadBalancerStatus, NodeAddress, Unsupported, Zone, Zones, default_load_balancer_name,
};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Service, ServicePort};

mod nodes;
mod routes;

pub(crate) use nodes::*;
pub(crate) use routes::*;

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
    /// `Hosts`: the Nodes the call was given as backends.
    pub hosts: Vec<Node>,
}

/// Upstream `fakecloud.UpdateBalancerCall`: one `EnsureLoadBalancer` or `UpdateLoadBalancer`
/// call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UpdateBalancerCall {
    /// `Service`: the Service the call was made for, as the controller passed it.
    pub service: Service,
    /// `Hosts`: the Nodes the call was given as backends.
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
    /// `UpdateCalls`: every `UpdateLoadBalancer` call, in order.
    pub update_calls: Vec<UpdateBalancerCall>,
    /// `EnsureCalls`: every `EnsureLoadBalancer` call, in order.
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
    /// `DisableInstances`: `instances()` is `None` when set.
    pub disable_instances: bool,
    /// `DisableZones`: `zones()` is `None` when set.
    pub disable_zones: bool,
    /// `DisableLoadBalancers`: `load_balancer()` is `None` when set.
    pub disable_load_balancers: bool,
    /// The load balancer state (`Exists`, `Err`, `ExternalIP`, `Balancers`, the call logs).
    pub lb: Mutex<FakeBalancers>,
    /// `EnsureCallCb`: awaited after each `EnsureLoadBalancer` call was recorded.
    pub ensure_call_cb: Option<CallCallback>,
    /// `UpdateCallCb`: awaited after each `UpdateLoadBalancer` call was recorded.
    pub update_call_cb: Option<CallCallback>,
    /// The node label keys the fake reads for every Service's backends (not upstream's:
    /// [`LoadBalancer::node_label_keys`]).
    pub node_label_keys: Vec<String>,
    /// The answer of [`LoadBalancer::calls_for_one_service_may_overlap`] (not upstream's).
    pub calls_for_one_service_may_overlap: bool,
    /// `ExistsByProviderID` (answer of `InstanceExists` and `InstanceExistsByProviderID`).
    pub exists_by_provider_id: bool,
    /// `ErrByProviderID` (error of the same two calls).
    pub err_by_provider_id: Option<FakeError>,
    /// `NodeShutdown` (answer of `InstanceShutdown` and `InstanceShutdownByProviderID`).
    pub node_shutdown: bool,
    /// `ErrShutdownByProviderID` (error of `InstanceShutdown` and `InstanceShutdownByProviderID`).
    pub err_shutdown_by_provider_id: Option<FakeError>,
    /// `MetadataErr` (error of `InstanceMetadata`).
    pub metadata_err: Option<FakeError>,
    /// `Addresses`: the answer of every address lookup (`NodeAddresses*`, V2 metadata).
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
    /// `AdditionalLabels`: extra labels V2 `InstanceMetadata` returns for every node.
    pub additional_labels: BTreeMap<String, String>,
    /// `OverrideInstanceMetadata`: when set, `InstanceMetadata` returns its answer (and, as
    /// upstream, records no call).
    pub override_instance_metadata: Option<MetadataOverride>,
    /// `RequestDelay`: every recorded call sleeps this long first.
    pub request_delay: Duration,
    /// `Calls`: every call, by upstream's names.
    pub calls: Mutex<Vec<String>>,
    /// The next this many `instance_exists` calls panic (a provider bug).
    pub exists_panics: AtomicU32,
    /// The next this many `node_addresses_by_provider_id` calls panic (a provider bug).
    pub addresses_panics: AtomicU32,
}

/// Panics if `pending` is above zero, counting it down: a provider bug, for the tests of what
/// the controllers do with one.
fn panic_if_pending(pending: &AtomicU32, call: &str) {
    if pending.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok() {
        panic!("the fake provider's {call} hit a bug");
    }
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
        panic_if_pending(&self.exists_panics, "instance_exists");
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
            node_prefixes: Vec::new(),
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
        panic_if_pending(&self.addresses_panics, "node_addresses_by_provider_id");
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

    fn node_label_keys(&self, _service: &Service) -> Vec<String> {
        self.node_label_keys.clone()
    }

    fn calls_for_one_service_may_overlap(&self) -> bool {
        self.calls_for_one_service_may_overlap
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
