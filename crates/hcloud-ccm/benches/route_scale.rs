//! Benchmark (not a test): routes for many nodes, against a real kube-apiserver and the
//! Hetzner fake.
//!
//! Measures:
//! 1. burst: time from N kubelets registering at once (each with a pod CIDR, as node IPAM
//!    assigns them) until every route exists in the network, and until every node is marked
//!    `NetworkUnavailable=False`; the Hetzner requests that took (from the CCM's start);
//!    1b. the same with the route controller alone, for nodes already initialized (the
//!    routes' own cost);
//! 2. steady state at the default flags (watch-based routes, `--route-resync-period=4m`): the
//!    time until a route deleted outside Kubernetes (in the fake, right after a reconcile: the
//!    worst case) is back, and what that cost; then the Hetzner requests over a window, per
//!    hour.
//!
//! The fake's route actions take BENCH_ACTION_DELAY_MS (default: the fake's 500 ms). The
//! network takes one change at a time, so the burst needs at least N × that delay; the
//! default route limit (100, the API's) is raised to N for the burst.
//!
//! Run: `cargo bench -p hcloud-ccm --bench route_scale`
//! Knobs (env): BENCH_NODES (default 500), BENCH_ACTION_DELAY_MS (default 500),
//! BENCH_STEADY_SECS (default 600), BENCH_CCM_ARGS (extra flags for both phases),
//! BENCH_RUST_LOG (the CCM's RUST_LOG, default warn).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use test_harness::{ChildProcess, ControlPlane, NodeBuilder, Ready};

use common::{env_or, print_counts};

const TOKEN: &str = "benchtoken000000000000000000000000000000000000000000000000000000";
const CLUSTER_CIDR: &str = "10.240.0.0/12";

/// Node i's pod CIDR: a /24 of 10.240.0.0/12.
fn pod_cidr(i: usize) -> String {
    format!("10.{}.{}.0/24", 240 + i / 256, i % 256)
}

fn routes_to_pods(h: &FakeHandle, net: u64) -> BTreeSet<String> {
    h.network(net).expect("network").routes.into_iter().map(|r| r.destination).collect()
}

