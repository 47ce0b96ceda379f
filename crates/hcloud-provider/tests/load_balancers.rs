//! HcloudLoadBalancers against the Hetzner fake: what each Service lifecycle step sends (counted
//! per endpoint in the fake's request log), and that the fake ends up as the Service asks.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_provider::LoadBalancer as _;
use cloud_provider::events::{EventSink, ProviderEvent};
use cloud_provider::{CloudError, IpMode};
use hcloud_api::models::NetworkId;
use hcloud_api::{Client, PollPolicy, RetryPolicy, SecretString};
use hcloud_fake::control::{ActionFailure, ResourceRef, SeedCertificate, SeedLoadBalancer, SeedNetwork, SeedServer};
use hcloud_fake::faults::FaultRule;
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use hcloud_provider::HcloudLoadBalancers;
use hcloud_provider::load_balancers::LbDefaults;
use hcloud_provider::load_balancers::annotations as a;
use hcloud_provider::load_balancers::tracker::TrackerPolicy;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};

const UID: &str = "5b1c3d2e-7a4f-4e0b-9c1d-2e3f4a5b6c7d";

#[derive(Default)]
struct Events(Mutex<Vec<ProviderEvent>>);

impl EventSink for Events {
    fn publish(&self, e: ProviderEvent) {
        self.0.lock().unwrap().push(e);
    }
}

impl Events {
    fn reasons(&self) -> Vec<(String, String)> {
        self.0.lock().unwrap().iter().map(|e| (e.object.name.clone(), e.reason.to_string())).collect()
    }

    fn with_reason(&self, reason: &str) -> Vec<ProviderEvent> {
        self.0.lock().unwrap().iter().filter(|e| e.reason == reason).cloned().collect()
    }
}

struct Setup {
    _fake: FakeServer,
    h: FakeHandle,
    lbs: HcloudLoadBalancers,
    events: Arc<Events>,
}

