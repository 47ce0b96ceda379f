//! Hetzner private-network routes against the fake: what each call sends (request counts),
//! the checks made before any request, and today's failure modes (a busy network, `locked`,
//! the route limit, routes to deleted servers).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::{AddressType, CloudError, NodeAddress, Route, Routes};
use hcloud_api::models::NetworkId;
use hcloud_api::{Client, PollPolicy, RetryPolicy, SecretString};
use hcloud_fake::control::{ResourceRef, SeedNetwork, SeedServer};
use hcloud_fake::faults::FaultRule;
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use hcloud_provider::config::CacheMode;
use hcloud_provider::{HcloudMetrics, HcloudRoutes, Inventory, RoutesConfig};

const CLUSTER: &str = "kubernetes";

struct Env {
    _fake: FakeServer,
    base_url: String,
    h: FakeHandle,
    net: u64,
    routes: HcloudRoutes,
    inventory: Arc<Inventory>,
}

/// A network `10.0.0.0/8` (subnet `10.0.0.0/24`) with servers `node-a` (10.0.0.5) and
/// `node-b` (10.0.0.6), and routes for cluster CIDR 10.244.0.0/16.
async fn env(action_delay: Duration) -> Env {
    let fake =
        FakeServer::start(FakeConfig { log_requests: false, ..FakeConfig::default().with_action_delay(action_delay) })
            .await
            .expect("fake");
    let h = fake.handle();
    let mut seed = SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central");
    // Someone else's route outside the cluster CIDR.
    seed.routes.push(hcloud_fake::wire::Route { destination: "192.168.0.0/24".into(), gateway: "10.0.0.99".into() });
    let net = h.seed_network(&seed).expect("network");
    h.seed_server(&SeedServer::new("node-a").network_ip(net, "10.0.0.5")).expect("server");
    h.seed_server(&SeedServer::new("node-b").network_ip(net, "10.0.0.6")).expect("server");
    let client = Client::builder(SecretString::from("t".repeat(64)))
        .endpoint(fake.base_url())
        .retry_policy(RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(400),
        })
        .poll_policy(PollPolicy { initial: Duration::from_millis(20), max: Duration::from_millis(50) })
        .build()
        .expect("client");
    let inventory = Arc::new(Inventory::new(client.clone(), CacheMode::All));
    let config = RoutesConfig {
        network: NetworkId(net as i64),
        network_name: "k8s".to_owned(),
        cluster_cidrs: vec!["10.244.0.0/16".parse().unwrap()],
        confirm_max_age: Duration::from_secs(10),
    };
    let routes = HcloudRoutes::new(client, inventory.clone(), config, HcloudMetrics::default());
    let base_url = fake.base_url();
    Env { _fake: fake, base_url, h, net, routes, inventory }
}

fn route_for(node: &str, provider_id: &str, cidr: &str, internal: &str) -> Route {
    Route {
        target_node: node.to_owned(),
        target_provider_id: provider_id.to_owned(),
        destination_cidr: cidr.to_owned(),
        target_node_addresses: vec![
            NodeAddress::new(AddressType::Hostname, node),
            NodeAddress::new(AddressType::InternalIp, internal),
        ],
        ..Route::default()
    }
}

fn network_routes(e: &Env) -> Vec<(String, String)> {
    let mut r: Vec<(String, String)> =
        e.h.network(e.net).unwrap().routes.into_iter().map(|r| (r.destination, r.gateway)).collect();
    r.sort();
    r
}

fn pair(d: &str, g: &str) -> (String, String) {
    (d.to_owned(), g.to_owned())
}

fn requests(h: &FakeHandle) -> u64 {
    h.request_counts().total
}

fn server_id(h: &FakeHandle, name: &str) -> u64 {
    h.snapshot().servers.iter().find(|s| s.name == name).map(|s| s.id).expect("server")
}

/// Adds a route to the network as another writer (not through `e.routes`, whose view it
/// bypasses).
async fn add_foreign_route(e: &Env, destination: &str, gateway: &str) {
    let other = Client::builder(SecretString::from("o".repeat(64))).endpoint(e.base_url.clone()).build().unwrap();
    let route =
        hcloud_api::models::Route { destination: destination.parse().unwrap(), gateway: gateway.parse().unwrap() };
    other.networks().add_route(NetworkId(e.net as i64), &route).await.expect("someone else's route");
}

