//! Shared set-up of the Load Balancer tests against the Hetzner fake.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_provider::events::{EventObject, EventSink, ProviderEvent};
use hcloud_api::models::NetworkId;
use hcloud_api::{Client, PollPolicy, RetryPolicy, SecretString};
use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use hcloud_provider::HcloudLoadBalancers;
use hcloud_provider::load_balancers::LbDefaults;
use hcloud_provider::load_balancers::tracker::TrackerPolicy;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};

pub const UID: &str = "5b1c3d2e-7a4f-4e0b-9c1d-2e3f4a5b6c7d";

/// Records the provider's events and resync requests.
#[derive(Default)]
pub struct Events(Mutex<Vec<ProviderEvent>>, Mutex<Vec<String>>);

impl EventSink for Events {
    fn publish(&self, e: ProviderEvent) {
        self.0.lock().unwrap().push(e);
    }

    fn resync(&self, object: &EventObject) {
        self.1.lock().unwrap().push(format!("{}/{}", object.kind, object.name));
    }
}

impl Events {
    /// `Kind/name` of every object the provider asked to have reconciled again.
    pub fn resyncs(&self) -> Vec<String> {
        self.1.lock().unwrap().clone()
    }

    pub fn reasons(&self) -> Vec<(String, String)> {
        self.0.lock().unwrap().iter().map(|e| (e.object.name.clone(), e.reason.to_string())).collect()
    }

    pub fn with_reason(&self, reason: &str) -> Vec<ProviderEvent> {
        self.0.lock().unwrap().iter().filter(|e| e.reason == reason).cloned().collect()
    }
}

pub struct Setup {
    pub fake: FakeServer,
    pub h: FakeHandle,
    pub lbs: HcloudLoadBalancers,
    pub events: Arc<Events>,
}

pub fn client(fake: &FakeServer) -> Client {
    Client::builder(SecretString::from("t".repeat(64)))
        .endpoint(fake.base_url())
        .retry_policy(RetryPolicy {
            max_retries: 1,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        })
        .poll_policy(PollPolicy { initial: Duration::from_millis(10), max: Duration::from_millis(50) })
        .build()
        .expect("client")
}

/// The tracker polls fast against the fake (the deadline stays the default).
pub fn fast_policy() -> TrackerPolicy {
    TrackerPolicy {
        wait_initial: Duration::from_millis(10),
        wait_max: Duration::from_millis(50),
        sweep_initial: Duration::from_millis(40),
        sweep_max: Duration::from_millis(100),
        ..TrackerPolicy::default()
    }
}

pub async fn setup_with(defaults: LbDefaults, network: Option<NetworkId>) -> Setup {
    setup_with_policy(defaults, network, fast_policy()).await
}

pub async fn setup_with_policy(defaults: LbDefaults, network: Option<NetworkId>, policy: TrackerPolicy) -> Setup {
    let fake =
        FakeServer::start(FakeConfig::default().with_action_delay(Duration::from_millis(30))).await.expect("fake");
    let h = fake.handle();
    let lbs = HcloudLoadBalancers::with_policy(client(&fake), defaults, network, Duration::from_secs(300), policy);
    let events = Arc::new(Events::default());
    lbs.set_events(events.clone());
    Setup { fake, h, lbs, events }
}

/// A fake with network `k8s` (10.0.0.0/8, subnet 10.0.0.0/24) given as `HCLOUD_NETWORK`.
pub async fn setup_net() -> (Setup, u64) {
    let fake =
        FakeServer::start(FakeConfig::default().with_action_delay(Duration::from_millis(30))).await.expect("fake");
    let h = fake.handle();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).expect("net");
    let lbs = HcloudLoadBalancers::with_policy(
        client(&fake),
        LbDefaults::default(),
        Some(NetworkId(net as i64)),
        Duration::from_secs(300),
        TrackerPolicy::default(),
    );
    let events = Arc::new(Events::default());
    lbs.set_events(events.clone());
    (Setup { fake, h, lbs, events }, net)
}

pub async fn setup() -> Setup {
    setup_with(LbDefaults { location: Some("fsn1".into()), ..Default::default() }, None).await
}

pub fn service(annotations: &[(&str, &str)], ports: &[(i32, &str, i32)]) -> Service {
    let mut svc = Service::default();
    svc.metadata.namespace = Some("shop".into());
    svc.metadata.name = Some("web".into());
    svc.metadata.uid = Some(UID.into());
    svc.metadata.annotations = Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        ports: Some(
            ports
                .iter()
                .map(|(port, proto, node_port)| ServicePort {
                    port: *port,
                    protocol: Some((*proto).into()),
                    node_port: Some(*node_port),
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    });
    svc
}

pub fn node(name: &str, server: u64) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.spec = Some(NodeSpec { provider_id: Some(format!("hcloud://{server}")), ..Default::default() });
    n
}

pub fn seed_nodes(h: &FakeHandle, n: usize, network: Option<u64>) -> Vec<Node> {
    (0..n)
        .map(|i| {
            let name = format!("node-{i}");
            let mut seed = SeedServer::new(&name);
            if let Some(net) = network {
                seed = seed.network(net);
            }
            node(&name, h.seed_server(&seed).expect("server"))
        })
        .collect()
}

/// Every request since the last reset except reads of actions, `"<METHOD> <endpoint>"`.
pub fn sent(h: &FakeHandle) -> Vec<String> {
    h.request_log().into_iter().filter(|r| !r.endpoint.starts_with("GET /v1/actions")).map(|r| r.endpoint).collect()
}

pub fn mutating(h: &FakeHandle) -> Vec<String> {
    sent(h).into_iter().filter(|e| !e.starts_with("GET ")).collect()
}

pub async fn settle(s: &Setup) {
    test_harness_free_wait(Duration::from_secs(10), || s.lbs.tracker().outstanding() == 0).await;
    s.h.finish_all_actions();
}

pub async fn test_harness_free_wait(deadline: Duration, mut ok: impl FnMut() -> bool) {
    let until = tokio::time::Instant::now() + deadline;
    while !ok() {
        assert!(tokio::time::Instant::now() < until, "condition not met within {deadline:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn only_lb(h: &FakeHandle) -> hcloud_fake::wire::LoadBalancer {
    let lbs = h.snapshot().load_balancers;
    assert_eq!(lbs.len(), 1, "exactly one Load Balancer: {:?}", lbs.iter().map(|l| &l.name).collect::<Vec<_>>());
    lbs.into_iter().next().unwrap()
}

pub fn target_ids(lb: &hcloud_fake::wire::LoadBalancer) -> Vec<u64> {
    let mut ids: Vec<u64> = lb.targets.iter().filter_map(|t| t.server.as_ref().map(|s| s.id)).collect();
    ids.sort_unstable();
    ids
}
