//! Benchmark (not a test): an hour of churn on a real kube-apiserver and the Hetzner fake,
//! through two `hcloud-ccm` replicas with leader election.
//!
//! Churn, one operation every SOAK_STEP_SECS, chosen at random (SOAK_SEED) around the target
//! sizes: Nodes join (a server seeded in the network, then a kubelet-like Node with a pod CIDR)
//! and leave (the server deleted and the Node turning `Ready=Unknown`, for the CCM to delete;
//! or the Node deleted first, as a drain does, then its server); LoadBalancer Services are
//! created, their ports and annotations (`algorithm-type`, `health-check-interval`) changed, and
//! deleted. Meanwhile SOAK_FAULT_PERCENT of the Hetzner requests get a fault, rotating through
//! every mode the fake knows (JSON 5xx, HTML 5xx, 429, client timeouts, connection resets
//! before and in the middle of the answer, conflict, locked, a change applied whose answer is
//! lost, failed actions), and every SOAK_HANDOVER_SECS the leader is stopped and a new replica
//! started right after it exits. The leader releases the lease on SIGTERM, and whichever asks
//! first takes it: the waiting standby (it retries every 2 s) or the new replica (it asks at
//! start-up). The fake's rate limit is the API's (3600 per hour, a full bucket at the start).
//!
//! Reports: RSS, peak RSS, open file descriptors and threads of each replica from `/proc`
//! (tokio tasks are not exposed by the CCM's metrics), Hetzner requests per hour by endpoint
//! and replica, the faults that hit; and checks, after the churn stops and the faults are
//! cleared, that every Node, Load Balancer and route is what it should be, and — watched all
//! along — that no Node whose server lives and no Load Balancer of a live Service was deleted.
//!
//! Run: `nice -n 5 cargo bench -p hcloud-ccm --bench soak > soak.log 2>&1`
//! Knobs (env): SOAK_MINUTES (default 60), SOAK_HANDOVER_SECS (600), SOAK_STEP_SECS (8),
//! SOAK_NODES (12), SOAK_SERVICES (12), SOAK_FAULT_PERCENT (3), SOAK_SETTLE_SECS (420: longer
//! than the 5 min Load Balancer cache and the 4 min route resync), SOAK_WARM_SECS (120, after a
//! replica takes over), SOAK_SEED (1), SOAK_LOG_DIR (replica logs; default a temp dir).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

mod chaos;
mod churn;
#[path = "../common/mod.rs"]
mod common;
mod replicas;
mod world;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hcloud_fake::control::SeedNetwork;
use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams};

use common::env_or;
use replicas::{Launch, Replica};
use world::{LABEL_SERVICE_UID, World};

pub type Shared = Arc<Mutex<World>>;

/// Watches every second for deletions that must not happen: a Node the churn did not make
/// leave, a Load Balancer whose Service lives.
async fn monitor(h: FakeHandle, nodes: Api<Node>, world: Shared, stop: Arc<AtomicBool>) {
    let mut seen_nodes: BTreeSet<String> = BTreeSet::new();
    let mut seen_lbs: BTreeMap<u64, Option<String>> = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok(list) = nodes.list(&ListParams::default()).await {
            let now: BTreeSet<String> = list.items.iter().filter_map(|n| n.metadata.name.clone()).collect();
            let mut w = world.lock().unwrap();
            for gone in seen_nodes.difference(&now) {
                if w.nodes_server_gone.contains_key(gone) {
                    w.ccm_node_deletions += 1;
                } else if !w.nodes_drained.contains(gone) {
                    let server = w.nodes.get(gone).map(|n| n.server);
                    let alive = server.is_some_and(|id| h.server(id).is_some());
                    w.wrong.push(format!("Node {gone} was deleted while its server {server:?} exists: {alive}"));
                }
            }
            seen_nodes = now;
        }
        let lbs: BTreeMap<u64, Option<String>> = h
            .snapshot()
            .load_balancers
            .into_iter()
            .map(|lb| (lb.id, lb.labels.get(LABEL_SERVICE_UID).cloned()))
            .collect();
        let mut w = world.lock().unwrap();
        for (id, uid) in &seen_lbs {
            if lbs.contains_key(id) {
                continue;
            }
            match uid {
                Some(uid) if w.deleted_uids.contains(uid) => w.lb_deletions += 1,
                _ => {
                    let live = w.services.iter().find(|(_, s)| Some(&s.uid) == uid.as_ref()).map(|(n, _)| n.clone());
                    w.wrong.push(format!("Load Balancer {id} (uid {uid:?}, live Service {live:?}) was deleted"));
                }
            }
        }
        seen_lbs = lbs;
    }
}

