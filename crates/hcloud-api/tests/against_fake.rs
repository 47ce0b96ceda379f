//! Integration tests of the client against the stateful fake (`hcloud-fake`) over real HTTP on
//! 127.0.0.1: load balancers with networks, services and private targets; paging; action
//! waiting; typed errors; retries; label selectors; token redaction and per-request timeouts.
//!
//! Time-dependent behaviour is driven by the fake (long action delays plus
//! `finish_all_actions`, latency faults), never by sleeps standing in for a condition.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hcloud_api::models::{
    ActionStatus, AttachLbToNetworkRequest, CreateLoadBalancerRequest, HealthCheck, HealthCheckHttp, HealthStatus,
    HttpOptions, IdRef, LbPrivateNet, LbProtocol, LbService, LbTarget, LoadBalancer, LoadBalancerId,
    LoadBalancerListParams, NetworkId, Pagination, ServerId, ServerListParams, TargetHealth, TargetKind, TargetSpec,
    UpdateLoadBalancerRequest,
};
use hcloud_api::{
    Action, Client, Error, ErrorCode, ErrorDetails, InvalidField, PollPolicy, RequestEvent, RequestObserver,
    RetryPolicy, SecretString,
};
use hcloud_fake::control::{ActionFailure, ResourceRef, SeedLoadBalancer, SeedNetwork, SeedServer, SeedServerBatch};
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer, FaultRule, TokenPolicy};
use pretty_assertions::assert_eq;

const TOKEN: &str = "hcloud-test-token-6f1c2a9e0b7d4c3a8e5f";

/// Action delay used where the test needs actions to finish on their own.
const SHORT_ACTION: Duration = Duration::from_millis(40);

/// Action delay used where the test finishes actions itself (`finish_all_actions`).
const FOREVER: Duration = Duration::from_secs(3600);

/// Generous deadline for waits that are expected to succeed.
const WAIT: Duration = Duration::from_secs(10);

// ------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------

/// One HTTP exchange as the client's observer saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    method: String,
    endpoint: &'static str,
    status: Option<u16>,
    attempt: u32,
}

/// Records every exchange the client reports.
#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<Seen>>);

impl RequestObserver for Recorder {
    fn observe(&self, e: &RequestEvent<'_>) {
        self.0.lock().unwrap().push(Seen {
            method: e.method.to_string(),
            endpoint: e.endpoint,
            status: e.status,
            attempt: e.attempt,
        });
    }
}

impl Recorder {
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn seen(method: &str, endpoint: &'static str, status: Option<u16>, attempt: u32) -> Seen {
    Seen { method: method.to_owned(), endpoint, status, attempt }
}

fn retry(max_retries: u32) -> RetryPolicy {
    RetryPolicy { max_retries, base_delay: Duration::from_millis(10), max_delay: Duration::from_millis(40) }
}

fn poll() -> PollPolicy {
    PollPolicy { initial: Duration::from_millis(20), max: Duration::from_millis(50) }
}

/// A running fake, a client for it and the client's request recorder.
struct Env {
    fake: FakeServer,
    h: FakeHandle,
    client: Client,
    rec: Arc<Recorder>,
}

impl Env {
    async fn start(config: FakeConfig) -> Env {
        Env::with(config, retry(3), Duration::from_secs(5)).await
    }

    async fn with(config: FakeConfig, retry: RetryPolicy, timeout: Duration) -> Env {
        let fake = FakeServer::start(FakeConfig { log_requests: false, ..config }).await.expect("fake starts");
        let h = fake.handle();
        let rec = Arc::new(Recorder::default());
        let client = Client::builder(SecretString::from(TOKEN))
            .endpoint(fake.base_url())
            .retry_policy(retry)
            .poll_policy(poll())
            .timeout(timeout)
            .observer(rec.clone())
            .build()
            .expect("client builds");
        Env { fake, h, client, rec }
    }

