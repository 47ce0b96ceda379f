//! Benchmark (not a test): hcloud-ccm and the official CCM (v1.35.0) with many nodes against a
//! real kube-apiserver and the Hetzner fake, side by side.
//!
//! Each subject runs on a fresh fake seeded alike (N servers in the network `k8s`) and a
//! cleaned cluster, with the chart's default flags (`--route-reconciliation-period=30s
//! --webhook-secure-port=0 --feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true`,
//! upstream's node monitor period and status update frequency) and `HCLOUD_NETWORK=k8s`.
//! Measures, per subject:
//! 1. initialization: N kubelets register at once, Ready; the time until every Node has its
//!    providerID and lost the uninitialized taint, and the Hetzner requests from the CCM's
//!    start (start-up checks included);
//! 2. idle: the Hetzner requests over a window with every Node Ready (the periodic status
//!    update runs every 5 minutes; a 300 s window holds one), extrapolated to an hour;
//! 3. the peak RSS (VmHWM) and CPU seconds (utime+stime) of that CCM process at the end of the
//!    idle window;
//!
//! with BENCH_ADDRESS_CHANGE=1 (both CCMs then run with `HCLOUD_INSTANCES_ADDRESS_FAMILY=dualstack`)
//! also
//! 3b. a changed address: one Node's server gets another IPv6 /64 (its IPv6 Primary IP
//!    unassigned and another assigned: two actions in the fake, as in the API); the delay and
//!    the Hetzner requests until the Node shows the new ExternalIP;
//!
//! and with BENCH_EXTRA_PHASES=1 also
//! 4. lifecycle: ten Nodes turn NotReady (their servers still running): the requests of the
//!    transition and then per hour;
//! 5. initialization again by a new process, with kubelets that register NotReady and turn
//!    Ready only after initialization (what real kubelets do before the CNI runs), so the
//!    lifecycle controller sees them all NotReady.
//!
//! The subjects take turns (official, hcloud-ccm, official, …) for BENCH_ROUNDS rounds; the
//! table shows each figure's median and range.
//!
//! Run: `cargo bench -p hcloud-ccm --bench node_scale`
//! Knobs (env): BENCH_SUBJECTS (`both`, default; `ours`; `official`), BENCH_ROUNDS (default
//! 1), BENCH_NODES (default 500), BENCH_IDLE_SECS (default 300), BENCH_EXTRA_PHASES (`1`: run
//! phases 4 and 5), BENCH_WINDOW_SECS (the NotReady window, default 60), BENCH_CCM_ARGS
//! (extra flags for both, e.g. "--kube-api-qps=100 --kube-api-burst=200"),
//! BENCH_REQUEST_LOG_DIR (write each run's request log there), BENCH_TIME_SCALE (k > 1: both
//! CCMs refresh addresses every 300/k s, `--node-status-update-frequency`, and the idle
//! figures are divided by k, so a window of W s stands for k·W s of the default 5-minute
//! refresh; hcloud-ccm's safety resync, by wall time, is not sped up: see docs/benchmarks.md),
//! BENCH_ADDRESS_CHANGE (`1`: phase 3b).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::time::{Duration, Instant};

use futures::StreamExt;
use hcloud_fake::control::{PublicIpv6Change, RequestCounts, SeedNetwork, SeedServer};
use hcloud_fake::{FakeConfig, FakeServer};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use test_harness::{ChildProcess, ControlPlane, NodeBuilder, Ready, UNINITIALIZED_TAINT_KEY, set_ready};

use common::compare::{self, Requests, Subject, Table, Unit};
use common::{clean, env_or};

/// Nodes that turn NotReady in the lifecycle phase.
const NOT_READY: usize = 10;

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
                        && !spec
                            .and_then(|s| s.taints.as_ref())
                            .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED_TAINT_KEY))
                })
                .count()
        })
        .unwrap_or(0)
}

struct Bench {
    cp: ControlPlane,
    client: kube::Client,
    nodes: Api<Node>,
    n: usize,
    idle: Duration,
    window: Duration,
    extra: Vec<String>,
    extra_phases: bool,
    /// BENCH_TIME_SCALE: how much faster than every 5 minutes the address refresh runs.
    time_scale: u64,
    address_change: bool,
}

