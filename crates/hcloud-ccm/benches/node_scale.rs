//! Benchmark (not a test): hcloud-ccm with many nodes against a real kube-apiserver and the
//! Hetzner fake.
//!
//! Measures:
//! 1. time from registering N nodes at once (like N kubelets) until all are initialized, and
//!    the Hetzner API requests that took (from the CCM's start, including its start-up checks):
//!    1a. kubelets that register Ready (the best case);
//!    1b. kubelets that register NotReady and turn Ready only after initialization (what real
//!    kubelets do before the CNI runs), so the lifecycle controller sees them all NotReady;
//! 2. steady state: Hetzner requests caused by the periodic address refresh and by lifecycle
//!    monitoring, observed over a window and extrapolated to an hour at the default periods;
//! 3. resident memory of the hcloud-ccm process, and its peak (VmHWM).
//!
//! Run: `cargo bench -p hcloud-ccm --bench node_scale`
//! Knobs (env): BENCH_NODES (default 500), BENCH_CCM_ARGS (extra flags, e.g.
//! "--kube-api-qps=100 --kube-api-burst=200"), BENCH_WINDOW_SECS (default 60).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::time::{Duration, Instant};

use futures::StreamExt;
use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::{FakeConfig, FakeServer};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use test_harness::{ChildProcess, ControlPlane, NodeBuilder, Ready, set_ready};

use common::{env_or, print_counts, status_kib};

const TOKEN: &str = "benchtoken000000000000000000000000000000000000000000000000000000";

fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