fn client(fake: &FakeServer) -> Client {
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

async fn setup_with(defaults: LbDefaults, network: Option<NetworkId>) -> Setup {
    let fake =
        FakeServer::start(FakeConfig::default().with_action_delay(Duration::from_millis(30))).await.expect("fake");
    let h = fake.handle();
    let policy = TrackerPolicy {
        wait_initial: Duration::from_millis(10),
        wait_max: Duration::from_millis(50),
        sweep_initial: Duration::from_millis(40),
        sweep_max: Duration::from_millis(100),
    };
    let lbs = HcloudLoadBalancers::with_policy(client(&fake), defaults, network, Duration::from_secs(300), policy);
    let events = Arc::new(Events::default());
    lbs.set_events(events.clone());
    Setup { _fake: fake, h, lbs, events }
}

/// A fake with network `k8s` (10.0.0.0/8, subnet 10.0.0.0/24) given as `HCLOUD_NETWORK`.
async fn setup_net() -> (Setup, u64) {
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
    (Setup { _fake: fake, h, lbs, events }, net)
}

async fn setup() -> Setup {
    setup_with(LbDefaults { location: Some("fsn1".into()), ..Default::default() }, None).await
}

fn service(annotations: &[(&str, &str)], ports: &[(i32, &str, i32)]) -> Service {
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

fn node(name: &str, server: u64) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.spec = Some(NodeSpec { provider_id: Some(format!("hcloud://{server}")), ..Default::default() });
    n
}

fn seed_nodes(h: &FakeHandle, n: usize, network: Option<u64>) -> Vec<Node> {
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
fn sent(h: &FakeHandle) -> Vec<String> {
    h.request_log().into_iter().filter(|r| !r.endpoint.starts_with("GET /v1/actions")).map(|r| r.endpoint).collect()
}

fn mutating(h: &FakeHandle) -> Vec<String> {
    sent(h).into_iter().filter(|e| !e.starts_with("GET ")).collect()
}

async fn settle(s: &Setup) {
    test_harness_free_wait(Duration::from_secs(10), || s.lbs.tracker().outstanding() == 0).await;
    s.h.finish_all_actions();
}

async fn test_harness_free_wait(deadline: Duration, mut ok: impl FnMut() -> bool) {
    let until = tokio::time::Instant::now() + deadline;
    while !ok() {
        assert!(tokio::time::Instant::now() < until, "condition not met within {deadline:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn only_lb(h: &FakeHandle) -> hcloud_fake::wire::LoadBalancer {
    let lbs = h.snapshot().load_balancers;
    assert_eq!(lbs.len(), 1, "exactly one Load Balancer: {:?}", lbs.iter().map(|l| &l.name).collect::<Vec<_>>());
    lbs.into_iter().next().unwrap()
}

fn target_ids(lb: &hcloud_fake::wire::LoadBalancer) -> Vec<u64> {
    let mut ids: Vec<u64> = lb.targets.iter().filter_map(|t| t.server.as_ref().map(|s| s.id)).collect();
    ids.sort_unstable();
    ids
}

#[tokio::test]
async fn a_new_service_costs_one_create_and_an_unchanged_one_nothing() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 3, None);
    s.h.reset_requests();
    let svc = service(&[(a::TYPE, "lb11")], &[(80, "TCP", 30080), (443, "TCP", 30443)]);

    let status = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    assert_eq!(
        sent(&s.h),
        vec!["GET /v1/load_balancer_types", "GET /v1/load_balancers", "POST /v1/load_balancers"],
        "one list of types, one list of Load Balancers, one create with everything in it"
    );
    let lb = only_lb(&s.h);
    assert_eq!(lb.labels.get("hcloud-ccm/service-uid").map(String::as_str), Some(UID));
    assert_eq!(lb.name, "a5b1c3d2e7a4f4e0b9c1d2e3f4a5b6c7");
    assert_eq!(lb.location.name, "fsn1");
    let ports: Vec<(u16, u16, u16)> =
        lb.services.iter().map(|s| (s.listen_port, s.destination_port, s.health_check.port)).collect();
    assert_eq!(ports, vec![(80, 30080, 30080), (443, 30443, 30443)]);
    assert_eq!(lb.targets.len(), 3);
    let ips: Vec<(String, Option<IpMode>)> =
        status.ingress.iter().map(|i| (i.ip.clone().unwrap_or_default(), i.ip_mode)).collect();
    assert_eq!(
        ips,
        vec![
            (lb.public_net.ipv4.ip.clone().unwrap(), Some(IpMode::Vip)),
            (lb.public_net.ipv6.ip.clone().unwrap(), Some(IpMode::Vip))
        ]
    );

    settle(&s).await;
    s.h.reset_requests();
    let again = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure again");
    assert_eq!(again, status);
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(s.h.request_counts().total, 0, "nothing changed: no request at all");
    assert!(s.events.reasons().is_empty(), "{:?}", s.events.reasons());
}

#[tokio::test]
async fn a_node_added_costs_one_add_target() {
    let s = setup().await;
    let mut nodes = seed_nodes(&s.h, 2, None);
    let svc = service(&[(a::TYPE, "lb11")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;
    nodes.push(node("node-new", s.h.seed_server(&SeedServer::new("node-new")).expect("server")));
    s.h.reset_requests();

    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(sent(&s.h), vec!["POST /v1/load_balancers/{id}/actions/add_target"]);
    settle(&s).await;
    assert!(s.h.request_count("GET /v1/actions") >= 1, "the add_target action was confirmed");
    assert_eq!(only_lb(&s.h).targets.len(), 3);

    // A node removed: one remove_target.
    nodes.remove(0);
    s.h.reset_requests();
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(sent(&s.h), vec!["POST /v1/load_balancers/{id}/actions/remove_target"]);
    settle(&s).await;
    assert_eq!(only_lb(&s.h).targets.len(), 2);
}

#[tokio::test]
async fn ports_follow_the_service() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080), (443, "TCP", 30443)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;

    // NodePort of 80 changed, 443 removed, 8080 added.
    let changed = service(&[], &[(80, "TCP", 31080), (8080, "TCP", 30880)]);
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &changed, &nodes).await.expect("ensure");
    assert_eq!(
        mutating(&s.h),
        vec![
            "POST /v1/load_balancers/{id}/actions/delete_service",
            "POST /v1/load_balancers/{id}/actions/update_service",
            "POST /v1/load_balancers/{id}/actions/add_service"
        ]
    );
    settle(&s).await;
    let lb = only_lb(&s.h);
    let ports: Vec<(u16, u16, u16)> =
        lb.services.iter().map(|s| (s.listen_port, s.destination_port, s.health_check.port)).collect();
    assert_eq!(ports, vec![(80, 31080, 31080), (8080, 30880, 30880)]);
    assert!(s.events.with_reason("LoadBalancerTypeUnconfigured").len() == 1, "only when it was created");
}

#[tokio::test]
async fn a_lost_create_answer_never_duplicates_the_load_balancer() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.h.inject_fault(FaultRule::html(Some("POST"), "/v1/load_balancers", 502).applied().times(1));

    match s.lbs.ensure_load_balancer("k", &svc, &nodes).await {
        // Found by its label right away: no error at all.
        Ok(status) => assert_eq!(status.ingress.len(), 2),
        Err(e) => panic!("the created Load Balancer should have been found by label: {e}"),
    }
    assert_eq!(s.h.request_count("POST /v1/load_balancers"), 1);
    assert!(s.h.request_log().iter().any(|r| r.query.as_deref().is_some_and(|q| q.contains("label_selector"))));
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure again");
    assert_eq!(s.h.request_count("POST /v1/load_balancers"), 1, "never created twice");
    only_lb(&s.h);
}

