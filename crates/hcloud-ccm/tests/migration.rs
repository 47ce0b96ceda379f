//! Migration without churn, both ways: the test behind the first sentence of
//! `docs/migration.md`.
//!
//! A cluster (a private network, Nodes initialized by the CCM, a LoadBalancer Service per
//! annotation family of the official CCM, routes with the chart's networking arguments) is
//! converged under one CCM, which is then stopped; the other starts on the same Lease and syncs
//! everything (every Service ensured again, every Node and route seen). Nothing may change in
//! the cluster or the fake. hcloud-ccm must send no mutating Hetzner request; the official CCM
//! sends what it sends when it restarts after itself (an `update_service` per port and a create
//! of every managed certificate, refused as existing; listed in docs/migration.md), nothing
//! more. Then the first one takes over again: the same. Run once from the official CCM (v1.35.0,
//! built by `scripts/provision-oracles`) and once from hcloud-ccm.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

use crate::oracle;

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::ListParams;
use oracle::cluster::{self, Case, FIXED_PRIVATE_IP};
use oracle::snapshot::differences;
use oracle::subject::{CHART_ARGS, CHART_NETWORKING_ARGS, Config, Subject};
use oracle::world::{CONVERGE, World, tail};
use test_harness::{ChildProcess, wait_until};

/// The Lease both CCMs elect their leader on (leader election on, as in production).
const LEASE: &str = "differential-migration";

/// How many times each Service was ensured (its `EnsuredLoadBalancer` events' count).
async fn ensured(world: &World, cases: &[Case]) -> BTreeMap<&'static str, i32> {
    let mut out = BTreeMap::new();
    for c in cases {
        let n = test_harness::events_for(&world.client, "Service", c.name)
            .await
            .map(|events| {
                events
                    .iter()
                    .filter(|e| e.namespace == world.namespace && e.reason == "EnsuredLoadBalancer")
                    .map(|e| e.count)
                    .sum()
            })
            .unwrap_or(0);
        out.insert(c.name, n);
    }
    out
}

fn routes(world: &World) -> usize {
    world.h().snapshot().networks.iter().map(|n| n.routes.len()).sum()
}

fn config() -> Config {
    Config::default().env(&[("HCLOUD_NETWORK", "k8s")]).args(CHART_ARGS).args(CHART_NETWORKING_ARGS).lease(LEASE)
}

/// What the official CCM sends whenever it starts, even on a cluster it converged itself and
/// nothing changed (docs/migration.md lists it): an `update_service` for every port of every Load
/// Balancer, and a create of every managed certificate (answered `uniqueness_error`: it exists).
const OFFICIAL_START_NOISE: &[&str] = &["POST /v1/load_balancers/{id}/actions/update_service", "POST /v1/certificates"];

/// Mutating requests by endpoint.
type Mutations = BTreeMap<String, usize>;

/// Mutating requests by method and path (the Load Balancer's id in it).
type MutatedPaths = BTreeMap<String, usize>;

/// Stops `from`, starts `to` on the same Lease, waits until `to` has ensured every Service again
/// and gone quiet; asserts it changed nothing (cluster and fake) and returns it with the mutating
/// requests it sent.
async fn hand_over(
    world: &World,
    from: (Subject, ChildProcess),
    to: Subject,
    cases: &[Case],
) -> (ChildProcess, Mutations, MutatedPaths) {
    let (from_subject, from_ccm) = from;
    let status = from_ccm.stop().await.expect("the old CCM stops");
    assert!(status.success() || status.code() == Some(143), "{} exited with {status}", from_subject.label());
    let before = world.snapshot(&[FIXED_PRIVATE_IP]).await;
    let ensured_before = ensured(world, cases).await;
    let requests_before = world.requests_of(to).len();
    let records_before = world.h().request_log_for_token(to.token()).len();

    let ccm = world.start(to, &config());
    let synced = wait_until(CONVERGE, "the new CCM ensured every Service again", async || {
        let now = ensured(world, cases).await;
        now.iter().all(|(name, n)| *n > ensured_before[name])
    })
    .await;
    if let Err(e) = synced {
        panic!("{e}\n--- {} log ---\n{}", to.label(), tail(&ccm.logs(), 80));
    }
    world.settle(to, &ccm, "the new CCM went quiet", async || true).await;

    let sent: Vec<String> = world.requests_of(to).into_iter().skip(requests_before).collect();
    let mut by_endpoint: BTreeMap<&str, usize> = BTreeMap::new();
    let mut mutations = Mutations::new();
    for r in &sent {
        *by_endpoint.entry(r.as_str()).or_default() += 1;
        if !r.starts_with("GET ") {
            *mutations.entry(r.clone()).or_default() += 1;
        }
    }
    let mut paths = MutatedPaths::new();
    for r in world.h().request_log_for_token(to.token()).into_iter().skip(records_before) {
        if r.method != "GET" {
            *paths.entry(format!("{} {}", r.method, r.path)).or_default() += 1;
        }
    }
    println!("{} -> {}: {} Hetzner requests: {by_endpoint:?}", from_subject.label(), to.label(), sent.len());
    let after = world.snapshot(&[FIXED_PRIVATE_IP]).await;
    let changes = differences(&before, &after);
    assert!(
        changes.is_empty(),
        "{} taking over from {} changed {} fields:\n  {}\n--- its log ---\n{}",
        to.label(),
        from_subject.label(),
        changes.len(),
        changes.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "),
        tail(&ccm.logs(), 60)
    );
    (ccm, mutations, paths)
}