async fn initialized_count(nodes: &Api<Node>) -> usize {
    nodes
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|n| {
                    let spec = n.spec.as_ref();
                    spec.and_then(|s| s.provider_id.as_ref()).is_some()
                        && !spec.and_then(|s| s.taints.as_ref()).is_some_and(|t| {
                            t.iter().any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized")
                        })
                })
                .count()
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = env_or("BENCH_NODES", 500) as usize;
    let window = Duration::from_secs(env_or("BENCH_WINDOW_SECS", 60));
    let extra: Vec<String> =
        std::env::var("BENCH_CCM_ARGS").unwrap_or_default().split_whitespace().map(str::to_owned).collect();
    println!("node_scale: {n} nodes, extra flags {extra:?}");

    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());

    // A project with N servers in one private network; the fake's action delay stays at its
    // default (nothing in node initialization waits for actions).
    let fake = FakeServer::start(FakeConfig::default().with_rate_limit(1_000_000, 1000.0)).await.expect("fake");
    let h = fake.handle();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central")).expect("net");
    for i in 0..n {
        h.seed_server(&SeedServer::new(&format!("node-{i:04}")).network(net)).expect("server");
    }

    let kubeconfig = format!("--kubeconfig={}", cp.ccm_kubeconfig().display());
    let endpoint = fake.base_url();
    let start_ccm = |flags: &[String]| {
        let mut args: Vec<&str> = vec![
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
            "--leader-elect=false",
            "--secure-port=0",
            &kubeconfig,
        ];
        args.extend(flags.iter().map(String::as_str));
        ChildProcess::spawn(
            std::path::Path::new(env!("CARGO_BIN_EXE_hcloud-ccm")),
            &args,
            &[
                ("HCLOUD_TOKEN", TOKEN),
                ("HCLOUD_ENDPOINT", &endpoint),
                ("HCLOUD_NETWORK", "k8s"),
                ("RUST_LOG", "warn"),
                ("HCLOUD_METRICS_ADDRESS", "127.0.0.1:0"),
            ],
            "hcloud-ccm",
        )
        .expect("ccm")
    };
    // Started = the start-up checks (token, network) are done.
    let wait_started = async |ccm: &ChildProcess, networks_before: u64| {
        let t = Instant::now();
        while h.request_count("GET /v1/networks") == networks_before {
            assert!(t.elapsed() < Duration::from_secs(60), "ccm did not start:\n{}", ccm.logs());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };

    // Phase 1: the CCM with default flags (plus BENCH_CCM_ARGS).
    let register_all = async |ready: Ready| {
        futures::stream::iter(0..n)
            .for_each_concurrent(32, |i| {
                let client = client.clone();
                async move {
                    NodeBuilder::new(format!("node-{i:04}"))
                        .kubelet_hostname_address(true)
                        .ready(ready)
                        .register(&client)
                        .await
                        .expect("register");
                }
            })
            .await;
    };
    let wait_initialized = async |ccm: &ChildProcess, started: Instant| loop {
        let done = initialized_count(&nodes).await;
        if done == n {
            return started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(900), "only {done}/{n} initialized:\n{}", ccm.logs());
        tokio::time::sleep(Duration::from_millis(250)).await;
    };

    // 1a. N kubelets register at once, Ready.
    let ccm = start_ccm(&extra);
    wait_started(&ccm, 0).await;
    let rss_idle = rss_kib(ccm.pid());
    let started = Instant::now();
    register_all(Ready::True).await;
    let registered = started.elapsed();
    let init = wait_initialized(&ccm, started).await;
    let rss_after_init = rss_kib(ccm.pid());
    println!("\n1a. initialization, kubelets registered Ready");
    println!(
        "  {n} nodes registered in {:.1} s; all initialized {:.1} s after the first registration",
        registered.as_secs_f64(),
        init.as_secs_f64()
    );
    print_counts("since hcloud-ccm started (incl. token check and network lookup)", &fake.handle());
    ccm.stop().await.expect("stop");

    // 1b. The same with kubelets that register NotReady and turn Ready once initialized.
    nodes.delete_collection(&Default::default(), &ListParams::default()).await.expect("delete nodes");
    while !nodes.list(&ListParams::default()).await.expect("list").items.is_empty() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    h.reset_requests();
    let ccm = start_ccm(&extra);
    wait_started(&ccm, 0).await;
    let started = Instant::now();
    register_all(Ready::False).await;
    let init = wait_initialized(&ccm, started).await;
    println!("\n1b. initialization, kubelets registered NotReady (the lifecycle controller sees {n} NotReady nodes)");
    println!("  all {n} initialized {:.1} s after the first registration", init.as_secs_f64());
    print_counts("since hcloud-ccm started (incl. token check and network lookup)", &fake.handle());
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let client = client.clone();
            async move {
                set_ready(&client, &format!("node-{i:04}"), Ready::True).await.expect("ready");
            }
        })
        .await;
    let peak_init = peak_rss_kib(ccm.pid());
    ccm.stop().await.expect("stop");

    // Phase 2: steady state. The refresh runs every `refresh` here so a window sees a few
    // passes; the per-hour figure is extrapolated to the default 5m.
    let refresh = Duration::from_secs(20);
    let mut flags = extra.clone();
    flags.push(format!("--node-status-update-frequency={}s", refresh.as_secs()));
    let networks_before = h.request_count("GET /v1/networks");
    let ccm = start_ccm(&flags);
    wait_started(&ccm, networks_before).await;
    // Let the first refresh pass (run at start) finish before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;

    // 2a. All nodes Ready: only the periodic address refresh talks to Hetzner.
    h.reset_requests();
    tokio::time::sleep(window).await;
    let passes = window.as_secs_f64() / refresh.as_secs_f64();
    let refresh_requests = h.request_counts().total;
    let per_pass = refresh_requests as f64 / passes;
    println!(
        "\n2a. steady state, all {n} nodes Ready, refresh every {}s, window {}s",
        refresh.as_secs(),
        window.as_secs()
    );
    print_counts("in the window", &fake.handle());
    println!(
        "  ≈ {per_pass:.1} requests per refresh pass ⇒ {:.0} requests/hour at the default 5m refresh (+0 from lifecycle: Ready nodes cost nothing)",
        per_pass * 12.0
    );

    // 2b. Ten nodes turn NotReady (servers still running): the transition is rechecked once,
    // then the lifecycle checks them every 5 s from the inventory.
    let not_ready = 10.min(n);
    h.reset_requests();
    for i in 0..not_ready {
        set_ready(&client, &format!("node-{i:04}"), Ready::False).await.expect("not ready");
    }
    // Two monitor periods: every transition has been seen and rechecked.
    tokio::time::sleep(Duration::from_secs(11)).await;
    println!("\n2b. {not_ready} nodes turn NotReady: the recheck of the transition");
    print_counts("in the 11 s after the transition (including any refresh pass)", &fake.handle());
    h.reset_requests();
    tokio::time::sleep(window).await;
    let total = h.request_counts().total as f64;
    let lifecycle_per_hour = (total - per_pass * passes).max(0.0) * 3600.0 / window.as_secs_f64();
    println!("\n2c. {not_ready} nodes NotReady (servers running), window {}s", window.as_secs());
    print_counts("in the window", &fake.handle());
    println!("  ≈ {lifecycle_per_hour:.0} requests/hour from lifecycle monitoring of {not_ready} NotReady nodes");

    let rss_end = rss_kib(ccm.pid());
    let peak = peak_rss_kib(ccm.pid()).max(peak_init);
    println!(
        "\n3. hcloud-ccm resident memory: {:.1} MiB idle, {:.1} MiB after initializing {n} nodes, {:.1} MiB at the end; peak {:.1} MiB",
        rss_idle as f64 / 1024.0,
        rss_after_init as f64 / 1024.0,
        rss_end as f64 / 1024.0,
        peak as f64 / 1024.0
    );
    assert!(ccm.is_running(), "hcloud-ccm died:\n{}", ccm.logs());
    ccm.stop().await.expect("stop");
}