    /// Requests the fake counted for `endpoint` (e.g. `GET /v1/servers/{id}`).
    fn count(&self, endpoint: &str) -> u64 {
        self.h.request_count(endpoint)
    }
}

fn sid(id: u64) -> ServerId {
    ServerId(i64::try_from(id).unwrap())
}

fn nid(id: u64) -> NetworkId {
    NetworkId(i64::try_from(id).unwrap())
}

fn lbid(id: u64) -> LoadBalancerId {
    LoadBalancerId(i64::try_from(id).unwrap())
}

fn raw(id: impl Into<i64>) -> u64 {
    u64::try_from(id.into()).unwrap()
}

/// Polls `cond` until it holds (a condition wait, bounded by [`WAIT`]).
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn api_err(e: &Error) -> &hcloud_api::ApiError {
    e.api().unwrap_or_else(|| panic!("expected an API error, got {e:?}"))
}

fn labels(pairs: &[(&str, &str)]) -> hcloud_api::models::Labels {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// A tcp 80 -> 30080 service and an http 443 -> 30443 service with an http health check, every
/// field set to a non-default value so that the round trip is checked field by field.
fn two_services() -> Vec<LbService> {
    vec![
        LbService {
            protocol: LbProtocol::Tcp,
            listen_port: 80,
            destination_port: 30080,
            proxyprotocol: true,
            health_check: Some(HealthCheck {
                protocol: LbProtocol::Tcp,
                port: 30080,
                interval: 5,
                timeout: 3,
                retries: 2,
                http: None,
            }),
            http: None,
        },
        LbService {
            protocol: LbProtocol::Http,
            listen_port: 443,
            destination_port: 30443,
            proxyprotocol: false,
            health_check: Some(HealthCheck {
                protocol: LbProtocol::Http,
                port: 30443,
                interval: 7,
                timeout: 4,
                retries: 5,
                http: Some(HealthCheckHttp {
                    domain: Some("health.example.com".to_owned()),
                    path: "/healthz".to_owned(),
                    response: Some("ok".to_owned()),
                    status_codes: vec!["2??".to_owned()],
                    tls: false,
                }),
            }),
            http: Some(HttpOptions {
                cookie_name: Some("SRVID".to_owned()),
                cookie_lifetime: Some(600),
                certificates: Vec::new(),
                redirect_http: false,
                sticky_sessions: true,
                // Explicit: today's API answers every HTTP service with a timeout_idle.
                timeout_idle: Some(45),
            }),
        },
    ]
}

/// A server target on its private IP, healthy on both services of [`two_services`].
fn private_target(id: u64) -> LbTarget {
    LbTarget {
        kind: TargetKind::Server,
        server: Some(IdRef { id: sid(id) }),
        ip: None,
        label_selector: None,
        use_private_ip: true,
        health_status: vec![
            TargetHealth { listen_port: 80, status: HealthStatus::Healthy },
            TargetHealth { listen_port: 443, status: HealthStatus::Healthy },
        ],
        targets: Vec::new(),
    }
}

/// A network `10.0.0.0/8` with subnet `10.0.0.0/24` and three servers at .11, .12, .13.
fn seed_network_with_three_servers(h: &FakeHandle) -> (u64, Vec<u64>) {
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap();
    let servers = (1..=3)
        .map(|i| {
            h.seed_server(&SeedServer::new(&format!("node-{i}")).network_ip(net, &format!("10.0.0.1{i}"))).unwrap()
        })
        .collect();
    (net, servers)
}

/// Checks type, location, labels, services, targets and private network of a load balancer
/// built from [`two_services`] and three private targets.
async fn assert_full_lb(
    client: &Client,
    lb: &LoadBalancer,
    name: &str,
    lb_labels: &hcloud_api::models::Labels,
    servers: &[u64],
) {
    let lb11 = client.load_balancer_types().get_by_name("lb11").await.unwrap().expect("lb11 exists");
    let fsn1 = client.locations().list_all().await.unwrap().into_iter().find(|l| l.name == "fsn1").expect("fsn1");
    assert_eq!(lb.name, name);
    assert_eq!(lb.load_balancer_type, lb11);
    assert_eq!((lb.load_balancer_type.name.as_str(), lb.load_balancer_type.max_targets), ("lb11", 25));
    assert_eq!(lb.load_balancer_type.max_services, 5);
    assert_eq!(lb.location, fsn1);
    assert_eq!(lb.location.network_zone, "eu-central");
    assert_eq!(&lb.labels, lb_labels);
    assert_eq!(lb.services, two_services());
    assert_eq!(lb.targets, servers.iter().map(|s| private_target(*s)).collect::<Vec<_>>());
    assert!(lb.public_net.enabled);
    assert!(lb.public_net.ipv4.ip.is_some());
    for s in servers {
        let server = client.servers().get(sid(*s)).await.unwrap();
        assert_eq!(server.load_balancers, vec![lb.id.0], "server {s} lists the load balancer");
    }
}

// ------------------------------------------------------------------------------------------
// 1. Load balancer with network, services and private targets
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn load_balancer_attach_services_and_private_targets_step_by_step() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let (net, servers) = seed_network_with_three_servers(&env.h);
    let c = &env.client;
    let lb_labels = labels(&[("cluster", "prod"), ("service", "ingress")]);

    let created = c
        .load_balancers()
        .create(&CreateLoadBalancerRequest {
            name: "ingress".to_owned(),
            load_balancer_type: "lb11".to_owned(),
            location: Some("fsn1".to_owned()),
            labels: lb_labels.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = created.resource.id;
    let create_action = created.action.expect("create returns an action");
    assert_eq!(create_action.command, "create_load_balancer");
    c.wait_for_action(&create_action, WAIT).await.unwrap();

    let attach = c
        .load_balancers()
        .attach_to_network(
            id,
            &AttachLbToNetworkRequest {
                network: nid(net),
                ip: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 100))),
                ip_range: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(attach.command, "attach_to_network");
    let attach = c.wait_for_action(&attach, WAIT).await.unwrap();
    assert_eq!((attach.status, attach.progress), (ActionStatus::Success, 100));

    for service in two_services() {
        let a = c.load_balancers().add_service(id, &service).await.unwrap();
        assert_eq!(a.command, "add_service");
        c.wait_for_action(&a, WAIT).await.unwrap();
    }
    for s in &servers {
        let a =
            c.load_balancers().add_target(id, &TargetSpec::Server { id: sid(*s), use_private_ip: true }).await.unwrap();
        assert_eq!(a.command, "add_target");
        c.wait_for_action(&a, WAIT).await.unwrap();
    }

    let lb = c.load_balancers().get(id).await.unwrap();
    assert_eq!(lb.id, id);
    assert_eq!(
        lb.private_net,
        vec![LbPrivateNet { network: nid(net), ip: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 100))) }]
    );
    assert_full_lb(c, &lb, "ingress", &lb_labels, &servers).await;
    // The client's view equals the fake's own state.
    let fake_lb = env.h.load_balancer(raw(id.0)).unwrap();
    assert_eq!(fake_lb.targets.len(), 3);
    assert_eq!(fake_lb.private_net[0].ip, "10.0.0.100");
}

