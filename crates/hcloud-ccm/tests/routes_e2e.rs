//! End to end: routes in the Hetzner private network for the nodes' pod CIDRs — real
//! kube-apiserver + etcd, the Hetzner fake, and the `hcloud-ccm` binary with the official
//! chart's route flags (`--allocate-node-cidrs=true --cluster-cidr=...`, watch-based routes).

#![allow(clippy::expect_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::{Env, REACT, addresses, metrics_address, pairs, scrape};
use hcloud_fake::control::{ResourceRef, SeedNetwork, SeedServer};
use hcloud_fake::faults::FaultRule;
use hcloud_fake::wire::Route;
use hcloud_fake::{FakeConfig, FakeHandle};
use k8s_openapi::api::core::v1::Node;
use kube::api::DeleteParams;
use test_harness::{NodeBuilder, events_for, wait_for, wait_for_event, wait_until};

/// The flags the official chart passes when `networking.enabled`.
const ROUTES: [&str; 2] = ["--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16"];

/// The network `k8s` (10.0.0.0/8, subnet 10.0.0.0/24) with `routes` already in it.
fn network(h: &FakeHandle, routes: &[(&str, &str)]) -> u64 {
    let mut seed = SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central");
    seed.routes =
        routes.iter().map(|(d, g)| Route { destination: (*d).to_owned(), gateway: (*g).to_owned() }).collect();
    h.seed_network(&seed).expect("network")
}

/// The network's routes, sorted, as `(destination, gateway)`.
fn routes(h: &FakeHandle, net: u64) -> Vec<(String, String)> {
    let mut r: Vec<(String, String)> =
        h.network(net).expect("network").routes.into_iter().map(|r| (r.destination, r.gateway)).collect();
    r.sort();
    r
}

fn network_unavailable(n: &Node) -> Option<(String, String)> {
    let c = n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "NetworkUnavailable")?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
}

fn routed(n: Option<&Node>) -> bool {
    n.and_then(network_unavailable) == Some(("False".to_owned(), "RouteCreated".to_owned()))
}

async fn wait_routes(h: &FakeHandle, net: u64, expected: &[(&str, &str)], what: &str) {
    let expected = pairs(expected);
    if wait_until(REACT, what, async || routes(h, net) == expected).await.is_err() {
        panic!("{what}: routes are {:?}, expected {expected:?}", routes(h, net));
    }
}

#[tokio::test]
async fn a_node_gets_a_route_via_its_private_ip_and_loses_it_when_deleted_while_foreign_routes_stay() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = network(
        &h,
        &[
            // Someone else's routes outside the cluster CIDR: one to nowhere, one to node-first.
            ("192.168.0.0/24", "10.0.0.99"),
            ("10.100.0.0/16", "10.0.0.5"),
            // A blackhole inside the cluster CIDR (a server deleted while the CCM was away).
            ("10.244.99.0/24", "10.0.0.98"),
        ],
    );
    h.seed_server(&SeedServer::new("node-first").network_ip(net, "10.0.0.5")).expect("server");
    let metrics = metrics_address();
    let ccm = env.ccm(&[("HCLOUD_NETWORK", "k8s"), ("HCLOUD_METRICS_ADDRESS", &metrics)], &ROUTES).await;

    NodeBuilder::new("node-first").pod_cidrs(["10.244.1.0/24"]).register(&env.client).await.expect("node");
    let node =
        wait_for(&env.nodes, "node-first", REACT, "node-first routed", routed).await.expect("routed").expect("node");
    assert!(addresses(&node).contains(&("InternalIP".to_owned(), "10.0.0.5".to_owned())));
    wait_routes(
        &h,
        net,
        &[("10.100.0.0/16", "10.0.0.5"), ("10.244.1.0/24", "10.0.0.5"), ("192.168.0.0/24", "10.0.0.99")],
        "node-first's route exists, the blackhole in the cluster CIDR is gone, foreign routes stay",
    )
    .await;
    // The route waited for the node's initialization instead of failing first.
    let events = events_for(&env.client, "Node", "node-first").await.expect("events");
    assert!(!events.iter().any(|e| e.reason == "FailedToCreateRoute"), "{events:?}");

    env.nodes.delete("node-first", &DeleteParams::default()).await.expect("delete");
    wait_routes(
        &h,
        net,
        &[("10.100.0.0/16", "10.0.0.5"), ("192.168.0.0/24", "10.0.0.99")],
        "the deleted node's route is gone, foreign routes stay",
    )
    .await;
    assert!(ccm.is_running(), "{}", ccm.logs());
    assert!(ccm.logs().contains("route controller started"), "{}", ccm.logs());
    // Upstream's route_controller_route_sync_total (1.37): the creation and the deletion were
    // reconciles a node change brought that changed routes; none failed. A reconcile is counted
    // once it ended, a moment after its last route change is visible: poll.
    let changed = r#"route_controller_route_sync_total{outcome="changed",trigger="node_change"}"#;
    wait_until(REACT, "two counted reconciles that changed routes", async || {
        scrape(&metrics, changed).await.is_some_and(|v| v >= 2.0)
    })
    .await
    .expect("counted");
    for trigger in ["node_change", "periodic"] {
        let series = format!(r#"route_controller_route_sync_total{{outcome="error",trigger="{trigger}"}}"#);
        assert_eq!(scrape(&metrics, &series).await, None, "{series}");
    }
}

