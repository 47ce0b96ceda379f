//! The cloud-node-lifecycle controller (upstream `controllers/nodelifecycle`).
//!
//! ```text
//!  every --node-monitor-period: nodes from the shared cache
//!     ├─ prefetch(initialized nodes that turned NotReady, Recheck)  (current answers, at once)
//!     ├─ prefetch(not-ready nodes, Lifecycle)        (one bulk lookup where it pays off)
//!     └─ per node, --concurrent-node-lifecycle-syncs at a time:
//!            decide (Ready? exists? shut down?) ─► write (pure) ─► API
//!            Ready=True          → remove the shutdown taint if present
//!            instance gone       → Normal DeletingNode event, delete the Node (UID precondition)
//!            instance shut down  → add node.cloudprovider.kubernetes.io/shutdown:NoSchedule
//!            any provider error  → keep the node untouched
//! ```
//!
//! Upstream's 1.37 metrics ([`metrics`]): the duration of each pass and every provider call.

#[cfg(test)]
mod controller_tests;
pub mod decide;
pub mod metrics;
pub mod readiness;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use cloud_provider::{Cloud, InstancesV2, LookupPurpose};
use controller_runtime::writes::{ConflictRetry, is_not_found, patch_replanned};
use controller_runtime::{
    ControllerIo, EventRecorder, Informer, PassConfig, PassTimer, Passes, Reconciled, RuntimeMetrics, Synced,
    object_ref,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::Store;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info};

use decide::{LifecycleDecision, LifecycleWrite, decide, is_ready};
use metrics::LifecycleMetrics;
use readiness::{Readiness, turned_not_ready};

/// Upstream's name of this controller (events, logs).
pub const CONTROLLER_NAME: &str = "cloud-node-lifecycle-controller";

/// Settings of the cloud-node-lifecycle controller (upstream
/// `NodeLifecycleControllerConfiguration`, 1.37).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLifecycleConfig {
    /// `--node-monitor-period`: time between two passes over every node.
    pub monitor_period: Duration,
    /// `--concurrent-node-lifecycle-syncs`: nodes checked at once (at least 1).
    pub workers: usize,
}

impl Default for NodeLifecycleConfig {
    /// Upstream's defaults: every 5 s, one node at a time.
    fn default() -> Self {
        NodeLifecycleConfig { monitor_period: Duration::from_secs(5), workers: 1 }
    }
}

/// The cloud-node-lifecycle controller.
pub struct CloudNodeLifecycleController<C: Cloud> {
    api: Api<Node>,
    params: PatchParams,
    cloud: Arc<C>,
    store: Store<Node>,
    synced: Synced,
    events: EventRecorder,
    config: NodeLifecycleConfig,
    metrics: LifecycleMetrics,
    /// Where the passes are counted (`controller_reconcile_total`, panics, retries).
    runtime_metrics: RuntimeMetrics,
    shutdown: CancellationToken,
    /// Readiness of each node (by UID) in the previous pass, to notice NotReady transitions;
    /// `None` before the first pass.
    was_ready: Mutex<Option<Readiness>>,
}

impl<C: Cloud> CloudNodeLifecycleController<C> {
    /// A controller checking nodes as `config` says until `shutdown`.
    pub fn new(
        cloud: Arc<C>,
        informer: &Informer<Node>,
        io: ControllerIo,
        config: NodeLifecycleConfig,
        shutdown: CancellationToken,
    ) -> Self {
        CloudNodeLifecycleController {
            api: Api::all(io.client.clone()),
            params: io.patch_params(),
            cloud,
            store: informer.store(),
            synced: informer.synced(),
            events: io.events(CONTROLLER_NAME),
            config,
            metrics: LifecycleMetrics::default(),
            runtime_metrics: io.metrics.clone(),
            shutdown,
            was_ready: Mutex::default(),
        }
    }

    /// The controller's metrics, to register where they are served.
    pub fn metrics(&self) -> LifecycleMetrics {
        self.metrics.clone()
    }