#[tokio::test]
async fn load_balancer_created_with_network_services_and_targets_in_one_request() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let (net, servers) = seed_network_with_three_servers(&env.h);
    let c = &env.client;
    let lb_labels = labels(&[("cluster", "prod")]);

    let created = c
        .load_balancers()
        .create(&CreateLoadBalancerRequest {
            name: "one-shot".to_owned(),
            load_balancer_type: "lb11".to_owned(),
            location: Some("fsn1".to_owned()),
            labels: lb_labels.clone(),
            network: Some(nid(net)),
            services: two_services(),
            targets: servers.iter().map(|s| TargetSpec::Server { id: sid(*s), use_private_ip: true }).collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    let action = created.action.expect("create returns an action");
    assert_eq!(action.status, ActionStatus::Running);
    let done = c.wait_for_actions(std::slice::from_ref(&action), WAIT).await.unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].id, done[0].status.clone(), done[0].progress), (action.id, ActionStatus::Success, 100));

    let lb = c.load_balancers().get(created.resource.id).await.unwrap();
    assert_full_lb(c, &lb, "one-shot", &lb_labels, &servers).await;
    assert_eq!(lb.private_net.len(), 1);
    assert_eq!(lb.private_net[0].network, nid(net));
    let ip = lb.private_net[0].ip.expect("private IP");
    let subnet: ipnet::IpNet = "10.0.0.0/24".parse().unwrap();
    assert!(subnet.contains(&ip), "{ip} in the subnet");
    let taken: Vec<IpAddr> =
        ["10.0.0.1", "10.0.0.11", "10.0.0.12", "10.0.0.13"].iter().map(|s| s.parse().unwrap()).collect();
    assert!(!taken.contains(&ip), "{ip} is neither the gateway nor a server's IP");
}

// ------------------------------------------------------------------------------------------
// 2. Paging
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn paging_through_120_servers() {
    let env = Env::start(FakeConfig::default()).await;
    let ids = env.h.seed_servers(&SeedServerBatch::new("node-", 120)).unwrap();
    let c = &env.client;
    let all = ServerListParams::default();

    let p1 = c.servers().list(&all, 1, 50).await.unwrap();
    let p2 = c.servers().list(&all, 2, 50).await.unwrap();
    let p3 = c.servers().list(&all, 3, 50).await.unwrap();
    assert_eq!((p1.items.len(), p2.items.len(), p3.items.len()), (50, 50, 20));
    let meta = |page, previous_page, next_page| Pagination {
        page,
        per_page: 50,
        previous_page,
        next_page,
        last_page: Some(3),
        total_entries: Some(120),
    };
    assert_eq!(p1.pagination, Some(meta(1, None, Some(2))));
    assert_eq!(p2.pagination, Some(meta(2, Some(1), Some(3))));
    assert_eq!(p3.pagination, Some(meta(3, Some(2), None)));
    let paged: Vec<String> = [p1, p2, p3].into_iter().flat_map(|p| p.items).map(|s| s.name).collect();
    assert_eq!(paged, (1..=120).map(|i| format!("node-{i}")).collect::<Vec<_>>());

    env.h.reset_requests();
    env.rec.take();
    let listed = c.servers().list_all(&all).await.unwrap();
    assert_eq!(listed.len(), 120);
    assert_eq!(listed.iter().map(|s| raw(s.id.0)).collect::<Vec<_>>(), ids, "every server, in id order");
    assert!(listed.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(env.count("GET /v1/servers"), 3);
    assert_eq!(env.h.request_counts().total, 3);
    let mut pages: Vec<String> = env
        .h
        .request_log()
        .iter()
        .map(|r| {
            let q = r.query.clone().unwrap_or_default();
            assert!(q.split('&').any(|kv| kv == "per_page=50"), "{q}");
            q.split('&').find(|kv| kv.starts_with("page=")).unwrap().to_owned()
        })
        .collect();
    pages.sort();
    assert_eq!(pages, ["page=1", "page=2", "page=3"]);
    let events = env.rec.take();
    assert_eq!(events.len(), 3);
    assert!(events.iter().all(|e| e.endpoint == "/servers" && e.status == Some(200) && e.attempt == 0), "{events:?}");
}

// ------------------------------------------------------------------------------------------
// 3. Waiting on actions
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn wait_for_action_polls_a_running_action_until_success() {
    let env = Env::start(FakeConfig::default().with_action_delay(FOREVER)).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    let action = env.client.servers().poweroff(sid(server)).await.unwrap();
    assert_eq!((action.status.clone(), action.progress), (ActionStatus::Running, 0));
    env.h.reset_requests();

    let client = env.client.clone();
    let waiting = action.clone();
    let task = tokio::spawn(async move { client.wait_for_action(&waiting, WAIT).await });
    let h = env.h.clone();
    until("the waiter polled twice", || h.request_count("GET /v1/actions") >= 2).await;
    assert!(!task.is_finished(), "the waiter keeps waiting while the action runs");
    env.h.finish_all_actions();
    let done = task.await.unwrap().unwrap();

    assert_eq!(done.id, action.id);
    assert_eq!(done.command, "stop_server");
    assert_eq!((done.status, done.progress), (ActionStatus::Success, 100));
    assert!(done.finished.is_some());
    assert!(env.count("GET /v1/actions") >= 3, "polled while running and once more after success");
    assert_eq!(env.count("GET /v1/actions/{id}"), 0);
    let server = env.client.servers().get(sid(server)).await.unwrap();
    assert_eq!(server.status.as_str(), "off");
}

#[tokio::test]
async fn wait_for_action_surfaces_a_failed_action() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    let lb = lbid(env.h.seed_load_balancer(&SeedLoadBalancer::new("public")).unwrap());
    env.h.fail_next_actions(ActionFailure {
        count: 1,
        command: Some("add_target".to_owned()),
        code: "action_failed".to_owned(),
        message: "the target could not be configured".to_owned(),
    });

    let action = env
        .client
        .load_balancers()
        .add_target(lb, &TargetSpec::Server { id: sid(server), use_private_ip: false })
        .await
        .unwrap();
    let err = env.client.wait_for_action(&action, WAIT).await.unwrap_err();
    match &err {
        Error::ActionFailed { id, command, code, message } => {
            assert_eq!(*id, action.id);
            assert_eq!(command, "add_target");
            assert_eq!(code, &ErrorCode::Unknown("action_failed".to_owned()));
            assert_eq!(code.as_str(), "action_failed");
            assert_eq!(message, "the target could not be configured");
        }
        other => panic!("expected ActionFailed, got {other:?}"),
    }
    assert!(!err.is_transient());
    let text = err.to_string();
    assert!(text.contains("add_target") && text.contains("the target could not be configured"), "{text}");
    assert!(env.client.load_balancers().get(lb).await.unwrap().targets.is_empty(), "failed action changed nothing");
}