#[tokio::test]
async fn a_lost_create_that_did_not_happen_is_looked_up_before_the_next_create() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.h.inject_fault(FaultRule::reset(Some("POST"), "/v1/load_balancers").times(1));
    let err = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect_err("lost");
    assert!(matches!(err, CloudError::Failed { transient: true, .. }), "{err:?}");
    assert!(s.h.snapshot().load_balancers.is_empty());
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    let log = s.h.request_log();
    let lookup = log.iter().position(|r| r.query.as_deref().is_some_and(|q| q.contains("label_selector")));
    let create = log.iter().position(|r| r.endpoint == "POST /v1/load_balancers");
    assert!(lookup.is_some() && lookup < create, "looked up by label first: {:?}", sent(&s.h));
    only_lb(&s.h);
}

#[tokio::test]
async fn an_existing_load_balancer_is_adopted_by_name() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 2, None);
    let id = s.h.seed_load_balancer(&SeedLoadBalancer::new("shop-web")).expect("lb");
    let svc = service(&[(a::NAME, "shop-web")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    assert_eq!(s.h.request_count("POST /v1/load_balancers"), 0, "adopted, not created");
    settle(&s).await;
    let lb = only_lb(&s.h);
    assert_eq!(lb.id, id);
    assert_eq!(lb.labels.get("hcloud-ccm/service-uid").map(String::as_str), Some(UID));
    assert_eq!((lb.services.len(), lb.targets.len()), (1, 2));
}

#[tokio::test]
async fn a_load_balancer_created_meanwhile_is_adopted_on_the_next_try() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    // The inventory lists first (empty)...
    let other = service(&[], &[(80, "TCP", 30080)]);
    let mut other = other.clone();
    other.metadata.uid = Some("11111111-2222-3333-4444-555555555555".into());
    s.lbs.ensure_load_balancer("k", &other, &nodes).await.expect("first service");
    // ...then someone creates the one to adopt.
    s.h.seed_load_balancer(&SeedLoadBalancer::new("shop-web")).expect("lb");
    let svc = service(&[(a::NAME, "shop-web")], &[(80, "TCP", 30080)]);
    let err = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect_err("name taken");
    assert!(matches!(err, CloudError::Retry { .. }), "{err:?}");
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("adopted on the next try");
    assert_eq!(s.h.snapshot().load_balancers.len(), 2);
}

