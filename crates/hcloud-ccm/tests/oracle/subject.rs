//! The two CCMs under comparison and how each is started: the same flags and environment for
//! both (the point of a drop-in replacement), a token of its own each (so the fake's request
//! log tells them apart), listeners on free loopback ports.

use std::path::Path;

use test_harness::oracle::OfficialCcm;
use test_harness::{ChildProcess, ControlPlane};

/// One of the two CCMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    /// Hetzner's official Go hcloud-cloud-controller-manager v1.35.0.
    Official,
    /// This repository's `hcloud-ccm`.
    Ours,
}

impl Subject {
    /// Both, the official CCM first.
    pub const BOTH: [Subject; 2] = [Subject::Official, Subject::Ours];

    /// A short name for logs and reports.
    pub fn label(self) -> &'static str {
        match self {
            Subject::Official => "official",
            Subject::Ours => "hcloud-ccm",
        }
    }

    /// The other one.
    pub fn other(self) -> Subject {
        match self {
            Subject::Official => Subject::Ours,
            Subject::Ours => Subject::Official,
        }
    }

    /// Its Hetzner API token (64 characters, like real tokens; the fake accepts any).
    pub fn token(self) -> &'static str {
        match self {
            Subject::Official => "officialccm00000000000000000000000000000000000000000000000000000",
            Subject::Ours => "hcloudccm000000000000000000000000000000000000000000000000000000x",
        }
    }
}

/// What a scenario configures, given to both CCMs alike.
#[derive(Debug, Clone)]
pub struct Config {
    /// Environment (`HCLOUD_*`), besides the token, the endpoint and the metrics address.
    pub env: Vec<(String, String)>,
    /// Flags after the common ones.
    pub args: Vec<String>,
    /// `Some(lease)`: leader election on that Lease in `kube-system` with short timings;
    /// `None`: `--leader-elect=false`.
    pub lease: Option<String>,
    /// `true` (the default): `--node-monitor-period=2s` (lifecycle scenarios settle quickly)
    /// and `--v=2`; `false`: upstream's defaults for both, as the chart runs them (benchmarks).
    pub test_timings: bool,
    /// hcloud-ccm's kubeconfig instead of the control plane's CCM identity (e.g. an audited
    /// ServiceAccount's); the official CCM always reads as an admin.
    pub kubeconfig: Option<std::path::PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config { env: Vec::new(), args: Vec::new(), lease: None, test_timings: true, kubeconfig: None }
    }
}

impl Config {
    /// With `HCLOUD_*` variables.
    pub fn env(mut self, pairs: &[(&str, &str)]) -> Self {
        self.env.extend(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        self
    }

    /// With flags.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// With upstream's node monitor period (5 s) and log verbosity, as the chart runs them.
    pub fn chart_timings(mut self) -> Self {
        self.test_timings = false;
        self
    }

    /// hcloud-ccm with the kubeconfig at `path`.
    pub fn kubeconfig(mut self, path: &Path) -> Self {
        self.kubeconfig = Some(path.to_owned());
        self
    }

    /// With leader election on `lease`.
    pub fn lease(mut self, lease: &str) -> Self {
        self.lease = Some(lease.to_owned());
        self
    }
}

/// The official chart's arguments (`args:` in its values) plus what the chart adds with
/// `networking.enabled` (the route controller): what users run today.
pub const CHART_ARGS: &[&str] = &[
    "--route-reconciliation-period=30s",
    "--webhook-secure-port=0",
    "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
];

/// The chart's networking arguments for `clusterCIDR` (its default `10.244.0.0/16`).
pub const CHART_NETWORKING_ARGS: &[&str] = &["--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16"];

/// A TCP port on 127.0.0.1 that was free when we looked.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

/// Starts `subject` against the control plane and the fake at `endpoint`.
///
/// Both get `--cloud-provider=hcloud --allow-untagged-cloud`, the node monitor at 2 s (so
/// lifecycle scenarios settle quickly; not with [`Config::chart_timings`]), secure port and
/// metrics on free loopback ports, and the scenario's `config`. The official CCM reads the cluster as an admin (its RBAC is not
/// under test here); hcloud-ccm as the RBAC-restricted identity its chart installs.
pub fn spawn(subject: Subject, cp: &ControlPlane, endpoint: &str, config: &Config, name: &str) -> ChildProcess {
    let kubeconfig = match subject {
        Subject::Official => cp.admin_kubeconfig(),
        Subject::Ours => config.kubeconfig.as_deref().unwrap_or(cp.ccm_kubeconfig()),
    };
    let mut args: Vec<String> = vec![
        "--cloud-provider=hcloud".into(),
        "--allow-untagged-cloud".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={}", free_port()),
    ];
    if config.test_timings {
        args.extend(["--node-monitor-period=2s".into(), "--v=2".into()]);
    }
    match &config.lease {
        None => args.push("--leader-elect=false".into()),
        Some(lease) => args.extend([
            "--leader-elect=true".into(),
            "--leader-elect-lease-duration=4s".into(),
            "--leader-elect-renew-deadline=3s".into(),
            "--leader-elect-retry-period=1s".into(),
            format!("--leader-elect-resource-name={lease}"),
        ]),
    }
    args.extend(config.args.iter().cloned());
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut env: Vec<(String, String)> = vec![
        ("HCLOUD_TOKEN".into(), subject.token().into()),
        ("HCLOUD_ENDPOINT".into(), endpoint.into()),
        ("HCLOUD_METRICS_ADDRESS".into(), metrics),
    ];
    if subject == Subject::Ours {
        env.push(("RUST_LOG".into(), String::new()));
    }
    env.extend(config.env.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    match subject {
        Subject::Official => OfficialCcm::spawn(&args, &env, name).unwrap_or_else(|e| {
            panic!("{e}. The differential suite needs the official CCM and does not skip without it.")
        }),
        Subject::Ours => ChildProcess::spawn(Path::new(env!("CARGO_BIN_EXE_hcloud-ccm")), &args, &env, name)
            .unwrap_or_else(|e| panic!("hcloud-ccm spawns: {e}")),
    }
}
