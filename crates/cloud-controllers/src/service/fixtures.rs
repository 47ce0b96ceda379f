//! Builders and doubles for the ports of upstream's `controller_test.go`: `newService` and its
//! tweaks, `makeNode` and its tweaks, `fakeNodeLister`, and `newController` — a
//! [`ServiceSyncer`] over upstream's fake cloud whose writes go to the real kube-apiserver of
//! test-harness through a client that records every request it sends.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use controller_runtime::EventRecorder;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Namespace, Node, NodeCondition, NodeSpec, NodeStatus, Service,
    ServicePort, ServiceSpec, ServiceStatus, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use test_harness::{ControlPlane, unique_name};

use super::nodes::{NodeListError, NodeLister};
use super::sync::{ServiceSyncer, SyncerParts};
use crate::testing::{Fake, FakeCloud};

/// How long a test waits for the API server or the controller.
pub(crate) const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Upstream's `region`.
pub(crate) const REGION: &str = "us-central";
/// The fake's ingress IP (upstream leaves `ExternalIP` nil, which prints as `<nil>`; an API
/// server refuses that in a status, so the ports set a documentation address).
pub(crate) const EXTERNAL_IP: &str = "192.0.2.1";

// ---------------------------------------------------------------------------------------------
// Services.

/// A change to a Service (upstream `serviceTweak`).
pub(crate) type ServiceTweak = Box<dyn Fn(&mut Service)>;

fn spec(s: &mut Service) -> &mut ServiceSpec {
    s.spec.get_or_insert_with(ServiceSpec::default)
}

/// Upstream `newService`: namespace `default`, the type, one TCP port 80.
pub(crate) fn new_service(name: &str, type_: &str, tweaks: Vec<ServiceTweak>) -> Service {
    let mut s = Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some(type_.to_owned()),
            ports: Some(make_service_port("TCP", 0)),
            ..Default::default()
        }),
        ..Default::default()
    };
    for tweak in tweaks {
        tweak(&mut s);
    }
    s
}

/// Upstream `copyService`.
pub(crate) fn copy_service(old: &Service, tweaks: Vec<ServiceTweak>) -> Service {
    let mut s = old.clone();
    for tweak in tweaks {
        tweak(&mut s);
    }
    s
}

/// Upstream `defaultExternalService`.
pub(crate) fn default_external_service() -> Service {
    new_service("external-balancer", "LoadBalancer", vec![])
}

/// Upstream `makeServicePort`.
pub(crate) fn make_service_port(protocol: &str, target_port: i32) -> Vec<ServicePort> {
    vec![ServicePort {
        port: 80,
        protocol: Some(protocol.to_owned()),
        target_port: (target_port > 0).then_some(IntOrString::Int(target_port)),
        ..Default::default()
    }]
}

/// Upstream `tweakAddETP`.
pub(crate) fn tweak_add_etp(policy: &'static str) -> ServiceTweak {
    Box::new(move |s| spec(s).external_traffic_policy = Some(policy.to_owned()))
}

/// Upstream `tweakAddLBIngress`.
pub(crate) fn tweak_add_lb_ingress(ip: &'static str) -> ServiceTweak {
    Box::new(move |s| {
        s.status = Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress { ip: Some(ip.to_owned()), ..Default::default() }]),
            }),
            ..Default::default()
        })
    })
}

/// Upstream `tweakAddPorts`.
pub(crate) fn tweak_add_ports(protocol: &'static str, target_port: i32) -> ServiceTweak {
    Box::new(move |s| spec(s).ports = Some(make_service_port(protocol, target_port)))
}

/// Upstream `tweakAddLBClass`.
pub(crate) fn tweak_add_lb_class(class: &'static str) -> ServiceTweak {
    Box::new(move |s| spec(s).load_balancer_class = Some(class.to_owned()))
}

/// Upstream `tweakAddFinalizers`.
pub(crate) fn tweak_add_finalizers(finalizers: &'static [&'static str]) -> ServiceTweak {
    Box::new(move |s| s.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect()))
}

