//! Command-line flags: upstream cloud-controller-manager names and defaults
//! (`k8s.io/cloud-provider` options), so the official chart's arguments work unchanged.
//! Booleans and durations use Go syntax (`--leader-elect=false`, `--node-monitor-period=5s`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};
use hcloud_provider::config::{ENV_HELP, parse_go_bool, parse_go_duration};

use crate::controllers;

fn go_bool(s: &str) -> Result<bool, String> {
    parse_go_bool(s).ok_or_else(|| format!("{s:?} is not a boolean; accepted: true, false, 1, 0, t, f"))
}

fn go_duration(s: &str) -> Result<Duration, String> {
    parse_go_duration(s).ok_or_else(|| format!("{s:?} is not a duration; use Go syntax like 5s, 1m30s, 5m0s"))
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Plain,
    /// One JSON object per line.
    Json,
}

fn env_help() -> String {
    let mut s = String::from("Environment (Hetzner settings, same names as the official CCM):\n");
    for (k, v) in ENV_HELP {
        s.push_str(&format!("  {k}\n      {v}\n"));
    }
    s.push_str(
        "\nFlags marked [compat] are accepted so the official chart's arguments work, and have no effect yet.\n\
         Logs: RUST_LOG overrides --v (e.g. RUST_LOG=hcloud_provider=debug).",
    );
    s
}

/// hcloud-ccm: the Kubernetes cloud-controller-manager for Hetzner Cloud.
#[derive(Debug, Clone, Parser)]
#[command(name = "hcloud-ccm", version, about, after_long_help = env_help(), after_help = "Run with --help for the environment variables.")]
pub struct Args {
    /// Cloud provider name; must be `hcloud`.
    #[arg(long, default_value = "")]
    pub cloud_provider: String,

    /// [compat] Cloud config file. Unused: Hetzner settings come from the environment.
    #[arg(long, default_value = "")]
    pub cloud_config: String,

    /// Path to a kubeconfig. Empty: the pod's service account (in cluster), else $KUBECONFIG or ~/.kube/config.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Kubernetes API server URL; overrides the kubeconfig's.
    #[arg(long)]
    pub master: Option<String>,

    /// Controllers to run: '*' for all, 'foo' to enable, '-foo' to disable. Names:
    /// cloud-node-controller, cloud-node-lifecycle-controller, service-lb-controller,
    /// node-route-controller (aliases cloud-node, cloud-node-lifecycle, service, route).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,

    /// Leader election. Not implemented yet: with `true` every replica acts (the node
    /// controllers' writes are conditional, so duplicates are harmless); run one replica.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = go_bool)]
    pub leader_elect: bool,

    /// [compat] Leader election lease duration.
    #[arg(long, default_value = "15s", value_parser = go_duration)]
    pub leader_elect_lease_duration: Duration,

    /// [compat] Leader election renew deadline.
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// [compat] Leader election retry period.
    #[arg(long, default_value = "2s", value_parser = go_duration)]
    pub leader_elect_retry_period: Duration,

    /// [compat] Leader election lock type; only `leases`.
    #[arg(long, default_value = "leases")]
    pub leader_elect_resource_lock: String,

    /// [compat] Leader election lease name.
    #[arg(long, default_value = "cloud-controller-manager")]
    pub leader_elect_resource_name: String,

    /// [compat] Leader election lease namespace.
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,

    /// Period of the informers' full resync (replays every cached object as an update).
    #[arg(long, default_value = "12h", value_parser = go_duration)]
    pub min_resync_period: Duration,

    /// Requests per second to the Kubernetes API, per controller client.
    #[arg(long, default_value_t = 20.0)]
    pub kube_api_qps: f64,

    /// Burst of requests to the Kubernetes API, per controller client.
    #[arg(long, default_value_t = 30)]
    pub kube_api_burst: u32,

    /// [compat] Content type for Kubernetes API requests (JSON is always used).
    #[arg(long, default_value = "application/vnd.kubernetes.protobuf")]
    pub kube_api_content_type: String,

    /// How often the node-lifecycle controller checks nodes.
    #[arg(long, default_value = "5s", value_parser = go_duration)]
    pub node_monitor_period: Duration,

    /// How often node addresses are refreshed from the cloud.
    #[arg(long, default_value = "5m", value_parser = go_duration)]
    pub node_status_update_frequency: Duration,

    /// Nodes initialized at once.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub concurrent_node_syncs: i64,

    /// Nodes whose addresses are refreshed at once (0: same as --concurrent-node-syncs).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub concurrent_node_status_updates: i64,

    /// [compat] Services synced at once (service controller not implemented yet).
    #[arg(long, default_value_t = 1)]
    pub concurrent_service_syncs: i64,

    /// Cluster name, passed to the provider for load balancers and routes.
    #[arg(long, default_value = "kubernetes")]
    pub cluster_name: String,

    /// [compat] Cluster pod CIDR(s) for routes (route controller not implemented yet).
    #[arg(long, default_value = "")]
    pub cluster_cidr: String,

    /// [compat] Allocate node CIDRs (unused by cloud controllers upstream too).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub allocate_node_cidrs: bool,

