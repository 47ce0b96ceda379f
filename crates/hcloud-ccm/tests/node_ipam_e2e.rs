//! End to end: node IPAM (`node-ipam-controller` with `--cidr-allocator-type=CloudAllocator`) —
//! real kube-apiserver + etcd, the Hetzner fake, and the `hcloud-ccm` binary with the flags a
//! user writes. Nodes get `[IPv4 from --cluster-cidr, IPv6 from their server's /64]`; only the
//! IPv4 ranges are routed; a restart hands out nothing twice; a replaced server's Node comes
//! back with a range from the new server's /64; a /64 that moved to another server is not
//! handed out to a second Node.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use common::{Env, REACT, metrics_address, pairs};
use hcloud_fake::control::{PublicIpv6Change, SeedNetwork, SeedServer};
use hcloud_fake::wire::ServerStatus;
use hcloud_fake::{FakeConfig, FakeHandle};
use k8s_openapi::api::core::v1::Node;
use kube::api::DeleteParams;
use test_harness::{NodeBuilder, Ready, events_for, set_ready, wait_for, wait_for_event, wait_until};

/// What a dual-stack user passes (two IPv4 ranges only, so exhaustion and reuse show).
const DUAL_STACK: [&str; 4] = [
    "--controllers=*,node-ipam-controller",
    "--allocate-node-cidrs=true",
    "--cidr-allocator-type=CloudAllocator",
    "--cluster-cidr=10.244.0.0/23",
];

fn pod_cidrs(n: &Node) -> Vec<String> {
    n.spec.as_ref().and_then(|s| s.pod_cidrs.clone()).unwrap_or_default()
}

/// The second /`mask` block of the server's /64 (at /80: `<prefix>:1::/80`).
fn block(h: &FakeHandle, server: u64, mask: u32) -> String {
    let net = h.server(server).expect("server").public_net.ipv6.expect("ipv6").ip;
    let addr: Ipv6Addr = net.strip_suffix("/64").expect("a /64").parse().expect("address");
    format!("{}/{mask}", Ipv6Addr::from(u128::from(addr) + (1u128 << (128 - mask))))
}

/// The Node's range at the default /80.
fn expected_v6(h: &FakeHandle, server: u64) -> String {
    block(h, server, 80)
}

async fn assigned(env: &Env, name: &str) -> Vec<String> {
    let node = wait_for(&env.nodes, name, REACT, "pod CIDRs", |n| n.is_some_and(|n| !pod_cidrs(n).is_empty()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    pod_cidrs(&node.expect("node"))
}

fn routed(n: Option<&Node>) -> bool {
    let c = n.and_then(|n| n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "NetworkUnavailable"));
    c.is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("RouteCreated"))
}

fn routes(h: &FakeHandle, net: u64) -> Vec<(String, String)> {
    let mut r: Vec<(String, String)> =
        h.network(net).expect("network").routes.into_iter().map(|r| (r.destination, r.gateway)).collect();
    r.sort();
    r
}

async fn wait_routes(h: &FakeHandle, net: u64, expected: &[(&str, &str)], what: &str) {
    let mut expected = pairs(expected);
    expected.sort();
    if wait_until(REACT, what, async || routes(h, net) == expected).await.is_err() {
        panic!("{what}: routes are {:?}, expected {expected:?}", routes(h, net));
    }
}

/// GET requests for servers the fake answered, by path shape.
fn server_reads(h: &FakeHandle) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in h.request_log() {
        if r.method == "GET" && r.endpoint.starts_with("GET /v1/servers") {
            *out.entry(r.endpoint).or_default() += 1;
        }
    }
    out
}

