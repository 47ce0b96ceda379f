//! The route controller (upstream `controllers/route`): for every node's pod CIDR, a route in
//! the cloud's network to that node, kept in sync as nodes come, go and change, and the
//! node's `NetworkUnavailable` condition saying whether its routes exist.
//!
//! ```text
//!  watch mode (default):  node add/delete, podCIDRs/addresses/providerID change ─► trigger ─┐
//!                         safety resync when no pass started for `resync` ─────────────────┤
//!  periodic mode:         every --route-reconciliation-period ─────────────────────────────┤
//!                                                                                          ▼
//!        Passes (controller-runtime: one pass at a time over the whole cluster; a triggered
//!        pass starts at least 10 s after the previous one; a burst of node events is one pass)
//!           reconcile_routes:
//!           list_routes ─► plan_routes (pure: deletions, creations, per-node actions)
//!           ─► execute: deletions + creations, ≤ 200 provider calls in flight
//!              ├ creation failed → Warning FailedToCreateRoute (+ the provider's own reason)
//!              └ node done → NetworkUnavailable False/RouteCreated or True/NoRouteCreated
//!                            (merge patch with resourceVersion, written only on change)
//!           any operation failed → Err → the pass is retried with backoff (10 s doubling,
//!                                   up to the resync period; an outage at least every
//!                                   30 s); failures the provider refused until their
//!                                   input changes (`CloudError::Refused`) alone → done:
//!                                   the node's change or the resync brings the next pass
//! ```
//!
//! Routes are only deleted inside the cluster CIDRs (`is_responsible_for_route`); routes of
//! other clusters or users outside them are never touched. Every reconcile is counted in
//! upstream's `route_controller_route_sync_total{outcome, trigger}` ([`metrics`]).

#[cfg(test)]
mod controller_tests;
pub mod exec;
pub mod metrics;
pub mod plan;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::{CloudError, Route, Routes};
use controller_runtime::writes::{ConflictRetry, is_not_found, patch_replanned};
use controller_runtime::{
    Change, ControllerIo, EventRecorder, ExponentialBackoff, Informer, PassConfig, PassTimer, Passes, ReconcileError,
    Reconciled, Synced, object_ref,
};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use exec::{ExecutionReport, MAX_CONCURRENT_ROUTE_OPERATIONS, RouteSink, execute};
use metrics::{PendingTrigger, RouteMetrics, SyncOutcome, SyncTrigger};
use plan::{PlannedCreate, RouteScope, condition_patch, plan_routes_matching, update_trigger};

/// Upstream's name of this controller (metrics, logs).
pub const CONTROLLER_NAME: &str = "node-route-controller";

/// Upstream's event source component of the route controller.
pub const EVENT_COMPONENT: &str = "route_controller";

/// Upstream's `minRouteResyncInterval`: in watch mode, at most one reconcile per 10 s,
/// however many node events arrive.
pub const MIN_RECONCILE_INTERVAL: Duration = Duration::from_secs(10);

/// When reconciles happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileMode {
    /// Reconcile on node events (upstream's `CloudControllerManagerWatchBasedRoutesReconciliation`)
    /// and, as a safety net for routes changed outside Kubernetes, whenever no reconcile ran
    /// for `resync`.
    Watch {
        /// A reconcile whenever none started for this long.
        resync: Duration,
    },
    /// Reconcile every `period` (upstream's default mode, `--route-reconciliation-period`).
    Periodic {
        /// Time between the starts of two reconciles.
        period: Duration,
    },
}

impl ReconcileMode {
    /// The longest time between two reconciles without node events.
    pub fn period(&self) -> Duration {
        match self {
            ReconcileMode::Watch { resync } => *resync,
            ReconcileMode::Periodic { period } => *period,
        }
    }

    /// The passes that come without a node event.
    fn timer(&self) -> PassTimer {
        match *self {
            ReconcileMode::Watch { resync } => PassTimer::Resync(resync),
            ReconcileMode::Periodic { period } => PassTimer::Every(period),
        }
    }
}

/// Settings of the route controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteControllerConfig {
    /// `--cluster-name`, passed to the provider.
    pub cluster_name: String,
    /// `--cluster-cidr`: one, or two for dual-stack. Routes are only deleted inside these.
    pub cluster_cidrs: Vec<IpNet>,
    /// IPv6 pod CIDRs lie in each node's own prefix (node IPAM's cloud allocator): no route
    /// is created for them, and they count as done for `NetworkUnavailable`.
    pub node_local_ipv6: bool,
    /// When reconciles happen.
    pub mode: ReconcileMode,
    /// Shortest time between two reconciles in watch mode (upstream: 10 s).
    pub min_interval: Duration,
}

