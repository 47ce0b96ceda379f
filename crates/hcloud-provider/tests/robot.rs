//! Robot (dedicated) servers in HcloudInstances against the fake's Robot part: one list per
//! cache period, metadata, the CAPH guard, lookups by name across cloud and Robot, shutdown
//! through the reset endpoint, and the rate-limit circuit (nothing deleted while it is open).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_provider::events::{EventSink, ProviderEvent};
use cloud_provider::{AddressType, InstancesV2, NodeAddress};
use hcloud_api::SecretString;
use hcloud_api::robot::RobotClient;
use hcloud_fake::control::SeedServer;
use hcloud_fake::faults::FaultRule;
use hcloud_fake::robot::{RobotServerPatch, SeedRobotServer};
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use hcloud_provider::config::{AddressFamily, CacheMode};
use hcloud_provider::instances::RobotSupport;
use hcloud_provider::robot::RobotMode;
use hcloud_provider::{HcloudInstances, Inventory, RobotInventory};
use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus};

use crate::clock::age;

const CACHE: Duration = Duration::from_secs(300);
const WAIT: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Events(Mutex<Vec<ProviderEvent>>);

impl EventSink for Events {
    fn publish(&self, e: ProviderEvent) {
        self.0.lock().unwrap().push(e);
    }
}

impl Events {
    fn reasons(&self) -> Vec<String> {
        self.0.lock().unwrap().iter().map(|e| e.reason.to_string()).collect()
    }
}

struct Fx {
    _fake: FakeServer,
    h: FakeHandle,
    i: HcloudInstances,
    robot: Arc<RobotInventory>,
    events: Arc<Events>,
}

async fn fx(family: AddressFamily, with_client: bool) -> Fx {
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let client = crate::fake_client::no_retry_client(&fake.base_url());
    let robot_client =
        RobotClient::new(&fake.robot_url(), "robot", SecretString::from("robot-password")).expect("robot client");
    let robot = Arc::new(RobotInventory::new(robot_client, CACHE, WAIT));
    let inventory = Arc::new(Inventory::new(client, CacheMode::All));
    let i = HcloudInstances::new(inventory, None, family, true, Duration::from_secs(10), Duration::from_secs(60))
        .with_robot(RobotSupport {
            mode: if with_client { RobotMode::Full(robot.clone()) } else { RobotMode::LoadBalancerOnly },
            forward_internal_ips: true,
        });
    let events = Arc::new(Events::default());
    i.set_events(events.clone());
    Fx { h: fake.handle(), _fake: fake, i, robot, events }
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.to_owned());
    n.spec = Some(NodeSpec { provider_id: provider_id.map(str::to_owned), ..Default::default() });
    n
}

fn transient(e: &cloud_provider::CloudError) -> bool {
    matches!(e, cloud_provider::CloudError::Failed { transient: true, .. })
}

fn robot_lists(h: &FakeHandle) -> u64 {
    h.request_count("GET /robot/server")
}