#[tokio::test]
async fn list_maps_gateways_to_servers_and_reports_the_rest_as_blackholes() {
    let e = env(Duration::ZERO).await;
    let a = server_id(&e.h, "node-a");
    let r = e.routes.list_routes(CLUSTER).await.expect("list");
    assert_eq!(r.len(), 1);
    assert!(r[0].blackhole, "10.0.0.99 is no server's: {r:?}");
    assert_eq!(e.h.request_count("GET /v1/networks/{id}"), 1);
    assert_eq!(e.h.request_count("GET /v1/servers"), 1, "one server list maps every gateway");

    let created = route_for("node-a", &format!("hcloud://{a}"), "10.244.1.0/24", "10.0.0.5");
    e.routes.create_route(CLUSTER, "uid-a", &created).await.expect("create");
    let r = e.routes.list_routes(CLUSTER).await.expect("list");
    let ours = r.iter().find(|r| r.destination_cidr == "10.244.1.0/24").expect("our route");
    assert_eq!((ours.target_node.as_str(), ours.target_provider_id.clone()), ("node-a", format!("hcloud://{a}")));
    assert_eq!(ours.gateway.as_deref(), Some("10.0.0.5"));
    assert_eq!(ours.name, "10.0.0.5-10.244.1.0/24");
    assert!(!ours.blackhole);
    assert_eq!(e.h.request_count("GET /v1/servers"), 1, "known gateways: the snapshot answers");
}

/// Moves tokio's clock (by which the inventory ages its data) forward at once.
async fn age(by: Duration) {
    tokio::time::pause();
    tokio::time::advance(by).await;
    tokio::time::resume();
}

#[tokio::test]
async fn an_unknown_gateway_inside_the_cluster_is_confirmed_before_it_is_a_blackhole() {
    let e = env(Duration::ZERO).await;
    // A route inside the cluster CIDR via 10.0.0.8, which no server holds (yet).
    add_foreign_route(&e, "10.244.8.0/24", "10.0.0.8").await;
    // Fresh list (taken just now): a blackhole without a second list.
    let r = e.routes.list_routes(CLUSTER).await.unwrap();
    assert!(r.iter().find(|r| r.destination_cidr == "10.244.8.0/24").unwrap().blackhole);
    assert_eq!(e.h.request_count("GET /v1/servers"), 1);
    // A new server takes 10.0.0.8. The snapshot is young (younger than the confirmation
    // age: no new list) and does not know it, but the network lists it as attached: one
    // direct lookup finds it, so its route is not reported as a blackhole.
    e.h.seed_server(&SeedServer::new("node-new").network_ip(e.net, "10.0.0.8")).unwrap();
    let r = e.routes.list_routes(CLUSTER).await.unwrap();
    let route = r.iter().find(|r| r.destination_cidr == "10.244.8.0/24").unwrap();
    assert!(!route.blackhole, "{route:?}");
    assert_eq!(route.target_node, "node-new");
    assert_eq!(e.h.request_count("GET /v1/servers"), 1, "younger than the confirmation age: no list");
    assert_eq!(e.h.request_count("GET /v1/servers/{id}"), 1);
    // Every gateway in the cluster CIDR known: later lists cost no server request, and the
    // foreign blackhole outside the cluster CIDR (192.168.0.0/24 via 10.0.0.99) is never
    // confirmed.
    age(Duration::from_secs(600)).await;
    let r = e.routes.list_routes(CLUSTER).await.unwrap();
    assert!(r.iter().find(|r| r.destination_cidr == "192.168.0.0/24").unwrap().blackhole);
    assert!(!r.iter().find(|r| r.destination_cidr == "10.244.8.0/24").unwrap().blackhole);
    assert_eq!((e.h.request_count("GET /v1/servers"), e.h.request_count("GET /v1/servers/{id}")), (1, 1));
    // An unknown gateway inside the cluster CIDR with a snapshot older than the confirmation
    // age (HCLOUD_SERVER_CACHE_MAX_AGE): one fresh list; every attached server is in it, so
    // the blackhole is confirmed without a lookup per server.
    add_foreign_route(&e, "10.244.9.0/24", "10.0.0.9").await;
    let r = e.routes.list_routes(CLUSTER).await.unwrap();
    assert!(r.iter().find(|r| r.destination_cidr == "10.244.9.0/24").unwrap().blackhole);
    assert_eq!((e.h.request_count("GET /v1/servers"), e.h.request_count("GET /v1/servers/{id}")), (2, 1));
    assert_eq!(e.inventory.stats().lists.get(), 2);
}

