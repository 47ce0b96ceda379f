//! The service controller (upstream `controllers/service`): a load balancer for every
//! `type: LoadBalancer` Service, kept in sync with the Service and the cluster's nodes, and
//! deleted with it.
//!
//! ```text
//!  Service informer ─ add: wants LB or needs cleanup ─┐
//!                   ─ update: needs_update or cleanup ─┼─► WorkQueue<ObjectRef<Service>> "service"
//!                   ─ delete: wanted a LB ─────────────┤    (5 s → 300 s per Service) ─► Workers
//!  provider's resync request (resync_handle) ──────────┘    (--concurrent-service-syncs) ─► sync_service
//!     delete path (no longer wants a LB, or needs cleanup):    │
//!       get ─► DeletingLoadBalancer ─► ensure_deleted ─► remove finalizer ─► DeletedLoadBalancer
//!     ensure path:                                             │
//!       EnsuringLoadBalancer ─► add finalizer ─► ensure(stable node set) ─► EnsuredLoadBalancer
//!     then: status.loadBalancer patched only if it differs; errors: SyncLoadBalancerFailed,
//!       backoff (a provider's `Retry` waits its delay)
//!
//!  Node informer ─ add / delete / (exclusion verdict or providerID changed) / a label some
//!     cached Service's provider reads (`LoadBalancer::node_label_keys`) changed ─► trigger
//!     ─► Passes "node" (one pass at a time; changes during a pass bring one more): every cached
//!        load balancer whose set of (name, providerID, values of the labels its provider reads)
//!        changed gets update_load_balancer (UpdatedLoadBalancer / UpdateLoadBalancerFailed);
//!        failures are retried by a full Service sync (its key goes to the "service" queue)
//! ```
//!
//! Which Services: upstream's (type LoadBalancer without `spec.loadBalancerClass`), or, with
//! [`ServiceControllerConfig::load_balancer_class`], exactly those of that one class instead.
//! The decisions are pure ([`filter`], [`nodes`], [`plan`]); [`sync`] sends what they planned.
//!
//! Deliberate differences from upstream: every write carries the Service's UID (and the
//! finalizer write its `resourceVersion`, re-planned on conflict); a Service deleted while it
//! had no cleanup finalizer still gets its load balancer deleted (upstream ignores Service
//! deletions and relies on the finalizer); a node label the provider reads for a Service's
//! backends (e.g. a node selector) updates that load balancer when it changes (upstream waits
//! for an unrelated change); a node sync and a Service sync never call the
//! provider for the same load balancer at once; a status the API server normalised (dropped
//! or defaulted `ipMode`) is not re-sent on every sync.

mod cache;
#[cfg(test)]
mod e2e_tests;
pub mod filter;
#[cfg(test)]
mod fixtures;
mod metrics;
#[cfg(test)]
mod node_sync_tests;
pub mod nodes;
pub mod plan;
#[cfg(test)]
mod plan_tests;
pub mod sync;
#[cfg(test)]
mod sync_tests;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::LoadBalancer;
use cloud_provider::events::EventObject;
use controller_runtime::{
    Change, ControllerIo, ExponentialBackoff, Informer, PassConfig, Passes, Reconciled, Reconciler, Synced, WorkQueue,
    WorkerConfig, Workers, key_of, object_ref,
};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Service};
use kube::runtime::reflector::ObjectRef;
use tokio_util::sync::CancellationToken;
use tracing::info;

pub use cache::{CachedService, ServiceCache};
use filter::{needs_cleanup, needs_update, wants_load_balancer};
pub use metrics::ServiceMetrics;
use nodes::should_sync_updated_node;
pub use sync::{ServiceSyncer, SyncError, SyncerParts};

/// The controller's name in `--controllers`.
pub const CONTROLLER_NAME: &str = "service-lb-controller";

/// Upstream's event source and client name of the service controller.
pub const EVENT_COMPONENT: &str = "service-controller";

/// Upstream `minRetryDelay`/`maxRetryDelay`: a failing Service is retried after 5 s, doubling
/// up to 300 s.
pub const SERVICE_BACKOFF: ExponentialBackoff =
    ExponentialBackoff { base: Duration::from_secs(5), max: Duration::from_secs(300) };

/// The name of the node sync's passes in metrics (the name its queue had).
const NODE_SYNC_NAME: &str = "node";

/// Settings of the service controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceControllerConfig {
    /// `--concurrent-service-syncs`: Services synced at once (also the parallelism of a node
    /// sync pass).
    pub workers: usize,
    /// `--cluster-name`, passed to the provider.
    pub cluster_name: String,
    /// Manage exactly the LoadBalancer Services of this `spec.loadBalancerClass` instead of
    /// those without a class (`None`, upstream's behaviour).
    pub load_balancer_class: Option<String>,
}

impl Default for ServiceControllerConfig {
    fn default() -> Self {
        ServiceControllerConfig { workers: 1, cluster_name: "kubernetes".to_owned(), load_balancer_class: None }
    }
}

