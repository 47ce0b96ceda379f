//! What every controller is started with: the cloud, the options, the shared informers, a
//! Kubernetes client of its own, the metrics, and the token that stops it.

use std::sync::Arc;

use cloud_provider::Cloud;
use controller_runtime::{ControllerIo, Informer, RuntimeMetrics, Synced};
use controller_serving::MetricsRegistry;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, Config};
use tokio_util::sync::CancellationToken;

use crate::dry_run::{DryRun, DryRunLayer};
use crate::kube_client::{KubeClientError, rate_limited_client};
use crate::metrics::{ManagerMetrics, RestClientMetricsLayer};
use crate::options::Options;
use crate::provider_events::Resyncs;

/// Builds one Kubernetes client per user (controller, informers, leader election), each
/// with its own `--kube-api-qps`/`--kube-api-burst` token bucket and User-Agent, like
/// upstream's `ClientBuilder.ClientOrDie(name)`.
#[derive(Clone)]
pub struct ClientFactory {
    config: Config,
    qps: f64,
    burst: u32,
    user_agent: String,
    metrics: RestClientMetricsLayer,
    dry_run: Option<DryRun>,
}

impl ClientFactory {
    /// Clients for `config`; User-Agents read `<program>/<version> (<os>/<arch>) <user>`;
    /// requests are counted in `metrics`.
    pub fn new(config: Config, qps: f64, burst: u32, program: &str, version: &str, metrics: &ManagerMetrics) -> Self {
        let user_agent = format!("{program}/{version} ({}/{})", std::env::consts::OS, std::env::consts::ARCH);
        let host = config.cluster_url.authority().map(|a| a.to_string()).unwrap_or_default();
        ClientFactory { config, qps, burst, user_agent, metrics: metrics.rest_client_layer(&host), dry_run: None }
    }

    /// In a dry run, every client's writes go out with `dryRun=All` and are recorded in
    /// `dry_run` as its user's (the delegation clients' reviews excepted: they write nothing).
    pub fn with_dry_run(mut self, dry_run: Option<DryRun>) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// A client for `user` (e.g. a controller's name).
    pub fn client(&self, user: &str) -> Result<Client, KubeClientError> {
        let user_agent = format!("{} {user}", self.user_agent);
        let dry_run = self.dry_run.as_ref().map(|d| DryRunLayer::new(d.clone(), user));
        rate_limited_client(self.config.clone(), self.qps, self.burst, &user_agent, &self.metrics, dry_run)
    }

    /// A client for `user` that writes for real, even in a dry run: the secure port's
    /// TokenReviews and SubjectAccessReviews (answers, never stored).
    fn review_client(&self, user: &str) -> Result<Client, KubeClientError> {
        let user_agent = format!("{} {user}", self.user_agent);
        rate_limited_client(self.config.clone(), self.qps, self.burst, &user_agent, &self.metrics, None)
    }

    /// A client for `user` from the kubeconfig `path` named by `flag`, or [`Self::client`]
    /// without one; with upstream's delegation limits (200 requests per second, bursts of 400).
    pub async fn delegation_client(
        &self,
        flag: &'static str,
        path: Option<&std::path::Path>,
        user: &str,
    ) -> Result<Client, KubeClientError> {
        let Some(path) = path else { return self.review_client(user) };
        let config = crate::kube_client::delegation_config(flag, path).await?;
        let user_agent = format!("{} {user}", self.user_agent);
        rate_limited_client(config, 200.0, 400, &user_agent, &self.metrics, None)
    }
}

/// The shared informers. The Service informer exists only once a controller asks for it, so
/// a manager without a service controller does not watch Services.
pub struct Informers {
    /// Nodes (every controller reads these).
    pub nodes: Informer<Node>,
    services: Option<Informer<Service>>,
    client: Client,
    resync: std::time::Duration,
    metrics: RuntimeMetrics,
}