/// Why a reconcile did not finish its work.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The provider could not list the routes.
    #[error("error listing routes: {0}")]
    List(#[source] CloudError),
    /// Some route operations failed; they are retried with backoff.
    #[error("{failed} of {total} route operations failed; retrying with backoff")]
    Incomplete {
        /// Deletions and creations that failed.
        failed: usize,
        /// Deletions and creations the plan asked for.
        total: usize,
        /// Some failure was the provider's outage or a busy network.
        transient: bool,
    },
}

impl ReconcileError for RouteError {
    fn event_reason(&self) -> Option<&str> {
        // Failed creations are published on their nodes; a pass over the cluster has no object.
        None
    }

    fn is_transient(&self) -> bool {
        match self {
            RouteError::List(CloudError::Failed { transient, .. }) => *transient,
            RouteError::List(_) => false,
            RouteError::Incomplete { transient, .. } => *transient,
        }
    }
}

/// What a reconcile that carried out `operations` comes to: done, or (watch mode) an error
/// the pass runner retries with backoff. Failures the provider refused until their input changes
/// alone are done: their Warning events were published, and a retry of the same input would
/// be refused again (only costing the provider's reads); a change of the node enqueues the
/// next reconcile, and so does the resync.
pub fn reconcile_outcome(
    mode: ReconcileMode,
    operations: usize,
    report: &ExecutionReport,
) -> Result<Reconciled, RouteError> {
    if report.complete() {
        return Ok(Reconciled::ANSWERED);
    }
    let failed = report.delete_failures + report.create_failures;
    if !report.retry_may_help() {
        info!(failed, total = operations, "route operations refused until their nodes change; waiting for a change");
        return Ok(Reconciled::ANSWERED);
    }
    match mode {
        // Upstream's periodic mode: the next period retries.
        ReconcileMode::Periodic { .. } => {
            warn!(failed, total = operations, "some route operations failed; the next period retries them");
            Ok(Reconciled::ANSWERED)
        }
        ReconcileMode::Watch { .. } => {
            Err(RouteError::Incomplete { failed, total: operations, transient: report.transient })
        }
    }
}

/// The route controller.
pub struct RouteController<R: Routes> {
    reconciler: Arc<RouteReconciler<R>>,
    passes: Passes,
    pending: PendingTrigger,
    synced: Synced,
    shutdown: CancellationToken,
}

struct RouteReconciler<R: Routes> {
    routes: Arc<R>,
    config: RouteControllerConfig,
    api: Api<Node>,
    params: PatchParams,
    store: Store<Node>,
    events: EventRecorder,
    metrics: RouteMetrics,
    pending: PendingTrigger,
}

impl<R: Routes> RouteController<R> {
    /// Wires the controller to the shared node informer. In watch mode, node adds and
    /// deletes and updates of pod CIDRs, addresses or provider ID (and informer resyncs)
    /// trigger a pass, noting its `trigger` label.
    pub fn new(
        routes: Arc<R>,
        informer: &mut Informer<Node>,
        io: ControllerIo,
        config: RouteControllerConfig,
        shutdown: CancellationToken,
    ) -> Self {
        let passes = Passes::new(
            PassConfig {
                min_interval: config.min_interval,
                timer: config.mode.timer(),
                backoff: ExponentialBackoff {
                    base: config.min_interval,
                    max: config.mode.period().max(config.min_interval),
                },
                ..PassConfig::new(CONTROLLER_NAME)
            },
            shutdown.clone(),
        )
        .metrics(io.metrics.clone());
        let pending = PendingTrigger::default();
        if matches!(config.mode, ReconcileMode::Watch { .. }) {
            let (trigger, pending) = (passes.trigger(), pending.clone());
            informer.on_change(CONTROLLER_NAME, move |change| {
                let cause = match change {
                    Change::Applied { old: None, .. } | Change::Deleted(_) => Some(SyncTrigger::NodeChange),
                    Change::Applied { old: Some(old), new } => update_trigger(old, new),
                };
                if let Some(cause) = cause {
                    pending.note(cause);
                    trigger.trigger();
                }
            });
        }
        let reconciler = Arc::new(RouteReconciler {
            routes,
            config,
            api: Api::all(io.client.clone()),
            params: io.patch_params(),
            store: informer.store(),
            events: io.events(EVENT_COMPONENT),
            metrics: RouteMetrics::default(),
            pending: pending.clone(),
        });
        RouteController { reconciler, passes, pending, synced: informer.synced(), shutdown }
    }

    /// The controller's metrics, to register where they are served.
    pub fn metrics(&self) -> RouteMetrics {
        self.reconciler.metrics.clone()
    }