#[tokio::test]
async fn dual_stack_nodes_get_ipv4_from_the_cluster_cidr_and_ipv6_from_their_server() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).expect("net");
    let a = h.seed_server(&SeedServer::new("node-a").network_ip(net, "10.0.0.2")).expect("a");
    let b = h.seed_server(&SeedServer::new("node-b").network_ip(net, "10.0.0.3")).expect("b");
    let c = h.seed_server(&SeedServer::new("node-c").network_ip(net, "10.0.0.4")).expect("c");
    let mut no_v6 = SeedServer::new("node-no-v6").network_ip(net, "10.0.0.5");
    no_v6.enable_ipv6 = false;
    h.seed_server(&no_v6).expect("no-v6");
    let metrics = metrics_address();
    let env_vars = [("HCLOUD_NETWORK", "k8s"), ("HCLOUD_METRICS_ADDRESS", metrics.as_str())];
    let ccm = env.ccm(&env_vars, &DUAL_STACK).await;

    for n in ["node-a", "node-b"] {
        NodeBuilder::new(n).register(&env.client).await.expect("node");
    }
    let (got_a, got_b) = (assigned(&env, "node-a").await, assigned(&env, "node-b").await);
    let mut v4 = vec![got_a[0].clone(), got_b[0].clone()];
    v4.sort();
    assert_eq!(v4, ["10.244.0.0/24", "10.244.1.0/24"]);
    assert_eq!(got_a[1], expected_v6(&h, a), "IPv6 from node-a's own /64, after the IPv4 range");
    assert_eq!(got_b[1], expected_v6(&h, b));
    // Only the IPv4 ranges are routed, and the Nodes count as routed with them alone.
    wait_routes(&h, net, &[(&got_a[0], "10.0.0.2"), (&got_b[0], "10.0.0.3")], "the IPv4 ranges are routed").await;
    for n in ["node-a", "node-b"] {
        wait_for(&env.nodes, n, REACT, "NetworkUnavailable=False", routed).await.expect("routed");
        let events = events_for(&env.client, "Node", n).await.expect("events");
        let bad: Vec<_> = events.iter().filter(|e| e.type_ == "Warning").collect();
        assert!(bad.is_empty(), "{n}: no IPv6RouteNotSupported nor any other warning: {bad:?}");
    }

    // A server without IPv6: a Warning, and no range at all (IPv4 alone would be final).
    NodeBuilder::new("node-no-v6").register(&env.client).await.expect("node");
    let e = wait_for_event(&env.client, "Node", "node-no-v6", "NodeIPv6PrefixMissing", REACT).await.expect("warning");
    assert!(e.message.contains("no IPv6 prefix of /80 or shorter for the instance of node node-no-v6"), "{e:?}");
    assert!(pod_cidrs(&env.nodes.get("node-no-v6").await.expect("node")).is_empty());

    // The cluster CIDR is exhausted: node-c waits, and gets node-a's range once node-a is gone.
    NodeBuilder::new("node-c").register(&env.client).await.expect("node");
    let e = wait_for_event(&env.client, "Node", "node-c", "CIDRNotAvailable", REACT).await.expect("exhausted");
    assert!(e.message.contains("no remaining CIDRs in cluster CIDR 10.244.0.0/23"), "{e:?}");
    env.nodes.delete("node-a", &DeleteParams::default()).await.expect("delete");
    let got_c = assigned(&env, "node-c").await;
    assert_eq!(got_c, [got_a[0].clone(), expected_v6(&h, c)], "node-a's IPv4 range is reused");
    wait_routes(&h, net, &[(&got_c[0], "10.0.0.4"), (&got_b[0], "10.0.0.3")], "node-a's route moved to node-c").await;

    // node-b's server is replaced by a new one with its name (another /64): the old kubelet
    // stops reporting, the lifecycle controller deletes the Node (its providerID's server is
    // gone), the kubelet on the new server registers it again, and it gets a range from the
    // new server's /64, never the old one's.
    h.delete_server(b).expect("delete server");
    // (The fake would hand the freed /64 out again; Hetzner gives a new server another one.)
    let mut new_b = SeedServer::new("node-b").network_ip(net, "10.0.0.6");
    new_b.public_ipv6 = Some("2001:db8:beef::/64".to_owned());
    let b2 = h.seed_server(&new_b).expect("new b");
    set_ready(&env.client, "node-b", Ready::Unknown).await.expect("not ready");
    wait_for(&env.nodes, "node-b", REACT, "the Node of the deleted server is deleted", |n| n.is_none())
        .await
        .expect("deleted");
    NodeBuilder::new("node-b").register(&env.client).await.expect("node-b again");
    let got_b2 = assigned(&env, "node-b").await;
    assert_eq!(got_b2, [got_b[0].clone(), expected_v6(&h, b2)]);
    assert_ne!(got_b2[1], got_b[1], "the new server's /64, not the old one's");
    wait_routes(&h, net, &[(&got_c[0], "10.0.0.4"), (&got_b2[0], "10.0.0.6")], "node-b routed via its new server")
        .await;

    // node-c's server gets another /64 (a Primary IPv6 swap) while the CCM is down; after the
    // restart nothing held is handed out again, and node-c's stale range is reported.
    let reads_before_restart = server_reads(&h);
    ccm.stop().await.expect("stops");
    h.change_server_ipv6(c, PublicIpv6Change::Next).expect("new /64");
    let ccm = env.ccm(&env_vars, &DUAL_STACK).await;
    let e = wait_for_event(&env.client, "Node", "node-c", "PodCIDRNotInNodePrefix", REACT).await.expect("reported");
    assert!(e.message.contains(&format!("pod CIDR {} of node node-c is not inside", got_c[1])), "{e:?}");
    let e = wait_for_event(&env.client, "Node", "node-no-v6", "NodeIPv6PrefixMissing", REACT).await.expect("again");
    assert!(e.message.contains("node-no-v6"), "{e:?}");
    // A /64 of its own: the fake would hand out node-c's former one, whose range node-c still
    // holds (NodeIPv6PrefixInUse, see a_moved_primary_ipv6_is_not_handed_out_twice).
    let mut d = SeedServer::new("node-d").network_ip(net, "10.0.0.7");
    d.public_ipv6 = Some("2001:db8:d00d::/64".to_owned());
    h.seed_server(&d).expect("d");
    NodeBuilder::new("node-d").register(&env.client).await.expect("node");
    wait_for_event(&env.client, "Node", "node-d", "CIDRNotAvailable", REACT).await.expect("nothing handed out twice");
    assert!(pod_cidrs(&env.nodes.get("node-d").await.expect("d")).is_empty());
    assert_eq!(pod_cidrs(&env.nodes.get("node-c").await.expect("c")), got_c, "pod CIDRs never change");
    assert!(ccm.is_running(), "{}", ccm.logs());
    assert!(ccm.logs().contains("node IPAM controller started"), "{}", ccm.logs());
    for n in env.nodes.list(&Default::default()).await.expect("nodes").items {
        eprintln!("{}: podCIDRs {:?}", n.metadata.name.unwrap_or_default(), n.spec.and_then(|s| s.pod_cidrs));
    }
    eprintln!("routes: {:?}", routes(&h, net));
    eprintln!("server reads before the restart: {reads_before_restart:?}; in all: {:?}", server_reads(&h));
}