#[tokio::test]
async fn metadata_of_robot_nodes_by_id_legacy_id_and_name_from_one_list() {
    let f = fx(AddressFamily::DualStack, true).await;
    let a = f.h.seed_robot_server(&SeedRobotServer::new("bm-a").product("Server Auction").dc("HEL1-DC2")).unwrap();
    let b = f.h.seed_robot_server(&SeedRobotServer::new("bm-b")).unwrap();
    f.h.seed_robot_server(&SeedRobotServer::new("bm-c")).unwrap();
    f.h.seed_server(&SeedServer::new("cloud-1")).unwrap();

    let mut by_id = node("bm-a", Some(&format!("hrobot://{a}")));
    by_id.status = Some(NodeStatus {
        addresses: Some(vec![k8s_openapi::api::core::v1::NodeAddress {
            type_: "InternalIP".into(),
            address: "10.200.0.5".into(),
        }]),
        ..Default::default()
    });
    let m = f.i.instance_metadata(&by_id).await.expect("metadata").expect("some");
    assert_eq!(m.provider_id, format!("hrobot://{a}"));
    assert_eq!(m.instance_type, "Server-Auction");
    assert_eq!((m.zone.as_str(), m.region.as_str()), ("hel1-dc2", "hel1"));
    assert_eq!(m.additional_labels.get("instance.hetzner.cloud/provided-by").map(String::as_str), Some("robot"));
    let server = f.h.robot_server(a).unwrap();
    assert_eq!(
        m.node_addresses,
        vec![
            NodeAddress::new(AddressType::Hostname, "bm-a"),
            NodeAddress::new(AddressType::ExternalIp, format!("{}1", server.ipv6_net)),
            NodeAddress::new(AddressType::ExternalIp, server.ipv4.unwrap().to_string()),
            NodeAddress::new(AddressType::InternalIp, "10.200.0.5"),
        ]
    );

    let legacy = f.i.instance_metadata(&node("bm-b", Some(&format!("hcloud://bm-{b}")))).await.expect("legacy");
    assert_eq!(legacy.expect("some").provider_id, format!("hrobot://{b}"), "written in the new format");
    let by_name = f.i.instance_metadata(&node("bm-c", None)).await.expect("by name").expect("some");
    assert!(by_name.provider_id.starts_with("hrobot://"));
    let cloud = f.i.instance_metadata(&node("cloud-1", None)).await.expect("cloud").expect("some");
    assert!(cloud.provider_id.starts_with("hcloud://"), "cloud nodes unaffected");
    for _ in 0..5 {
        assert!(f.i.instance_exists(&node("bm-a", Some(&format!("hrobot://{a}")))).await.expect("exists"));
    }
    assert_eq!(robot_lists(&f.h), 1, "one Robot list serves every lookup within ROBOT_CACHE_TIMEOUT");
    age(CACHE).await;
    assert!(f.i.instance_exists(&node("bm-a", Some(&format!("hrobot://{a}")))).await.expect("exists"));
    assert_eq!(robot_lists(&f.h), 2, "and the next period costs one more");
    assert!(f.events.reasons().is_empty(), "{:?}", f.events.reasons());
}

#[tokio::test]
async fn a_removed_robot_server_is_gone_only_after_a_direct_lookup() {
    let f = fx(AddressFamily::Ipv4, true).await;
    let a = f.h.seed_robot_server(&SeedRobotServer::new("bm-a")).unwrap();
    let n = node("bm-a", Some(&format!("hrobot://{a}")));
    assert!(f.i.instance_exists(&n).await.expect("exists"));
    f.h.delete_robot_server(a).unwrap();
    age(CACHE).await;
    assert!(!f.i.instance_exists(&n).await.expect("gone"));
    assert_eq!(f.h.request_count("GET /robot/server/{id}"), 1, "the absence was confirmed directly");
    // A server missing from the list but found directly exists.
    let b = f.h.seed_robot_server(&SeedRobotServer::new("bm-b")).unwrap();
    assert!(f.i.instance_exists(&node("bm-b", Some(&format!("hrobot://{b}")))).await.expect("exists"));
}

#[tokio::test]
async fn a_robot_node_without_provider_id_missing_from_the_cached_list_is_confirmed_with_a_fresh_list() {
    let f = fx(AddressFamily::Ipv4, true).await;
    f.h.seed_robot_server(&SeedRobotServer::new("bm-a")).unwrap();
    assert!(f.i.instance_exists(&node("bm-a", None)).await.expect("exists"));
    assert_eq!(robot_lists(&f.h), 1);

    // A server added after the list was cached: the cached list misses it, the cloud has no
    // server of that name, but it exists — the Node must not be reported gone.
    f.h.seed_robot_server(&SeedRobotServer::new("bm-new")).unwrap();
    assert!(f.i.instance_exists(&node("bm-new", None)).await.expect("exists"), "a fresh list finds it");
    assert_eq!(robot_lists(&f.h), 2, "the miss was confirmed with one fresh list");
    // The fresh list is the cache now: later lookups within the cache period cost nothing.
    assert!(f.i.instance_exists(&node("bm-new", None)).await.expect("exists"));
    assert_eq!(robot_lists(&f.h), 2);

    // Truly absent: "gone" only after a fresh list misses it too.
    assert!(!f.i.instance_exists(&node("bm-gone", None)).await.expect("answer"));
    assert_eq!(robot_lists(&f.h), 3, "the absence was confirmed with a fresh list");

    // The confirming read fails: an error (the lifecycle controller keeps the Node), never "gone".
    f.h.inject_robot_fault(FaultRule::error(Some("GET"), "/server", 503, "MAINTENANCE").times(1));
    let e = f.i.instance_exists(&node("bm-gone", None)).await.expect_err("unconfirmed");
    assert!(transient(&e), "{e}");
    assert_eq!(robot_lists(&f.h), 4);
    assert!(f.events.reasons().is_empty(), "{:?}", f.events.reasons());
}