#[tokio::test]
async fn a_live_server_a_paginated_list_missed_is_found_directly_and_its_route_is_no_blackhole() {
    let e = env(Duration::ZERO).await;
    // node-a, node-b, 48 others: 50 servers fill page 1; node-x (id 51) is alone on page 2.
    e.h.seed_servers(&hcloud_fake::control::SeedServerBatch::new("filler-", 48)).unwrap();
    e.h.seed_server(&SeedServer::new("node-x").network_ip(e.net, "10.0.0.51")).unwrap();
    let x = server_id(&e.h, "node-x");
    let filler = server_id(&e.h, "filler-1");
    add_foreign_route(&e, "10.244.51.0/24", "10.0.0.51").await;
    e.h.reset_requests();

    // A server of page 1 is deleted after page 1 was answered and before page 2 is: node-x
    // moves up to page 1, and the list has it on neither page.
    e.h.inject_fault(FaultRule::latency(Some("GET"), "/servers", Duration::ZERO).times(1));
    e.h.inject_fault(FaultRule::latency(Some("GET"), "/servers", Duration::from_millis(500)).times(1));
    let h = e.h.clone();
    let deleter = tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while h.request_count("GET /v1/servers") == 0 {
            assert!(tokio::time::Instant::now() < deadline, "page 1 was never requested");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        h.delete_server(filler).unwrap();
    });
    let r = e.routes.list_routes(CLUSTER).await.expect("list");
    deleter.await.unwrap();
    assert_eq!(e.h.request_count("GET /v1/servers"), 2, "one list of two pages");

    let route = r.iter().find(|r| r.destination_cidr == "10.244.51.0/24").expect("route");
    assert!(!route.blackhole, "node-x lives: its route is no blackhole: {route:?}");
    assert_eq!((route.target_node.as_str(), route.target_provider_id.clone()), ("node-x", format!("hcloud://{x}")));
    assert_eq!(
        e.h.request_count("GET /v1/servers/{id}"),
        1,
        "confirmed with one direct lookup of the one attached server the list lacked"
    );
}

#[tokio::test]
async fn a_failed_confirmation_is_an_error_not_a_blackhole() {
    let e = env(Duration::ZERO).await;
    e.routes.list_routes(CLUSTER).await.expect("list");
    // Attached after the (young) snapshot; its route's gateway is unknown to the snapshot.
    e.h.seed_server(&SeedServer::new("node-y").network_ip(e.net, "10.0.0.12")).unwrap();
    add_foreign_route(&e, "10.244.12.0/24", "10.0.0.12").await;
    e.h.inject_fault(FaultRule::error(Some("GET"), "/servers/{id}", 403, "forbidden").times(1));
    let err = e.routes.list_routes(CLUSTER).await.expect_err("the confirmation failed");
    assert!(err.to_string().contains("to confirm a blackhole"), "{err}");
    let r = e.routes.list_routes(CLUSTER).await.expect("list");
    assert!(!r.iter().find(|r| r.destination_cidr == "10.244.12.0/24").unwrap().blackhole);
}

#[tokio::test]
async fn a_gateway_no_attached_server_holds_is_a_blackhole_without_a_lookup_per_server() {
    let e = env(Duration::ZERO).await;
    e.h.seed_servers(&hcloud_fake::control::SeedServerBatch::new("filler-", 60)).unwrap();
    let c = e.h.seed_server(&SeedServer::new("node-c").network_ip(e.net, "10.0.0.7")).unwrap();
    add_foreign_route(&e, "10.244.7.0/24", "10.0.0.7").await;
    e.h.delete_server(c).unwrap();
    e.h.reset_requests();
    let r = e.routes.list_routes(CLUSTER).await.expect("list");
    assert!(r.iter().find(|r| r.destination_cidr == "10.244.7.0/24").unwrap().blackhole, "{r:?}");
    assert_eq!(e.h.request_count("GET /v1/servers/{id}"), 0, "every attached server was in the list");
    assert_eq!(e.h.request_count("GET /v1/servers"), 2, "one list (two pages)");
}

