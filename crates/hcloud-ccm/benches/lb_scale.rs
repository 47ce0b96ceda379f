//! Benchmark (not a test): hcloud-ccm and the official CCM (v1.35.0) with many LoadBalancer
//! Services against a real kube-apiserver and the Hetzner fake (actions take the fake's
//! default 500 ms), side by side.
//!
//! Each subject runs on a fresh fake seeded alike and a cleaned cluster with N initialized
//! Nodes, with the chart's default flags and `HCLOUD_LOAD_BALANCERS_LOCATION=fsn1`,
//! `HCLOUD_LOAD_BALANCERS_TYPE=lb21` (no network: the chart's default). Measures, with S
//! Services and N Nodes (defaults 100 × 50), per subject:
//! 1. converge: S Services created at once; the time until every Service has its ingress and
//!    every Load Balancer its N targets, and the Hetzner requests until the CCM went quiet
//!    (action confirmations included);
//! 2. one Node added: the time until every Load Balancer has it, and the requests;
//! 3. idle: the requests over a window (BENCH_IDLE_SECS), extrapolated to an hour;
//! 4. the peak RSS (VmHWM) and CPU seconds (utime+stime) of that process;
//! 5. restart: a new process ensures every Service again (nothing to change): the requests
//!    until quiet, of which none should change anything.
//!
//! The subjects take turns for BENCH_ROUNDS rounds; the table shows each figure's median.
//!
//! The official CCM adds a Load Balancer's targets one action at a time, each waited for, so
//! at the fake's 500 ms per action 100 Services × 50 Nodes take it about 100 × 50 × 0.5 s
//! ≈ 42 min to converge; LIMIT allows an hour.
//!
//! Run: `cargo bench -p hcloud-ccm --bench lb_scale`
//! Knobs (env): BENCH_SUBJECTS (`both`, default; `ours`; `official`), BENCH_ROUNDS (default
//! 1), BENCH_SERVICES (default 100), BENCH_NODES (default 50), BENCH_IDLE_SECS (default 300),
//! BENCH_ACTION_DELAY_MS (how long the fake's actions take, default 500), BENCH_CCM_ARGS
//! (extra flags for both, e.g. "--concurrent-service-syncs=5"),
//! BENCH_REQUEST_LOG_DIR (write each run's request log there), BENCH_SHARING_GROUPS (default 0:
//! a Load Balancer per Service; G > 0: Service i carries `sharing-key: group-<i mod G>` and
//! listens on port 80 + i / G, so G shared Load Balancers hold S / G services each — hcloud-ccm
//! only, run it with BENCH_SUBJECTS=ours).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hcloud_fake::control::{RequestCounts, SeedServer};
use hcloud_fake::{FakeConfig, FakeServer};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::api::{Api, ListParams, PostParams};
use test_harness::{ControlPlane, NodeBuilder, Ready};

use common::compare::{self, Requests, Subject, Table, Unit};
use common::{clean, env_or};

const NAMESPACE: &str = "default";
/// Quiet this long (longer than the slowest background confirmation) = done.
const QUIET: Duration = Duration::from_secs(12);
/// Longest a phase may take.
const LIMIT: Duration = Duration::from_secs(3600);