fn leader(replicas: &[Replica]) -> Option<usize> {
    replicas.iter().position(Replica::is_leader)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let minutes = env_or("SOAK_MINUTES", 60);
    let handover = Duration::from_secs(env_or("SOAK_HANDOVER_SECS", 600));
    let step = Duration::from_secs(env_or("SOAK_STEP_SECS", 8));
    let target_nodes = env_or("SOAK_NODES", 12) as usize;
    let target_services = env_or("SOAK_SERVICES", 12) as usize;
    let percent = env_or("SOAK_FAULT_PERCENT", 3) as f64;
    let settle = Duration::from_secs(env_or("SOAK_SETTLE_SECS", 420));
    let warm = Duration::from_secs(env_or("SOAK_WARM_SECS", 120));
    let seed = env_or("SOAK_SEED", 1);
    let log_dir = std::env::var("SOAK_LOG_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir().join(format!("hcloud-ccm-soak-{}", std::process::id())));
    std::fs::create_dir_all(&log_dir).expect("log dir");
    println!(
        "soak: {minutes} min of churn (one op every {}s around {target_nodes} nodes / {target_services} Services), \
         {percent}% faulted Hetzner requests, a handover every {}s, seed {seed}; replica logs in {}",
        step.as_secs(),
        handover.as_secs(),
        log_dir.display()
    );

    let t0 = Instant::now();
    let cp = test_harness::ControlPlane::start().await.expect("control plane");
    println!("Kubernetes {}", cp.kubernetes_version());
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let h = fake.handle();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central")).expect("net");

    let world: Shared = Arc::default();
    let mut churn =
        churn::Churn::new(client.clone(), h.clone(), net, world.clone(), seed, target_nodes, target_services);
    for _ in 0..target_nodes {
        churn.join_node().await;
    }
    let launch = Launch {
        kubeconfig: format!("--kubeconfig={}", cp.ccm_kubeconfig().display()),
        endpoint: fake.base_url(),
        cluster_cidr: "--cluster-cidr=10.240.0.0/12".to_owned(),
        log_dir: log_dir.clone(),
    };
    let mut replicas = vec![Replica::start(&launch, 0, t0)];
    while leader(&replicas).is_none() {
        assert!(t0.elapsed() < Duration::from_secs(120), "no leader:\n{}", replicas[0].proc.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    replicas.push(Replica::start(&launch, 1, t0));
    for _ in 0..target_services / 2 {
        churn.create_service().await;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let mon = tokio::spawn(monitor(h.clone(), nodes.clone(), world.clone(), stop.clone()));
    let stop_chaos = Arc::new(AtomicBool::new(false));
    let chaos = tokio::spawn(chaos::run(h.clone(), percent, stop_chaos.clone()));
    let requests_at_start = h.request_counts().total;
    let churn_start = Instant::now();
    let deadline = churn_start + Duration::from_secs(minutes * 60);
    let mut next_handover = churn_start + handover;
    let mut next_sample = Instant::now();
    let mut next_step = Instant::now();
    let mut handovers: Vec<f64> = Vec::new();
    let stamp = |t0: Instant| format!("[{:>6.0}s]", t0.elapsed().as_secs_f64());
    while Instant::now() < deadline {
        if Instant::now() >= next_sample {
            for r in &mut replicas {
                r.sample(t0, &launch);
            }
            let running = replicas.iter().filter(|r| r.running()).count();
            for _ in running..2 {
                let i = replicas.len();
                println!("{} starting replica-{i:02} to keep two replicas", stamp(t0));
                replicas.push(Replica::start(&launch, i, t0));
            }
            let (live_nodes, live_services) = {
                let w = world.lock().unwrap();
                (w.nodes.len(), w.services.len())
            };
            let rss: Vec<String> = replicas
                .iter()
                .filter(|r| r.running())
                .filter_map(|r| r.samples.last().map(|s| (r, s)))
                .map(|(r, s)| {
                    format!(
                        "{}{} {:.1} MiB {} fds {} thr",
                        r.name,
                        if s.leader { "*" } else { "" },
                        s.rss_kib as f64 / 1024.0,
                        s.fds,
                        s.threads
                    )
                })
                .collect();
            println!(
                "{} {} nodes, {} Services, {} Hetzner requests, {} faulted; {}",
                stamp(t0),
                live_nodes,
                live_services,
                h.request_counts().total,
                h.request_log().iter().filter(|r| r.fault.is_some()).count(),
                rss.join(", ")
            );
            next_sample = Instant::now() + Duration::from_secs(30);
        }
        if Instant::now() >= next_handover {
            next_handover += handover;
            match leader(&replicas) {
                None => println!("{} handover skipped: no leader", stamp(t0)),
                Some(i) => {
                    let t = Instant::now();
                    let name = replicas[i].name.clone();
                    replicas[i].stop(t0, &launch).await;
                    let n = replicas.len();
                    replicas.push(Replica::start(&launch, n, t0));
                    while leader(&replicas).is_none() && t.elapsed() < Duration::from_secs(120) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    let took = t.elapsed().as_secs_f64();
                    let new = leader(&replicas).map(|j| {
                        replicas[j].leader_since.get_or_insert(t0.elapsed());
                        replicas[j].name.clone()
                    });
                    println!("{} handover: stopped leader {name}, new leader {new:?} after {took:.1} s", stamp(t0));
                    handovers.push(took);
                }
            }
        }
        if Instant::now() >= next_step {
            churn.step().await;
            next_step += step;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let churn_secs = churn_start.elapsed().as_secs_f64();
    let requests_churn = h.request_counts().total - requests_at_start;
    stop_chaos.store(true, Ordering::Relaxed);
    let armed = chaos.await.expect("chaos");
    println!("{} churn over; faults cleared; waiting up to {} s for convergence", stamp(t0), settle.as_secs());

    let settle_start = Instant::now();
    let problems = loop {
        let expected = world.lock().unwrap().clone();
        let problems = world::check(&expected, &h, &nodes, &svcs, net).await;
        if problems.is_empty() || settle_start.elapsed() >= settle {
            break problems;
        }
        for r in &mut replicas {
            r.sample(t0, &launch);
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    let converged = settle_start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    mon.await.expect("monitor");
    for r in &mut replicas {
        r.sample(t0, &launch);
    }

    // The report.
    let counts = h.request_counts();
    let log = h.request_log();
    println!("\n== soak report ({minutes} min of churn, Kubernetes {}) ==", cp.kubernetes_version());
    {
        let w = world.lock().unwrap();
        println!("churn operations: {:?}", w.ops);
        println!(
            "observed: {} Nodes deleted by the CCM (server gone), {} Load Balancers deleted with their Service",
            w.ccm_node_deletions, w.lb_deletions
        );
        println!("end state: {} Nodes, {} Services", w.nodes.len(), w.services.len());
    }
    common::summary(
        "leader handover (SIGTERM → another replica leads)",
        if handovers.is_empty() { vec![0.0] } else { handovers },
    );
    println!(
        "Hetzner requests during the churn: {requests_churn} in {:.1} min = {:.0} per hour; {} in all (incl. settle)",
        churn_secs / 60.0,
        requests_churn as f64 * 3600.0 / churn_secs,
        counts.total
    );
    for (endpoint, n) in &counts.by_endpoint {
        println!("  {n:>7}  {endpoint}");
    }
    if log.len() as u64 == counts.total {
        let mut hit: BTreeMap<String, u64> = BTreeMap::new();
        for r in &log {
            if let Some(f) = &r.fault {
                *hit.entry(f.clone()).or_insert(0) += 1;
            }
        }
        let organic_429 = log.iter().filter(|r| r.status == 429 && r.fault.is_none()).count();
        println!(
            "faults that hit ({} requests = {:.1}%): {hit:?}",
            hit.values().sum::<u64>(),
            hit.values().sum::<u64>() as f64 * 100.0 / counts.total as f64
        );
        println!("armed by mode: {armed:?}; rate-limit 429s (not injected): {organic_429}");
        // Errors the fake itself answered (not injected): what the CCM asked for in vain.
        let mut refused: BTreeMap<String, u64> = BTreeMap::new();
        for r in log.iter().filter(|r| r.fault.is_none() && r.status >= 400) {
            let code = r.error_code.as_deref().unwrap_or("-");
            *refused.entry(format!("{} → {} {code}", r.endpoint, r.status)).or_insert(0) += 1;
        }
        println!("errors answered by the fake itself (not injected):");
        for (what, n) in &refused {
            println!("  {n:>7}  {what}");
        }
        for r in &replicas {
            let fp = hcloud_fake::token_fingerprint(&r.token);
            let mine = log.iter().filter(|x| x.token_fingerprint.as_deref() == Some(fp.as_str())).count();
            println!("  {}: {mine} Hetzner requests", r.name);
        }
    } else {
        println!("armed by mode: {armed:?} (the fake's request log overflowed; no per-fault tallies)");
    }
    println!("resources (/proc; warm = the first sample {} s after taking over):", warm.as_secs());
    replicas::print_table(&replicas, warm);

    for r in &mut replicas {
        r.stop(t0, &launch).await;
    }
    if problems.is_empty() {
        println!(
            "\nCHECK PASSED: every Node, Load Balancer and route as expected ({converged:.0} s after the churn); nothing wrongly deleted"
        );
    } else {
        println!("\nCHECK FAILED after {converged:.0} s of settling ({} problems):", problems.len());
        for p in &problems {
            println!("  - {p}");
        }
    }
    drop(replicas);
    drop(fake);
    drop(cp);
    if !problems.is_empty() {
        std::process::exit(1);
    }
}
