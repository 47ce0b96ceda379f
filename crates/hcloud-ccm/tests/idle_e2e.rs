//! End to end: the address refresh of a large project (500 servers, 10 pages) is confirmed by a
//! look at the newest server and Primary IP actions instead of listing every server, and a
//! Primary IP swapped on a Node's server, or the configured network deleted with the servers
//! attached (no server action), still shows on the Node at the next refresh.

#![allow(clippy::expect_used)]

use crate::common;

use common::{Env, REACT, addresses, tainted};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::{PublicIpv6Change, SeedNetwork, SeedServerBatch};
use k8s_openapi::api::core::v1::Node;
use test_harness::{NodeBuilder, wait_for, wait_until};

fn initialized(n: Option<&Node>) -> bool {
    n.is_some_and(|n| !tainted(n) && n.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_some())
}

/// The first address of a server's IPv6 /64, as the Node shows it.
fn node_ipv6(net: &str) -> String {
    let (prefix, _) = net.split_once('/').expect("a CIDR");
    let mut segments = prefix.parse::<std::net::Ipv6Addr>().expect("IPv6").segments();
    segments[7] |= 1;
    std::net::Ipv6Addr::from(segments).to_string()
}

#[tokio::test]
async fn idle_refreshes_look_at_actions_and_a_swapped_primary_ip_still_shows() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let ids = h.seed_servers(&SeedServerBatch::new("big", 500)).expect("servers");
    // The address refresh every 2 s with a 1 s max age: each refresh finds its list stale.
    let ccm = env
        .ccm(
            &[("HCLOUD_INSTANCES_ADDRESS_FAMILY", "dualstack"), ("HCLOUD_SERVER_CACHE_MAX_AGE", "1s")],
            &["--node-status-update-frequency=2s"],
        )
        .await;
    // Ten Nodes: as many as the list has pages, so the first refresh lists rather than asking
    // for each server alone (later ones look, whatever the number of Nodes).
    let names: Vec<String> = (1..=10).map(|i| format!("big{i}")).collect();
    for name in &names {
        NodeBuilder::new(name.as_str()).register(&env.client).await.expect("node registers");
    }
    for name in &names {
        wait_for(&env.nodes, name, REACT, "initialized", initialized).await.expect("initialized");
    }

    // The list that initialized them had no baseline (the project's size was not known yet);
    // the next refresh lists after one (2 requests to /servers/actions), the one after that
    // looks (1 more).
    wait_until(REACT, "a refresh looked at the action lists", async || h.request_count("GET /v1/servers/actions") >= 3)
        .await
        .expect("a look");
    // Idle: refreshes look at the two action lists and list no server.
    h.reset_requests();
    wait_until(REACT, "five refreshes looked at the action lists", async || {
        h.request_count("GET /v1/servers/actions") >= 5
    })
    .await
    .expect("refreshes");
    let counts = h.request_counts();
    assert_eq!(h.request_count("GET /v1/servers"), 0, "no server list while nothing happened: {counts:?}");
    assert_eq!(h.request_count("GET /v1/servers/{id}"), 0, "nor single servers: {counts:?}");
    let looks = h.request_count("GET /v1/servers/actions");
    assert!(h.request_count("GET /v1/primary_ips/actions") >= looks - 1, "{counts:?}");

    // A Primary IP swapped (unassign + assign, two actions): the next refresh lists and the
    // Node shows the new address.
    h.change_server_ipv6(ids[1], PublicIpv6Change::Next).expect("swap");
    let net = h.server(ids[1]).expect("server").public_net.ipv6.expect("ipv6").ip;
    let want = node_ipv6(&net);
    let node = wait_for(&env.nodes, "big2", REACT, "big2 shows its new IPv6", |n: Option<&Node>| {
        n.is_some_and(|n| addresses(n).iter().any(|(t, a)| t == "ExternalIP" && *a == want))
    })
    .await
    .expect("the new address shows")
    .expect("node exists");
    assert!(addresses(&node).iter().any(|(t, a)| t == "Hostname" && a == "big2"));
    assert!(h.request_count("GET /v1/servers") >= 10, "one full list (10 pages): {:?}", h.request_counts());
    drop(ccm);
}

#[tokio::test]
async fn a_network_deleted_with_its_servers_attached_takes_the_internal_ip_at_the_next_refresh() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net =
        h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central")).expect("network");
    let mut batch = SeedServerBatch::new("big", 500);
    batch.networks = vec![net.into()];
    let ids = h.seed_servers(&batch).expect("servers");
    let ccm = env
        .ccm(
            &[("HCLOUD_NETWORK", "k8s"), ("HCLOUD_SERVER_CACHE_MAX_AGE", "1s")],
            &["--node-status-update-frequency=2s"],
        )
        .await;
    let names: Vec<String> = (1..=10).map(|i| format!("big{i}")).collect();
    for name in &names {
        NodeBuilder::new(name.as_str()).register(&env.client).await.expect("node registers");
    }
    let internal = h.server(ids[1]).expect("server").private_net[0].ip.clone();
    wait_for(&env.nodes, "big2", REACT, "initialized with its InternalIP", |n: Option<&Node>| {
        initialized(n) && n.is_some_and(|n| addresses(n).iter().any(|(t, a)| t == "InternalIP" && *a == internal))
    })
    .await
    .expect("initialized");
    // Idle refreshes look at the two action lists and read the network, and list no server.
    wait_until(REACT, "a refresh looked", async || h.request_count("GET /v1/servers/actions") >= 3)
        .await
        .expect("a look");
    h.reset_requests();
    wait_until(REACT, "three refreshes looked", async || h.request_count("GET /v1/servers/actions") >= 3)
        .await
        .expect("refreshes");
    assert_eq!(h.request_count("GET /v1/servers"), 0, "{:?}", h.request_counts());
    assert!(h.request_count("GET /v1/networks/{id}") >= 2, "each look reads the network: {:?}", h.request_counts());

    // Deleted with every server attached: no server action; the next refresh lists.
    let client = hcloud_api::Client::builder(hcloud_api::SecretString::from(common::TOKEN.to_owned()))
        .endpoint(env.fake.base_url())
        .build()
        .expect("client");
    let actions = h.request_count("GET /v1/servers/actions");
    client.networks().delete(hcloud_api::models::NetworkId(net as i64)).await.expect("delete the network");
    assert_eq!(h.server(ids[1]).expect("server").private_net.len(), 0, "detached");
    wait_for(&env.nodes, "big2", REACT, "big2 lost its InternalIP", |n: Option<&Node>| {
        n.is_some_and(|n| !addresses(n).iter().any(|(t, _)| t == "InternalIP"))
    })
    .await
    .expect("the InternalIP goes");
    assert!(h.request_count("GET /v1/servers/actions") > actions);
    assert!(h.request_count("GET /v1/servers") >= 10, "one full list (10 pages): {:?}", h.request_counts());
    drop(ccm);
}