/// The service controller, wired to the shared informers; [`ServiceController::run`] starts it.
pub struct ServiceController<L: LoadBalancer> {
    syncer: Arc<ServiceSyncer<L>>,
    service_queue: WorkQueue<ObjectRef<Service>>,
    /// The node sync: one pass over every load balancer after node changes.
    node_sync: Passes,
    synced: [Synced; 2],
    io: ControllerIo,
    workers: usize,
}

impl<L: LoadBalancer> ServiceController<L> {
    /// Registers the controller's handlers on the Service and Node informers.
    pub fn new(
        balancer: Arc<L>,
        services: &mut Informer<Service>,
        nodes: &mut Informer<Node>,
        io: ControllerIo,
        config: ServiceControllerConfig,
        shutdown: CancellationToken,
    ) -> Self {
        let service_queue = WorkQueue::new("service", SERVICE_BACKOFF, shutdown.clone()).with_metrics(&io.metrics);
        let node_sync = Passes::new(PassConfig::new(NODE_SYNC_NAME), shutdown).metrics(io.metrics.clone());

        let (q, class) = (service_queue.clone(), config.load_balancer_class.clone());
        services.on_change(CONTROLLER_NAME, move |change| {
            let class = class.as_deref();
            let enqueue = match change {
                // Cleanup here also finishes what a previous run left undone.
                Change::Applied { old: None, new } => wants_load_balancer(new, class) || needs_cleanup(new),
                Change::Applied { old: Some(old), new } => needs_update(old, new, class) || needs_cleanup(new),
                // Without our finalizer a Service can vanish at once; its load balancer goes too.
                Change::Deleted(gone) => wants_load_balancer(gone, class),
            };
            if enqueue {
                let svc = match change {
                    Change::Applied { new, .. } => new,
                    Change::Deleted(gone) => gone,
                };
                q.add(key_of(svc.as_ref()));
            }
        });
        let syncer = Arc::new(ServiceSyncer::new(SyncerParts {
            balancer,
            cluster_name: config.cluster_name,
            class: config.load_balancer_class,
            services: services.store(),
            nodes: Arc::new(nodes.store()),
            client: io.client.clone(),
            params: io.patch_params(),
            events: io.events(EVENT_COMPONENT),
            metrics: ServiceMetrics::default(),
        }));
        let (trigger, watcher) = (node_sync.trigger(), syncer.clone());
        nodes.on_change(CONTROLLER_NAME, move |change| {
            let enqueue = match change {
                Change::Applied { old: Some(old), new } => {
                    should_sync_updated_node(old, new) || watcher.reads_changed_labels(old, new)
                }
                Change::Applied { old: None, .. } | Change::Deleted(_) => true,
            };
            if enqueue {
                trigger.trigger();
            }
        });
        ServiceController {
            syncer,
            service_queue,
            node_sync,
            synced: [services.synced(), nodes.synced()],
            io,
            workers: config.workers.max(1),
        }
    }

    /// A handle that reconciles a Service the provider names again (through the queue, with
    /// its usual deduplication), e.g. when the provider reports that a change it let finish in
    /// the background failed.
    pub fn resync_handle(&self) -> impl Fn(&EventObject) + Send + Sync + 'static {
        let queue = self.service_queue.clone();
        move |service| {
            let key = ObjectRef::new(&service.name);
            queue.add(match service.namespace.as_deref().filter(|ns| !ns.is_empty()) {
                Some(ns) => key.within(ns),
                None => key,
            })
        }
    }

    /// Upstream's service controller metrics, to register with the manager's registry.
    pub fn metrics(&self) -> ServiceMetrics {
        self.syncer.metrics().clone()
    }

    /// Runs the Service workers and the node sync until the shutdown token fires, once both
    /// informers have synced.
    pub async fn run(self) {
        let shutdown = self.service_queue.shutdown_token().clone();
        for synced in &self.synced {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                ok = synced.wait() => if !ok { return },
            }
        }
        info!(workers = self.workers, class = ?self.syncer.class, "service controller started");
        let services = Workers::new(
            self.syncer.clone(),
            self.service_queue.clone(),
            WorkerConfig::new(CONTROLLER_NAME, self.workers),
        )
        .metrics(self.io.metrics.clone());
        let (syncer, queue, workers) = (&self.syncer, &self.service_queue, self.workers);
        // Upstream `syncNodes`; Services whose update failed get a full sync.
        let node_sync = self.node_sync.run(|| async move {
            for key in syncer.sync_nodes(workers).await {
                queue.add(key);
            }
            Ok::<_, std::convert::Infallible>(Reconciled::DONE)
        });
        tokio::join!(services.run(), node_sync);
    }
}

impl<L: LoadBalancer> Reconciler for ServiceSyncer<L> {
    type Resource = Service;
    type Error = SyncError;

    async fn reconcile(&self, key: &ObjectRef<Service>) -> Result<Reconciled, SyncError> {
        self.sync_service(key).await
    }

    fn regarding(&self, key: &ObjectRef<Service>) -> Option<ObjectReference> {
        self.cached_service(key).map(|s| object_ref(s.as_ref()))
    }
}