#[tokio::test]
async fn two_load_balancers_with_the_label_are_an_error_not_a_guess() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    for name in ["one", "two"] {
        let mut lb = SeedLoadBalancer::new(name);
        lb.labels.insert("hcloud-ccm/service-uid".into(), UID.into());
        s.h.seed_load_balancer(&lb).expect("lb");
    }
    s.h.reset_requests();
    let err =
        s.lbs.ensure_load_balancer("k", &service(&[], &[(80, "TCP", 30080)]), &nodes).await.expect_err("ambiguous");
    assert_eq!(err.reason(), "NonUniqueLoadBalancer");
    assert!(err.to_string().contains("2 Load Balancers carry the label hcloud-ccm/service-uid="), "{err}");
    assert!(mutating(&s.h).is_empty());
    let del = s.lbs.ensure_load_balancer_deleted("k", &service(&[], &[])).await.expect_err("ambiguous");
    assert_eq!(del.reason(), "NonUniqueLoadBalancer");
    assert_eq!(s.h.snapshot().load_balancers.len(), 2, "nothing deleted");
}

#[tokio::test]
async fn bad_annotations_leave_the_load_balancer_untouched() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;
    let before = only_lb(&s.h);
    s.h.reset_requests();
    let bad = service(
        &[(a::ALGORITHM_TYPE, "fastest"), (a::HEALTH_CHECK_INTERVAL, "10"), (a::PROTOCOL, "http")],
        &[(80, "TCP", 30080)],
    );
    for call in 0..2 {
        let err = if call == 0 {
            s.lbs.ensure_load_balancer("k", &bad, &nodes).await.map(|_| ()).expect_err("invalid")
        } else {
            s.lbs.update_load_balancer("k", &bad, &nodes).await.expect_err("invalid")
        };
        assert_eq!(err.reason(), "InvalidLoadBalancerConfiguration");
        let text = err.to_string();
        assert!(text.contains("annotation load-balancer.hetzner.cloud/algorithm-type: \"fastest\" is invalid; accepted: round_robin, least_connections"), "{text}");
        assert!(text.contains("health-check-interval: \"10\""), "{text}");
    }
    assert_eq!(s.h.request_counts().total, 0, "nothing sent");
    assert_eq!(only_lb(&s.h), before);
    // Deletion still works with bad annotations.
    s.lbs.ensure_load_balancer_deleted("k", &bad).await.expect("deleted");
    assert!(s.h.snapshot().load_balancers.is_empty());
}

#[tokio::test]
async fn an_unknown_type_names_the_types_that_exist() {
    let s = setup().await;
    let err = s
        .lbs
        .ensure_load_balancer("k", &service(&[(a::TYPE, "lb99")], &[(80, "TCP", 30080)]), &[])
        .await
        .expect_err("unknown type");
    let text = err.to_string();
    assert!(text.contains("\"lb99\" is invalid; accepted: lb11, lb21, lb31"), "{text}");
    assert_eq!(s.h.request_count("POST /v1/load_balancers"), 0);
}

#[tokio::test]
async fn udp_ports_are_reported_and_tcp_ports_served() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(53, "UDP", 30053), (80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    let ev = s.events.with_reason("UnsupportedProtocolConfigured");
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].object.kind, ev[0].object.name.as_str()), ("Service", "web"));
    assert!(ev[0].message.contains("53/UDP"), "{}", ev[0].message);
    assert_eq!(only_lb(&s.h).services.iter().map(|s| s.listen_port).collect::<Vec<_>>(), vec![80]);
}