/// A powered-off server's Primary IPv6 goes to a new server: the new server's Node would get
/// the same IPv6 range as the first server's Node. It gets no range, with a Warning naming both
/// Nodes, until the first Node is gone; then it gets that range.
#[tokio::test]
async fn a_moved_primary_ipv6_is_not_handed_out_twice() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let a = h.seed_server(&SeedServer::new("node-a")).expect("a");
    // A short server cache, so node-b's new server is found at once.
    let ccm = env.ccm(&[("HCLOUD_SERVER_CACHE_MAX_AGE", "1s")], &DUAL_STACK).await;
    NodeBuilder::new("node-a").register(&env.client).await.expect("node");
    let got_a = assigned(&env, "node-a").await;
    assert_eq!(got_a[1], expected_v6(&h, a));
    let a_net = h.server(a).expect("a").public_net.ipv6.expect("ipv6").ip;
    h.set_server_status(a, ServerStatus::Off).expect("off");
    h.change_server_ipv6(a, PublicIpv6Change::Remove).expect("Primary IPv6 unassigned");
    let mut moved = SeedServer::new("node-b");
    moved.public_ipv6 = Some(a_net.clone());
    let b = h.seed_server(&moved).expect("b");
    assert_eq!(expected_v6(&h, b), got_a[1], "node-b's server has node-a's former /64");

    NodeBuilder::new("node-b").register(&env.client).await.expect("node");
    let decided = wait_until(REACT, "node-b gets pod CIDRs or a Warning", async || {
        let has = env.nodes.get("node-b").await.is_ok_and(|n| !pod_cidrs(&n).is_empty());
        has || events_for(&env.client, "Node", "node-b")
            .await
            .is_ok_and(|e| e.iter().any(|e| e.reason == "NodeIPv6PrefixInUse"))
    })
    .await;
    decided.unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));
    let got_b = pod_cidrs(&env.nodes.get("node-b").await.expect("node-b"));
    assert!(got_b.is_empty(), "node-b got {got_b:?} while node-a holds {got_a:?}");
    let e = wait_for_event(&env.client, "Node", "node-b", "NodeIPv6PrefixInUse", REACT).await.expect("warning");
    let range = format!("IPv6 range {} from the prefix of node node-b's instance is held by node node-a", got_a[1]);
    assert!(e.message.contains(&range) && e.message.contains("delete Node node-a"), "{e:?}");

    // node-a is gone: node-b gets the range.
    env.nodes.delete("node-a", &DeleteParams::default()).await.expect("delete");
    let got_b = assigned(&env, "node-b").await;
    assert_eq!(got_b[1], got_a[1], "{got_b:?}");
    assert!(got_b[0].starts_with("10.244."), "{got_b:?}");
    assert!(ccm.is_running(), "{}", ccm.logs());
}

