//! Command-line flags: upstream cloud-controller-manager names and defaults
//! (`k8s.io/cloud-provider` options), so an existing deployment's arguments work unchanged.
//! Booleans and durations use Go syntax (`--leader-elect=false`, `--node-monitor-period=5s`).
//! [`ManagerArgs`] is flattened into the program's own `clap` parser; [`ManagerArgs::validate`]
//! turns it into typed [`Options`](crate::Options), reporting every problem at once.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};
use cloud_controllers::route::MIN_RECONCILE_INTERVAL;
use cloud_controllers::{NodeControllerConfig, NodeLifecycleConfig, ReconcileMode};

use crate::controller_set::ControllerSet;
pub use crate::options::LogFormat;
use crate::options::{
    KubeOptions, LeaderElectionOptions, LoggingOptions, Options, RouteOptions, SecureServingOptions, ServiceOptions,
};

pub(crate) mod compat;
mod ipam;
mod serving;
pub use compat::{LoggingArgs, NoEffectArgs, VmoduleDirective, parse_vmodule};
use ipam::NodeIpam;
pub use ipam::{CLOUD_ALLOCATOR, DEFAULT_MASK_IPV6_CLOUD, NodeIpamArgs, RANGE_ALLOCATOR};
pub use serving::{AuthArgs, ServingArgs};
mod values;
pub use values::{
    FeatureGates, WATCH_BASED_ROUTES_GATE, parse_cluster_cidrs, parse_feature_gates, validate_node_controller,
    validate_node_lifecycle_controller, validate_qualified_name,
};
use values::{go_bool, go_duration};

/// The flags of upstream's cloud-controller-manager. Flags marked `[compat]` are accepted so
/// existing arguments keep working, and have no effect.
#[derive(Debug, Clone, Args)]
pub struct ManagerArgs {
    /// Cloud provider name (the provider this program implements).
    #[arg(long, default_value = "")]
    pub cloud_provider: String,

    /// [compat] Cloud config file (the provider reads its settings from the environment).
    #[arg(long, default_value = "")]
    pub cloud_config: String,

    /// Path to a kubeconfig. Empty: the pod's service account (in cluster), else $KUBECONFIG or ~/.kube/config.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Kubernetes API server URL; overrides the kubeconfig's.
    #[arg(long)]
    pub master: Option<String>,

    /// Controllers to run: '*' for all enabled by default, 'foo' to enable, '-foo' to disable.
    /// Names: cloud-node-controller, cloud-node-lifecycle-controller, service-lb-controller,
    /// node-route-controller (aliases cloud-node, cloud-node-lifecycle, service, route), and
    /// node-ipam-controller (alias nodeipam; disabled by default: '*,node-ipam-controller').
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,

    /// Leader election: only the replica holding the Lease runs controllers and talks to the
    /// cloud. Turn it off only when exactly one replica runs.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = go_bool)]
    pub leader_elect: bool,

    /// Dry run: run every controller against the cluster and the cloud and write nothing to
    /// either. Writes to the API server go out with dryRun=All (checked, not stored), the
    /// provider sends no write, there is no leader election (no Lease); each write it would
    /// make is logged ("dry run: write not made") and counted in dry_run_planned_writes_total.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub dry_run: bool,

    /// How long a standby waits after it last saw the leader renew before taking over.
    #[arg(long, default_value = "15s", value_parser = go_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps trying to renew before it gives up leadership (and exits).
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// How often the leader renews and a standby tries to acquire.
    #[arg(long, default_value = "2s", value_parser = go_duration)]
    pub leader_elect_retry_period: Duration,

    /// Leader election lock type; only `leases`.
    #[arg(long, default_value = "leases")]
    pub leader_elect_resource_lock: String,

    /// Name of the leader election Lease.
    #[arg(long, default_value = "cloud-controller-manager")]
    pub leader_elect_resource_name: String,

    /// Namespace of the leader election Lease.
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