    /// Runs the passes until the shutdown token fires, once the informer has synced; the
    /// first pass starts at once.
    pub async fn run(self) {
        tokio::select! {
            _ = self.shutdown.cancelled() => return,
            ok = self.synced.wait() => if !ok { return },
        }
        let reconciler = &self.reconciler;
        info!(mode = ?reconciler.config.mode, cluster_cidrs = ?reconciler.config.cluster_cidrs, "route controller started");
        // The first pass covers the nodes the informer listed (upstream: their Add events).
        self.pending.note(SyncTrigger::NodeChange);
        self.passes.trigger().trigger();
        self.passes.run(|| reconciler.reconcile_routes()).await;
    }
}

impl<R: Routes> RouteReconciler<R> {
    /// Upstream `reconcileNodeRoutes` and `recordRouteSync`: one reconcile, counted. A failed
    /// reconcile's retry keeps its trigger.
    async fn reconcile_routes(&self) -> Result<Reconciled, RouteError> {
        let trigger = self.pending.take(matches!(self.config.mode, ReconcileMode::Watch { .. }));
        let (outcome, result) = match self.routes.list_routes(&self.config.cluster_name).await {
            Err(e) => (SyncOutcome::Error, Err(RouteError::List(e))),
            Ok(routes) => self.reconcile_listed(routes).await,
        };
        self.metrics.record(outcome, trigger);
        if result.is_err() {
            self.pending.note(trigger);
        }
        result
    }

    /// Plans and carries out the routes against `routes`, the provider's current ones.
    async fn reconcile_listed(&self, routes: Vec<Route>) -> (SyncOutcome, Result<Reconciled, RouteError>) {
        let nodes = self.store.state();
        let scope =
            RouteScope { cluster_cidrs: &self.config.cluster_cidrs, node_local_ipv6: self.config.node_local_ipv6 };
        let plan = plan_routes_matching(&nodes, &routes, scope, &|p| self.routes.canonical_provider_id(p));
        let operations = plan.deletions.len() + plan.creations();
        if operations == 0 {
            debug!(routes = routes.len(), nodes = nodes.len(), "routes in sync");
        } else {
            info!(
                routes = routes.len(),
                nodes = nodes.len(),
                delete = plan.deletions.len(),
                create = plan.creations(),
                "reconciling routes"
            );
        }
        let report =
            execute(&*self.routes, &self.config.cluster_name, &plan, &nodes, self, MAX_CONCURRENT_ROUTE_OPERATIONS)
                .await;
        (SyncOutcome::of(report.created, report.deleted), reconcile_outcome(self.config.mode, operations, &report))
    }

    /// Writes the node's `NetworkUnavailable` condition if it changes, re-planned from a
    /// fresh read after a conflict (upstream: `RetryOnConflict`, 5 steps, 100 ms). The read is a
    /// GET of the Node (its status included), as upstream's: neither the shipped ClusterRole nor
    /// the official one grants `get` on `nodes/status`.
    async fn write_condition(&self, node: &Node, routes_created: bool) -> Result<(), kube::Error> {
        let name = node.name_any();
        let now = Time(Timestamp::now());
        let result = patch_replanned(
            ConflictRetry::NODE_HELPERS,
            node,
            || self.api.get(&name),
            |current: &Node| condition_patch(current, routes_created, &now),
            |patch| {
                info!(node = %name, routes_created, "updating NetworkUnavailable condition");
                let (api, name, params) = (&self.api, &name, &self.params);
                async move { api.patch_status(name, params, &Patch::Merge(patch)).await.map(drop) }
            },
        )
        .await;
        match result {
            Err(e) if is_not_found(&e) => Ok(()),
            other => other,
        }
    }
}

impl<R: Routes> RouteSink for RouteReconciler<R> {
    async fn creation_failed(&self, node: &Node, create: &PlannedCreate, elapsed: Duration, error: &CloudError) {
        let reference = object_ref(node);
        let name = node.name_any();
        // Upstream's text without its "after <duration>": identical repeats (a permanent
        // problem retried with backoff) fold into one Event whose count grows.
        debug!(node = %name, destination = %create.route.destination_cidr, ?elapsed, "route creation failed");
        let message = format!(
            "Could not create route {} {} for node {}: {}",
            create.name_hint, create.route.destination_cidr, name, error
        );
        self.events.warning(&reference, "FailedToCreateRoute", message).await;
        // A provider that names the cause of a misconfiguration gets its own reason too
        // (e.g. ClusterCIDRMisconfigured), so alerts on the provider's reasons work.
        if let CloudError::Failed { reason, message, transient: false, .. } | CloudError::Refused { reason, message } =
            error
            && reason != "FailedToCreateRoute"
        {
            self.events.warning(&reference, reason, message.clone()).await;
        }
    }

    async fn node_done(&self, node: &Arc<Node>, routes_created: bool) {
        if let Err(e) = self.write_condition(node, routes_created).await {
            error!(node = %node.name_any(), error = %e, "error updating NetworkUnavailable condition");
        }
    }
}