fn service(i: usize, groups: usize) -> Service {
    let mut svc = Service::default();
    svc.metadata.name = Some(format!("svc-{i:03}"));
    let port = if groups > 0 {
        let key = ("load-balancer.hetzner.cloud/sharing-key".to_owned(), format!("group-{}", i % groups));
        svc.metadata.annotations = Some(BTreeMap::from([key]));
        80 + (i / groups) as i32
    } else {
        80
    };
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        selector: Some(BTreeMap::from([("app".to_owned(), format!("app-{i:03}"))])),
        ports: Some(vec![ServicePort {
            name: Some("http".into()),
            port,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    svc
}

fn with_ingress(list: &[Service]) -> usize {
    list.iter()
        .filter(|s| {
            s.status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|l| l.ingress.as_ref())
                .is_some_and(|i| !i.is_empty())
        })
        .count()
}

struct Bench {
    cp: ControlPlane,
    client: kube::Client,
    services: usize,
    n: usize,
    idle: Duration,
    action_delay: Duration,
    extra: Vec<String>,
    /// Sharing groups (0: none).
    groups: usize,
}

impl Bench {
    /// How many Load Balancers the Services get, and how many services each holds.
    fn layout(&self) -> (usize, usize) {
        if self.groups == 0 { (self.services, 1) } else { (self.groups, self.services.div_ceil(self.groups)) }
    }

    /// One subject's run; its figures go into `table`, its request counts by phase into
    /// `endpoints`.
    async fn run(&self, subject: Subject, table: &mut Table, endpoints: &mut [Vec<(Subject, RequestCounts)>; 3]) {
        let (services, n) = (self.services, self.n);
        let (lb_count, per_lb) = self.layout();
        println!("\n# {}", subject.label());
        clean::remove_nodes_and_load_balancer_services(&self.client).await;
        let fake = FakeServer::start(
            FakeConfig::default().with_rate_limit(1_000_000, 1000.0).with_action_delay(self.action_delay),
        )
        .await
        .expect("fake");
        let h = fake.handle();
        let ids: Vec<u64> =
            (0..=n).map(|i| h.seed_server(&SeedServer::new(&format!("node-{i:03}"))).expect("server")).collect();
        let register = async |i: usize| {
            NodeBuilder::new(format!("node-{i:03}"))
                .provider_id(format!("hcloud://{}", ids[i]))
                .without_uninitialized_taint()
                .ready(Ready::True)
                .register(&self.client)
                .await
                .expect("register");
        };
        futures::stream::iter(0..n).for_each_concurrent(16, &register).await;
        let config = compare::chart_config(&self.extra)
            .env(&[("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"), ("HCLOUD_LOAD_BALANCERS_TYPE", "lb21")]);
        let svcs: Api<Service> = Api::namespaced(self.client.clone(), NAMESPACE);

        // 1. Converge.
        let ccm = compare::start(subject, &self.cp, &fake.base_url(), &config);
        compare::wait_started(&ccm, &h, false).await;
        compare::wait_quiet(&h, Instant::now(), Duration::from_secs(2)).await;
        h.reset_requests();
        let started = Instant::now();
        futures::stream::iter(0..services)
            .for_each_concurrent(16, |i| {
                let svcs = svcs.clone();
                async move {
                    svcs.create(&PostParams::default(), &service(i, self.groups)).await.expect("create service");
                }
            })
            .await;
        let converged = loop {
            let list = svcs.list(&ListParams::default()).await.expect("list");
            let ingress = with_ingress(&list.items);
            let lbs = h.snapshot().load_balancers;
            let complete = lbs.iter().filter(|l| l.targets.len() == n && l.services.len() == per_lb).count();
            if ingress == services && complete == lb_count && lbs.len() == lb_count {
                break started.elapsed();
            }
            assert!(ccm.is_running(), "{} exited:\n{}", ccm.name(), ccm.logs());
            assert!(started.elapsed() < LIMIT, "{ingress}/{services} ingress, {complete} LBs:\n{}", ccm.logs());
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let last = compare::wait_quiet(&h, started, QUIET).await;
        let counts = h.request_counts();
        println!(
            "1. {services} Services converged {:.1} s after the first was created; quiet from {:.1} s on; {} requests",
            converged.as_secs_f64(),
            last.as_secs_f64(),
            counts.total
        );
        compare::dump_request_log(&h, &format!("lb_scale-{}-converge", subject.label()));
        let what = format!("converge {services} Services × {n} Nodes");
        table.requests(&format!("{what}: requests"), subject, Requests::of(&counts));
        table.set(&format!("{what}: time to converge"), Unit::Secs, subject, converged.as_secs_f64());
        endpoints[0].push((subject, counts));

        // 2. One Node added.
        h.reset_requests();
        let started = Instant::now();
        register(n).await;
        let added = loop {
            let done = h.snapshot().load_balancers.iter().filter(|l| l.targets.len() == n + 1).count();
            if done == lb_count {
                break started.elapsed();
            }
            assert!(ccm.is_running(), "{} exited:\n{}", ccm.name(), ccm.logs());
            assert!(started.elapsed() < LIMIT, "{done}/{lb_count} have the new node:\n{}", ccm.logs());
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        compare::wait_quiet(&h, started, QUIET).await;
        let counts = h.request_counts();
        println!(
            "2. one Node added: every Load Balancer has it after {:.1} s; {} requests",
            added.as_secs_f64(),
            counts.total
        );
        compare::dump_request_log(&h, &format!("lb_scale-{}-add-node", subject.label()));
        table.requests(&format!("add one Node to {lb_count} Load Balancers: requests"), subject, Requests::of(&counts));
        table.set(
            &format!("add one Node to {lb_count} Load Balancers: time"),
            Unit::Secs,
            subject,
            added.as_secs_f64(),
        );
        endpoints[1].push((subject, counts));

        // 3. Idle.
        h.reset_requests();
        let t = Instant::now();
        tokio::time::sleep(self.idle).await;
        let idle = h.request_counts();
        let secs = t.elapsed().as_secs_f64();
        let per_hour = idle.total as f64 * 3600.0 / secs;
        println!("3. idle, window {secs:.0} s: {} requests ⇒ {per_hour:.0}/hour", idle.total);
        common::print_counts("in the window", &h);
        table.set(
            &format!(
                "idle, {services} Services × {} Nodes: requests per hour (a {secs:.0} s window × {:.0})",
                n + 1,
                3600.0 / secs
            ),
            Unit::PerHour,
            subject,
            per_hour,
        );

        // 4. The process.
        assert!(ccm.is_running(), "{} died:\n{}", subject.label(), ccm.logs());
        table.process("the process after converge, add and idle", subject, compare::proc_figures(ccm.pid()));
        ccm.stop().await.expect("stop");

        // 5. Restart: every Service ensured again, nothing to change.
        h.reset_requests();
        let started = Instant::now();
        let ccm = compare::start(subject, &self.cp, &fake.base_url(), &config);
        let last = compare::wait_quiet(&h, started, QUIET).await;
        let counts = h.request_counts();
        println!("5. restart: quiet {:.1} s after the start; {} requests", last.as_secs_f64(), counts.total);
        compare::dump_request_log(&h, &format!("lb_scale-{}-restart", subject.label()));
        table.requests(&format!("restart with {services} Services in place: requests"), subject, Requests::of(&counts));
        endpoints[2].push((subject, counts));
        assert!(ccm.is_running(), "{} died:\n{}", subject.label(), ccm.logs());
        ccm.stop().await.expect("stop");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let services = env_or("BENCH_SERVICES", 100) as usize;
    let n = env_or("BENCH_NODES", 50) as usize;
    let idle = Duration::from_secs(env_or("BENCH_IDLE_SECS", 300));
    let rounds = env_or("BENCH_ROUNDS", 1).max(1);
    let action_delay = Duration::from_millis(env_or("BENCH_ACTION_DELAY_MS", 500));
    let extra = compare::extra_args();
    let subjects = compare::subjects();
    let groups = env_or("BENCH_SHARING_GROUPS", 0) as usize;
    println!(
        "lb_scale: {services} LoadBalancer Services × {n} Nodes, {groups} sharing groups, subjects {subjects:?}, {rounds} round(s), chart defaults, extra flags {extra:?}"
    );

    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let bench = Bench { cp, client, services, n, idle, action_delay, extra, groups };
    let mut table = Table::new(format!("lb_scale: {services} Services × {n} Nodes, actions {action_delay:?}"));
    let mut endpoints = [Vec::new(), Vec::new(), Vec::new()];
    for round in 1..=rounds {
        println!("\n=== round {round}/{rounds}");
        for subject in &subjects {
            bench.run(*subject, &mut table, &mut endpoints).await;
        }
    }
    compare::print_endpoints(&format!("converge {services} Services"), &endpoints[0]);
    compare::print_endpoints("add one Node", &endpoints[1]);
    compare::print_endpoints("restart", &endpoints[2]);
    table.print();
}