#[tokio::test]
async fn max_targets_gives_events_instead_of_a_failure() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 27, None);
    let svc = service(&[(a::TYPE, "lb11")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    assert_eq!(only_lb(&s.h).targets.len(), 25, "lb11 takes 25");
    let full = s.events.with_reason("MaxTargetsReached");
    assert_eq!(full.len(), 2);
    assert!(full.iter().all(|e| e.object.kind == "Node"));
    assert!(full[0].message.contains("max number of targets has been reached"), "{}", full[0].message);
    // Upgrading the type adds the rest.
    settle(&s).await;
    let bigger = service(&[(a::TYPE, "lb21")], &[(80, "TCP", 30080)]);
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &bigger, &nodes).await.expect("ensure");
    assert_eq!(
        mutating(&s.h),
        vec![
            "POST /v1/load_balancers/{id}/actions/change_type",
            "POST /v1/load_balancers/{id}/actions/add_target",
            "POST /v1/load_balancers/{id}/actions/add_target"
        ]
    );
    settle(&s).await;
    assert_eq!(only_lb(&s.h).targets.len(), 27);
}

#[tokio::test]
async fn rename_through_the_annotation() {
    let s = setup().await;
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    settle(&s).await;
    s.h.reset_requests();
    s.lbs
        .ensure_load_balancer("k", &service(&[(a::NAME, "renamed")], &[(80, "TCP", 30080)]), &[])
        .await
        .expect("ensure");
    assert_eq!(mutating(&s.h), vec!["PUT /v1/load_balancers/{id}"]);
    assert_eq!(only_lb(&s.h).name, "renamed");
}

#[tokio::test]
async fn delete_protection_keeps_the_load_balancer_and_not_found_is_success() {
    let s = setup().await;
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    settle(&s).await;
    // Protected behind the inventory's back: the API's `protected` answer is enough.
    let id = only_lb(&s.h).id;
    hcloud_api::Client::load_balancers(&client(&s._fake))
        .change_protection(hcloud_api::models::LoadBalancerId(id as i64), true)
        .await
        .expect("protect");
    s.h.finish_all_actions();
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("skipped, not failed");
    assert_eq!(only_lb(&s.h).id, id);
    let ev = s.events.with_reason("LoadBalancerDeletionProtected");
    assert_eq!(ev.len(), 1);
    assert!(ev[0].message.contains("delete protection"), "{}", ev[0].message);
    // Known protected now: skipped without a request.
    s.h.reset_requests();
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("skipped");
    assert_eq!(s.h.request_count("DELETE /v1/load_balancers/{id}"), 0);

    let s = setup().await;
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    settle(&s).await;
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("deleted");
    assert!(s.h.snapshot().load_balancers.is_empty());
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("already gone is fine");
    assert_eq!(s.lbs.get_load_balancer("k", &svc).await.expect("get"), None);
}

#[tokio::test]
async fn https_with_an_uploaded_certificate_by_name() {
    let s = setup().await;
    let cert = s.h.seed_certificate(&SeedCertificate::uploaded("shop-tls", &["shop.example.com"])).expect("cert");
    let svc = service(
        &[(a::PROTOCOL, "https"), (a::HTTP_CERTIFICATES, "shop-tls"), (a::HTTP_REDIRECT_HTTP, "true")],
        &[(443, "TCP", 30443)],
    );
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    let lb = only_lb(&s.h);
    let http = lb.services[0].http.clone().expect("http options");
    assert_eq!((lb.services[0].protocol.as_str(), http.certificates, http.redirect_http), ("https", vec![cert], true));
    settle(&s).await;
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("again");
    assert!(mutating(&s.h).is_empty(), "{:?}", sent(&s.h));

    let missing = service(&[(a::PROTOCOL, "https"), (a::HTTP_CERTIFICATES, "nope")], &[(443, "TCP", 30443)]);
    let err = s.lbs.ensure_load_balancer("k", &missing, &[]).await.expect_err("unknown certificate");
    assert!(
        err.to_string().contains("annotation load-balancer.hetzner.cloud/http-certificates: \"nope\" is invalid"),
        "{err}"
    );
}

