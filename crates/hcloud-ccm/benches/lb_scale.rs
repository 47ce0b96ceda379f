//! Benchmark (not a test): LoadBalancer Services against a real kube-apiserver and the Hetzner
//! fake (actions take the fake's default 500 ms), through the `hcloud-ccm` binary.
//!
//! Measures, with S Services and N Nodes (defaults 100 × 50):
//! 1. from scratch: wall time until every Service has its ingress and every Load Balancer its
//!    N targets, and the Hetzner requests that took until the CCM went quiet (action
//!    confirmations included), by endpoint;
//! 2. one Node added: wall time until every Load Balancer has it, and the requests;
//! 3. a no-op resync of all S Services (the CCM restarted: every Service is ensured again):
//!    the requests, of which none may change anything.
//!
//! Run: `cargo bench -p hcloud-ccm --bench lb_scale`
//! Knobs (env): BENCH_SERVICES (default 100), BENCH_NODES (default 50), BENCH_CCM_ARGS (extra
//! flags, e.g. "--kube-api-qps=100 --kube-api-burst=200 --concurrent-service-syncs=5").

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hcloud_fake::control::SeedServer;
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::api::{Api, ListParams, PostParams};
use test_harness::{ChildProcess, ControlPlane, NodeBuilder, Ready};

use common::{env_or, free_port};

const TOKEN: &str = "benchtoken000000000000000000000000000000000000000000000000000000";
const NAMESPACE: &str = "default";
/// Quiet this long (longer than the slowest background confirmation) = done.
const QUIET: Duration = Duration::from_secs(12);