/// Upstream `tweakAddDeletionTimestamp(time.Now())`.
pub(crate) fn tweak_add_deletion_timestamp() -> ServiceTweak {
    Box::new(|s| s.metadata.deletion_timestamp = Some(Time(Timestamp::now())))
}

/// Upstream `tweakAddAppProtocol`.
pub(crate) fn tweak_add_app_protocol(app_protocol: &'static str) -> ServiceTweak {
    Box::new(move |s| {
        if let Some(p) = spec(s).ports.as_mut().and_then(|p| p.first_mut()) {
            p.app_protocol = Some(app_protocol.to_owned());
        }
    })
}

/// Upstream `tweakSetIPFamilies`.
pub(crate) fn tweak_set_ip_families(families: &'static [&'static str]) -> ServiceTweak {
    Box::new(move |s| spec(s).ip_families = Some(families.iter().map(|f| f.to_string()).collect()))
}

// ---------------------------------------------------------------------------------------------
// Nodes.

/// Upstream `providerID`.
pub(crate) const PROVIDER_ID: &str = "providerID";

/// Upstream `makeNode()`: name `node`, empty labels and taints, provider ID `providerID`,
/// Ready.
pub(crate) fn make_node() -> Node {
    Node {
        metadata: ObjectMeta { name: Some("node".to_owned()), labels: Some(BTreeMap::new()), ..Default::default() },
        spec: Some(NodeSpec { taints: Some(vec![]), provider_id: Some(PROVIDER_ID.to_owned()), ..Default::default() }),
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".to_owned(),
                status: "True".to_owned(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

/// Node tweaks (upstream `tweakName`, `tweakAddTaint`, ...), chainable.
pub(crate) trait NodeTweaks: Sized {
    fn node(&mut self) -> &mut Node;
    /// `tweakName`.
    fn name(mut self, name: &str) -> Self {
        self.node().metadata.name = Some(name.to_owned());
        self
    }
    /// `tweakAddTaint` (key only).
    fn add_taint(mut self, key: &str) -> Self {
        let taint = Taint { key: key.to_owned(), ..Default::default() };
        self.node().spec.get_or_insert_with(Default::default).taints.get_or_insert_with(Vec::new).push(taint);
        self
    }
    /// `tweakSetLabel`.
    fn set_label(mut self, key: &str, value: &str) -> Self {
        self.node().metadata.labels.get_or_insert_with(BTreeMap::new).insert(key.to_owned(), value.to_owned());
        self
    }
    /// `tweakSetCondition`: replaces the condition of that type (or appends it) with only type
    /// and status.
    fn set_condition(mut self, type_: &str, status: &str) -> Self {
        let conditions =
            self.node().status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
        let new = NodeCondition { type_: type_.to_owned(), status: status.to_owned(), ..Default::default() };
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => *c = new,
            None => conditions.push(new),
        }
        self
    }
    /// `tweakSetReady`.
    fn set_ready(self, ready: bool) -> Self {
        self.set_condition("Ready", if ready { "True" } else { "False" })
    }
    /// `tweakUnsetCondition`: renames the condition's type.
    fn unset_condition(mut self, type_: &str) -> Self {
        let conditions = self.node().status.as_mut().and_then(|s| s.conditions.as_mut());
        if let Some(c) = conditions.and_then(|c| c.iter_mut().find(|c| c.type_ == type_)) {
            c.type_ = "SomethingElse".to_owned();
        }
        self
    }
    /// `tweakDeleted`.
    fn deleted(mut self) -> Self {
        self.node().metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        self
    }
    /// `tweakProviderID`.
    fn provider_id(mut self, id: &str) -> Self {
        self.node().spec.get_or_insert_with(Default::default).provider_id = Some(id.to_owned());
        self
    }
}

impl NodeTweaks for Node {
    fn node(&mut self) -> &mut Node {
        self
    }
}

/// `makeNode(tweakName(name))`, shared.
pub(crate) fn named_node(name: &str) -> Arc<Node> {
    Arc::new(make_node().name(name))
}

/// Upstream `fakeNodeLister`: fixed nodes, or an error.
#[derive(Default)]
pub(crate) struct FakeNodeLister {
    pub nodes: Mutex<Vec<Arc<Node>>>,
    pub err: Mutex<Option<String>>,
}

impl FakeNodeLister {
    /// Upstream `newFakeNodeLister(err, nodes...)`.
    pub(crate) fn new(err: Option<&str>, nodes: &[Arc<Node>]) -> Arc<Self> {
        Arc::new(FakeNodeLister { nodes: Mutex::new(nodes.to_vec()), err: Mutex::new(err.map(str::to_owned)) })
    }

    /// Replaces the nodes and the error (upstream assigns a new lister).
    pub(crate) fn set(&self, err: Option<&str>, nodes: &[Arc<Node>]) {
        *self.nodes.lock().expect("lock") = nodes.to_vec();
        *self.err.lock().expect("lock") = err.map(str::to_owned);
    }
}

impl NodeLister for FakeNodeLister {
    fn list(&self) -> Result<Vec<Arc<Node>>, NodeListError> {
        if let Some(e) = self.err.lock().expect("lock").clone() {
            return Err(NodeListError(e));
        }
        Ok(self.nodes.lock().expect("lock").clone())
    }
}

// ---------------------------------------------------------------------------------------------
// The controller.

/// Every request a client sent: method and path.
pub(crate) type RequestLog = Arc<Mutex<Vec<(String, String)>>>;

/// A tower layer recording each request before passing it on.
#[derive(Clone)]
struct Recording<S> {
    inner: S,
    log: RequestLog,
}

impl<S, B> tower::Service<http::Request<B>> for Recording<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        self.log.lock().expect("lock").push((req.method().to_string(), req.uri().path().to_owned()));
        self.inner.call(req)
    }
}