/// IPv6-only: no `--cluster-cidr`, each Node gets its server's range alone, and there is no
/// route controller (nothing to route).
#[tokio::test]
async fn ipv6_only_nodes_get_their_servers_range_alone() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let id = h.seed_server(&SeedServer::new("node-v6")).expect("server");
    let args = [
        "--controllers=*,nodeipam",
        "--allocate-node-cidrs=true",
        "--cidr-allocator-type=CloudAllocator",
        "--node-cidr-mask-size-ipv6=112",
    ];
    let ccm = env.ccm(&[("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv6")], &args).await;
    NodeBuilder::new("node-v6").register(&env.client).await.expect("node");
    let range = block(&h, id, 112);
    assert!(range.ends_with("::1:0/112"), "{range}");
    assert_eq!(assigned(&env, "node-v6").await, [range]);
    assert!(ccm.logs().contains("node-route-controller not started"), "{}", ccm.logs());
}

/// Server requests of a burst of `n` Nodes joining (all initialized, and with `ipam` all
/// assigned), by endpoint: the difference the run made to the fake's request log.
async fn burst_reads(env: &Env, n: usize, ipam: bool) -> BTreeMap<String, usize> {
    let h = env.fake.handle();
    let before = server_reads(&h);
    let args: &[&str] = if ipam { &DUAL_STACK[..3] } else { &[] };
    let mut args = args.to_vec();
    args.push("--cluster-cidr=10.244.0.0/16");
    let ccm = env.ccm(&[], &args).await;
    let names: Vec<String> = (1..=n).map(|i| format!("burst{i}")).collect();
    for name in &names {
        NodeBuilder::new(name).register(&env.client).await.expect("node");
    }
    let done = |node: &Node| !common::tainted(node) && (!ipam || pod_cidrs(node).len() == 2);
    let all = wait_until(REACT, "every node initialized (and assigned)", async || {
        let list = env.nodes.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
        list.len() == n && list.iter().all(done)
    })
    .await;
    all.unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));
    ccm.stop().await.expect("stops");
    for name in &names {
        env.nodes.delete(name, &DeleteParams::default()).await.expect("delete");
    }
    wait_until(REACT, "the burst's nodes are gone", async || {
        env.nodes.list(&Default::default()).await.is_ok_and(|l| l.items.is_empty())
    })
    .await
    .expect("gone");
    let after = server_reads(&h);
    after.into_iter().map(|(k, v)| (k.clone(), v - before.get(&k).copied().unwrap_or(0))).collect()
}

/// The allocator's server lookups are answered by the server data the node controller reads
/// anyway: a burst of 20 Nodes costs the same server requests with node IPAM as without.
#[tokio::test]
async fn node_ipam_adds_no_server_requests() {
    let env = Env::start(FakeConfig::default()).await;
    env.fake.handle().seed_servers(&hcloud_fake::control::SeedServerBatch::new("burst", 20)).expect("servers");
    let without = burst_reads(&env, 20, false).await;
    let with = burst_reads(&env, 20, true).await;
    eprintln!("server reads for 20 Nodes: without node IPAM {without:?}, with {with:?}");
    assert_eq!(with, without);
}