    /// [compat] CIDR allocator type.
    #[arg(long, default_value = "RangeAllocator")]
    pub cidr_allocator_type: String,

    /// Configure routes for pod CIDRs (needs route support from the provider).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = go_bool)]
    pub configure_cloud_routes: bool,

    /// [compat] Route reconciliation period.
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub route_reconciliation_period: Duration,

    /// Allow a cloud without a cluster ID. Required for Hetzner Cloud (the official chart passes it).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub allow_untagged_cloud: bool,

    /// [compat] Use per-controller service account credentials.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub use_service_account_credentials: bool,

    /// [compat] Address of the secure serving port.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: String,

    /// [compat] Secure serving port (0 disables).
    #[arg(long, default_value_t = 10258)]
    pub secure_port: u16,

    /// [compat] Webhook serving port (0 disables).
    #[arg(long, default_value_t = 10260)]
    pub webhook_secure_port: u16,

    /// [compat] Feature gates, e.g. CloudControllerManagerWatchBasedRoutesReconciliation=true.
    #[arg(long, default_value = "")]
    pub feature_gates: String,

    /// [compat] Enable profiling endpoints.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = go_bool)]
    pub profiling: bool,

    /// [compat] Delay between starting controllers.
    #[arg(long, default_value = "0s", value_parser = go_duration)]
    pub controller_start_interval: Duration,

    /// Log verbosity like klog's -v: 0-1 info, 2-4 debug, 5+ trace.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Plain)]
    pub log_format: LogFormat,
}

/// What the flags resolve to.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Resolved `--controllers` list.
    pub controllers: Vec<String>,
    /// Initialization workers.
    pub node_syncs: usize,
    /// Address refresh workers.
    pub node_status_updates: usize,
    /// Warnings to log once logging is up.
    pub warnings: Vec<String>,
}