#[tokio::test]
async fn wait_for_action_times_out_before_the_action_finishes() {
    let env = Env::start(FakeConfig::default().with_action_delay(FOREVER)).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    let action = env.client.servers().poweroff(sid(server)).await.unwrap();
    env.h.reset_requests();

    let started = Instant::now();
    let err = env.client.wait_for_action(&action, Duration::from_millis(150)).await.unwrap_err();
    let elapsed = started.elapsed();
    match &err {
        Error::ActionTimeout { id, command, waited } => {
            assert_eq!(*id, action.id);
            assert_eq!(command, "stop_server");
            assert!(*waited >= Duration::from_millis(150), "{waited:?}");
        }
        other => panic!("expected ActionTimeout, got {other:?}"),
    }
    assert!(err.is_transient());
    assert!(elapsed < Duration::from_secs(2), "gave up near the deadline, took {elapsed:?}");
    assert!(env.count("GET /v1/actions") >= 1, "polled before giving up");
    let still = env.h.action(raw(action.id.0)).unwrap();
    assert_eq!(still.status, hcloud_fake::wire::ActionStatus::Running);
}

#[tokio::test]
async fn wait_for_actions_polls_all_actions_in_one_request() {
    let env = Env::start(FakeConfig::default().with_action_delay(FOREVER)).await;
    let ids = env.h.seed_servers(&SeedServerBatch::new("node-", 5)).unwrap();
    let mut actions: Vec<Action> = Vec::new();
    for id in &ids {
        actions.push(env.client.servers().poweroff(sid(*id)).await.unwrap());
    }
    env.h.reset_requests();

    let client = env.client.clone();
    let waiting = actions.clone();
    let task = tokio::spawn(async move { client.wait_for_actions(&waiting, WAIT).await });
    let h = env.h.clone();
    until("three polls", || h.request_count("GET /v1/actions") >= 3).await;
    env.h.finish_all_actions();
    let done = task.await.unwrap().unwrap();

    assert_eq!(done.iter().map(|a| a.id).collect::<Vec<_>>(), actions.iter().map(|a| a.id).collect::<Vec<_>>());
    assert!(done.iter().all(|a| a.status == ActionStatus::Success && a.progress == 100), "{done:?}");
    let log = env.h.request_log();
    let polls = log.len();
    assert!(polls >= 4, "three polls while running, one after: {polls}");
    assert!(log.iter().all(|r| r.endpoint == "GET /v1/actions"), "only batched polls: {log:?}");
    assert_eq!(env.count("GET /v1/actions/{id}"), 0);
    // The actions finished together, so every poll asked for all five ids at once: `polls`
    // requests where polling one action at a time would have taken `5 * polls`.
    let mut want: Vec<String> = actions.iter().map(|a| format!("id={}", a.id)).collect();
    want.sort();
    let mut ids_polled = 0;
    for r in &log {
        let q = r.query.clone().unwrap_or_default();
        let mut got: Vec<String> = q.split('&').filter(|kv| kv.starts_with("id=")).map(str::to_owned).collect();
        got.sort();
        assert_eq!(got, want, "query {q}");
        ids_polled += got.len();
    }
    assert_eq!(ids_polled, actions.len() * polls);
    assert!(polls < ids_polled, "batched: {polls} requests for {ids_polled} action lookups");
}