#[tokio::test]
async fn provider_ids_are_compared_as_the_servers_they_name() {
    let e = env(Duration::ZERO).await;
    let a = server_id(&e.h, "node-a");
    let listed = e.routes.list_routes(CLUSTER).await.expect("list");
    assert!(listed.iter().all(|r| r.target_provider_id.is_empty() || !r.target_provider_id.contains("://0")));
    // A kubelet started with --provider-id=hcloud://00<id> names the same server as the
    // route the network reports for it.
    let written = format!("hcloud://00{a}");
    assert_eq!(e.routes.canonical_provider_id(&written), format!("hcloud://{a}"));
    assert_eq!(e.routes.canonical_provider_id(&format!("hcloud://{a}")), format!("hcloud://{a}"));
    assert_eq!(e.routes.canonical_provider_id("hcloud://bm-07"), "hrobot://7");
    assert_eq!(e.routes.canonical_provider_id("aws:///x/i-1"), "aws:///x/i-1", "not ours: as it is");
    assert_eq!(e.routes.canonical_provider_id("hcloud://x"), "hcloud://x");
}

#[tokio::test]
async fn bad_destinations_are_refused_before_any_request() {
    let e = env(Duration::ZERO).await;
    let a = server_id(&e.h, "node-a");
    let before = requests(&e.h);
    let cases = [
        ("fd00:10:244:1::/64", "IPv6RouteNotSupported"),
        ("10.245.0.0/24", "ClusterCIDRMisconfigured"),
        ("10.0.0.0/8", "ClusterCIDRMisconfigured"),
    ];
    for (cidr, reason) in cases {
        let err = e
            .routes
            .create_route(CLUSTER, "uid", &route_for("node-a", &format!("hcloud://{a}"), cidr, "10.0.0.5"))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), reason, "{cidr}: {err}");
        assert!(err.awaits_input_change(), "{cidr}: refused until the node's pod CIDR changes");
    }
    for (pid, reason) in [("hrobot://5", "RobotNotSupported"), ("hcloud://x", "InvalidProviderID")] {
        let err = e
            .routes
            .create_route(CLUSTER, "uid", &route_for("node-a", pid, "10.244.1.0/24", "10.0.0.5"))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), reason, "{pid}: {err}");
        assert!(err.awaits_input_change(), "{pid}: refused until the node's providerID changes");
    }
    assert_eq!(requests(&e.h), before, "no request for a destination that cannot be routed");
    // Deleting outside the cluster CIDR is refused too: someone else's route stays.
    let foreign = Route {
        name: "x".into(),
        destination_cidr: "192.168.0.0/24".into(),
        gateway: Some("10.0.0.99".into()),
        ..Route::default()
    };
    let err = e.routes.delete_route(CLUSTER, &foreign).await.unwrap_err();
    assert_eq!(err.reason(), "RouteOutsideClusterCIDR");
    assert_eq!(requests(&e.h), before);
    assert_eq!(network_routes(&e), vec![pair("192.168.0.0/24", "10.0.0.99")]);
}

