//! Benchmark (not a test): how long after a node turns NotReady hcloud-ccm deletes it (its
//! server is gone) or taints it (its server is powered off), with default flags
//! (`--node-monitor-period=5s`, `HCLOUD_SERVER_CACHE_LIFECYCLE_MAX_AGE=1m`), and how many
//! Hetzner requests each transition costs.
//!
//! Run: `cargo bench -p hcloud-ccm --bench lifecycle_latency`
//! Knobs (env): BENCH_ROUNDS (default 5), BENCH_SERVERS (project size, default 120).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::time::{Duration, Instant};

use hcloud_fake::control::{SeedServer, SeedServerBatch};
use hcloud_fake::wire::ServerStatus;
use hcloud_fake::{FakeConfig, FakeServer};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use test_harness::{ChildProcess, ControlPlane, NodeBuilder, Ready, set_ready};

use common::{env_or, summary};

const TOKEN: &str = "benchtoken000000000000000000000000000000000000000000000000000000";

async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) -> Duration {
    let t = Instant::now();
    while !done().await {
        assert!(t.elapsed() < Duration::from_secs(300), "{what}: not within 300 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    t.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds = env_or("BENCH_ROUNDS", 5) as usize;
    let others = env_or("BENCH_SERVERS", 120) as usize;
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let fake = FakeServer::start(FakeConfig::default().with_rate_limit(1_000_000, 1000.0)).await.expect("fake");
    let h = fake.handle();
    h.seed_servers(&SeedServerBatch::new("other", others as u32)).expect("servers");
    let ids: Vec<u64> =
        (0..2 * rounds).map(|i| h.seed_server(&SeedServer::new(&format!("lc-{i}"))).expect("server")).collect();

    let kubeconfig = format!("--kubeconfig={}", cp.ccm_kubeconfig().display());
    let endpoint = fake.base_url();
    let ccm = ChildProcess::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_hcloud-ccm")),
        &["--cloud-provider=hcloud", "--allow-untagged-cloud", "--leader-elect=false", "--secure-port=0", &kubeconfig],
        &[
            ("HCLOUD_TOKEN", TOKEN),
            ("HCLOUD_ENDPOINT", &endpoint),
            ("RUST_LOG", "warn"),
            ("HCLOUD_METRICS_ADDRESS", "127.0.0.1:0"),
        ],
        "hcloud-ccm",
    )
    .expect("ccm");
    for i in 0..2 * rounds {
        NodeBuilder::new(format!("lc-{i}")).register(&client).await.expect("node");
    }
    until("initialized", async || {
        let list = nodes.list(&Default::default()).await.expect("list");
        list.items.iter().filter(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_some()).count()
            == 2 * rounds
    })
    .await;
    // Let the lifecycle controller see every node Ready for a few passes.
    tokio::time::sleep(Duration::from_secs(12)).await;

    println!("lifecycle_latency: {rounds} rounds, project of {} servers, default flags", others + 2 * rounds);
    let (mut deleted, mut tainted, mut requests) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let (gone, off) = (format!("lc-{}", 2 * r), format!("lc-{}", 2 * r + 1));
        let before = h.request_counts().total;
        h.delete_server(ids[2 * r]).expect("delete");
        h.set_server_status(ids[2 * r + 1], ServerStatus::Off).expect("off");
        set_ready(&client, &gone, Ready::False).await.expect("not ready");
        set_ready(&client, &off, Ready::False).await.expect("not ready");
        let t = Instant::now();
        let d = until("deleted", async || nodes.get_opt(&gone).await.expect("get").is_none()).await;
        deleted.push(d.as_secs_f64());
        until("tainted", async || {
            nodes
                .get(&off)
                .await
                .expect("get")
                .spec
                .and_then(|s| s.taints)
                .is_some_and(|t| t.iter().any(|t| t.key == "node.cloudprovider.kubernetes.io/shutdown"))
        })
        .await;
        tainted.push(t.elapsed().as_secs_f64());
        requests.push(h.request_counts().total - before);
        // Next round starts at a different phase of the monitor period.
        tokio::time::sleep(Duration::from_millis(1700)).await;
    }
    println!("From NotReady (server already deleted / powered off) to:");
    summary("node deleted", deleted);
    summary("shutdown taint", tainted);
    println!("  Hetzner requests per round (one deleted + one powered-off node): {requests:?}");
    assert!(ccm.is_running(), "hcloud-ccm died:\n{}", ccm.logs());
    ccm.stop().await.expect("stop");
}