// ------------------------------------------------------------------------------------------
// 4. Typed errors
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn locked_while_an_action_runs_and_after_lock_resource() {
    let env = Env::start(FakeConfig::default().with_action_delay(FOREVER)).await;
    let c = &env.client;
    let created = c
        .load_balancers()
        .create(&CreateLoadBalancerRequest {
            name: "busy".to_owned(),
            load_balancer_type: "lb11".to_owned(),
            location: Some("fsn1".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = created.resource.id;
    env.h.reset_requests();

    // The create action still runs: mutations answer 423 locked (and a POST is not retried).
    let err = c.load_balancers().add_service(id, &two_services()[0]).await.unwrap_err();
    let api = api_err(&err);
    assert_eq!((api.status, &api.code), (423, &ErrorCode::Locked));
    assert_eq!(api.request, format!("POST /load_balancers/{id}/actions/add_service"));
    assert!(api.correlation_id.is_some());
    assert!(err.is_transient());
    assert_eq!(env.count("POST /v1/load_balancers/{id}/actions/add_service"), 1);

    env.h.finish_all_actions();
    let a = c.load_balancers().add_service(id, &two_services()[0]).await.unwrap();
    env.h.finish_all_actions();
    assert_eq!(c.wait_for_action(&a, WAIT).await.unwrap().status, ActionStatus::Success);

    // A test lock: even the idempotent PUT gets 423, once (locked is not retried).
    env.h.lock_resource(ResourceRef::load_balancer(raw(id.0)));
    let rename = UpdateLoadBalancerRequest { name: Some("renamed".to_owned()), labels: None };
    let err = c.load_balancers().update(id, &rename).await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::Locked));
    assert_eq!(api_err(&err).status, 423);
    assert_eq!(env.count("PUT /v1/load_balancers/{id}"), 1);
    env.h.unlock_resource(ResourceRef::load_balancer(raw(id.0)));
    assert_eq!(c.load_balancers().update(id, &rename).await.unwrap().name, "renamed");
}

#[tokio::test]
async fn not_found_is_typed_and_find_maps_it_to_none() {
    let env = Env::start(FakeConfig::default()).await;
    let c = &env.client;
    let err = c.servers().get(ServerId(424_242)).await.unwrap_err();
    assert!(err.is_not_found());
    let api = api_err(&err);
    assert_eq!((api.status, &api.code), (404, &ErrorCode::NotFound));
    assert_eq!(api.request, "GET /servers/424242");
    assert!(!api.message.is_empty());
    assert!(!err.is_transient());
    assert_eq!(env.count("GET /v1/servers/{id}"), 1, "404 is not retried");

    assert_eq!(c.servers().find(ServerId(424_242)).await.unwrap(), None);
    let existing = env.h.seed_server(&SeedServer::new("there")).unwrap();
    assert_eq!(c.servers().find(sid(existing)).await.unwrap().map(|s| s.name), Some("there".to_owned()));

    let err = c.load_balancers().get(LoadBalancerId(77)).await.unwrap_err();
    assert_eq!(api_err(&err).status, 404);
    assert!(err.is_not_found());
    assert_eq!(c.load_balancers().get_by_name("nope").await.unwrap(), None);
}

#[tokio::test]
async fn duplicate_load_balancer_name_is_a_uniqueness_error() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let req = CreateLoadBalancerRequest {
        name: "dup".to_owned(),
        load_balancer_type: "lb11".to_owned(),
        location: Some("fsn1".to_owned()),
        ..Default::default()
    };
    env.client.load_balancers().create(&req).await.unwrap();
    let err = env.client.load_balancers().create(&req).await.unwrap_err();
    let api = api_err(&err);
    assert_eq!((api.status, &api.code), (409, &ErrorCode::UniquenessError));
    assert_eq!(api.request, "POST /load_balancers");
    // The fake names the offending field: {"fields":[{"name":"name"}]}. The client keeps
    // details of codes other than invalid_input as JSON text.
    match &api.details {
        Some(ErrorDetails::Other(json)) => {
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            assert_eq!(v, serde_json::json!({"fields": [{"name": "name"}]}));
        }
        other => panic!("expected the fields of the uniqueness error, got {other:?}"),
    }
    assert_eq!(env.count("POST /v1/load_balancers"), 2, "409 uniqueness_error is not retried like conflict");
    assert_eq!(env.h.snapshot().load_balancers.len(), 1);
}