#[tokio::test]
async fn a_managed_certificate_is_created_once_with_the_service_label() {
    let s = setup().await;
    let svc = service(
        &[
            (a::PROTOCOL, "https"),
            (a::CERTIFICATE_TYPE, "managed"),
            (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "shop.example.com"),
            (a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING, "true"),
        ],
        &[(443, "TCP", 30443)],
    );
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    let certs = s.h.snapshot().certificates;
    assert_eq!(certs.len(), 1);
    let cert = &certs[0];
    assert_eq!(cert.name, format!("ccm-managed-certificate-{UID}"));
    assert_eq!(cert.labels.get("hcloud-ccm/service-uid").map(String::as_str), Some(UID));
    assert_eq!(cert.labels.get("HC-Use-Staging-CA").map(String::as_str), Some("true"));
    assert_eq!(only_lb(&s.h).services[0].http.as_ref().map(|h| h.certificates.clone()), Some(vec![cert.id]));
    settle(&s).await;
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("again");
    assert_eq!(s.h.request_count("POST /v1/certificates"), 1, "created once");
}

#[tokio::test]
async fn private_network_with_private_ip_targets_and_private_ingress() {
    let (s, net) = setup_net().await;
    let nodes = seed_nodes(&s.h, 2, Some(net));
    let svc = service(
        &[(a::LOCATION, "nbg1"), (a::USE_PRIVATE_IP, "true"), (a::PRIVATE_SUBNET_IP_RANGE, "10.0.0.0/24")],
        &[(80, "TCP", 30080)],
    );
    let status = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    let lb = only_lb(&s.h);
    assert_eq!(lb.private_net.len(), 1);
    assert!(lb.targets.iter().all(|t| t.use_private_ip == Some(true)) && lb.targets.len() == 2);
    let private = &lb.private_net[0].ip;
    assert!(private.starts_with("10.0.0."), "{private}");
    assert_eq!(status.ingress.last().and_then(|i| i.ip.clone()), Some(private.clone()), "private ingress IP reported");
}

#[tokio::test]
async fn a_failed_action_marks_the_load_balancer_for_a_fresh_read_and_raises_an_event() {
    let s = setup().await;
    let mut nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;
    nodes.push(node("node-x", s.h.seed_server(&SeedServer::new("node-x")).expect("server")));
    s.h.fail_next_actions(ActionFailure {
        count: 1,
        command: Some("add_target".into()),
        code: "action_failed".into(),
        message: "boom".into(),
    });
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("accepted");
    settle(&s).await;
    let ev = s.events.with_reason("LoadBalancerActionFailed");
    assert_eq!(ev.len(), 1, "{:?}", s.events.reasons());
    assert!(ev[0].message.contains("adding node node-x as a target failed"), "{}", ev[0].message);
    assert_eq!(only_lb(&s.h).targets.len(), 1, "the target did not arrive");
    // The next sync reads the Load Balancer again and repairs it.
    s.h.reset_requests();
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("repair");
    assert_eq!(sent(&s.h), vec!["GET /v1/load_balancers/{id}", "POST /v1/load_balancers/{id}/actions/add_target"]);
    settle(&s).await;
    assert_eq!(only_lb(&s.h).targets.len(), 2);
}

#[tokio::test]
async fn a_locked_load_balancer_is_retried_after_a_delay() {
    let s = setup().await;
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    settle(&s).await;
    let id = only_lb(&s.h).id;
    s.h.lock_resource(ResourceRef::load_balancer(id));
    let err = s.lbs.ensure_load_balancer("k", &service(&[], &[(81, "TCP", 30081)]), &[]).await.expect_err("locked");
    assert!(matches!(err, CloudError::Retry { .. }), "{err:?}");
    s.h.unlock_resource(ResourceRef::load_balancer(id));
    s.lbs.ensure_load_balancer("k", &service(&[], &[(81, "TCP", 30081)]), &[]).await.expect("after the lock");
    settle(&s).await;
    assert_eq!(only_lb(&s.h).services.iter().map(|s| s.listen_port).collect::<Vec<_>>(), vec![81]);
    assert_eq!(target_ids(&only_lb(&s.h)), Vec::<u64>::new());
}