/// The periodic mode (the watch-based gate off, as upstream's default): every reconcile is
/// counted with `trigger="periodic"`, and once the route exists they change nothing (`noop`).
#[tokio::test]
async fn the_periodic_mode_counts_periodic_reconciles() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = network(&h, &[]);
    h.seed_server(&SeedServer::new("node-p").network_ip(net, "10.0.0.5")).expect("server");
    let metrics = metrics_address();
    let periodic = [
        "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=false",
        "--route-reconciliation-period=1s",
    ];
    let args = [&ROUTES[..], &periodic[..]].concat();
    let _ccm = env.ccm(&[("HCLOUD_NETWORK", "k8s"), ("HCLOUD_METRICS_ADDRESS", &metrics)], &args).await;

    NodeBuilder::new("node-p").pod_cidrs(["10.244.1.0/24"]).register(&env.client).await.expect("node");
    wait_routes(&h, net, &[("10.244.1.0/24", "10.0.0.5")], "routed in the periodic mode").await;
    let series =
        |outcome: &str| format!(r#"route_controller_route_sync_total{{outcome="{outcome}",trigger="periodic"}}"#);
    // Counted once the reconcile ended, a moment after the route is visible: poll.
    wait_until(REACT, "a counted periodic reconcile that changed routes", async || {
        scrape(&metrics, &series("changed")).await.is_some_and(|v| v >= 1.0)
    })
    .await
    .expect("counted");
    wait_until(REACT, "a periodic reconcile that changes nothing", async || {
        scrape(&metrics, &series("noop")).await.is_some_and(|v| v >= 1.0)
    })
    .await
    .expect("noop reconciles");
    let node_change = r#"route_controller_route_sync_total{outcome="changed",trigger="node_change"}"#;
    assert_eq!(scrape(&metrics, node_change).await, None, "the periodic mode has no node_change trigger");
}

#[tokio::test]
async fn a_changed_pod_cidr_replaces_the_route() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = network(&h, &[]);
    h.seed_server(&SeedServer::new("node-a").network_ip(net, "10.0.0.5")).expect("server");
    let _ccm = env.ccm(&[("HCLOUD_NETWORK", "k8s")], &ROUTES).await;

    NodeBuilder::new("node-a").pod_cidrs(["10.244.1.0/24"]).register(&env.client).await.expect("node");
    wait_routes(&h, net, &[("10.244.1.0/24", "10.0.0.5")], "the first pod CIDR is routed").await;
    // A pod CIDR never changes in place (the API server forbids it): the node registers again
    // with another one.
    env.nodes.delete("node-a", &DeleteParams::default()).await.expect("delete");
    wait_for(&env.nodes, "node-a", REACT, "node-a gone", |n| n.is_none()).await.expect("gone");
    NodeBuilder::new("node-a").pod_cidrs(["10.244.2.0/24"]).register(&env.client).await.expect("node");
    wait_routes(&h, net, &[("10.244.2.0/24", "10.0.0.5")], "the new pod CIDR replaces the old one").await;
    wait_for(&env.nodes, "node-a", REACT, "node-a routed", routed).await.expect("routed");
}

#[tokio::test]
async fn a_changed_private_ip_updates_the_gateway() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = network(&h, &[]);
    let id = h.seed_server(&SeedServer::new("node-a").network_ip(net, "10.0.0.5")).expect("server");
    // Addresses refresh every 2 s (default 5 min), so the node learns its new IP quickly.
    let args = [&ROUTES[..], &["--node-status-update-frequency=2s"]].concat();
    let _ccm = env.ccm(&[("HCLOUD_NETWORK", "k8s")], &args).await;

    NodeBuilder::new("node-a").pod_cidrs(["10.244.1.0/24"]).register(&env.client).await.expect("node");
    wait_routes(&h, net, &[("10.244.1.0/24", "10.0.0.5")], "routed via the first IP").await;
    h.move_private_ip(id, net, "10.0.0.50").expect("the server's private IP moves");
    wait_for(&env.nodes, "node-a", REACT, "node-a has its new InternalIP", |n| {
        n.is_some_and(|n| addresses(n).contains(&("InternalIP".to_owned(), "10.0.0.50".to_owned())))
    })
    .await
    .expect("address refreshed");
    wait_routes(&h, net, &[("10.244.1.0/24", "10.0.0.50")], "the gateway follows the node's new IP").await;
    let node = env.nodes.get("node-a").await.expect("node");
    assert!(routed(Some(&node)), "{:?}", network_unavailable(&node));
}