async fn routed_count(nodes: &Api<Node>) -> usize {
    nodes
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|n| {
                    n.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
                        c.iter().any(|c| {
                            c.type_ == "NetworkUnavailable"
                                && c.status == "False"
                                && c.reason.as_deref() == Some("RouteCreated")
                        })
                    })
                })
                .count()
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = env_or("BENCH_NODES", 500) as usize;
    let action_delay = Duration::from_millis(env_or("BENCH_ACTION_DELAY_MS", 500));
    let steady = Duration::from_secs(env_or("BENCH_STEADY_SECS", 600));
    let extra: Vec<String> =
        std::env::var("BENCH_CCM_ARGS").unwrap_or_default().split_whitespace().map(str::to_owned).collect();
    println!("route_scale: {n} nodes, route actions take {action_delay:?}, extra flags {extra:?}");

    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());

    let fake = FakeServer::start(FakeConfig {
        log_requests: false,
        ..FakeConfig::default().with_rate_limit(1_000_000, 1000.0).with_action_delay(action_delay)
    })
    .await
    .expect("fake");
    let h = fake.handle();
    h.set_route_limit(n.max(100));
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central")).expect("net");
    for i in 0..n {
        h.seed_server(&SeedServer::new(&format!("node-{i:04}")).network(net)).expect("server");
    }

    let kubeconfig = format!("--kubeconfig={}", cp.ccm_kubeconfig().display());
    let cluster_cidr = format!("--cluster-cidr={CLUSTER_CIDR}");
    let endpoint = fake.base_url();
    let log = std::env::var("BENCH_RUST_LOG").unwrap_or_else(|_| "warn".to_owned());
    let start_ccm = |flags: &[&str]| {
        let mut args: Vec<&str> = vec![
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
            "--leader-elect=false",
            "--secure-port=0",
            "--allocate-node-cidrs=true",
            &cluster_cidr,
            &kubeconfig,
        ];
        args.extend(flags);
        args.extend(extra.iter().map(String::as_str));
        ChildProcess::spawn(
            std::path::Path::new(env!("CARGO_BIN_EXE_hcloud-ccm")),
            &args,
            &[
                ("HCLOUD_TOKEN", TOKEN),
                ("HCLOUD_ENDPOINT", &endpoint),
                ("HCLOUD_NETWORK", "k8s"),
                ("RUST_LOG", &log),
                ("HCLOUD_METRICS_ADDRESS", "127.0.0.1:0"),
            ],
            "hcloud-ccm",
        )
        .expect("ccm")
    };
    // Started = the route controller's first reconcile read the network.
    let wait_first_reconcile = async |ccm: &ChildProcess| {
        let t = Instant::now();
        while h.request_count("GET /v1/networks/{id}") == 0 {
            assert!(t.elapsed() < Duration::from_secs(60), "ccm did not start:\n{}", ccm.logs());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };

    // 1. Burst: N kubelets register at once, each with a pod CIDR.
    let ccm = start_ccm(&[]);
    wait_first_reconcile(&ccm).await;
    let wanted: BTreeSet<String> = (0..n).map(pod_cidr).collect();
    let started = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let client = client.clone();
            async move {
                NodeBuilder::new(format!("node-{i:04}"))
                    .kubelet_hostname_address(true)
                    .ready(Ready::True)
                    .pod_cidrs([pod_cidr(i)])
                    .register(&client)
                    .await
                    .expect("register");
            }
        })
        .await;
    let registered = started.elapsed();
    let all_routes = loop {
        let have = routes_to_pods(&h, net);
        if wanted.is_subset(&have) {
            break started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(3600), "only {}/{n} routes:\n{}", have.len(), ccm.logs());
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let burst_requests = h.request_counts();
    let all_routed = loop {
        let done = routed_count(&nodes).await;
        if done == n {
            break started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(3600), "only {done}/{n} nodes routed");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!("\n1. burst: {n} nodes with pod CIDRs registered at once (in {:.1} s)", registered.as_secs_f64());
    println!(
        "  every route exists {:.1} s after the first registration; every node NetworkUnavailable=False after {:.1} s",
        all_routes.as_secs_f64(),
        all_routed.as_secs_f64()
    );
    println!(
        "  (the network takes one change at a time: {n} × {action_delay:?} = {:.1} s is the floor)",
        (action_delay * n as u32).as_secs_f64()
    );
    println!("  until every route existed, since hcloud-ccm started: {} Hetzner API requests", burst_requests.total);
    for (endpoint, count) in &burst_requests.by_endpoint {
        println!("    {count:>6}  {endpoint}");
    }
    if std::env::var("BENCH_RUST_LOG").is_ok() {
        for line in ccm.logs().lines().filter(|l| !l.contains("INFO") || l.contains("reconciling routes")) {
            println!("  | {line}");
        }
    }
    assert!(ccm.is_running(), "hcloud-ccm died:\n{}", ccm.logs());
    ccm.stop().await.expect("stop");

    // 1b. The route controller alone, for nodes the cloud-node controller already initialized
    //     (what the routes themselves cost, without the initialization's requests).
    nodes.delete_collection(&Default::default(), &ListParams::default()).await.expect("delete nodes");
    while !nodes.list(&ListParams::default()).await.expect("list").items.is_empty() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for cidr in routes_to_pods(&h, net) {
        h.remove_route(net, &cidr).expect("clear routes");
    }
    h.reset_requests();
    let ccm = start_ccm(&["--controllers=route"]);
    wait_first_reconcile(&ccm).await;
    let servers: std::collections::HashMap<String, (u64, String)> = h
        .snapshot()
        .servers
        .iter()
        .map(|s| (s.name.clone(), (s.id, s.private_net.first().map(|p| p.ip.clone()).unwrap_or_default())))
        .collect();
    let started = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let client = client.clone();
            let (id, ip) = servers[&format!("node-{i:04}")].clone();
            async move {
                NodeBuilder::new(format!("node-{i:04}"))
                    .without_uninitialized_taint()
                    .provider_id(format!("hcloud://{id}"))
                    .address("InternalIP", ip)
                    .pod_cidrs([pod_cidr(i)])
                    .register(&client)
                    .await
                    .expect("register");
            }
        })
        .await;
    let all_routes = loop {
        let have = routes_to_pods(&h, net);
        if wanted.is_subset(&have) {
            break started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(3600), "only {}/{n} routes:\n{}", have.len(), ccm.logs());
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!("\n1b. the route controller alone, {n} initialized nodes registered at once");
    println!("  every route exists {:.1} s after the first registration", all_routes.as_secs_f64());
    print_counts("since hcloud-ccm started", &fake.handle());
    assert!(ccm.is_running(), "hcloud-ccm died:\n{}", ccm.logs());
    ccm.stop().await.expect("stop");

    // 2. Steady state at the defaults, the route controller alone (the other controllers'
    //    cost is node_scale's), and a route deleted outside Kubernetes right after a reconcile.
    h.reset_requests();
    let ccm = start_ccm(&["--controllers=route"]);
    wait_first_reconcile(&ccm).await;
    print_counts("start-up and first reconcile", &fake.handle());
    h.reset_requests();
    let deleted = Instant::now();
    let victim = pod_cidr(n / 2);
    h.remove_route(net, &victim).expect("out-of-band deletion");
    let restored = loop {
        if routes_to_pods(&h, net).contains(&victim) {
            break deleted.elapsed();
        }
        assert!(deleted.elapsed() < Duration::from_secs(900), "not restored:\n{}", ccm.logs());
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!("\n2. steady state, default route flags, {n} nodes");
    println!(
        "  a route deleted outside Kubernetes right after a reconcile was back after {:.1} s",
        restored.as_secs_f64()
    );
    print_counts("noticing and restoring it", &fake.handle());
    h.reset_requests();
    let window = Instant::now();
    tokio::time::sleep(steady).await;
    let secs = window.elapsed().as_secs_f64();
    let total = print_counts(&format!("then, in a window of {secs:.0} s"), &fake.handle());
    println!("  ⇒ {:.1} Hetzner requests/hour", total as f64 * 3600.0 / secs);
    assert!(ccm.is_running(), "hcloud-ccm died:\n{}", ccm.logs());
    ccm.stop().await.expect("stop");
}
