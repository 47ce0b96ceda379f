//! Benchmark (not a test): hcloud-ccm and the official CCM (v1.35.0) creating routes for many
//! Nodes against a real kube-apiserver and the Hetzner fake, side by side.
//!
//! Each subject runs on a fresh fake seeded alike (N servers in the network `k8s`) and a
//! cleaned cluster, with the chart's default flags plus its networking flags
//! (`--allocate-node-cidrs=true`; the cluster CIDR is 10.240.0.0/12 instead of the chart's
//! 10.244.0.0/16, which holds only 256 /24s) and `HCLOUD_NETWORK=k8s`. Measures, per subject:
//! 1. burst: N kubelets register at once, each with a pod CIDR (as node IPAM assigns them);
//!    the time until every route exists in the network and until every Node is
//!    `NetworkUnavailable=False`, and the Hetzner requests from the CCM's start until every
//!    route existed (the Nodes' initialization included);
//! 2. a route deleted outside Kubernetes: the time until it is back and what that cost (once
//!    the CCM was quiet for 2 s, or after 60 s if it never is; given up after
//!    BENCH_RESTORE_LIMIT_SECS, then reported as not back with what was sent meanwhile);
//! 3. idle: the requests over a window (BENCH_IDLE_SECS), extrapolated to an hour;
//! 4. the peak RSS (VmHWM) and CPU seconds (utime+stime) of that process.
//!
//! The fake's route actions take BENCH_ACTION_DELAY_MS (default: the fake's 500 ms). The
//! network takes one change at a time, so the burst needs at least N × that delay; the
//! default route limit (100, the API's) is raised to N.
//!
//! Run: `cargo bench -p hcloud-ccm --bench route_scale`
//! Knobs (env): BENCH_SUBJECTS (`both`, default; `ours`; `official`), BENCH_ROUNDS (default
//! 1), BENCH_NODES (default 500), BENCH_ACTION_DELAY_MS (default 500), BENCH_IDLE_SECS
//! (default 300), BENCH_RESTORE_LIMIT_SECS (default 900), BENCH_CCM_ARGS (extra flags for
//! both), BENCH_REQUEST_LOG_DIR.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hcloud_fake::control::{RequestCounts, SeedNetwork, SeedServer};
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use test_harness::{ControlPlane, NodeBuilder, Ready};

use common::compare::{self, Requests, Subject, Table, Unit};
use common::{clean, env_or};

/// The cluster CIDR: room for 4096 /24 pod CIDRs.
const CLUSTER_CIDR: &str = "10.240.0.0/12";
/// Longest a phase may take.
const LIMIT: Duration = Duration::from_secs(3600);

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

struct Bench {
    cp: ControlPlane,
    client: kube::Client,
    nodes: Api<Node>,
    n: usize,
    action_delay: Duration,
    idle: Duration,
    restore_limit: Duration,
    extra: Vec<String>,
}