    /// Monitors nodes until shutdown, once the informer has synced.
    pub async fn run(self) {
        tokio::select! {
            _ = self.shutdown.cancelled() => return,
            synced = self.synced.wait() => if !synced { return },
        }
        let NodeLifecycleConfig { monitor_period, workers } = self.config;
        info!(period = ?monitor_period, workers, "cloud-node-lifecycle controller started");
        // On the pass runner: a pass that panics (a provider bug) is counted and retried with
        // backoff; the next one comes a period after the previous ended (upstream `wait.Until`).
        let passes = Passes::new(
            PassConfig { timer: PassTimer::Sliding(monitor_period), ..PassConfig::new(CONTROLLER_NAME) },
            self.shutdown.clone(),
        )
        .metrics(self.runtime_metrics.clone());
        passes
            .run(|| async {
                self.monitor_nodes().await;
                Ok::<_, std::convert::Infallible>(Reconciled::DONE)
            })
            .await;
    }

    /// One pass over all nodes (upstream `MonitorNodes`), timed.
    pub async fn monitor_nodes(&self) {
        let started = tokio::time::Instant::now();
        let nodes = self.store.state();
        let not_ready: Vec<Arc<Node>> = nodes.iter().filter(|n| !is_ready(n)).cloned().collect();
        let turned_not_ready = self.note_readiness(&nodes);
        if let Some(v2) = self.cloud.instances_v2() {
            if !turned_not_ready.is_empty() {
                debug!(
                    nodes = turned_not_ready.len(),
                    "nodes turned NotReady; asking the provider for current answers"
                );
                v2.prefetch(&turned_not_ready, LookupPurpose::Recheck).await;
            }
            if !not_ready.is_empty() {
                v2.prefetch(&not_ready, LookupPurpose::Lifecycle).await;
            }
        }
        futures::stream::iter(nodes)
            .for_each_concurrent(self.config.workers.max(1), |node| async move { self.monitor_node(&node).await })
            .await;
        self.metrics.monitored(started.elapsed());
    }

    /// Records each node's readiness; returns the nodes that turned NotReady since the
    /// previous pass (see [`turned_not_ready`]).
    fn note_readiness(&self, nodes: &[Arc<Node>]) -> Vec<Arc<Node>> {
        // Whole-value replacement only; a poisoned lock still holds a consistent map.
        let mut was_ready = self.was_ready.lock_unpoisoned();
        let (turned, now) = turned_not_ready(was_ready.as_ref(), nodes);
        *was_ready = Some(now);
        turned
    }

    async fn monitor_node(&self, node: &Node) {
        let name = node.name_any();
        let decision = match decide(&*self.cloud, node, &self.metrics).await {
            Ok(d) => d,
            Err(e) => {
                error!(node = %name, error = %e, "error checking if node exists; keeping it");
                return;
            }
        };
        match decision.write(node) {
            None => {}
            Some(LifecycleWrite::Delete { uid }) => self.delete(node, uid).await,
            Some(LifecycleWrite::Patch(_)) => {
                if let Err(e) = self.patch_taints(node, decision).await {
                    error!(node = %name, error = %e, ?decision, "error patching node taints");
                }
            }
        }
    }

    async fn delete(&self, node: &Node, uid: Option<String>) {
        let name = node.name_any();
        let reference = object_ref(node);
        self.events
            .normal(
                &reference,
                "DeletingNode",
                format!("Deleting node {name} because it does not exist in the cloud provider"),
            )
            .await;
        // The UID precondition makes sure we delete the Node we decided about, not a new
        // Node registered under the same name meanwhile.
        let params =
            DeleteParams { preconditions: Some(Preconditions { uid, resource_version: None }), ..Default::default() };
        match self.api.delete(&name, &params).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                error!(node = %name, error = %e, "unable to delete node");
                self.events
                    .warning(&reference, "DeletingNodeFailed", format!("Failed deleting node {name}: {e}"))
                    .await;
            }
        }
    }

    /// Sends the decision's taint patch, re-planned from a fresh read after a conflict
    /// (upstream: `RetryOnConflict`, 5 steps, 100 ms).
    async fn patch_taints(&self, node: &Node, decision: LifecycleDecision) -> Result<(), kube::Error> {
        let name = node.name_any();
        let result = patch_replanned(
            ConflictRetry::NODE_HELPERS,
            node,
            || self.api.get(&name),
            |current: &Node| match decision.write(current) {
                Some(LifecycleWrite::Patch(patch)) => Some(patch),
                _ => None,
            },
            |patch| {
                let (api, name, params) = (&self.api, &name, &self.params);
                async move { api.patch(name, params, &Patch::Merge(patch)).await.map(drop) }
            },
        )
        .await;
        match result {
            Err(e) if is_not_found(&e) => Ok(()),
            other => other,
        }
    }
}
