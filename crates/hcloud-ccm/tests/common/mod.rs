//! Shared set-up for end-to-end tests: the real control plane of this test binary, an
//! in-process Hetzner fake, and the `hcloud-ccm` binary as a child process.
//!
//! Each test takes a control plane of the binary's pool for itself (`Env::start` takes a
//! turn, `ControlPlane::exclusive`) because every CCM watches every Node of its cluster; up to
//! the pool's size of them run at once, and each starts from a cluster without Nodes,
//! LoadBalancer Services or Events of earlier turns.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

pub mod lb;

use std::time::Duration;

use hcloud_fake::{FakeConfig, FakeServer};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use test_harness::{ChildProcess, ControlPlane, Turn};

/// A token the fake accepts (64 characters, like real tokens).
pub const TOKEN: &str = "e2etoken00000000000000000000000000000000000000000000000000000000";

/// Deadline for the CCM to react.
pub const REACT: Duration = Duration::from_secs(60);

/// One test's environment.
pub struct Env {
    pub cp: &'static ControlPlane,
    pub client: kube::Client,
    pub nodes: Api<Node>,
    pub fake: FakeServer,
    _turn: Turn,
}

impl Env {
    /// Takes a turn on a control plane of the pool, removes what earlier turns left (Nodes,
    /// LoadBalancer Services, Events), starts a fake with `config`.
    pub async fn start(config: FakeConfig) -> Env {
        let turn = ControlPlane::exclusive().await.expect("control plane starts");
        let cp = turn.control_plane();
        let client = cp.admin_client().await.expect("admin client");
        crate::oracle::clean::remove_earlier_turns(&client).await;
        let nodes: Api<Node> = Api::all(client.clone());
        let fake = FakeServer::start(config).await.expect("fake starts");
        Env { cp, client, nodes, fake, _turn: turn }
    }

    /// Starts `hcloud-ccm` against the fake and the control plane (as the CCM's
    /// RBAC-restricted identity) and waits until it has started its controllers.
    pub async fn ccm(&self, env: &[(&str, &str)], args: &[&str]) -> ChildProcess {
        let ccm = self.spawn_ccm(env, args);
        ccm.wait_for_log("hcloud-ccm started", Duration::from_secs(30)).await.unwrap_or_else(|e| {
            panic!("hcloud-ccm did not start: {e}\n--- logs ---\n{}", ccm.logs());
        });
        ccm
    }

    /// Spawns `hcloud-ccm` (one replica, `--leader-elect=false`) without waiting.
    pub fn spawn_ccm(&self, env: &[(&str, &str)], args: &[&str]) -> ChildProcess {
        let mut all_args = vec!["--leader-elect=false"];
        all_args.extend_from_slice(args);
        self.spawn_with(TOKEN, self.cp.ccm_kubeconfig(), env, &all_args, "hcloud-ccm")
    }

    /// Spawns one `hcloud-ccm` replica with leader election on Lease `lease` (short timings:
    /// lease 4 s, renew deadline 3 s, retry period 1 s), using `token` for Hetzner and
    /// `kubeconfig` for the API server.
    pub fn spawn_replica(&self, name: &str, token: &str, kubeconfig: &std::path::Path, lease: &str) -> ChildProcess {
        self.spawn_replica_with(name, token, kubeconfig, lease, &[])
    }

    /// [`Env::spawn_replica`] with extra environment.
    pub fn spawn_replica_with(
        &self,
        name: &str,
        token: &str,
        kubeconfig: &std::path::Path,
        lease: &str,
        env: &[(&str, &str)],
    ) -> ChildProcess {
        let lease = format!("--leader-elect-resource-name={lease}");
        let args = [
            "--leader-elect=true",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=1s",
            lease.as_str(),
        ];
        self.spawn_with(token, kubeconfig, env, &args, name)
    }

    /// Spawns `hcloud-ccm` with `token`, `kubeconfig`, extra `env` and `args` (after the
    /// defaults, so they win).
    pub fn spawn_with(
        &self,
        token: &str,
        kubeconfig: &std::path::Path,
        env: &[(&str, &str)],
        args: &[&str],
        name: &str,
    ) -> ChildProcess {
        spawn_hcloud_ccm(&self.fake.base_url(), token, kubeconfig, env, args, name)
    }
}

/// Spawns the `hcloud-ccm` binary against the fake at `endpoint` and the API server of
/// `kubeconfig`, with the suite's defaults (one replica's flags, loopback listeners on
/// system-picked ports, `--v=2`) followed by `env` and `args`, which win.
pub fn spawn_hcloud_ccm(
    endpoint: &str,
    token: &str,
    kubeconfig: &std::path::Path,
    env: &[(&str, &str)],
    args: &[&str],
    name: &str,
) -> ChildProcess {
    let kubeconfig = format!("--kubeconfig={}", kubeconfig.display());
    let mut all_args = vec![
        "--cloud-provider=hcloud",
        "--allow-untagged-cloud",
        kubeconfig.as_str(),
        "--node-monitor-period=1s",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        "--v=2",
    ];
    all_args.extend_from_slice(args);
    // Listeners on loopback only, on ports the system picks (tests that check them pass
    // their own --secure-port / HCLOUD_METRICS_ADDRESS, which come later and win).
    let mut all_env = vec![
        ("HCLOUD_TOKEN", token),
        ("HCLOUD_ENDPOINT", endpoint),
        ("RUST_LOG", ""),
        ("HCLOUD_METRICS_ADDRESS", "127.0.0.1:0"),
    ];
    all_env.extend_from_slice(env);
    ChildProcess::spawn(std::path::Path::new(env!("CARGO_BIN_EXE_hcloud-ccm")), &all_args, &all_env, name)
        .expect("hcloud-ccm spawns")
}

/// A TCP port on 127.0.0.1 that was free when we looked.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// The value of a label.
pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// True if the node has the uninitialized taint.
pub fn tainted(node: &Node) -> bool {
    has_taint(node, "node.cloudprovider.kubernetes.io/uninitialized")
}

/// True if the node has a taint with this key.
pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| t.iter().any(|t| t.key == key))
}

/// `(type, address)` pairs of `status.addresses`.
pub fn addresses(node: &Node) -> Vec<(String, String)> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| a.iter().map(|a| (a.type_.clone(), a.address.clone())).collect())
        .unwrap_or_default()
}

/// `(type, address)` pairs from string slices.
pub fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(t, a)| (t.to_string(), a.to_string())).collect()
}

/// The server's public IPv4 as the fake assigned it.
pub fn server_ipv4(fake: &FakeServer, id: u64) -> String {
    let s = fake.handle().server(id).expect("server exists");
    s.public_net.ipv4.expect("has ipv4").ip
}

/// `HCLOUD_METRICS_ADDRESS` on a free loopback port, for a test that scrapes `/metrics`.
pub fn metrics_address() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// The value of the sample `series` (name and labels, exactly as encoded) on the plain metrics
/// listener at `address`, once the listener answers; `None` if the series is absent.
pub async fn scrape(address: &str, series: &str) -> Option<f64> {
    let url = format!("http://{address}/metrics");
    let body = reqwest::get(&url).await.and_then(|r| r.error_for_status()).unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let text = body.text().await.expect("metrics body");
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}