impl Args {
    /// Checks the flags' meaning; returns every problem found.
    pub fn validate(&self) -> Result<Settings, Vec<String>> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        match self.cloud_provider.as_str() {
            "hcloud" => {}
            "" => errors.push("--cloud-provider: required; hcloud-ccm supports --cloud-provider=hcloud".to_owned()),
            other => errors.push(format!("--cloud-provider: {other:?} is not supported; hcloud-ccm supports: hcloud")),
        }
        if !self.allow_untagged_cloud {
            errors.push(
                "--allow-untagged-cloud: required: Hetzner Cloud has no cluster ID (the official chart always passes it)"
                    .to_owned(),
            );
        }
        errors.extend(validate_node_controller(self.concurrent_node_syncs, self.concurrent_node_status_updates));
        let controllers = controllers::resolve(&self.controllers).unwrap_or_else(|e| {
            errors.push(e);
            Vec::new()
        });
        if self.leader_elect_resource_lock != "leases" {
            errors.push(format!(
                "--leader-elect-resource-lock: {:?} is not supported; only leases",
                self.leader_elect_resource_lock
            ));
        }
        if !(self.kube_api_qps > 0.0 && self.kube_api_qps.is_finite()) {
            errors.push(format!("--kube-api-qps: must be a positive number, got {}", self.kube_api_qps));
        }
        if self.kube_api_burst == 0 {
            errors.push("--kube-api-burst: must be at least 1".to_owned());
        }
        for (flag, d) in [
            ("--node-monitor-period", self.node_monitor_period),
            ("--node-status-update-frequency", self.node_status_update_frequency),
            ("--min-resync-period", self.min_resync_period),
        ] {
            if d.is_zero() {
                errors.push(format!("{flag}: must be greater than 0"));
            }
        }
        if self.leader_elect {
            warnings.push(
                "--leader-elect=true: leader election is not implemented yet; every replica acts. Run a single replica \
                 (the official chart passes --leader-elect=false for one replica)"
                    .to_owned(),
            );
        }
        if !self.cloud_config.is_empty() {
            warnings.push(format!(
                "--cloud-config={:?} is ignored: hcloud-ccm reads its Hetzner settings from the environment",
                self.cloud_config
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let node_syncs = usize::try_from(self.concurrent_node_syncs).unwrap_or(1);
        let node_status_updates = match usize::try_from(self.concurrent_node_status_updates).unwrap_or(0) {
            0 => node_syncs,
            n => n,
        };
        Ok(Settings { controllers, node_syncs, node_status_updates, warnings })
    }
}

/// Upstream `NodeControllerOptions.Validate`.
pub fn validate_node_controller(concurrent_node_syncs: i64, concurrent_node_status_updates: i64) -> Vec<String> {
    let mut errors = Vec::new();
    if concurrent_node_syncs <= 0 {
        errors.push("concurrent-node-syncs must be a positive number".to_owned());
    }
    if concurrent_node_status_updates < 0 {
        errors.push("concurrent-node-status-updates cannot be a negative number".to_owned());
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<Args, clap::Error> {
        let mut argv = vec!["hcloud-ccm"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv)
    }

    /// Upstream `TestDefaultFlags` for the flags that exist here.
    #[test]
    fn test_default_flags() {
        let a = parse(&[]).expect("parses");
        assert_eq!(a.controllers, vec!["*"]);
        assert!(a.leader_elect);
        assert_eq!(a.leader_elect_lease_duration, Duration::from_secs(15));
        assert_eq!(a.leader_elect_renew_deadline, Duration::from_secs(10));
        assert_eq!(a.leader_elect_retry_period, Duration::from_secs(2));
        assert_eq!(a.leader_elect_resource_name, "cloud-controller-manager");
        assert_eq!(a.leader_elect_resource_namespace, "kube-system");
        assert_eq!(a.min_resync_period, Duration::from_secs(12 * 3600));
        assert_eq!(a.kube_api_qps, 20.0);
        assert_eq!(a.kube_api_burst, 30);
        assert_eq!(a.node_monitor_period, Duration::from_secs(5));
        assert_eq!(a.node_status_update_frequency, Duration::from_secs(300));
        assert_eq!(a.concurrent_node_syncs, 1);
        assert_eq!(a.concurrent_node_status_updates, 0);
        assert_eq!(a.cluster_name, "kubernetes");
        assert!(a.configure_cloud_routes);
        assert!(!a.allocate_node_cidrs);
        assert!(!a.allow_untagged_cloud);
        assert_eq!(a.route_reconciliation_period, Duration::from_secs(10));
        assert_eq!(a.secure_port, 10258);
    }

    #[test]
    fn the_official_charts_arguments_are_accepted() {
        let a = parse(&[
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
            "--route-reconciliation-period=30s",
            "--webhook-secure-port=0",
            "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--leader-elect=false",
        ])
        .expect("parses");
        assert!(a.allow_untagged_cloud && !a.leader_elect && a.allocate_node_cidrs);
        let s = a.validate().expect("valid");
        assert_eq!(s.controllers, vec!["*"]);
        assert_eq!((s.node_syncs, s.node_status_updates), (1, 1));
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }

    #[test]
    fn unknown_flags_and_bad_values_are_rejected_before_start() {
        let e = parse(&["--no-such-flag"]).unwrap_err().to_string();
        assert!(e.contains("--no-such-flag"), "{e}");
        let e = parse(&["--node-monitor-period=5 seconds"]).unwrap_err().to_string();
        assert!(e.contains("not a duration"), "{e}");
        let e = parse(&["--leader-elect=maybe"]).unwrap_err().to_string();
        assert!(e.contains("not a boolean"), "{e}");
        let e = parse(&["--kube-api-qps=fast"]).unwrap_err().to_string();
        assert!(e.contains("--kube-api-qps"), "{e}");
    }

    #[test]
    fn semantic_errors_are_collected() {
        let errs =
            parse(&["--cloud-provider=aws", "--concurrent-node-syncs=0", "--controllers=*,bogus", "--kube-api-qps=0"])
                .expect("parses")
                .validate()
                .unwrap_err();
        let text = errs.join("\n");
        for needle in [
            "--cloud-provider: \"aws\" is not supported",
            "--allow-untagged-cloud: required",
            "concurrent-node-syncs must be a positive number",
            "unknown controller(s) bogus",
            "--kube-api-qps: must be a positive number",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in {text}");
        }
        assert_eq!(errs.len(), 5);
    }

    #[test]
    fn status_workers_default_to_sync_workers() {
        let s = parse(&["--cloud-provider=hcloud", "--allow-untagged-cloud", "--concurrent-node-syncs=7"])
            .expect("parses")
            .validate()
            .expect("valid");
        assert_eq!((s.node_syncs, s.node_status_updates), (7, 7));
        assert_eq!(s.warnings.len(), 1, "leader election warning");
    }

    /// Upstream `TestNodeControllerValidation`.
    #[test]
    fn test_node_controller_validation() {
        let cases: [(&str, i64, i64, &[&str]); 6] = [
            ("empty options", 1, 0, &[]),
            ("concurrent-node-syncs negative value", -5, 0, &["concurrent-node-syncs must be a positive number"]),
            ("concurrent-node-syncs zero value", 0, 0, &["concurrent-node-syncs must be a positive number"]),
            ("concurrent-node-syncs positive value, concurrent-node-status-updates default 0", 5, 0, &[]),
            ("concurrent-node-syncs positive value, concurrent-node-status-updates positive value", 5, 5, &[]),
            (
                "concurrent-node-syncs positive value, concurrent-node-status-updates negative value",
                5,
                -1,
                &["concurrent-node-status-updates cannot be a negative number"],
            ),
        ];
        for (name, syncs, updates, expected) in cases {
            assert_eq!(validate_node_controller(syncs, updates), expected, "case {name:?}");
        }
    }

    #[test]
    fn help_lists_the_environment() {
        let mut cmd = <Args as clap::CommandFactory>::command();
        let help = cmd.render_long_help().to_string();
        for var in ["HCLOUD_TOKEN", "HCLOUD_NETWORK", "HCLOUD_SERVER_CACHE_MODE", "--node-monitor-period"] {
            assert!(help.contains(var), "{var} missing from --help");
        }
    }
}