#[tokio::test]
async fn caph_guard_treats_a_renamed_server_as_not_the_nodes() {
    let f = fx(AddressFamily::Ipv4, true).await;
    let a = f.h.seed_robot_server(&SeedRobotServer::new("other-cluster-node")).unwrap();
    let n = node("bm-a", Some(&format!("hrobot://{a}")));
    assert!(!f.i.instance_exists(&n).await.expect("answer"));
    assert_eq!(f.events.reasons(), vec!["PossibleNodeDeletion"]);
    let e = f.i.instance_metadata(&n).await.expect_err("not this node's");
    assert_eq!(e.reason(), "ServerNotFound");
    assert_eq!(f.events.reasons(), vec!["PossibleNodeDeletion"; 2]);
    assert_eq!(f.h.request_count("GET /robot/server/{id}"), 0, "the list answered; no direct lookup needed");
}

#[tokio::test]
async fn a_name_of_both_a_cloud_and_a_robot_server_is_an_error_not_a_guess() {
    let f = fx(AddressFamily::Ipv4, true).await;
    f.h.seed_robot_server(&SeedRobotServer::new("twin")).unwrap();
    f.h.seed_server(&SeedServer::new("twin")).unwrap();
    let n = node("twin", None);
    let e = f.i.instance_metadata(&n).await.expect_err("ambiguous");
    assert_eq!(e.reason(), "InstanceLookupFailed");
    assert!(e.to_string().contains("--provider-id"), "{e}");
    assert!(f.i.instance_exists(&n).await.is_err(), "no guess in the lifecycle either");
}

#[tokio::test]
async fn shutdown_comes_from_the_reset_endpoint_uncached() {
    let f = fx(AddressFamily::Ipv4, true).await;
    let a = f.h.seed_robot_server(&SeedRobotServer::new("bm-a")).unwrap();
    let n = node("bm-a", Some(&format!("hrobot://{a}")));
    assert!(!f.i.instance_shutdown(&n).await.expect("running"));
    let patch = |s: &str| RobotServerPatch { operating_status: Some(s.into()), ..Default::default() };
    f.h.update_robot_server(a, &patch("shut off")).unwrap();
    assert!(f.i.instance_shutdown(&n).await.expect("off"));
    f.h.update_robot_server(a, &patch("not supported")).unwrap();
    assert!(!f.i.instance_shutdown(&n).await.expect("tower"), "not supported counts as running");
    f.h.inject_robot_fault(FaultRule::error(Some("GET"), "/reset/{id}", 404, "RESET_NOT_AVAILABLE"));
    assert!(!f.i.instance_shutdown(&n).await.expect("no reset"));
    assert_eq!(f.h.request_count("GET /robot/reset/{id}"), 4);
}

#[tokio::test]
async fn rate_limit_opens_the_circuit_and_nothing_is_reported_gone() {
    let f = fx(AddressFamily::Ipv4, true).await;
    let a = f.h.seed_robot_server(&SeedRobotServer::new("bm-a")).unwrap();
    let n = node("bm-a", Some(&format!("hrobot://{a}")));
    f.h.inject_robot_fault(FaultRule::error(Some("GET"), "/server", 403, "RATE_LIMIT_EXCEEDED").times(0));
    let e = f.i.instance_exists(&n).await.expect_err("rate limited");
    assert!(transient(&e), "{e}");
    assert_eq!(e.reason(), "RobotRateLimitExceeded");
    let before = f.robot.requests();
    for _ in 0..5 {
        let e = f.i.instance_exists(&n).await.expect_err("circuit open");
        assert!(transient(&e) && e.to_string().contains("next try in"), "{e}");
    }
    assert_eq!(f.robot.requests(), before, "no request while the circuit is open");
    assert_eq!(robot_lists(&f.h), 1);
    f.h.clear_robot_faults();
    age(WAIT).await;
    assert!(f.i.instance_exists(&n).await.expect("recovered"));
    assert_eq!(robot_lists(&f.h), 2);
}