#[tokio::test]
async fn sixth_service_on_lb11_exceeds_the_resource_limit() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let c = &env.client;
    let tcp = |port: u16| LbService {
        protocol: LbProtocol::Tcp,
        listen_port: port,
        destination_port: port + 30000,
        ..Default::default()
    };
    let created = c
        .load_balancers()
        .create(&CreateLoadBalancerRequest {
            name: "full".to_owned(),
            load_balancer_type: "lb11".to_owned(),
            location: Some("fsn1".to_owned()),
            services: (81..=85).map(tcp).collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    c.wait_for_action(&created.action.unwrap(), WAIT).await.unwrap();

    let err = c.load_balancers().add_service(created.resource.id, &tcp(86)).await.unwrap_err();
    let api = api_err(&err);
    assert_eq!((api.status, &api.code), (403, &ErrorCode::ResourceLimitExceeded));
    assert!(!err.is_transient());
    let lb = c.load_balancers().get(created.resource.id).await.unwrap();
    assert_eq!(lb.services.iter().map(|s| s.listen_port).collect::<Vec<_>>(), vec![81, 82, 83, 84, 85]);
}

#[tokio::test]
async fn twenty_sixth_target_on_lb11_exceeds_the_resource_limit() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let c = &env.client;
    let ip = |n: u8| TargetSpec::Ip(IpAddr::V4(Ipv4Addr::new(203, 0, 113, n)));
    let created = c
        .load_balancers()
        .create(&CreateLoadBalancerRequest {
            name: "many-targets".to_owned(),
            load_balancer_type: "lb11".to_owned(),
            location: Some("fsn1".to_owned()),
            targets: (1..=25).map(ip).collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    c.wait_for_action(&created.action.unwrap(), WAIT).await.unwrap();
    assert_eq!(c.load_balancers().get(created.resource.id).await.unwrap().targets.len(), 25);

    let err = c.load_balancers().add_target(created.resource.id, &ip(26)).await.unwrap_err();
    let api = api_err(&err);
    assert_eq!((api.status, &api.code), (403, &ErrorCode::ResourceLimitExceeded));
    assert_eq!(api.request, format!("POST /load_balancers/{}/actions/add_target", created.resource.id));
}

#[tokio::test]
async fn rate_limit_exceeded_and_rate_limit_headers() {
    let env = Env::with(FakeConfig::default().with_rate_limit(2, 0.0), retry(2), Duration::from_secs(5)).await;
    let c = &env.client;
    assert_eq!(c.rate_limit(), None, "nothing seen yet");
    let year_ahead = || SystemTime::now() + Duration::from_secs(365 * 86_400);
    let near = |a: SystemTime, b: SystemTime| {
        let d = a.duration_since(b).unwrap_or_else(|e| e.duration());
        d <= Duration::from_secs(5)
    };

    c.locations().list_all().await.unwrap();
    let rl = c.rate_limit().expect("headers seen");
    assert_eq!((rl.limit, rl.remaining), (2, 1));
    assert!(near(rl.reset, year_ahead()), "no refill: reset a year ahead, got {:?}", rl.reset);

    c.server_types().list_all().await.unwrap();
    let rl = c.rate_limit().unwrap();
    assert_eq!((rl.limit, rl.remaining), (2, 0));

    // Third request: 429. A GET is retried (max_retries = 2), all attempts are refused.
    let err = c.locations().list_all().await.unwrap_err();
    assert!(err.is_rate_limited());
    let api = api_err(&err);
    assert_eq!((api.status, &api.code), (429, &ErrorCode::RateLimitExceeded));
    assert!(err.is_transient());
    assert_eq!(env.count("GET /v1/locations"), 1 + 3);
    let rl = c.rate_limit().unwrap();
    assert_eq!((rl.limit, rl.remaining), (2, 0));
    assert!(near(rl.reset, year_ahead()));

    // A POST that hits the rate limit is retried too (the API refuses before applying
    // anything), just as bounded; nothing was created.
    let err = c
        .load_balancers()
        .create(&CreateLoadBalancerRequest {
            name: "x".to_owned(),
            load_balancer_type: "lb11".to_owned(),
            location: Some("fsn1".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::RateLimitExceeded));
    assert!(!err.is_outcome_unknown(), "a 429 says the create was not applied: {err:?}");
    assert_eq!(env.count("POST /v1/load_balancers"), 1 + 2);
    assert!(env.h.snapshot().load_balancers.is_empty());

    // Once the bucket is full again the headers say so.
    env.h.refill_rate_limit();
    c.locations().list_all().await.unwrap();
    let rl = c.rate_limit().unwrap();
    assert_eq!((rl.limit, rl.remaining), (2, 1));
}

#[tokio::test]
async fn invalid_label_selector_is_invalid_input_naming_the_field() {
    let env = Env::start(FakeConfig::default()).await;
    let params = ServerListParams { label_selector: Some("env in (prod".to_owned()), ..Default::default() };
    let err = env.client.servers().list_all(&params).await.unwrap_err();
    let api = api_err(&err);
    assert_eq!((api.status, &api.code), (400, &ErrorCode::InvalidInput));
    match &api.details {
        Some(ErrorDetails::InvalidInput(fields)) => {
            assert_eq!(fields.len(), 1);
            let InvalidField { name, messages } = &fields[0];
            assert_eq!(name, "label_selector");
            assert_eq!(messages.len(), 1, "{messages:?}");
        }
        other => panic!("expected invalid_input fields, got {other:?}"),
    }
    assert!(err.to_string().contains("field `label_selector`"), "{err}");
}

// ------------------------------------------------------------------------------------------
// 5. Retries
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn get_recovers_from_two_injected_502s() {
    let env = Env::start(FakeConfig::default()).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    env.h.inject_fault(FaultRule::error(Some("GET"), "/servers/{id}", 502, "bad_gateway").times(2));

    let got = env.client.servers().get(sid(server)).await.unwrap();
    assert_eq!(got.name, "node-1");
    assert_eq!(env.count("GET /v1/servers/{id}"), 3);
    let statuses: Vec<u16> = env.h.request_log().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [502, 502, 200]);
    assert_eq!(
        env.rec.take(),
        vec![
            seen("GET", "/servers/{id}", Some(502), 0),
            seen("GET", "/servers/{id}", Some(502), 1),
            seen("GET", "/servers/{id}", Some(200), 2),
        ]
    );
    assert!(env.h.faults().is_empty());
}

#[tokio::test]
async fn post_is_not_retried_after_a_502() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    env.h.inject_fault(FaultRule::error(Some("POST"), "/servers/{id}/actions/poweroff", 502, "bad_gateway").times(2));

    let err = env.client.servers().poweroff(sid(server)).await.unwrap_err();
    let api = api_err(&err);
    assert_eq!((api.status, &api.code), (502, &ErrorCode::BadGateway));
    assert_eq!(api.request, format!("POST /servers/{server}/actions/poweroff"));
    assert_eq!(env.count("POST /v1/servers/{id}/actions/poweroff"), 1);
    assert_eq!(env.rec.take(), vec![seen("POST", "/servers/{id}/actions/poweroff", Some(502), 0)]);
    assert_eq!(env.h.faults()[0].remaining, Some(1), "exactly one request reached the fake");
    assert!(env.h.snapshot().actions.is_empty(), "no action was started");
}

#[tokio::test]
async fn conflict_on_a_post_is_retried() {
    let env = Env::start(FakeConfig::default().with_action_delay(SHORT_ACTION)).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    env.h.inject_fault(FaultRule::error(Some("POST"), "/servers/{id}/actions/poweroff", 409, "conflict"));

    let action = env.client.servers().poweroff(sid(server)).await.unwrap();
    assert_eq!(action.command, "stop_server");
    assert_eq!(env.count("POST /v1/servers/{id}/actions/poweroff"), 2);
    assert_eq!(
        env.rec.take(),
        vec![
            seen("POST", "/servers/{id}/actions/poweroff", Some(409), 0),
            seen("POST", "/servers/{id}/actions/poweroff", Some(201), 1),
        ]
    );
    assert_eq!(env.h.snapshot().actions.len(), 1, "the action ran once");
    env.client.wait_for_action(&action, WAIT).await.unwrap();
}

#[tokio::test]
async fn retries_are_bounded() {
    let env = Env::with(FakeConfig::default(), retry(3), Duration::from_secs(5)).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    env.h.inject_fault(FaultRule::error(Some("GET"), "/servers/{id}", 503, "unavailable").times(0));

    let err = env.client.servers().get(sid(server)).await.unwrap_err();
    let api = api_err(&err);
    assert_eq!((api.status, &api.code), (503, &ErrorCode::Unavailable));
    assert_eq!(env.count("GET /v1/servers/{id}"), 4, "max_retries + 1 attempts");
    let attempts: Vec<u32> = env.rec.take().iter().map(|e| e.attempt).collect();
    assert_eq!(attempts, [0, 1, 2, 3]);

    // Conflicts are retried for POSTs too, but just as bounded.
    env.h.clear_faults();
    env.h.inject_fault(FaultRule::error(Some("POST"), "/servers/{id}/actions/poweron", 409, "conflict").times(0));
    let err = env.client.servers().poweron(sid(server)).await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::Conflict));
    assert_eq!(env.count("POST /v1/servers/{id}/actions/poweron"), 4);
}

