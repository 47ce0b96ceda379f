//! The validated, typed configuration of a controller manager ([`ManagerArgs::validate`]
//! builds it once; every part gets the piece it needs).
//!
//! [`ManagerArgs::validate`]: crate::ManagerArgs::validate

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use cloud_controllers::{NodeControllerConfig, RouteControllerConfig, ServiceControllerConfig};

use crate::args::LogFormat;

/// Everything the flags resolve to.
#[derive(Debug, Clone)]
pub struct Options {
    /// Resolved `--controllers` list (aliases expanded, `*` and `-name` kept).
    pub controllers: Vec<String>,
    /// cloud-node controller settings.
    pub node: NodeControllerConfig,
    /// Service controller settings (`--concurrent-service-syncs`, `--cluster-name`,
    /// `--load-balancer-class`).
    pub service: ServiceControllerConfig,
    /// `--node-monitor-period` of the lifecycle controller.
    pub node_monitor_period: Duration,
    /// `--min-resync-period`: informers replay their cache every [period, 2 × period).
    pub min_resync_period: Duration,
    /// How to reach the API server.
    pub kube: KubeOptions,
    /// Leader election, when `--leader-elect` is on.
    pub leader_election: Option<LeaderElectionOptions>,
    /// The secure port.
    pub serving: SecureServingOptions,
    /// `--cluster-name`, passed to the provider.
    pub cluster_name: String,
    /// The route controller's settings when routes are to be configured
    /// (`--allocate-node-cidrs` and `--configure-cloud-routes`, with `--cluster-cidr`).
    pub routes: Option<RouteControllerConfig>,
    /// Log format and verbosity.
    pub logging: LoggingOptions,
    /// Warnings to log once logging is up.
    pub warnings: Vec<String>,
}

/// Connection to the Kubernetes API server.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--master`.
    pub master: Option<String>,
    /// `--kube-api-qps`, per client.
    pub qps: f64,
    /// `--kube-api-burst`, per client.
    pub burst: u32,
}

/// `--leader-elect-*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionOptions {
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
    /// `--leader-elect-resource-name`.
    pub name: String,
    /// `--leader-elect-resource-namespace`.
    pub namespace: String,
}

/// `--bind-address`, `--secure-port`, `--tls-*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureServingOptions {
    /// `--bind-address`.
    pub bind_address: IpAddr,
    /// `--secure-port` (0 = off).
    pub port: u16,
    /// `--tls-cert-file`.
    pub cert_file: Option<PathBuf>,
    /// `--tls-private-key-file`.
    pub key_file: Option<PathBuf>,
}

/// `--log-format`, `-v`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggingOptions {
    /// Plain or JSON.
    pub format: LogFormat,
    /// klog-style verbosity.
    pub verbosity: u8,
}