impl Informers {
    /// Informers reading through `client`, replaying their caches every `resync`, counting
    /// their handlers' panics in `metrics`.
    pub fn new(client: Client, resync: std::time::Duration, metrics: RuntimeMetrics) -> Self {
        let nodes = Informer::new(Api::all(client.clone()), watcher::Config::default())
            .resync_every(resync)
            .metrics(metrics.clone());
        Informers { nodes, services: None, client, resync, metrics }
    }

    /// The Service informer, created on first use.
    pub fn services(&mut self) -> &mut Informer<Service> {
        self.nodes_and_services().1
    }

    /// The Node informer and the Service informer (created on first use), for controllers that
    /// watch both.
    pub fn nodes_and_services(&mut self) -> (&mut Informer<Node>, &mut Informer<Service>) {
        let (client, resync, metrics) = (&self.client, self.resync, &self.metrics);
        let services = self.services.get_or_insert_with(|| {
            Informer::new(Api::all(client.clone()), watcher::Config::default())
                .resync_every(resync)
                .metrics(metrics.clone())
        });
        (&mut self.nodes, services)
    }

    /// One handle per informer that resolves once its cache holds the first complete list.
    pub fn synced(&self) -> Vec<(&'static str, Synced)> {
        let mut all = vec![("Node", self.nodes.synced())];
        if let Some(services) = &self.services {
            all.push(("Service", services.synced()));
        }
        all
    }

    /// Each informer's watch as a task of its own, named by its kind, running until `shutdown`.
    pub fn into_tasks(self, shutdown: CancellationToken) -> Vec<(&'static str, BoxFuture<'static, ()>)> {
        let mut tasks: Vec<(&'static str, BoxFuture<'static, ()>)> =
            vec![("Node", Box::pin(self.nodes.run(shutdown.clone())))];
        if let Some(services) = self.services {
            tasks.push(("Service", Box::pin(services.run(shutdown))));
        }
        tasks
    }
}

/// What a controller is started with.
pub struct ControllerContext<C: Cloud> {
    /// The provider.
    pub cloud: Arc<C>,
    /// The manager's options.
    pub options: Options,
    /// The shared informers.
    pub informers: Informers,
    /// Stops the controllers (leadership lost, or shutdown).
    pub stop: CancellationToken,
    /// Where controllers register to reconcile objects again when the provider asks.
    pub resyncs: Resyncs,
    clients: ClientFactory,
    field_manager: String,
    metrics: RuntimeMetrics,
    registry: MetricsRegistry,
}

impl<C: Cloud> ControllerContext<C> {
    /// A context; `field_manager` names every write of every controller.
    pub fn new(
        cloud: Arc<C>,
        options: Options,
        informers: Informers,
        clients: ClientFactory,
        field_manager: &str,
        metrics: RuntimeMetrics,
        stop: CancellationToken,
    ) -> Self {
        let field_manager = field_manager.to_owned();
        let registry = MetricsRegistry::new();
        ControllerContext {
            cloud,
            options,
            informers,
            stop,
            resyncs: Resyncs::default(),
            clients,
            field_manager,
            metrics,
            registry,
        }
    }

    /// Routes the provider's resync requests through `resyncs` (the registry its event sink
    /// uses).
    pub fn with_resyncs(mut self, resyncs: Resyncs) -> Self {
        self.resyncs = resyncs;
        self
    }

    /// Controllers register their own metrics in `registry` (the one served on `/metrics`);
    /// without it they go to a registry nobody serves.
    pub fn with_metrics_registry(mut self, registry: MetricsRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// The registry served on `/metrics`, for a controller's own metrics.
    pub fn metrics_registry(&self) -> &MetricsRegistry {
        &self.registry
    }

    /// The client factory (for users other than controllers, e.g. leader election).
    pub fn clients(&self) -> &ClientFactory {
        &self.clients
    }

    /// The I/O handles for controller `name`: its own rate-limited client, the field manager
    /// and the shared metrics.
    pub fn io(&self, name: &str) -> Result<ControllerIo, KubeClientError> {
        Ok(ControllerIo {
            client: self.clients.client(name)?,
            field_manager: self.field_manager.clone(),
            metrics: self.metrics.clone(),
        })
    }
}