// ------------------------------------------------------------------------------------------
// 6. Label selectors
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn label_selectors_filter_servers() {
    let env = Env::start(FakeConfig::default()).await;
    let h = &env.h;
    h.seed_server(&SeedServer::new("web-prod").label("env", "prod").label("role", "web")).unwrap();
    h.seed_server(&SeedServer::new("db-prod").label("env", "prod").label("role", "db")).unwrap();
    h.seed_server(&SeedServer::new("web-staging").label("env", "staging").label("role", "web")).unwrap();
    h.seed_server(&SeedServer::new("dev-box").label("env", "dev")).unwrap();
    h.seed_server(&SeedServer::new("cache").label("role", "cache")).unwrap();

    let cases: &[(&str, &[&str])] = &[
        ("env=prod", &["web-prod", "db-prod"]),
        ("env==prod", &["web-prod", "db-prod"]),
        ("env!=prod", &["web-staging", "dev-box", "cache"]),
        ("env in (staging,dev)", &["web-staging", "dev-box"]),
        ("env notin (prod,staging)", &["dev-box", "cache"]),
        ("!role", &["dev-box"]),
        ("role", &["web-prod", "db-prod", "web-staging", "cache"]),
        ("env=prod,role=web", &["web-prod"]),
        ("role in (web,cache),env!=prod", &["web-staging", "cache"]),
        ("env,!role", &["dev-box"]),
        ("env=prod,!role", &[]),
    ];
    for (selector, expected) in cases {
        let params = ServerListParams { label_selector: Some((*selector).to_owned()), ..Default::default() };
        let names: Vec<String> =
            env.client.servers().list_all(&params).await.unwrap().into_iter().map(|s| s.name).collect();
        assert_eq!(names, *expected, "selector {selector:?}");
    }

    // The selector applies before paging.
    let params = ServerListParams { label_selector: Some("env!=prod".to_owned()), ..Default::default() };
    let page = env.client.servers().list(&params, 1, 2).await.unwrap();
    assert_eq!(page.items.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["web-staging", "dev-box"]);
    let p = page.pagination.unwrap();
    assert_eq!((p.total_entries, p.last_page, p.next_page), (Some(3), Some(2), Some(2)));
}