fn service(i: usize) -> Service {
    let mut svc = Service::default();
    svc.metadata.name = Some(format!("svc-{i:03}"));
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        selector: Some(BTreeMap::from([("app".to_owned(), format!("app-{i:03}"))])),
        ports: Some(vec![ServicePort {
            name: Some("http".into()),
            port: 80,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    svc
}

/// The requests so far, by endpoint, and per Service.
fn print_counts(label: &str, h: &FakeHandle, services: usize) {
    let total = common::print_counts(label, h);
    println!("    = {:.2} per Service", total as f64 / services as f64);
}

fn mutating(h: &FakeHandle) -> u64 {
    h.request_counts().by_endpoint.iter().filter(|(e, _)| !e.starts_with("GET ")).map(|(_, n)| n).sum()
}

/// Waits until no Hetzner request arrived for [`QUIET`].
async fn quiet(h: &FakeHandle) {
    let mut last = (h.request_counts().total, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = h.request_counts().total;
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= QUIET {
            return;
        }
    }
}

async fn reconciled(metrics: &str) -> f64 {
    let Ok(resp) = reqwest::get(metrics).await else { return 0.0 };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("controller_reconcile_total{") && l.contains("controller=\"service-lb-controller\""))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let services = env_or("BENCH_SERVICES", 100) as usize;
    let n = env_or("BENCH_NODES", 50) as usize;
    let extra: Vec<String> =
        std::env::var("BENCH_CCM_ARGS").unwrap_or_default().split_whitespace().map(str::to_owned).collect();
    println!("lb_scale: {services} LoadBalancer Services × {n} nodes, extra flags {extra:?}");

    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let svcs: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);

    let fake = FakeServer::start(FakeConfig::default().with_rate_limit(1_000_000, 1000.0)).await.expect("fake");
    let h = fake.handle();
    let mut ids = Vec::new();
    for i in 0..=n {
        ids.push(h.seed_server(&SeedServer::new(&format!("node-{i:03}"))).expect("server"));
    }
    let register = async |i: usize| {
        NodeBuilder::new(format!("node-{i:03}"))
            .provider_id(format!("hcloud://{}", ids[i]))
            .without_uninitialized_taint()
            .ready(Ready::True)
            .register(&client)
            .await
            .expect("register");
    };
    futures::stream::iter(0..n).for_each_concurrent(16, &register).await;

    let kubeconfig = format!("--kubeconfig={}", cp.ccm_kubeconfig().display());
    let endpoint = fake.base_url();
    let start_ccm = |metrics_port: u16| {
        let mut args: Vec<&str> = vec![
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
            "--leader-elect=false",
            "--secure-port=0",
            &kubeconfig,
        ];
        args.extend(extra.iter().map(String::as_str));
        let metrics = format!("127.0.0.1:{metrics_port}");
        ChildProcess::spawn(
            std::path::Path::new(env!("CARGO_BIN_EXE_hcloud-ccm")),
            &args,
            &[
                ("HCLOUD_TOKEN", TOKEN),
                ("HCLOUD_ENDPOINT", &endpoint),
                ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
                ("HCLOUD_LOAD_BALANCERS_TYPE", "lb21"),
                ("RUST_LOG", "warn,cloud_controller_manager=info"),
                ("HCLOUD_METRICS_ADDRESS", &metrics),
            ],
            "hcloud-ccm",
        )
        .expect("ccm")
    };
    let wait_started = async |ccm: &ChildProcess| {
        ccm.wait_for_log("hcloud-ccm started", Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));
    };

    // 1. From scratch.
    let port = free_port();
    let ccm = start_ccm(port);
    wait_started(&ccm).await;
    h.reset_requests();
    let started = Instant::now();
    futures::stream::iter(0..services)
        .for_each_concurrent(16, |i| {
            let svcs = svcs.clone();
            async move {
                svcs.create(&PostParams::default(), &service(i)).await.expect("create service");
            }
        })
        .await;
    let created = started.elapsed();
    let converged = loop {
        let list = svcs.list(&ListParams::default()).await.expect("list");
        let with_ingress = list
            .items
            .iter()
            .filter(|s| {
                s.status
                    .as_ref()
                    .and_then(|s| s.load_balancer.as_ref())
                    .and_then(|l| l.ingress.as_ref())
                    .is_some_and(|i| !i.is_empty())
            })
            .count();
        let lbs = h.snapshot().load_balancers;
        let complete = lbs.iter().filter(|l| l.targets.len() == n && l.services.len() == 1).count();
        if with_ingress == services && complete == services {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "{with_ingress}/{services} ingress, {complete} LBs:\n{}",
            ccm.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    quiet(&h).await;
    println!(
        "\n1. from scratch: {services} Services created in {:.1} s; all converged {:.1} s after the first",
        created.as_secs_f64(),
        converged.as_secs_f64()
    );
    print_counts("until quiet (incl. action confirmations)", &h, services);

    // 2. One node added.
    h.reset_requests();
    let started = Instant::now();
    register(n).await;
    let added = loop {
        let done = h.snapshot().load_balancers.iter().filter(|l| l.targets.len() == n + 1).count();
        if done == services {
            break started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(600), "{done}/{services} have the new node:\n{}", ccm.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    quiet(&h).await;
    println!("\n2. one node added: every Load Balancer has it {:.1} s after it registered", added.as_secs_f64());
    print_counts("until quiet", &h, services);
    ccm.stop().await.expect("stop");

    // 3. No-op resync: a restarted CCM ensures every Service again.
    let port = free_port();
    h.reset_requests();
    let ccm = start_ccm(port);
    wait_started(&ccm).await;
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    let started = Instant::now();
    while reconciled(&metrics).await < services as f64 {
        assert!(started.elapsed() < Duration::from_secs(600), "resync did not finish:\n{}", ccm.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let resynced = started.elapsed();
    quiet(&h).await;
    println!(
        "\n3. no-op resync of all {services} Services (restart): done {:.1} s after start-up",
        resynced.as_secs_f64()
    );
    print_counts("from the restart until quiet (incl. the start-up token check, GET /v1/locations)", &h, services);
    println!("  mutating requests: {}", mutating(&h));
    assert!(ccm.is_running(), "hcloud-ccm died:\n{}", ccm.logs());
    ccm.stop().await.expect("stop");
}
