//! The validated, typed configuration of a controller manager ([`ManagerArgs::validate`]
//! builds it once; every part gets the piece it needs).
//!
//! [`ManagerArgs::validate`]: crate::ManagerArgs::validate

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use cloud_controllers::{
    NodeControllerConfig, NodeIpamConfig, NodeLifecycleConfig, ReconcileMode, RouteControllerConfig,
    ServiceControllerConfig,
};
use controller_serving::{CaBundle, RequestHeaderSettings, SniCertKey, TlsParams};
use ipnet::IpNet;

use crate::args::compat::VmoduleDirective;
use crate::controller_set::ControllerSet;

/// Everything the flags resolve to.
#[derive(Debug, Clone)]
pub struct Options {
    /// The controllers `--controllers` enables (aliases, `*` and `-name` resolved once).
    pub controllers: ControllerSet,
    /// cloud-node controller settings.
    pub node: NodeControllerConfig,
    /// Service controller settings other than the cluster name (see [`Options::service_config`]).
    pub service: ServiceOptions,
    /// cloud-node-lifecycle controller settings (`--node-monitor-period`,
    /// `--concurrent-node-lifecycle-syncs`).
    pub node_lifecycle: NodeLifecycleConfig,
    /// `--min-resync-period`: informers replay their cache every [period, 2 × period).
    pub min_resync_period: Duration,
    /// How to reach the API server.
    pub kube: KubeOptions,
    /// Leader election, when `--leader-elect` is on (never in a dry run).
    pub leader_election: Option<LeaderElectionOptions>,
    /// `--dry-run`: nothing is written to the cluster or the cloud ([`crate::dry_run`]).
    pub dry_run: bool,
    /// The secure port.
    pub serving: SecureServingOptions,
    /// `--cluster-name`: the only copy; the service and route controllers get it from here
    /// ([`Options::service_config`], [`Options::route_config`]).
    pub cluster_name: String,
    /// The route settings when routes are to be configured (`--allocate-node-cidrs` and
    /// `--configure-cloud-routes`, with `--cluster-cidr`); see [`Options::route_config`].
    pub routes: Option<RouteOptions>,
    /// The node IPAM settings when `node-ipam-controller` is to run (named in `--controllers`,
    /// with `--allocate-node-cidrs=true`).
    pub node_ipam: Option<NodeIpamConfig>,
    /// Log format and verbosity.
    pub logging: LoggingOptions,
    /// Authentication and authorization of the secure port.
    pub auth: AuthOptions,
    /// Warnings to log once logging is up.
    pub warnings: Vec<String>,
}

impl Options {
    /// The service controller's configuration: [`Options::service`] with the cluster name.
    pub fn service_config(&self) -> ServiceControllerConfig {
        ServiceControllerConfig {
            workers: self.service.workers,
            cluster_name: self.cluster_name.clone(),
            load_balancer_class: self.service.load_balancer_class.clone(),
        }
    }

    /// The route controller's configuration, if routes are to be configured.
    pub fn route_config(&self) -> Option<RouteControllerConfig> {
        self.routes.as_ref().map(|r| RouteControllerConfig {
            cluster_name: self.cluster_name.clone(),
            cluster_cidrs: r.cluster_cidrs.clone(),
            node_local_ipv6: r.node_local_ipv6,
            mode: r.mode,
            min_interval: r.min_interval,
        })
    }
}

/// `--concurrent-service-syncs` and `--load-balancer-class`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceOptions {
    /// Services synced at once.
    pub workers: usize,
    /// The only `spec.loadBalancerClass` served; `None`: the Services without a class.
    pub load_balancer_class: Option<String>,
}

/// `--cluster-cidr` and the route reconcile mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteOptions {
    /// The pod network (one CIDR, or an IPv4 and an IPv6 one); routes outside it are never touched.
    pub cluster_cidrs: Vec<IpNet>,
    /// IPv6 pod CIDRs come from node IPAM's cloud allocator (the node's own prefix): no route.
    pub node_local_ipv6: bool,
    /// Watch-based with a safety resync, or periodic.
    pub mode: ReconcileMode,
    /// The shortest time between two route reconciles.
    pub min_interval: Duration,
}

/// Connection to the Kubernetes API server.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// The kubeconfig file (`--kubeconfig`); `None`: in-cluster, else `$KUBECONFIG` or `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// The API server URL, overriding the kubeconfig's (`--master`).
    pub master: Option<String>,
    /// Requests per second to the API server, per client (`--kube-api-qps`).
    pub qps: f64,
    /// Requests allowed above `qps` in a burst, per client (`--kube-api-burst`).
    pub burst: u32,
}

/// `--leader-elect-*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionOptions {
    /// How long a standby waits after the last renewal it saw before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// How often the leader renews and a standby tries to acquire.
    pub retry_period: Duration,
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace.
    pub namespace: String,
}

/// `--bind-address`, `--secure-port`, `--tls-*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureServingOptions {
    /// The address the secure port listens on.
    pub bind_address: IpAddr,
    /// `--secure-port` (0 = off).
    pub port: u16,
    /// The serving certificate (PEM); `None`: a self-signed one, generated in memory.
    pub cert_file: Option<PathBuf>,
    /// The private key of `cert_file` (PEM).
    pub key_file: Option<PathBuf>,
    /// `--tls-min-version`, `--tls-cipher-suites`, `--tls-curve-preferences`.
    pub tls: TlsParams,
    /// HTTP/2 offered (`--disable-http2-serving=false`).
    pub http2: bool,
    /// `--http2-max-streams-per-connection` (0: the server's default).
    pub http2_max_streams: u32,
    /// `--permit-port-sharing`: SO_REUSEPORT.
    pub reuse_port: bool,
    /// `--tls-sni-cert-key`.
    pub sni_certificates: Vec<SniCertKey>,
}

/// `--log-format` (or `--logging-format`), `-v`, `--vmodule`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggingOptions {
    /// Plain or JSON.
    pub format: LogFormat,
    /// klog-style verbosity: 0-1 info, 2-4 debug, 5+ trace.
    pub verbosity: u8,
    /// `--vmodule`: verbosity per log target.
    pub vmodule: Vec<VmoduleDirective>,
}

/// Delegated authentication and authorization of the secure port (`--authentication-*`,
/// `--authorization-*`, `--client-ca-file`, `--requestheader-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthOptions {
    /// Kubeconfig for TokenReviews; `None`: the main client.
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig for SubjectAccessReviews; `None`: the main client.
    pub authorization_kubeconfig: Option<PathBuf>,
    /// `--authentication-skip-lookup`.
    pub skip_lookup: bool,
    /// `--authentication-tolerate-lookup-failure`.
    pub tolerate_lookup_failure: bool,
    /// How long a TokenReview's answer is cached.
    pub token_cache_ttl: Duration,
    /// How long an allowing SubjectAccessReview is cached.
    pub authorized_cache_ttl: Duration,
    /// How long a denying SubjectAccessReview is cached.
    pub unauthorized_cache_ttl: Duration,
    /// `--client-ca-file`.
    pub client_ca: Option<CaBundle>,
    /// The front proxy's settings, with `--requestheader-client-ca-file`.
    pub request_header: Option<RequestHeaderSettings>,
    /// Paths served without authentication and authorization.
    pub always_allow_paths: Vec<String>,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Plain,
    /// One JSON object per line.
    Json,
}