#[tokio::test]
async fn a_fixed_private_ip_is_attached_after_the_create_then_the_private_targets_follow() {
    let (s, net) = setup_net().await;
    let nodes = seed_nodes(&s.h, 2, Some(net));
    let svc = service(
        &[
            (a::LOCATION, "fsn1"),
            (a::USE_PRIVATE_IP, "true"),
            (a::PRIVATE_IPV4, "10.0.0.77"),
            (a::USES_PROXYPROTOCOL, "true"),
        ],
        &[(80, "TCP", 30080)],
    );
    let status = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    assert_eq!(
        mutating(&s.h),
        vec![
            "POST /v1/load_balancers",
            "POST /v1/load_balancers/{id}/actions/attach_to_network",
            "POST /v1/load_balancers/{id}/actions/add_target",
            "POST /v1/load_balancers/{id}/actions/add_target"
        ]
    );
    settle(&s).await;
    let lb = only_lb(&s.h);
    assert_eq!(lb.private_net.iter().map(|n| n.ip.as_str()).collect::<Vec<_>>(), vec!["10.0.0.77"]);
    assert_eq!(lb.targets.len(), 2);
    assert!(lb.services[0].proxyprotocol);
    let ingress: Vec<(Option<String>, Option<IpMode>)> =
        status.ingress.iter().map(|i| (i.ip.clone(), i.ip_mode)).collect();
    assert_eq!(ingress.last(), Some(&(Some("10.0.0.77".to_owned()), Some(IpMode::Proxy))));
    assert!(ingress.iter().all(|(_, m)| *m == Some(IpMode::Proxy)), "{ingress:?}");

    // A new fixed IP: detach, attach with it, the private targets again.
    let moved = service(
        &[
            (a::LOCATION, "fsn1"),
            (a::USE_PRIVATE_IP, "true"),
            (a::PRIVATE_IPV4, "10.0.0.88"),
            (a::USES_PROXYPROTOCOL, "true"),
        ],
        &[(80, "TCP", 30080)],
    );
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &moved, &nodes).await.expect("ensure");
    assert_eq!(
        mutating(&s.h),
        vec![
            "POST /v1/load_balancers/{id}/actions/detach_from_network",
            "POST /v1/load_balancers/{id}/actions/attach_to_network",
            "POST /v1/load_balancers/{id}/actions/add_target",
            "POST /v1/load_balancers/{id}/actions/add_target"
        ]
    );
    settle(&s).await;
    let lb = only_lb(&s.h);
    assert_eq!(lb.private_net.iter().map(|n| n.ip.as_str()).collect::<Vec<_>>(), vec!["10.0.0.88"]);
    assert_eq!(lb.targets.len(), 2);
}

#[tokio::test]
async fn get_load_balancer_finds_by_label_only_and_reports_the_hostname() {
    let s = setup().await;
    let named = service(&[(a::NAME, "shop-web"), (a::HOSTNAME, "lb.example.com")], &[(80, "TCP", 30080)]);
    s.h.seed_load_balancer(&SeedLoadBalancer::new("shop-web")).expect("lb");
    assert_eq!(s.lbs.get_load_balancer("k", &named).await.expect("get"), None, "a name alone is not enough");
    assert_eq!(s.lbs.get_load_balancer_name("k", &named), "shop-web");
    s.lbs.ensure_load_balancer("k", &named, &[]).await.expect("adopt");
    let status = s.lbs.get_load_balancer("k", &named).await.expect("get").expect("found by label now");
    assert_eq!(status.ingress.len(), 1);
    assert_eq!(status.ingress[0].hostname.as_deref(), Some("lb.example.com"));
    assert_eq!((status.ingress[0].ip.as_deref(), status.ingress[0].ip_mode), (None, None));
}