#[tokio::test]
async fn a_rate_limit_wait_beyond_an_instant_keeps_the_circuit_open_without_a_panic() {
    // `Instant::now() + rate_limit_wait` used to overflow and panic for a wait the config
    // accepted then (it now stops at Go's largest duration; the inventory must not panic anyway).
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let h = fake.handle();
    h.seed_robot_server(&SeedRobotServer::new("bm-a")).unwrap();
    let client =
        RobotClient::new(&fake.robot_url(), "robot", SecretString::from("robot-password")).expect("robot client");
    let robot = RobotInventory::new(client, CACHE, Duration::MAX);
    h.inject_robot_fault(FaultRule::error(Some("GET"), "/server", 403, "RATE_LIMIT_EXCEEDED").times(0));
    let e = robot.servers().await.expect_err("rate limited");
    assert!(e.is_rate_limit(), "{e}");
    h.clear_robot_faults();
    let e = robot.servers().await.expect_err("the circuit is open");
    assert!(e.to_string().contains("next try in"), "{e}");
    assert_eq!(robot_lists(&h), 1, "no request while the circuit is open");
}

#[tokio::test]
async fn robot_ids_without_a_client_are_errors_not_absences() {
    let f = fx(AddressFamily::Ipv4, false).await;
    let a = f.h.seed_robot_server(&SeedRobotServer::new("bm-a")).unwrap();
    let e = f.i.instance_exists(&node("bm-a", Some(&format!("hrobot://{a}")))).await.expect_err("no client");
    assert_eq!(e.reason(), "RobotClientMissing");
    assert_eq!(robot_lists(&f.h), 0);
}

#[tokio::test]
async fn a_hundred_robot_nodes_cost_one_list_per_cache_period() {
    let f = fx(AddressFamily::Ipv4, true).await;
    let mut nodes = Vec::new();
    for i in 0..100 {
        let name = format!("bm-{i:03}");
        let n = f.h.seed_robot_server(&SeedRobotServer::new(&name)).unwrap();
        // Half joined with a providerID, half still without one (looked up by name).
        nodes.push(node(&name, (i % 2 == 0).then(|| format!("hrobot://{n}")).as_deref()));
    }
    for n in &nodes {
        let m = f.i.instance_metadata(n).await.expect("metadata").expect("some");
        assert!(m.provider_id.starts_with("hrobot://"));
        assert!(f.i.instance_exists(n).await.expect("exists"));
    }
    let robot =
        f.h.request_counts().by_endpoint.iter().filter(|(k, _)| k.contains("/robot/")).map(|(_, v)| v).sum::<u64>();
    assert_eq!((robot_lists(&f.h), robot), (1, 1), "{:?}", f.h.request_counts());
    // The name lookups also asked the cloud inventory once (one list, no per-node requests).
    assert_eq!(f.h.request_count("GET /v1/servers"), 1);
    assert_eq!(f.h.request_count("GET /v1/servers/{id}"), 0);
}

#[tokio::test]
async fn the_cloud_counts_robot_requests_in_its_metrics() {
    use cloud_provider::Cloud as _;
    use hcloud_provider::{ClientHooks, Config, HcloudCloud, HcloudMetrics};
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let h = fake.handle();
    let a = h.seed_robot_server(&SeedRobotServer::new("bm-a")).unwrap();
    let (url, robot_url) = (fake.base_url(), fake.robot_url());
    let config = Config::from_env(
        |k| match k {
            "HCLOUD_TOKEN" => Some("t".repeat(64)),
            "HCLOUD_ENDPOINT" => Some(url.clone()),
            "ROBOT_ENABLED" => Some("true".into()),
            "ROBOT_USER" => Some("robot".into()),
            "ROBOT_PASSWORD" => Some("robot-password".into()),
            "ROBOT_ENDPOINT" => Some(robot_url.clone()),
            _ => None,
        },
        Vec::new(),
    )
    .expect("config");
    let metrics = HcloudMetrics::default();
    let hooks = ClientHooks { metrics: Some(metrics.clone()), gate: None, write_gate: None };
    let cloud = HcloudCloud::connect(&config, hooks).await.expect("connect");
    let instances = cloud.instances_v2().expect("instances");
    assert!(instances.instance_exists(&node("bm-a", Some(&format!("hrobot://{a}")))).await.expect("exists"));

    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(
        text.lines().any(|l| l == r#"hcloud_robot_requests_total{code="200",method="get",api_endpoint="/server"} 1"#),
        "{text}"
    );
}