impl Bench {
    async fn register_all(&self, ready: Ready) {
        futures::stream::iter(0..self.n)
            .for_each_concurrent(32, |i| {
                let client = self.client.clone();
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
    }

    async fn wait_initialized(&self, ccm: &ChildProcess, started: Instant) -> Duration {
        loop {
            let done = initialized_count(&self.nodes).await;
            if done == self.n {
                return started.elapsed();
            }
            assert!(ccm.is_running(), "{} exited:\n{}", ccm.name(), ccm.logs());
            // At the default --kube-api-qps=20 each Node costs about 3 writes: 5,000 take 750 s.
            let limit = Duration::from_secs(900.max(self.n as u64 * 2 / 5));
            assert!(started.elapsed() < limit, "{}: only {done}/{} initialized:\n{}", ccm.name(), self.n, ccm.logs());
            // Listing thousands of Nodes four times a second would load the API server more
            // than the CCM under test does: poll less often the more there are.
            tokio::time::sleep(Duration::from_millis((self.n as u64 / 2).max(250))).await;
        }
    }

    /// Phase 3b: the server `id` of Node `name` gets another IPv6 /64; the delay and the
    /// requests until the Node shows it.
    async fn address_change(
        &self,
        subject: Subject,
        table: &mut Table,
        fake: &FakeServer,
        id: u64,
        name: &str,
        ccm: &ChildProcess,
    ) {
        let h = fake.handle();
        h.reset_requests();
        let t = Instant::now();
        h.change_server_ipv6(id, PublicIpv6Change::Next).expect("swap");
        let net = h.server(id).expect("server").public_net.ipv6.expect("ipv6").ip;
        let (prefix, _) = net.split_once('/').expect("a CIDR");
        let mut segments = prefix.parse::<std::net::Ipv6Addr>().expect("IPv6").segments();
        segments[7] |= 1;
        let want = std::net::Ipv6Addr::from(segments).to_string();
        let limit = Duration::from_secs(2 * 300 / self.time_scale + 60);
        let shown = loop {
            let node = self.nodes.get(name).await.expect("node");
            let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
            if addresses.iter().any(|a| a.type_ == "ExternalIP" && a.address == want) {
                break Some(t.elapsed());
            }
            if t.elapsed() > limit {
                break None;
            }
            assert!(ccm.is_running(), "{} exited:\n{}", ccm.name(), ccm.logs());
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let counts = h.request_counts();
        match shown {
            Some(d) => {
                println!("3b. {name}'s new IPv6 shows after {:.1} s: {} requests", d.as_secs_f64(), counts.total)
            }
            None => println!(
                "3b. {name}'s new IPv6 not shown after {:.0} s: {} requests",
                limit.as_secs_f64(),
                counts.total
            ),
        }
        common::print_counts("until then", &h);
        let period = 300 / self.time_scale;
        table.set(
            &format!("a Primary IP swapped: delay until the Node shows it (refresh every {period} s)"),
            Unit::Secs,
            subject,
            shown.map_or(f64::NAN, |d| d.as_secs_f64()),
        );
        table.requests("a Primary IP swapped: requests until the Node shows it", subject, Requests::of(&counts));
    }

    /// One subject's run; its figures go into `table`, its request counts by phase into
    /// `endpoints`.
    async fn run(&self, subject: Subject, table: &mut Table, endpoints: &mut [Vec<(Subject, RequestCounts)>; 2]) {
        let n = self.n;
        println!("\n# {}", subject.label());
        clean::remove_nodes_and_load_balancer_services(&self.client).await;
        let fake = FakeServer::start(FakeConfig::default().with_rate_limit(1_000_000, 1000.0)).await.expect("fake");
        let h = fake.handle();
        let net =
            h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central")).expect("net");
        let ids: Vec<u64> = (0..n)
            .map(|i| h.seed_server(&SeedServer::new(&format!("node-{i:04}")).network(net)).expect("server"))
            .collect();
        let mut config = compare::chart_config(&self.extra).env(&[("HCLOUD_NETWORK", "k8s")]);
        if self.time_scale > 1 {
            config.args.push(format!("--node-status-update-frequency={}s", 300 / self.time_scale));
        }
        if self.address_change {
            config = config.env(&[("HCLOUD_INSTANCES_ADDRESS_FAMILY", "dualstack")]);
        }

        // 1. Initialization, kubelets Ready.
        let ccm = compare::start(subject, &self.cp, &fake.base_url(), &config);
        compare::wait_started(&ccm, &h, true).await;
        let started = Instant::now();
        self.register_all(Ready::True).await;
        let registered = started.elapsed();
        let init = self.wait_initialized(&ccm, started).await;
        let counts = h.request_counts();
        println!(
            "1. {n} Nodes registered Ready in {:.1} s; all initialized {:.1} s after the first registration: {} requests",
            registered.as_secs_f64(),
            init.as_secs_f64(),
            counts.total
        );
        compare::dump_request_log(&h, &format!("node_scale-{}-init-ready", subject.label()));
        table.requests(&format!("initialize {n} Nodes (kubelets Ready): requests"), subject, Requests::of(&counts));
        table.set(&format!("initialize {n} Nodes (kubelets Ready): time"), Unit::Secs, subject, init.as_secs_f64());
        endpoints[0].push((subject, counts));

        // 2. Idle, every Node Ready.
        h.reset_requests();
        let t = Instant::now();
        tokio::time::sleep(self.idle).await;
        let idle = h.request_counts();
        let scale = self.time_scale as f64;
        let per_hour = idle.total as f64 * 3600.0 / (t.elapsed().as_secs_f64() * scale);
        println!(
            "2. idle, window {:.0} s (time scale {scale}): {} requests ⇒ {per_hour:.0}/hour",
            t.elapsed().as_secs_f64(),
            idle.total
        );
        common::print_counts("in the window", &h);
        table.set(
            &format!(
                "idle, {n} Nodes Ready: requests per hour (a {:.0} s window, refresh every {} s, ÷ {scale})",
                self.idle.as_secs_f64(),
                300 / self.time_scale
            ),
            Unit::PerHour,
            subject,
            per_hour,
        );
        assert!(ccm.is_running(), "{} died:\n{}", subject.label(), ccm.logs());
        table.process("the process after initialization and idle", subject, compare::proc_figures(ccm.pid()));
        if self.address_change {
            self.address_change(subject, table, &fake, ids[n / 2], &format!("node-{:04}", n / 2), &ccm).await;
        }
        if !self.extra_phases {
            ccm.stop().await.expect("stop");
            return;
        }

        // 4. Lifecycle: ten Nodes NotReady, servers running.
        let not_ready = NOT_READY.min(n);
        h.reset_requests();
        for i in 0..not_ready {
            set_ready(&self.client, &format!("node-{i:04}"), Ready::False).await.expect("not ready");
        }
        tokio::time::sleep(Duration::from_secs(11)).await;
        let transition = h.request_counts();
        println!("4. {not_ready} Nodes turn NotReady: {} requests in the 11 s after", transition.total);
        h.reset_requests();
        let t = Instant::now();
        tokio::time::sleep(self.window).await;
        let lifecycle = h.request_counts();
        let lifecycle_per_hour = lifecycle.total as f64 * 3600.0 / t.elapsed().as_secs_f64();
        println!(
            "   then {} requests in {:.0} s ⇒ {lifecycle_per_hour:.0}/hour",
            lifecycle.total,
            t.elapsed().as_secs_f64()
        );
        common::print_counts("in the window", &h);
        table.set(
            &format!("{not_ready} Nodes NotReady (servers running): requests in the 11 s after"),
            Unit::Count,
            subject,
            transition.total as f64,
        );
        table.set(
            &format!("{not_ready} Nodes NotReady (servers running): requests per hour"),
            Unit::PerHour,
            subject,
            lifecycle_per_hour,
        );
        assert!(ccm.is_running(), "{} died:\n{}", subject.label(), ccm.logs());
        table.process("that process after the NotReady window", subject, compare::proc_figures(ccm.pid()));
        ccm.stop().await.expect("stop");

        // 5. Initialization by a new process, kubelets NotReady until initialized.
        clean::remove_nodes_and_load_balancer_services(&self.client).await;
        h.reset_requests();
        let ccm = compare::start(subject, &self.cp, &fake.base_url(), &config);
        compare::wait_started(&ccm, &h, true).await;
        let started = Instant::now();
        self.register_all(Ready::False).await;
        let init = self.wait_initialized(&ccm, started).await;
        let counts = h.request_counts();
        println!(
            "5. {n} Nodes registered NotReady: all initialized {:.1} s after the first registration: {} requests",
            init.as_secs_f64(),
            counts.total
        );
        compare::dump_request_log(&h, &format!("node_scale-{}-init-not-ready", subject.label()));
        table.requests(&format!("initialize {n} Nodes (kubelets NotReady): requests"), subject, Requests::of(&counts));
        table.set(&format!("initialize {n} Nodes (kubelets NotReady): time"), Unit::Secs, subject, init.as_secs_f64());
        endpoints[1].push((subject, counts));
        assert!(ccm.is_running(), "{} died:\n{}", subject.label(), ccm.logs());
        table.process("the NotReady-initialization process", subject, compare::proc_figures(ccm.pid()));
        ccm.stop().await.expect("stop");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = env_or("BENCH_NODES", 500) as usize;
    let idle = Duration::from_secs(env_or("BENCH_IDLE_SECS", 300));
    let window = Duration::from_secs(env_or("BENCH_WINDOW_SECS", 60));
    let extra = compare::extra_args();
    let extra_phases = env_or("BENCH_EXTRA_PHASES", 0) == 1;
    let rounds = env_or("BENCH_ROUNDS", 1).max(1);
    let subjects = compare::subjects();
    println!(
        "node_scale: {n} nodes, subjects {subjects:?}, {rounds} round(s), chart defaults + HCLOUD_NETWORK, extra flags {extra:?}"
    );

    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let time_scale = env_or("BENCH_TIME_SCALE", 1).clamp(1, 300);
    let address_change = env_or("BENCH_ADDRESS_CHANGE", 0) == 1;
    let bench = Bench { cp, client, nodes, n, idle, window, extra, extra_phases, time_scale, address_change };
    let mut table = Table::new(format!("node_scale: {n} Nodes"));
    let mut endpoints = [Vec::new(), Vec::new()];
    for round in 1..=rounds {
        println!("\n=== round {round}/{rounds}");
        for subject in &subjects {
            bench.run(*subject, &mut table, &mut endpoints).await;
        }
    }
    compare::print_endpoints(&format!("initialize {n} Nodes, kubelets Ready"), &endpoints[0]);
    if extra_phases {
        compare::print_endpoints(&format!("initialize {n} Nodes, kubelets NotReady"), &endpoints[1]);
    }
    table.print();
}