    /// Nodes the node-lifecycle controller checks at once (upstream's default: 1; here 16, as
    /// before the flag existed, since a "server gone" answer is confirmed by a lookup per node).
    #[arg(long, default_value_t = 16, allow_negative_numbers = true)]
    pub concurrent_node_lifecycle_syncs: i64,

    /// How often node addresses are refreshed from the cloud.
    #[arg(long, default_value = "5m", value_parser = go_duration)]
    pub node_status_update_frequency: Duration,

    /// Nodes initialized at once.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub concurrent_node_syncs: i64,

    /// Nodes whose addresses are refreshed at once (0: same as --concurrent-node-syncs).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub concurrent_node_status_updates: i64,

    /// Services synced at once by the service controller.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub concurrent_service_syncs: i64,

    /// Cluster name, passed to the provider for load balancers and routes.
    #[arg(long, default_value = "kubernetes")]
    pub cluster_name: String,

    /// Manage the LoadBalancer Services of exactly this spec.loadBalancerClass (e.g.
    /// example.com/cloud-lb) instead of those without a class, so another implementation
    /// (MetalLB, Cilium LB-IPAM) can serve the class-less ones. Empty: upstream's behaviour.
    #[arg(long, default_value = "")]
    pub load_balancer_class: String,

    /// The cluster's pod network, e.g. 10.244.0.0/16; two comma-separated CIDRs (one IPv4, one
    /// IPv6) for dual-stack. Required for routes; routes outside it are never touched.
    #[arg(long, default_value = "")]
    pub cluster_cidr: String,

    /// Nodes get pod CIDRs (from kube-controller-manager's node IPAM). Routes are configured only
    /// when this and --configure-cloud-routes are both true.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub allocate_node_cidrs: bool,

    /// Configure routes for pod CIDRs (with --allocate-node-cidrs=true, and route support from
    /// the provider).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = go_bool)]
    pub configure_cloud_routes: bool,

    /// Period of the route controller's full reconcile when the watch-based mode is off
    /// (--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=false).
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub route_reconciliation_period: Duration,

    /// In the watch-based route mode (the default): reconcile routes also when none ran for this
    /// long, to repair routes changed outside Kubernetes (costs one request to the cloud).
    #[arg(long, default_value = "4m", value_parser = go_duration)]
    pub route_resync_period: Duration,

    /// Allow a cloud without a cluster ID. Required for Hetzner Cloud (the official chart passes it).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub allow_untagged_cloud: bool,

    /// [compat] Use per-controller service account credentials.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub use_service_account_credentials: bool,

    /// Address the secure port (/healthz, /readyz, /livez, /metrics) listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: String,

    /// HTTPS port for /healthz, /readyz, /livez and /metrics (0 disables).
    #[arg(long, default_value_t = 10258)]
    pub secure_port: u16,

    /// Serving certificate (PEM, may include intermediates). Without it a self-signed
    /// certificate is generated in memory.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,

    /// Private key of --tls-cert-file (PEM).
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,

    /// [compat] Directory for generated certificates (the self-signed one is kept in memory).
    #[arg(long)]
    pub cert_dir: Option<PathBuf>,

    /// [compat] Webhook serving port (0 disables).
    #[arg(long, default_value_t = 10260)]
    pub webhook_secure_port: u16,

    /// Feature gates as key=bool pairs. CloudControllerManagerWatchBasedRoutesReconciliation
    /// (default true here, as the official Hetzner chart sets it): reconcile routes on node
    /// events (plus --route-resync-period) instead of every --route-reconciliation-period.
    /// Repeatable: the occurrences merge, a later one winning for the same gate (upstream's
    /// mapStringBool).
    #[arg(long, action = ArgAction::Append)]
    pub feature_gates: Vec<String>,

    /// [compat] Profiling endpoints (there are none here; upstream's default is true).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    pub profiling: Option<bool>,

    /// [compat] Delay between starting controllers.
    #[arg(long, default_value = "0s", value_parser = go_duration)]
    pub controller_start_interval: Duration,

    /// Log verbosity like klog's -v: 0-1 info, 2-4 debug, 5+ trace.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,

    /// How log lines are written: `plain` text for people, `json` (one object per line) for
    /// log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Plain)]
    pub log_format: LogFormat,

