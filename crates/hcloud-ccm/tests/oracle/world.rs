//! One run's world: a control plane of the test binary's pool, for this run alone and cleaned
//! of earlier runs' Nodes and Services, a fresh namespace, and a fresh fake. Every CCM watches
//! every Node of its cluster, so a run takes a turn (`ControlPlane::exclusive`); up to the
//! pool's size of runs go at once.

use std::time::{Duration, Instant};

use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use test_harness::{ChildProcess, ControlPlane, Turn, unique_name, wait_until};

use super::snapshot::{self, Snapshot};
use super::subject::{self, Config, Subject};

/// How long a CCM must send no Hetzner request before a step counts as settled. Longer than
/// the official CCM's slowest action poll (hcloud-go backs off up to a few seconds).
pub const QUIET: Duration = Duration::from_secs(4);
/// Deadline for a step to converge. The official CCM syncs Services one at a time and polls
/// each action, so a step over a dozen Services takes minutes.
pub const CONVERGE: Duration = Duration::from_secs(420);

/// A run's world.
pub struct World {
    /// The control plane of this run's turn.
    pub cp: &'static ControlPlane,
    /// An admin client.
    pub client: kube::Client,
    /// The fake of this run.
    pub fake: FakeServer,
    /// This run's namespace (its Services live here).
    pub namespace: String,
    /// The Services of [`World::namespace`].
    pub services: Api<Service>,
    /// All Nodes.
    pub nodes: Api<Node>,
    /// What this run's snapshots have seen (UIDs and node ports of Services since deleted).
    seen: std::sync::Mutex<snapshot::Seen>,
    _turn: Turn,
}

impl World {
    /// Takes a turn on a control plane of the pool, removes every Node, LoadBalancer
    /// Service (finalizers stripped: their CCM is gone), Event and the leader-election Leases
    /// of earlier runs, creates a namespace, starts a fake (actions take 20 ms; no rate limit in
    /// the way).
    pub async fn fresh() -> World {
        let turn = ControlPlane::exclusive().await.expect("control plane starts");
        let cp = turn.control_plane();
        let client = cp.admin_client().await.expect("admin client");
        super::clean::remove_earlier_turns(&client).await;
        let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
        for l in leases.list(&ListParams::default()).await.expect("list leases").items {
            let name = l.metadata.name.unwrap_or_default();
            if name.starts_with("differential-") {
                let _ = leases.delete(&name, &DeleteParams::default()).await;
            }
        }
        let nodes: Api<Node> = Api::all(client.clone());
        let namespace = unique_name("diff");
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let mut ns = Namespace::default();
        ns.metadata.name = Some(namespace.clone());
        namespaces.create(&PostParams::default(), &ns).await.expect("namespace");
        let config = FakeConfig { log_requests: false, ..FakeConfig::default() }
            .with_action_delay(Duration::from_millis(20))
            .with_rate_limit(1_000_000, 1000.0);
        let fake = FakeServer::start(config).await.expect("fake starts");
        let services = Api::namespaced(client.clone(), &namespace);
        World { cp, client, fake, namespace, services, nodes, seen: Default::default(), _turn: turn }
    }

    /// The fake's handle.
    pub fn h(&self) -> FakeHandle {
        self.fake.handle()
    }

    /// Starts `subject` with `config`.
    pub fn start(&self, subject: Subject, config: &Config) -> ChildProcess {
        subject::spawn(subject, self.cp, &self.fake.base_url(), config, subject.label())
    }

    /// The normalised snapshot now.
    pub async fn snapshot(&self, keep_ips: &[&str]) -> Snapshot {
        let mut seen = self.seen.lock().map(|u| u.clone()).unwrap_or_default();
        let snapshot = snapshot::take(&self.client, &self.namespace, &self.h(), keep_ips, &mut seen).await;
        if let Ok(mut mine) = self.seen.lock() {
            *mine = seen;
        }
        snapshot
    }

    /// The Hetzner requests `subject` sent so far (`METHOD /v1/path-template`).
    pub fn requests_of(&self, subject: Subject) -> Vec<String> {
        self.h().request_log_for_token(subject.token()).into_iter().map(|r| r.endpoint).collect()
    }

    /// Waits until `converged` holds, then until `subject` has sent no Hetzner request for
    /// [`QUIET`]; panics with `what` and the CCM's log tail on the deadline.
    pub async fn settle(&self, subject: Subject, ccm: &ChildProcess, what: &str, converged: impl AsyncFnMut() -> bool) {
        let started = Instant::now();
        if let Err(e) = wait_until(CONVERGE, what, converged).await {
            panic!("{} did not converge: {e}\n--- its log ---\n{}", subject.label(), tail(&ccm.logs(), 80));
        }
        let mut last = (self.requests_of(subject).len(), Instant::now());
        let quiet = wait_until(CONVERGE, &format!("{} quiet after: {what}", subject.label()), async || {
            let n = self.requests_of(subject).len();
            if n != last.0 {
                last = (n, Instant::now());
            }
            last.1.elapsed() >= QUIET
        })
        .await;
        if let Err(e) = quiet {
            panic!("{e}\n--- its log ---\n{}", tail(&ccm.logs(), 80));
        }
        println!("  {} settled in {:.1}s: {what}", subject.label(), started.elapsed().as_secs_f64());
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