/// Converges the cluster under `chain[0]`, then hands it to each next subject in turn (a
/// subject may follow itself: a restart). hcloud-ccm must never send a mutating request when it
/// takes over; the official CCM sends the same requests whoever it takes over from (what it sends
/// after itself), all of them [`OFFICIAL_START_NOISE`].
async fn handovers(chain: &[Subject]) {
    let world = World::fresh().await;
    cluster::seed(&world).await;
    let cases = cluster::annotation_families();
    let first = chain[0];
    let mut ccm = world.start(first, &config());
    cluster::create(&world, &cases).await;
    world
        .settle(
            first,
            &ccm,
            "every Node initialized, every Service its Load Balancer, every Node its route",
            async || cluster::converged(&world, &cases).await && routes(&world) == 3,
        )
        .await;
    let nodes = world.nodes.list(&ListParams::default()).await.expect("nodes").items;
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(cluster::initialized));
    assert_eq!(world.h().snapshot().load_balancers.len(), cases.len());

    let mut official_starts: Vec<(Subject, Mutations)> = Vec::new();
    for pair in chain.windows(2) {
        let (from, to) = (pair[0], pair[1]);
        let (next, mutations, paths) = hand_over(&world, (from, ccm), to, &cases).await;
        ccm = next;
        match to {
            Subject::Ours => assert!(
                mutations.is_empty(),
                "hcloud-ccm taking over from {} sent mutating requests: {mutations:?}",
                from.label()
            ),
            Subject::Official => {
                let foreign: Vec<&String> =
                    mutations.keys().filter(|e| !OFFICIAL_START_NOISE.contains(&e.as_str())).collect();
                assert!(foreign.is_empty(), "the official CCM sent more than its start-up noise: {mutations:?}");
                official_starts.push((from, paths));
            }
        }
    }
    let after_itself = official_starts.iter().find(|(from, _)| *from == Subject::Official).map(|(_, m)| m.clone());
    let after_itself = after_itself.expect("the chain restarts the official CCM once, the baseline");
    assert!(!after_itself.is_empty(), "the official CCM's start-up noise vanished: update docs/migration.md");
    // The official CCM changes the same Load Balancers after hcloud-ccm as after itself. Its
    // start-up is not deterministic: it sometimes ensures a Service twice (a node sync racing
    // the first sync), repeating that Load Balancer's `update_service` calls. So per path the
    // counts are equal or one is a whole multiple of the other; the state itself must not
    // change at all (asserted in `hand_over`).
    for (from, paths) in &official_starts {
        let label = from.label();
        assert_eq!(
            paths.keys().collect::<Vec<_>>(),
            after_itself.keys().collect::<Vec<_>>(),
            "the official CCM taking over from {label} vs from itself: other Load Balancers or requests"
        );
        for (path, n) in paths {
            let base = after_itself[path];
            assert!(
                n % base == 0 || base % n == 0,
                "the official CCM taking over from {label}: {path} {n} times, after itself {base} times"
            );
        }
    }
    cluster::delete_all(&world, *chain.last().expect("a chain"), &ccm, &cases).await;
    let _ = tokio::time::timeout(Duration::from_secs(30), ccm.stop()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_the_official_ccm_to_hcloud_ccm_and_back_without_churn() {
    use Subject::{Official, Ours};
    handovers(&[Official, Official, Ours, Official]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_hcloud_ccm_to_the_official_ccm_and_back_without_churn() {
    use Subject::{Official, Ours};
    handovers(&[Ours, Ours, Official, Official, Ours]).await;
}