    /// TLS, HTTP/2 and socket flags of the secure port.
    #[command(flatten)]
    pub serving: ServingArgs,

    /// Node IPAM.
    #[command(flatten)]
    pub ipam: NodeIpamArgs,

    /// Authentication and authorization of the secure port.
    #[command(flatten)]
    pub auth: AuthArgs,

    /// component-base's logging flags.
    #[command(flatten)]
    pub logging: LoggingArgs,

    /// Upstream flags without an effect here (a warning each).
    #[command(flatten)]
    pub no_effect: NoEffectArgs,
}

impl ManagerArgs {
    /// Checks the flags' meaning for a program implementing `provider`; returns every
    /// problem found.
    pub fn validate(&self, provider: &str) -> Result<Options, Vec<String>> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        match self.cloud_provider.as_str() {
            p if p == provider => {}
            "" => errors.push(format!("--cloud-provider: required; this program supports --cloud-provider={provider}")),
            other => errors.push(format!("--cloud-provider: {other:?} is not supported; supported: {provider}")),
        }
        if !self.allow_untagged_cloud {
            errors.push(format!(
                "--allow-untagged-cloud: required: the {provider} provider has no cluster ID (pass \
                 --allow-untagged-cloud, as upstream deployments of this provider do)"
            ));
        }
        errors.extend(validate_node_controller(self.concurrent_node_syncs, self.concurrent_node_status_updates));
        errors.extend(validate_node_lifecycle_controller(self.concurrent_node_lifecycle_syncs));
        if self.concurrent_service_syncs <= 0 {
            errors.push("--concurrent-service-syncs: must be a positive number".to_owned());
        }
        if let Err(e) = validate_qualified_name(&self.load_balancer_class) {
            errors.push(format!(
                "--load-balancer-class: {:?} is not a valid class: {e} (a label-style key like example.com/cloud-lb)",
                self.load_balancer_class
            ));
        }
        let controllers = ControllerSet::from_flag(&self.controllers).unwrap_or_else(|e| {
            errors.push(e);
            ControllerSet::all()
        });
        let mut leader_election = self.leader_election(&mut errors);
        if self.dry_run && leader_election.take().is_some() {
            warnings.push(
                "--dry-run: leader election is off (--leader-elect is ignored): a dry run takes no Lease and runs \
                 beside the CCM in charge"
                    .to_owned(),
            );
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
            ("--route-reconciliation-period", self.route_reconciliation_period),
            ("--route-resync-period", self.route_resync_period),
        ] {
            if d.is_zero() {
                errors.push(format!("{flag}: must be greater than 0"));
            }
        }
        let bind_address = self.bind_address.parse::<std::net::IpAddr>().unwrap_or_else(|_| {
            errors.push(format!(
                "--bind-address: {:?} is not an IP address (e.g. 0.0.0.0, ::, 127.0.0.1)",
                self.bind_address
            ));
            std::net::IpAddr::from([0, 0, 0, 0])
        });
        match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(_), None) => errors.push("--tls-private-key-file: required with --tls-cert-file".to_owned()),
            (None, Some(_)) => errors.push("--tls-cert-file: required with --tls-private-key-file".to_owned()),
            _ => {}
        }
        if !self.cloud_config.is_empty() {
            warnings.push(format!(
                "--cloud-config={:?} is ignored: the {provider} provider reads its settings from the environment",
                self.cloud_config
            ));
        }
        warnings.extend(self.compat_warnings());
        if self.cert_dir.is_some() {
            warnings.push("--cert-dir is ignored: the self-signed serving certificate is kept in memory".to_owned());
        }
        // Occurrences in order: parsing them as one list merges them as upstream's flag does.
        let gates = parse_feature_gates(&self.feature_gates.join(",")).unwrap_or_else(|e| {
            errors.push(e);
            FeatureGates::default()
        });
        warnings
            .extend(gates.unknown.iter().map(|g| format!("--feature-gates: {g} is not known here and has no effect")));
        let cluster_cidrs = parse_cluster_cidrs(&self.cluster_cidr).unwrap_or_else(|e| {
            errors.push(e);
            Vec::new()
        });
        let node_ipam = self.ipam.validate(
            controllers.contains(crate::controller_set::NODE_IPAM),
            self.allocate_node_cidrs,
            &cluster_cidrs,
            &mut errors,
            &mut warnings,
        );
        let routes = self.routes(&gates, cluster_cidrs, &node_ipam, &mut errors, &mut warnings);
        let serving = self.serving.validate(&mut errors, &mut warnings);
        let auth = self.auth.validate(&mut errors);
        let logging = self.logging_options(&mut errors, &mut warnings);
        warnings.extend(self.no_effect.warnings());
        if !errors.is_empty() {
            return Err(errors);
        }
        let node_syncs = usize::try_from(self.concurrent_node_syncs).unwrap_or(1);
        let node_status_updates = match usize::try_from(self.concurrent_node_status_updates).unwrap_or(0) {
            0 => node_syncs,
            n => n,
        };
        Ok(Options {
            controllers,
            node: NodeControllerConfig {
                workers: node_syncs,
                status_workers: node_status_updates,
                status_update_frequency: self.node_status_update_frequency,
            },
            service: ServiceOptions {
                workers: usize::try_from(self.concurrent_service_syncs).unwrap_or(1),
                load_balancer_class: Some(self.load_balancer_class.clone()).filter(|c| !c.is_empty()),
            },
            node_lifecycle: NodeLifecycleConfig {
                monitor_period: self.node_monitor_period,
                workers: usize::try_from(self.concurrent_node_lifecycle_syncs).unwrap_or(1),
            },
            min_resync_period: self.min_resync_period,
            kube: KubeOptions {
                kubeconfig: self.kubeconfig.clone(),
                master: self.master.clone(),
                qps: self.kube_api_qps,
                burst: self.kube_api_burst,
            },
            leader_election,
            dry_run: self.dry_run,
            serving: SecureServingOptions {
                bind_address,
                port: self.secure_port,
                cert_file: self.tls_cert_file.clone(),
                key_file: self.tls_private_key_file.clone(),
                tls: serving.tls,
                http2: serving.http2,
                http2_max_streams: serving.http2_max_streams,
                reuse_port: self.serving.permit_port_sharing,
                sni_certificates: serving.sni_certificates,
            },
            cluster_name: self.cluster_name.clone(),
            routes,
            node_ipam: match node_ipam {
                NodeIpam::On(config) => Some(config),
                NodeIpam::Off => None,
            },
            logging,
            auth,
            warnings,
        })
    }

    /// Warnings for the upstream flags of this struct that are accepted without effect, when
    /// given a value that would make a difference upstream.
    fn compat_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.profiling == Some(true) {
            warnings.push("--profiling has no effect: there are no /debug/pprof endpoints here".to_owned());
        }
        if self.use_service_account_credentials {
            warnings.push(
                "--use-service-account-credentials has no effect: every controller uses the manager's own credentials"
                    .to_owned(),
            );
        }
        if !self.controller_start_interval.is_zero() {
            warnings.push("--controller-start-interval has no effect: the controllers start together".to_owned());
        }
        if !matches!(self.kube_api_content_type.as_str(), "application/vnd.kubernetes.protobuf" | "application/json") {
            warnings.push(format!(
                "--kube-api-content-type={:?} has no effect: requests to the API server are JSON",
                self.kube_api_content_type
            ));
        }
        warnings
    }

    /// `--logging-format` (overriding `--log-format`), `-v` and `--vmodule`.
    fn logging_options(&self, errors: &mut Vec<String>, warnings: &mut Vec<String>) -> LoggingOptions {
        let format = match self.logging.logging_format.as_deref() {
            Some("json") => LogFormat::Json,
            Some(_) => LogFormat::Plain,
            None => self.log_format,
        };
        let vmodule = match parse_vmodule(&self.logging.vmodule.join(",")) {
            Ok((directives, notes)) => {
                warnings.extend(notes);
                directives
            }
            Err(e) => {
                errors.push(e);
                Vec::new()
            }
        };
        if self.logging.log_flush_frequency.is_zero() {
            errors.push("--log-flush-frequency: must be greater than 0".to_owned());
        }
        LoggingOptions { format, verbosity: self.verbosity, vmodule }
    }

    /// The route settings, if routes are to be configured (`--allocate-node-cidrs` and
    /// `--configure-cloud-routes`); `--cluster-cidr` is then required, unless node IPAM's
    /// cloud allocator gives IPv6-only nodes ranges that need no route.
    fn routes(
        &self,
        gates: &FeatureGates,
        cidrs: Vec<ipnet::IpNet>,
        node_ipam: &NodeIpam,
        errors: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) -> Option<RouteOptions> {
        if !(self.allocate_node_cidrs && self.configure_cloud_routes) {
            return None;
        }
        if cidrs.is_empty() && node_ipam.node_local_ipv6() {
            warnings.push(
                "node-route-controller not started: without --cluster-cidr every pod range is IPv6 from a node's own \
                 prefix and needs no route"
                    .to_owned(),
            );
            return None;
        }
        if cidrs.is_empty() {
            errors.push(
                "--cluster-cidr: required with --allocate-node-cidrs=true and --configure-cloud-routes=true: the \
                 cluster's pod network, e.g. --cluster-cidr=10.244.0.0/16 (dual-stack: one IPv4 and one IPv6 CIDR, \
                 comma-separated)"
                    .to_owned(),
            );
            return None;
        }
        let mode = if gates.watch_based_routes {
            ReconcileMode::Watch { resync: self.route_resync_period }
        } else {
            ReconcileMode::Periodic { period: self.route_reconciliation_period }
        };
        Some(RouteOptions {
            cluster_cidrs: cidrs,
            node_local_ipv6: node_ipam.node_local_ipv6(),
            mode,
            min_interval: MIN_RECONCILE_INTERVAL,
        })
    }

    /// Upstream's leader-election checks (component-base `ValidateLeaderElectionConfiguration`),
    /// naming the flags.
    fn leader_election(&self, errors: &mut Vec<String>) -> Option<LeaderElectionOptions> {
        if self.leader_elect_resource_lock != "leases" {
            errors.push(format!(
                "--leader-elect-resource-lock: {:?} is not supported; only leases",
                self.leader_elect_resource_lock
            ));
        }
        if !self.leader_elect {
            return None;
        }
        let (lease, renew, retry) =
            (self.leader_elect_lease_duration, self.leader_elect_renew_deadline, self.leader_elect_retry_period);
        for (flag, d) in [
            ("--leader-elect-lease-duration", lease),
            ("--leader-elect-renew-deadline", renew),
            ("--leader-elect-retry-period", retry),
        ] {
            if d.is_zero() {
                errors.push(format!("{flag}: must be greater than zero"));
            }
        }
        if lease.subsec_nanos() != 0 {
            errors.push(format!(
                "--leader-elect-lease-duration ({lease:?}) must be a whole number of seconds (the Lease stores seconds)"
            ));
        }
        if lease <= renew {
            errors.push(format!(
                "--leader-elect-lease-duration ({lease:?}) must be greater than --leader-elect-renew-deadline ({renew:?})"
            ));
        }
        if renew <= retry.mul_f64(1.2) {
            errors.push(format!(
                "--leader-elect-renew-deadline ({renew:?}) must be greater than 1.2 x --leader-elect-retry-period ({retry:?})"
            ));
        }
        for (flag, v) in [
            ("--leader-elect-resource-name", &self.leader_elect_resource_name),
            ("--leader-elect-resource-namespace", &self.leader_elect_resource_namespace),
        ] {
            if v.is_empty() {
                errors.push(format!("{flag}: must not be empty"));
            }
        }
        Some(LeaderElectionOptions {
            lease_duration: lease,
            renew_deadline: renew,
            retry_period: retry,
            name: self.leader_elect_resource_name.clone(),
            namespace: self.leader_elect_resource_namespace.clone(),
        })
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod repeat_tests;