#[tokio::test]
async fn targets_are_resolved_by_provider_id_and_must_be_attached_with_the_nodes_internal_ip() {
    let e = env(Duration::ZERO).await;
    let a = server_id(&e.h, "node-a");
    // The node is named differently from its server: the providerID finds it.
    let renamed = route_for("k8s-worker-1", &format!("hcloud://{a}"), "10.244.1.0/24", "10.0.0.5");
    e.routes.create_route(CLUSTER, "uid", &renamed).await.expect("create");
    assert!(network_routes(&e).contains(&pair("10.244.1.0/24", "10.0.0.5")));
    // Without a providerID, the node name.
    e.routes
        .create_route(CLUSTER, "uid", &route_for("node-b", "", "10.244.2.0/24", "10.0.0.6"))
        .await
        .expect("by name");
    assert!(network_routes(&e).contains(&pair("10.244.2.0/24", "10.0.0.6")));

    let lone = e.h.seed_server(&SeedServer::new("lone")).unwrap();
    let err = e
        .routes
        .create_route(CLUSTER, "uid", &route_for("lone", &format!("hcloud://{lone}"), "10.244.3.0/24", "10.0.0.9"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "ServerNotAttachedToNetwork", "{err}");
    assert!(matches!(err, CloudError::Failed { transient: true, .. }), "retried: an attachment may be under way");
    let err = e
        .routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &format!("hcloud://{a}"), "10.244.3.0/24", "10.0.0.77"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "RouteGatewayNotNodeAddress", "{err}");
    assert!(err.to_string().contains("10.0.0.5") && err.to_string().contains("10.0.0.77"), "{err}");
    let err = e
        .routes
        .create_route(CLUSTER, "uid", &route_for("gone", "hcloud://999999", "10.244.3.0/24", "10.0.0.5"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "ServerNotFound", "{err}");
    let err = e
        .routes
        .create_route(CLUSTER, "uid", &route_for("robot", "hrobot://1234", "10.244.3.0/24", "10.0.0.5"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "RobotNotSupported", "{err}");
}

#[tokio::test]
async fn same_route_is_a_no_op_and_another_gateway_is_replaced() {
    let e = env(Duration::from_millis(100)).await;
    let (a, b) = (server_id(&e.h, "node-a"), server_id(&e.h, "node-b"));
    e.routes.list_routes(CLUSTER).await.unwrap();
    let to_a = route_for("node-a", &format!("hcloud://{a}"), "10.244.1.0/24", "10.0.0.5");
    e.routes.create_route(CLUSTER, "uid", &to_a).await.expect("create");
    assert_eq!(e.h.request_count("POST /v1/networks/{id}/actions/add_route"), 1);
    // The same route again: nothing sent (the provider knows the network's routes).
    let before = requests(&e.h);
    e.routes.create_route(CLUSTER, "uid", &to_a).await.expect("no-op");
    assert_eq!(requests(&e.h), before);
    // The pod CIDR now belongs to node-b: the route is replaced (delete, then add).
    e.routes
        .create_route(CLUSTER, "uid", &route_for("node-b", &format!("hcloud://{b}"), "10.244.1.0/24", "10.0.0.6"))
        .await
        .expect("replace");
    assert_eq!(network_routes(&e), vec![pair("10.244.1.0/24", "10.0.0.6"), pair("192.168.0.0/24", "10.0.0.99")]);
    assert_eq!(e.h.request_count("POST /v1/networks/{id}/actions/delete_route"), 1);
    // Deleting a route that is already gone succeeds.
    let gone = Route {
        name: "x".into(),
        destination_cidr: "10.244.1.0/24".into(),
        gateway: Some("10.0.0.6".into()),
        ..Route::default()
    };
    e.routes.delete_route(CLUSTER, &gone).await.expect("already gone is done");
}

#[tokio::test]
async fn a_stale_view_is_corrected_with_one_reload() {
    let e = env(Duration::ZERO).await;
    let a = server_id(&e.h, "node-a");
    e.routes.list_routes(CLUSTER).await.unwrap();
    // Another writer adds the same destination via node-b behind our back.
    add_foreign_route(&e, "10.244.1.0/24", "10.0.0.6").await;
    let to_a = route_for("node-a", &format!("hcloud://{a}"), "10.244.1.0/24", "10.0.0.5");
    let gets = e.h.request_count("GET /v1/networks/{id}");
    e.routes.create_route(CLUSTER, "uid", &to_a).await.expect("replaced after one reload");
    assert_eq!(e.h.request_count("GET /v1/networks/{id}"), gets + 1, "one reload");
    assert!(network_routes(&e).contains(&pair("10.244.1.0/24", "10.0.0.5")));
}

#[tokio::test]
async fn a_busy_or_locked_network_is_waited_out() {
    let e = env(Duration::from_millis(50)).await;
    let a = server_id(&e.h, "node-a");
    // `conflict` (a change running on the network) twice: the client retries.
    e.h.inject_fault(FaultRule::conflict(Some("POST"), "/networks/{id}/actions/add_route").times(2));
    e.routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &format!("hcloud://{a}"), "10.244.1.0/24", "10.0.0.5"))
        .await
        .expect("converges after conflicts");
    assert_eq!(e.h.request_count("POST /v1/networks/{id}/actions/add_route"), 3);
    // `locked` for a while (the official CCM retries it too): retried here with backoff.
    e.h.lock_resource(ResourceRef::network(e.net));
    let h = e.h.clone();
    let net = e.net;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        h.unlock_resource(ResourceRef::network(net));
    });
    e.routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &format!("hcloud://{a}"), "10.244.2.0/24", "10.0.0.5"))
        .await
        .expect("converges after the lock");
    assert!(network_routes(&e).contains(&pair("10.244.2.0/24", "10.0.0.5")));
    // Locked for good: a transient error after a bounded number of attempts.
    e.h.lock_resource(ResourceRef::network(e.net));
    let err = e
        .routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &format!("hcloud://{a}"), "10.244.3.0/24", "10.0.0.5"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "NetworkBusy", "{err}");
    assert!(matches!(err, CloudError::Failed { transient: true, .. }));
}

