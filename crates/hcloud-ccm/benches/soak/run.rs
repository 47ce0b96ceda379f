//! One soak run: the control plane, the fake, the replicas, the churn with chaos and handovers,
//! the settling, the hold, the last check, the report and the verdict.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hcloud_fake::control::SeedNetwork;
use hcloud_fake::{FakeConfig, FakeServer};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::Api;

use super::replicas::{Launch, Replica};
use super::report::Report;
use super::{Knobs, Outcome, Shared, chaos, churn, flat, monitor, report, world};

fn leader(replicas: &[Replica]) -> Option<usize> {
    replicas.iter().position(Replica::is_leader)
}

fn stamp(t0: Instant) -> String {
    format!("[{:>6.0}s]", t0.elapsed().as_secs_f64())
}

/// Samples every running replica, and starts one when fewer than two run.
fn sample(replicas: &mut Vec<Replica>, t0: Instant, launch: &Launch) {
    for r in replicas.iter_mut() {
        r.sample(t0, launch);
    }
    let running = replicas.iter().filter(|r| r.running()).count();
    for _ in running..2 {
        let i = replicas.len();
        println!("{} starting replica-{i:02} to keep two replicas", stamp(t0));
        replicas.push(Replica::start(launch, i, t0));
    }
}

/// Runs the soak with `k`; prints the report; returns what failed.
pub async fn run(k: &Knobs) -> Outcome {
    std::fs::create_dir_all(&k.log_dir).expect("log dir");
    println!(
        "soak: {} s of churn (one op every {} s around {} nodes / {} Services), {}% faulted Hetzner requests, \
         a handover every {} s, seed {}; replica logs in {}",
        k.churn.as_secs(),
        k.step.as_secs(),
        k.nodes,
        k.services,
        k.fault_percent,
        k.handover.as_secs(),
        k.seed,
        k.log_dir.display()
    );
    println!("resource bounds after a warm-up of {} s: {}", k.warm.as_secs(), flat::BOUNDS.describe());

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
    // Watching from before the first replica starts: no deletion goes unseen.
    let stop_monitor = Arc::new(AtomicBool::new(false));
    let mon = tokio::spawn(monitor::run(h.clone(), nodes.clone(), net, world.clone(), stop_monitor.clone()));
    let mut churn = churn::Churn::new(client.clone(), h.clone(), net, world.clone(), k.seed, k.nodes, k.services);
    for _ in 0..k.nodes {
        churn.join_node().await;
    }
    let launch = Launch {
        kubeconfig: format!("--kubeconfig={}", cp.ccm_kubeconfig().display()),
        endpoint: fake.base_url(),
        cluster_cidr: "--cluster-cidr=10.240.0.0/12".to_owned(),
        log_dir: k.log_dir.clone(),
    };
    let mut replicas = vec![Replica::start(&launch, 0, t0)];
    while leader(&replicas).is_none() {
        assert!(t0.elapsed() < Duration::from_secs(120), "no leader:\n{}", replicas[0].proc.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    replicas.push(Replica::start(&launch, 1, t0));
    for _ in 0..k.services / 2 {
        churn.create_service().await;
    }

    let stop_chaos = Arc::new(AtomicBool::new(false));
    let chaos = tokio::spawn(chaos::run(h.clone(), k.fault_percent, stop_chaos.clone()));
    let requests_at_start = h.request_counts().total;
    let churn_start = Instant::now();
    let deadline = churn_start + k.churn;
    let mut next_handover = churn_start + k.handover;
    let mut next_sample = Instant::now();
    let mut next_step = Instant::now();
    let mut handovers: Vec<f64> = Vec::new();
    while Instant::now() < deadline {
        if Instant::now() >= next_sample {
            sample(&mut replicas, t0, &launch);
            report::progress(&stamp(t0), &world, &h, &replicas);
            next_sample = Instant::now() + k.sample;
        }
        if Instant::now() >= next_handover {
            next_handover += k.handover;
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
            next_step += k.step;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let churn_secs = churn_start.elapsed().as_secs_f64();
    let requests_churn = h.request_counts().total - requests_at_start;
    stop_chaos.store(true, Ordering::Relaxed);
    let armed = chaos.await.expect("chaos");
    println!("{} churn over; faults cleared; waiting up to {} s for convergence", stamp(t0), k.settle.as_secs());

    // Settling: the state is checked every 5 s until it is as expected.
    let settle_start = Instant::now();
    let mut converged = None;
    while settle_start.elapsed() < k.settle {
        let expected = world.lock().unwrap().clone();
        if world::check(&expected, &h, &nodes, &svcs, net).await.is_empty() {
            converged = Some(settle_start.elapsed());
            break;
        }
        sample(&mut replicas, t0, &launch);
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let wrong_at_convergence = world.lock().unwrap().wrong.len();
    // The hold: the monitor keeps watching after the convergence check, then looks a last
    // time; the last check follows, so nothing between them goes unjudged.
    if let Some(after) = converged {
        println!(
            "{} converged {:.0} s after the churn; holding {} s",
            stamp(t0),
            after.as_secs_f64(),
            k.hold.as_secs()
        );
        let hold_end = Instant::now() + k.hold;
        while Instant::now() < hold_end {
            sample(&mut replicas, t0, &launch);
            tokio::time::sleep(Duration::from_secs(5).min(hold_end.saturating_duration_since(Instant::now()))).await;
        }
    }
    stop_monitor.store(true, Ordering::Relaxed);
    mon.await.expect("monitor");
    let expected = world.lock().unwrap().clone();
    let state = world::check(&expected, &h, &nodes, &svcs, net).await;
    for r in &mut replicas {
        r.sample(t0, &launch);
    }

    let report = Report {
        knobs: k,
        kubernetes: cp.kubernetes_version().to_owned(),
        world: expected,
        wrong_at_convergence,
        converged,
        handovers,
        churn_secs,
        requests_churn,
        armed,
    };
    report.print(&h, &replicas);
    let parts: Vec<flat::Part> = replicas
        .iter()
        .flat_map(|r| flat::check_replica(&r.name, &r.samples, r.started, r.leader_since, k.warm, &flat::BOUNDS))
        .collect();
    report::print_flatness(&parts, k.warm);

    for r in &mut replicas {
        r.stop(t0, &launch).await;
    }
    let crashes: Vec<String> = replicas.iter().filter_map(Replica::crash).collect();
    let outcome = super::verdict(&state, &report.world.wrong, &flat::problems(&parts), &crashes);
    report::print_verdict(&outcome, &report, t0.elapsed());
    drop(replicas);
    drop(fake);
    drop(cp);
    outcome
}