impl Bench {
    async fn run(&self, subject: Subject, table: &mut Table, endpoints: &mut [Vec<(Subject, RequestCounts)>; 2]) {
        let n = self.n;
        println!("\n# {}", subject.label());
        clean::remove_nodes_and_load_balancer_services(&self.client).await;
        let fake = FakeServer::start(
            FakeConfig::default().with_rate_limit(1_000_000, 1000.0).with_action_delay(self.action_delay),
        )
        .await
        .expect("fake");
        let h = fake.handle();
        h.set_route_limit(n.max(100));
        let net =
            h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central")).expect("net");
        for i in 0..n {
            h.seed_server(&SeedServer::new(&format!("node-{i:04}")).network(net)).expect("server");
        }
        let mut config = compare::chart_config(&self.extra).env(&[("HCLOUD_NETWORK", "k8s")]);
        config.args.extend(["--allocate-node-cidrs=true".to_owned(), format!("--cluster-cidr={CLUSTER_CIDR}")]);

        // 1. Burst.
        let ccm = compare::start(subject, &self.cp, &fake.base_url(), &config);
        compare::wait_started(&ccm, &h, true).await;
        let wanted: BTreeSet<String> = (0..n).map(pod_cidr).collect();
        let started = Instant::now();
        futures::stream::iter(0..n)
            .for_each_concurrent(32, |i| {
                let client = self.client.clone();
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
        let all_routes = loop {
            let have = routes_to_pods(&h, net);
            if wanted.is_subset(&have) {
                break started.elapsed();
            }
            assert!(ccm.is_running(), "{} exited:\n{}", ccm.name(), ccm.logs());
            assert!(started.elapsed() < LIMIT, "only {}/{n} routes:\n{}", have.len(), ccm.logs());
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let counts = h.request_counts();
        let all_routed = loop {
            let done = routed_count(&self.nodes).await;
            if done == n {
                break started.elapsed();
            }
            assert!(started.elapsed() < LIMIT, "only {done}/{n} nodes routed");
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        println!(
            "1. every route exists {:.1} s after the first registration (floor {n} × {:?} = {:.1} s), every Node NetworkUnavailable=False after {:.1} s; {} requests",
            all_routes.as_secs_f64(),
            self.action_delay,
            (self.action_delay * n as u32).as_secs_f64(),
            all_routed.as_secs_f64(),
            counts.total
        );
        compare::dump_request_log(&h, &format!("route_scale-{}-burst", subject.label()));
        let what = format!("{n} Nodes with pod CIDRs register at once");
        table.requests(&format!("{what}: requests until every route exists"), subject, Requests::of(&counts));
        table.set(&format!("{what}: time until every route exists"), Unit::Secs, subject, all_routes.as_secs_f64());
        table.set(
            &format!("{what}: time until every Node is NetworkUnavailable=False"),
            Unit::Secs,
            subject,
            all_routed.as_secs_f64(),
        );
        endpoints[0].push((subject, counts));

        // 2. A route deleted outside Kubernetes. A CCM that never goes quiet for 2 s is told
        //    apart from one that does not restore the route: both are reported, neither hangs.
        h.reset_requests();
        let settle = Instant::now();
        if compare::wait_quiet_within(&h, settle, Duration::from_secs(2), Duration::from_secs(60)).await.is_none() {
            println!("2. never quiet for 2 s within 60 s after the burst; deleting the route anyway");
            common::print_counts("in those 60 s", &h);
        }
        h.reset_requests();
        let deleted = Instant::now();
        let victim = pod_cidr(n / 2);
        h.remove_route(net, &victim).expect("out-of-band deletion");
        let mut report = deleted;
        let restored = loop {
            if routes_to_pods(&h, net).contains(&victim) {
                break Some(deleted.elapsed());
            }
            assert!(ccm.is_running(), "{} exited:\n{}", ccm.name(), ccm.logs());
            if deleted.elapsed() >= self.restore_limit {
                break None;
            }
            if report.elapsed() >= Duration::from_secs(60) {
                report = Instant::now();
                println!("   not back after {:.0} s", deleted.elapsed().as_secs_f64());
                common::print_counts("since the deletion", &h);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let counts = h.request_counts();
        let limit = self.restore_limit.as_secs_f64();
        match restored {
            Some(t) => {
                println!(
                    "2. a route deleted outside Kubernetes is back after {:.1} s; {} requests",
                    t.as_secs_f64(),
                    counts.total
                );
                table.set(
                    "a route deleted outside Kubernetes: time until it is back",
                    Unit::Secs,
                    subject,
                    t.as_secs_f64(),
                );
            }
            None => {
                println!(
                    "2. a route deleted outside Kubernetes is NOT back after {limit:.0} s (BENCH_RESTORE_LIMIT_SECS); {} requests",
                    counts.total
                );
                common::print_counts("since the deletion", &h);
            }
        }
        table.requests(
            &format!("a route deleted outside Kubernetes: requests until it is back (at most {limit:.0} s)"),
            subject,
            Requests::of(&counts),
        );
        endpoints[1].push((subject, counts));

        // 3. Idle, from when the CCM went quiet (the restored route's action is still being
        //    confirmed when the route shows up).
        compare::wait_quiet_within(&h, Instant::now(), Duration::from_secs(2), Duration::from_secs(60)).await;
        h.reset_requests();
        let t = Instant::now();
        tokio::time::sleep(self.idle).await;
        let idle = h.request_counts();
        let secs = t.elapsed().as_secs_f64();
        let per_hour = idle.total as f64 * 3600.0 / secs;
        println!("3. idle, window {secs:.0} s: {} requests ⇒ {per_hour:.0}/hour", idle.total);
        common::print_counts("in the window", &h);
        table.set(
            &format!("idle, {n} Nodes with routes: requests per hour (a {secs:.0} s window × {:.0})", 3600.0 / secs),
            Unit::PerHour,
            subject,
            per_hour,
        );

        // 4. The process.
        assert!(ccm.is_running(), "{} died:\n{}", subject.label(), ccm.logs());
        table.process("the process at the end", subject, compare::proc_figures(ccm.pid()));
        ccm.stop().await.expect("stop");
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = env_or("BENCH_NODES", 500) as usize;
    let action_delay = Duration::from_millis(env_or("BENCH_ACTION_DELAY_MS", 500));
    let idle = Duration::from_secs(env_or("BENCH_IDLE_SECS", 300));
    let restore_limit = Duration::from_secs(env_or("BENCH_RESTORE_LIMIT_SECS", 900));
    let rounds = env_or("BENCH_ROUNDS", 1).max(1);
    let extra = compare::extra_args();
    let subjects = compare::subjects();
    println!(
        "route_scale: {n} Nodes, route actions take {action_delay:?}, subjects {subjects:?}, {rounds} round(s), extra flags {extra:?}"
    );

    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let bench = Bench { cp, client, nodes, n, action_delay, idle, restore_limit, extra };
    let mut table = Table::new(format!("route_scale: {n} Nodes, route actions {action_delay:?}"));
    let mut endpoints = [Vec::new(), Vec::new()];
    for round in 1..=rounds {
        println!("\n=== round {round}/{rounds}");
        for subject in &subjects {
            bench.run(*subject, &mut table, &mut endpoints).await;
        }
    }
    compare::print_endpoints(&format!("{n} Nodes register: until every route exists"), &endpoints[0]);
    compare::print_endpoints("a route deleted outside Kubernetes", &endpoints[1]);
    table.print();
}