/// A client of the CCM's RBAC-restricted identity that records every request.
pub(crate) async fn recording_client() -> (kube::Client, RequestLog) {
    let cp = ControlPlane::shared().await.expect("control plane");
    let kubeconfig = kube::config::Kubeconfig::read_from(cp.ccm_kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .expect("config");
    let log = RequestLog::default();
    let layer = tower::layer::layer_fn({
        let log = log.clone();
        move |inner| Recording { inner, log: log.clone() }
    });
    let client = kube::client::ClientBuilder::try_from(config).expect("client builder").with_layer(&layer).build();
    (client, log)
}

/// A namespace of its own (the upstream tables all use `default`; the ports rename it so
/// tests can run side by side on one API server).
pub(crate) async fn test_namespace() -> String {
    let cp = ControlPlane::shared().await.expect("control plane");
    let admin = cp.admin_client().await.expect("admin client");
    let name = unique_name("svc");
    let ns =
        Namespace { metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(admin).create(&PostParams::default(), &ns).await.expect("namespace");
    name
}

/// Upstream `newController`: the fake cloud (region `us-central`), an empty Service cache the
/// test fills, upstream's fake node lister, and the real API server behind a recording
/// client.
pub(crate) struct TestController {
    pub syncer: Arc<ServiceSyncer<Fake>>,
    pub cloud: FakeCloud,
    pub nodes: Arc<FakeNodeLister>,
    pub services: Writer<Service>,
    pub requests: RequestLog,
    pub admin: kube::Client,
}

impl TestController {
    /// A controller over `fake` (region and ingress IP set as upstream's `newController` does).
    pub(crate) async fn new(mut fake: Fake) -> TestController {
        fake.zone.region = REGION.to_owned();
        fake.lb().external_ip = Some(EXTERNAL_IP.to_owned());
        let cloud = FakeCloud::from(fake);
        let (client, requests) = recording_client().await;
        let admin = ControlPlane::shared().await.expect("control plane").admin_client().await.expect("admin");
        let services = Writer::default();
        let nodes = FakeNodeLister::new(None, &[]);
        let syncer = Arc::new(ServiceSyncer::new(SyncerParts {
            balancer: cloud_provider::Cloud::load_balancer(&cloud).expect("load balancers"),
            cluster_name: "test-cluster".to_owned(),
            class: None,
            services: services.as_reader(),
            nodes: nodes.clone(),
            client: client.clone(),
            params: kube::api::PatchParams::default(),
            events: EventRecorder::new(client, super::EVENT_COMPONENT),
            metrics: super::ServiceMetrics::default(),
        }));
        TestController { syncer, cloud, nodes, services, requests, admin }
    }

    /// Puts `service` in the Service cache (the informer's store).
    pub(crate) fn cache_service(&mut self, service: &Service) {
        self.services.apply_watcher_event(&watcher::Event::Apply(service.clone()));
    }

    /// Creates `service` on the API server (in `namespace`), sets its status as given, and
    /// returns the stored object.
    ///
    /// A Service of another type with a load balancer status is reached the only way a real
    /// API server allows: created as `LoadBalancer` with that status, then switched to its
    /// type, and the server clears `status.loadBalancer` on that switch (writing an ingress to a
    /// non-LoadBalancer Service is refused with 422).
    pub(crate) async fn create(&self, namespace: &str, service: &Service) -> Service {
        let api: Api<Service> = Api::namespaced(self.admin.clone(), namespace);
        let mut svc = service.clone();
        svc.metadata.namespace = Some(namespace.to_owned());
        svc.metadata.deletion_timestamp = None;
        let spec = svc.spec.get_or_insert_with(Default::default);
        let final_type = spec.type_.clone();
        let has_ingress = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .is_some_and(|i| !i.is_empty());
        let switch_type = has_ingress && final_type.as_deref() != Some("LoadBalancer");
        if switch_type {
            spec.type_ = Some("LoadBalancer".to_owned());
        }
        let created = api.create(&PostParams::default(), &svc).await.expect("create service");
        let name = created.metadata.name.clone().unwrap_or_default();
        let with_status = match &service.status {
            Some(status) if status != &ServiceStatus::default() => {
                let patch = serde_json::json!({ "status": status });
                api.patch_status(
                    created.metadata.name.as_deref().unwrap_or_default(),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(patch),
                )
                .await
                .expect("status")
            }
            _ => created,
        };
        if !switch_type {
            return with_status;
        }
        let patch = serde_json::json!({ "spec": { "type": final_type } });
        let switched = api
            .patch(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch))
            .await
            .expect("switch the type");
        let ingress =
            switched.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_ref());
        assert_eq!(
            ingress, None,
            "the API server clears the load balancer status of a Service that is no longer a LoadBalancer"
        );
        switched
    }

    /// The number of PATCH requests to Services recorded since the last call, then clears the
    /// log (upstream `client.Actions()` filtered by `Matches("patch", "services")`).
    /// The paths of the requests with `method` sent so far (kept in the log).
    pub(crate) fn requests_of(&self, method: &str) -> Vec<String> {
        self.requests.lock().expect("lock").iter().filter(|(m, _)| m == method).map(|(_, p)| p.clone()).collect()
    }

    pub(crate) fn take_service_patches(&self) -> usize {
        let mut log = self.requests.lock().expect("lock");
        let n = log.iter().filter(|(m, p)| m == "PATCH" && p.contains("/services/")).count();
        log.clear();
        n
    }
}

/// Waits for an event with `reason` about Service `ns/name` and returns it.
pub(crate) async fn wait_for_event_in(
    c: &TestController,
    ns: &str,
    name: &str,
    reason: &str,
) -> test_harness::ObservedEvent {
    let description = format!("{reason} about {ns}/{name}");
    test_harness::wait_for_value(PATIENCE, &description, async || {
        let events = test_harness::events_for(&c.admin, "Service", name).await.ok()?;
        events.into_iter().find(|e| e.namespace == ns && e.reason == reason)
    })
    .await
    .expect("event")
}