#[tokio::test]
async fn label_selectors_filter_load_balancers() {
    let env = Env::start(FakeConfig::default()).await;
    let seed = |name: &str, pairs: &[(&str, &str)]| {
        let mut lb = SeedLoadBalancer::new(name);
        lb.labels = labels(pairs);
        env.h.seed_load_balancer(&lb).unwrap()
    };
    seed("lb-a", &[("app", "web"), ("tier", "frontend")]);
    seed("lb-b", &[("app", "web")]);
    seed("lb-c", &[("app", "api")]);
    seed("lb-d", &[]);

    let cases: &[(&str, &[&str])] = &[
        ("app=web", &["lb-a", "lb-b"]),
        ("app!=web", &["lb-c", "lb-d"]),
        ("tier", &["lb-a"]),
        ("!tier,app in (web,api)", &["lb-b", "lb-c"]),
        ("app notin (web)", &["lb-c", "lb-d"]),
        ("!app", &["lb-d"]),
    ];
    for (selector, expected) in cases {
        let params = LoadBalancerListParams { label_selector: Some((*selector).to_owned()), ..Default::default() };
        let names: Vec<String> =
            env.client.load_balancers().list_all(&params).await.unwrap().into_iter().map(|l| l.name).collect();
        assert_eq!(names, *expected, "selector {selector:?}");
    }
}

// ------------------------------------------------------------------------------------------
// Token redaction, per-request timeout
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_token_never_appears_in_errors() {
    let env = Env::start(FakeConfig::default().with_token_policy(TokenPolicy::deny([TOKEN]))).await;
    let err = env.client.servers().list_all(&ServerListParams::default()).await.unwrap_err();
    let api = api_err(&err);
    assert_eq!((api.status, &api.code), (401, &ErrorCode::Unauthorized));
    assert_eq!(env.count("GET /v1/servers"), 1, "401 is not retried");
    let text = format!("{err} {err:?}");
    assert!(!text.contains(TOKEN), "{text}");
    assert!(!format!("{:?}", env.client).contains(TOKEN));

    // A transport error (nothing listens on the port) and a timeout don't show it either.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dead = Client::builder(SecretString::from(TOKEN))
        .endpoint(format!("http://127.0.0.1:{port}/v1"))
        .retry_policy(retry(1))
        .build()
        .unwrap();
    let err = dead.servers().get(ServerId(1)).await.unwrap_err();
    assert!(matches!(err, Error::Transport { .. }), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(!text.contains(TOKEN), "{text}");

    env.h.set_token_policy(TokenPolicy::AcceptAll);
    let slow = Client::builder(SecretString::from(TOKEN))
        .endpoint(env.fake.base_url())
        .retry_policy(retry(0))
        .timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    env.h.inject_fault(FaultRule::latency(Some("GET"), "/servers", Duration::from_millis(500)));
    let err = slow.servers().list_all(&ServerListParams::default()).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(!text.contains(TOKEN), "{text}");
}

#[tokio::test]
async fn per_request_timeout_is_retried_for_get_but_not_for_post() {
    let timeout = Duration::from_millis(150);
    let env = Env::with(FakeConfig::default().with_action_delay(SHORT_ACTION), retry(2), timeout).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();

    env.h.inject_fault(FaultRule::latency(Some("GET"), "/servers/{id}", Duration::from_secs(2)).times(4));
    let started = Instant::now();
    let err = env.client.servers().get(sid(server)).await.unwrap_err();
    match &err {
        Error::Timeout { request, after } => {
            assert_eq!(request, &format!("GET /servers/{server}"));
            assert_eq!(*after, timeout);
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(err.is_transient());
    assert!(started.elapsed() >= timeout * 3, "three attempts each waited for the timeout");
    assert_eq!(
        env.rec.take(),
        vec![
            seen("GET", "/servers/{id}", None, 0),
            seen("GET", "/servers/{id}", None, 1),
            seen("GET", "/servers/{id}", None, 2),
        ]
    );
    assert_eq!(env.h.faults()[0].remaining, Some(1), "max_retries + 1 = 3 requests reached the fake");
    env.h.clear_faults();

    env.h.inject_fault(
        FaultRule::latency(Some("POST"), "/servers/{id}/actions/poweroff", Duration::from_secs(2)).times(2),
    );
    let err = env.client.servers().poweroff(sid(server)).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(env.rec.take(), vec![seen("POST", "/servers/{id}/actions/poweroff", None, 0)]);
    assert_eq!(env.h.faults()[0].remaining, Some(1), "the POST was sent once");

    // Without the fault the same calls work with the same client.
    env.h.clear_faults();
    assert_eq!(env.client.servers().get(sid(server)).await.unwrap().name, "node-1");
}

#[tokio::test]
async fn a_caller_that_knows_the_action_duration_polls_once() {
    let env = Env::start(FakeConfig::default().with_action_delay(Duration::from_millis(200))).await;
    let net = env
        .h
        .seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central"))
        .expect("network");
    let route = hcloud_api::models::Route {
        destination: "10.244.0.0/24".parse().unwrap(),
        gateway: "10.0.0.2".parse().unwrap(),
    };
    let action = env.client.networks().add_route(nid(net), &route).await.expect("add_route");
    let policy = PollPolicy { initial: Duration::from_millis(300), max: Duration::from_millis(300) };
    let done = env.client.wait_for_actions_with(&[action], Duration::from_secs(5), policy).await.expect("finishes");
    assert_eq!(done[0].status, ActionStatus::Success);
    assert_eq!(env.count("GET /v1/actions"), 1, "one poll at the expected end");
    assert_eq!(env.h.network(net).expect("network").routes.len(), 1);
}