/// A dual-stack Node (an IPv4 and an IPv6 pod CIDR): the IPv4 route is made, the IPv6 one is
/// refused before any request with a Warning (Hetzner networks route IPv4 only), and
/// `NetworkUnavailable` stays `True`/`NoRouteCreated`, as upstream's route controller leaves a
/// Node one of whose routes failed (the official CCM's failed IPv6 request ends the same way).
#[tokio::test]
async fn a_dual_stack_node_gets_its_ipv4_route_and_a_clear_event_for_ipv6() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = network(&h, &[]);
    h.seed_server(&SeedServer::new("node-ds").network_ip(net, "10.0.0.5")).expect("server");
    let _ccm = env
        .ccm(
            &[("HCLOUD_NETWORK", "k8s")],
            &["--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56"],
        )
        .await;

    let node = NodeBuilder::new("node-ds")
        .pod_cidrs(["10.244.1.0/24", "fd00:10:244:1::/64"])
        .register(&env.client)
        .await
        .expect("node");
    let stored = node.spec.and_then(|s| s.pod_cidrs).unwrap_or_default();
    assert_eq!(stored, ["10.244.1.0/24", "fd00:10:244:1::/64"], "the API server keeps both pod CIDRs");
    let event = wait_for_event(&env.client, "Node", "node-ds", "IPv6RouteNotSupported", REACT).await.expect("event");
    assert_eq!(event.type_, "Warning");
    assert!(event.message.contains("fd00:10:244:1::/64") && event.message.contains("IPv4 only"), "{}", event.message);
    let failed = wait_for_event(&env.client, "Node", "node-ds", "FailedToCreateRoute", REACT).await.expect("event");
    assert!(failed.message.contains("fd00:10:244:1::/64"), "{}", failed.message);
    wait_routes(&h, net, &[("10.244.1.0/24", "10.0.0.5")], "the IPv4 pod CIDR is routed").await;
    let unavailable =
        |n: Option<&Node>| n.and_then(network_unavailable) == Some(("True".to_owned(), "NoRouteCreated".to_owned()));
    wait_for(&env.nodes, "node-ds", REACT, "node-ds NetworkUnavailable True/NoRouteCreated", unavailable)
        .await
        .expect("condition");
    // The IPv6 route never reached the API: one add_route, the IPv4 one.
    assert_eq!(h.request_count("POST /v1/networks/{id}/actions/add_route"), 1, "{:?}", h.request_counts());
}

#[tokio::test]
async fn a_busy_network_is_waited_out() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = network(&h, &[]);
    h.seed_server(&SeedServer::new("node-busy").network_ip(net, "10.0.0.5")).expect("server");
    let _ccm = env.ccm(&[("HCLOUD_NETWORK", "k8s")], &ROUTES).await;

    // Locked (another change holds it) for a while, then busy (`conflict`) for a few more.
    h.lock_resource(ResourceRef::network(net));
    NodeBuilder::new("node-busy").pod_cidrs(["10.244.1.0/24"]).register(&env.client).await.expect("node");
    let met = |status: u16| {
        h.request_log().iter().any(|r| r.endpoint == "POST /v1/networks/{id}/actions/add_route" && r.status == status)
    };
    wait_until(REACT, "the CCM met the lock", async || met(423)).await.expect("locked");
    h.inject_fault(FaultRule::conflict(Some("POST"), "/networks/{id}/actions/add_route").times(3));
    tokio::time::sleep(Duration::from_secs(5)).await;
    h.unlock_resource(ResourceRef::network(net));
    wait_routes(&h, net, &[("10.244.1.0/24", "10.0.0.5")], "the route exists once the network is free").await;
    assert!(met(409), "conflicts were met and retried");
    wait_for(&env.nodes, "node-busy", REACT, "node-busy routed", routed).await.expect("routed");
}

#[tokio::test]
async fn route_settings_are_checked_at_start_up() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    network(&h, &[]);
    for (args, needle) in [
        (
            &["--allocate-node-cidrs=true"][..],
            "--cluster-cidr: required with --allocate-node-cidrs=true and --configure-cloud-routes=true",
        ),
        (&["--cluster-cidr=10.244.0.0/16,10.245.0.0/16"][..], "must be a dual-stack pair"),
        (&["--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0"][..], "\"10.244.0.0\" is not a CIDR"),
    ] {
        let ccm = env.spawn_ccm(&[("HCLOUD_NETWORK", "k8s")], args);
        let status = ccm.wait_exit(Duration::from_secs(30)).await.expect("exits");
        assert_eq!(status.code(), Some(1), "{args:?}: {}", ccm.logs());
        assert!(ccm.logs().contains(needle), "{args:?}: missing {needle:?}:\n{}", ccm.logs());
    }
    assert_eq!(h.request_counts().total, 0, "nothing starts on bad route settings");

    // Routes turned off in the environment: the controller does not run, and says why.
    let ccm = env.ccm(&[("HCLOUD_NETWORK", "k8s"), ("HCLOUD_NETWORK_ROUTES_ENABLED", "false")], &ROUTES).await;
    assert!(
        ccm.logs().contains("node-route-controller not started: --allocate-node-cidrs and --configure-cloud-routes are set, but the cloud provider does not offer routes"),
        "{}",
        ccm.logs()
    );
}
