//! End to end: the address refresh of a large project (500 servers, 10 pages) is confirmed by a
//! look at the newest server and Primary IP actions instead of listing every server, and a
//! Primary IP swapped on a Node's server still shows on the Node at the next refresh.

#![allow(clippy::expect_used)]

use crate::common;

use common::{Env, REACT, addresses, tainted};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::{PublicIpv6Change, SeedServerBatch};
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