#[tokio::test]
async fn the_route_limit_is_a_clear_error_and_is_not_asked_again_and_again() {
    let e = env(Duration::ZERO).await;
    let a = server_id(&e.h, "node-a");
    e.h.set_route_limit(2);
    e.routes.list_routes(CLUSTER).await.unwrap();
    let pid = format!("hcloud://{a}");
    e.routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &pid, "10.244.1.0/24", "10.0.0.5"))
        .await
        .expect("second route");
    let err = e
        .routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &pid, "10.244.2.0/24", "10.0.0.5"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "RouteLimitExceeded", "{err}");
    assert!(err.to_string().contains("network k8s has 2 routes") && err.to_string().contains("10.244.2.0/24"), "{err}");
    assert!(matches!(err, CloudError::Failed { transient: false, .. }));
    let posts = e.h.request_count("POST /v1/networks/{id}/actions/add_route");
    let err = e
        .routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &pid, "10.244.3.0/24", "10.0.0.5"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "RouteLimitExceeded");
    assert_eq!(
        e.h.request_count("POST /v1/networks/{id}/actions/add_route"),
        posts,
        "the learned limit spares the request"
    );
    // A route deleted makes room: the next creation goes out again.
    let ours = e
        .routes
        .list_routes(CLUSTER)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.destination_cidr == "10.244.1.0/24")
        .unwrap();
    e.routes.delete_route(CLUSTER, &ours).await.unwrap();
    e.routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &pid, "10.244.3.0/24", "10.0.0.5"))
        .await
        .expect("room again");
}

#[tokio::test]
async fn each_change_waits_for_its_action_with_about_one_poll() {
    let e = env(Duration::from_millis(150)).await;
    let a = server_id(&e.h, "node-a");
    let pid = format!("hcloud://{a}");
    e.routes.list_routes(CLUSTER).await.unwrap();
    // Concurrent creations go one at a time (no self-made `conflict`).
    let creations = (1..=8).map(|i| {
        let r = route_for("node-a", &pid, &format!("10.244.{i}.0/24"), "10.0.0.5");
        let routes = &e.routes;
        async move { routes.create_route(CLUSTER, "uid", &r).await }
    });
    let results = futures::future::join_all(creations).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(network_routes(&e).len(), 9);
    assert_eq!(e.h.request_count("POST /v1/networks/{id}/actions/add_route"), 8, "no conflict, no retry");
    let polls = e.h.request_count("GET /v1/actions");
    assert!(polls <= 8 * 3, "polls learn the action duration: {polls} for 8 actions");
}

#[tokio::test]
async fn cached_server_data_resolves_targets_and_is_refreshed_once_when_it_disagrees_with_the_node() {
    let e = env(Duration::ZERO).await;
    let a = server_id(&e.h, "node-a");
    let pid = format!("hcloud://{a}");
    e.routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &pid, "10.244.1.0/24", "10.0.0.5"))
        .await
        .expect("create");
    assert_eq!((e.h.request_count("GET /v1/servers"), e.h.request_count("GET /v1/servers/{id}")), (1, 0));
    // Minutes later the cached server still agrees with the node: no lookup request.
    age(Duration::from_secs(300)).await;
    e.routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &pid, "10.244.2.0/24", "10.0.0.5"))
        .await
        .expect("create");
    assert_eq!((e.h.request_count("GET /v1/servers"), e.h.request_count("GET /v1/servers/{id}")), (1, 0));
    // The server's IP moved and the node knows it, the cache does not: asked once, then right.
    e.h.move_private_ip(a, e.net, "10.0.0.50").unwrap();
    e.routes
        .create_route(CLUSTER, "uid", &route_for("node-a", &pid, "10.244.3.0/24", "10.0.0.50"))
        .await
        .expect("create");
    // One request: a single-server GET, or (as here, with a one-page project) a list.
    let lookups = e.h.request_count("GET /v1/servers") + e.h.request_count("GET /v1/servers/{id}");
    assert_eq!(lookups, 2, "{:?}", e.h.request_counts());
    assert!(network_routes(&e).contains(&pair("10.244.3.0/24", "10.0.0.50")));
}
