//! The cloud-node controller (upstream `controllers/node`).
//!
//! ```text
//!  Node informer ── add/update ──► WorkQueue<ObjectRef<Node>> ──► Workers (controller-runtime) ──► sync_node
//!                                                                     │ tainted? ──no──► reconcile beta→GA labels
//!                                                                     │ yes
//!                                                                     ▼
//!                                    provider.instance_metadata ──► plan_initialization (pure)
//!                                                                     │
//!                                     plan.status_patch() ─► status ◄─┤
//!                                     plan.spec_patch(rv) ─► node ◄───┘ (taint removed last)
//!                                     Normal "Synced" event; errors: Warning event + backoff
//!
//!  every --node-status-update-frequency: prefetch(initialized nodes), then per node
//!  (--concurrent-node-status-updates at once) refresh status.addresses if they changed.
//! ```

#[cfg(test)]
mod controller_tests;
pub mod metadata;
pub mod metrics;
pub mod plan;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;
use sync_lock::Unpoison as _;

use cloud_provider::{Cloud, InstancesV2, LookupPurpose};
use controller_runtime::writes::{ConflictRetry, is_not_found, retry_on_conflict};
use controller_runtime::{
    Change, ControllerIo, EventRecorder, ExponentialBackoff, Informer, PassConfig, PassTimer, Passes, ReconcileError,
    Reconciled, Reconciler, Synced, WorkQueue, WorkerConfig, Workers, key_of, object_ref,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use metadata::{MetadataError, get_instance_metadata, get_instance_node_addresses};
use plan::{
    InvalidProvidedNodeIp, addresses_patch, is_uninitialized, labels_patch, plan_addresses, plan_initialization,
    plan_label_reconcile,
};

/// Upstream's name of this controller (queue, events, metrics).
pub const CONTROLLER_NAME: &str = "cloud-node-controller";

/// The name the periodic address refresh's passes are counted under (metrics, logs); apart
/// from [`CONTROLLER_NAME`], whose count is the initializing reconciles.
pub const STATUS_UPDATE_NAME: &str = "cloud-node-status-update";

/// Settings of the cloud-node controller (upstream flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeControllerConfig {
    /// `--concurrent-node-syncs`: initialization workers.
    pub workers: usize,
    /// `--concurrent-node-status-updates` (0 = same as `workers`).
    pub status_workers: usize,
    /// `--node-status-update-frequency`: period of the address refresh.
    pub status_update_frequency: Duration,
}

impl Default for NodeControllerConfig {
    fn default() -> Self {
        NodeControllerConfig { workers: 1, status_workers: 0, status_update_frequency: Duration::from_secs(300) }
    }
}

/// Why syncing a node failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The provider could not tell us about the node.
    #[error("failed to get instance metadata for node {node}: {source}")]
    Metadata {
        /// Name of the node being synced.
        node: String,
        /// The provider's failure.
        #[source]
        source: MetadataError,
    },
    /// The provided node IP does not match the cloud's addresses.
    #[error("failed to get node modifiers from cloud provider: {0}")]
    ProvidedNodeIp(#[from] InvalidProvidedNodeIp),
    /// After a conflict, the node changed so that the plan no longer holds (e.g. its provided
    /// node IP annotation changed): nothing was written; the sync starts over.
    #[error("node {node} changed while it was being initialized: {source}")]
    Replan {
        /// Name of the node being synced.
        node: String,
        /// Why the new state cannot be initialized.
        #[source]
        source: InvalidProvidedNodeIp,
    },
    /// A Kubernetes API call failed.
    #[error("failed to {action} node {node}: {source}")]
    Kube {
        /// The write that failed, as the message words it (e.g. `initialize`).
        action: &'static str,
        /// Name of the node being synced.
        node: String,
        /// The API server's (or the connection's) error.
        #[source]
        source: kube::Error,
    },
}

impl SyncError {
    /// True if the provider's failure says nothing about the node (outage, rate limit).
    pub fn is_transient(&self) -> bool {
        matches!(self, SyncError::Metadata { source, .. } if source.is_transient())
    }

    /// Event reason for a Warning about this error.
    pub fn reason(&self) -> &str {
        match self {
            SyncError::Metadata { source, .. } => source.reason(),
            SyncError::ProvidedNodeIp(_) | SyncError::Replan { .. } => "InvalidProvidedNodeIP",
            SyncError::Kube { .. } => "NodeUpdateFailed",
        }
    }
}

impl ReconcileError for SyncError {
    fn event_reason(&self) -> Option<&str> {
        Some(self.reason())
    }

    fn is_transient(&self) -> bool {
        SyncError::is_transient(self)
    }
}

/// What syncing one node comes down to (upstream `syncNode` before its API writes).
#[derive(Debug, Clone, PartialEq)]
pub enum SyncPlan {
    /// The node is initialized: only copy beta labels to GA labels (may be empty).
    ReconcileLabels(std::collections::BTreeMap<String, String>),
    /// The provider returned no metadata: leave the node tainted until its next event.
    Skip,
    /// Initialize the node.
    Initialize {
        /// The status and spec writes that initialize it.
        plan: Box<plan::InitPlan>,
        /// The provider's answer (kept to re-plan after a conflict).
        metadata: Box<cloud_provider::InstanceMetadata>,
    },
}

/// Asks the provider about `node` and decides what to write. No Kubernetes API calls.
pub async fn plan_sync<C: Cloud>(cloud: &C, node: &Node) -> Result<SyncPlan, SyncError> {
    if !is_uninitialized(node) {
        return Ok(SyncPlan::ReconcileLabels(plan_label_reconcile(node)));
    }
    let name = node.name_any();
    let metadata =
        get_instance_metadata(cloud, node).await.map_err(|source| SyncError::Metadata { node: name, source })?;
    let Some(metadata) = metadata else { return Ok(SyncPlan::Skip) };
    let plan = plan_initialization(node, &metadata)?;
    Ok(SyncPlan::Initialize { plan: Box::new(plan), metadata: Box::new(metadata) })
}

/// The address refresh for `nodes` (upstream `UpdateNodeStatus` without the writes): one
/// provider lookup per initialized node, `workers` at a time; returns the nodes whose
/// `status.addresses` must change, with the new addresses. Lookup errors are logged.
pub async fn plan_status_updates<C: Cloud>(
    cloud: &C,
    nodes: &[Arc<Node>],
    workers: usize,
) -> Vec<(String, Vec<cloud_provider::NodeAddress>)> {
    let initialized: Vec<Arc<Node>> = nodes.iter().filter(|n| !is_uninitialized(n)).cloned().collect();
    if initialized.is_empty() {
        return Vec::new();
    }
    if let Some(v2) = cloud.instances_v2() {
        v2.prefetch(&initialized, LookupPurpose::Metadata).await;
    }
    futures::stream::iter(initialized)
        .map(|node: Arc<Node>| async move {
            let name = node.name_any();
            let addresses = match get_instance_node_addresses(cloud, &node).await {
                Ok(Some(a)) => a,
                Ok(None) => return None,
                Err(e) => {
                    warn!(node = %name, error = %e, "error getting instance metadata for node addresses");
                    return None;
                }
            };
            match plan_addresses(&node, &addresses) {
                Ok(Some(new)) => Some((name, new)),
                Ok(None) => None,
                Err(e) => {
                    error!(node = %name, error = %e, "failed to update node addresses");
                    None
                }
            }
        })
        .buffer_unordered(workers.max(1))
        .filter_map(std::future::ready)
        .collect()
        .await
}

/// The cloud-node controller.
pub struct CloudNodeController<C: Cloud> {
    reconciler: Arc<NodeReconciler<C>>,
    queue: WorkQueue<ObjectRef<Node>>,
    synced: Synced,
    io: ControllerIo,
    config: NodeControllerConfig,
    metrics: metrics::NodeMetrics,
}

/// How often the node controller announces a burst of uninitialized nodes to the provider.
const BURST_PREFETCH_INTERVAL: Duration = Duration::from_secs(1);

/// `sync_node` and what it needs; the reconciler the generic workers run.
struct NodeReconciler<C: Cloud> {
    /// When the last burst prefetch ran (announcing every pending node on every sync would
    /// make a burst of n nodes cost O(n²)).
    last_burst_prefetch: std::sync::Mutex<Option<tokio::time::Instant>>,
    api: Api<Node>,
    params: PatchParams,
    cloud: Arc<C>,
    store: Store<Node>,
    events: EventRecorder,
}

impl<C: Cloud> CloudNodeController<C> {
    /// Wires the controller to the shared node informer (every add and update, including
    /// resyncs, enqueues the node).
    pub fn new(
        cloud: Arc<C>,
        informer: &mut Informer<Node>,
        io: ControllerIo,
        config: NodeControllerConfig,
        shutdown: CancellationToken,
    ) -> Self {
        let queue =
            WorkQueue::new(CONTROLLER_NAME, ExponentialBackoff::CONTROLLER_DEFAULT, shutdown).with_metrics(&io.metrics);
        let q = queue.clone();
        let node_metrics = metrics::NodeMetrics::default();
        let counted = node_metrics.clone();
        informer.on_change(CONTROLLER_NAME, move |change| match change {
            Change::Applied { old, new } => {
                counted.changed(old.is_some_and(|o| is_uninitialized(o)), is_uninitialized(new));
                q.add(key_of(new.as_ref()));
            }
            Change::Deleted(gone) => counted.changed(is_uninitialized(gone), false),
        });
        let reconciler = Arc::new(NodeReconciler {
            last_burst_prefetch: Default::default(),
            api: Api::all(io.client.clone()),
            params: io.patch_params(),
            cloud,
            store: informer.store(),
            events: io.events(CONTROLLER_NAME),
        });
        CloudNodeController { reconciler, queue, synced: informer.synced(), io, config, metrics: node_metrics }
    }

    /// The controller's metrics, to register where they are served.
    pub fn metrics(&self) -> metrics::NodeMetrics {
        self.metrics.clone()
    }

    /// Runs the workers and the periodic address refresh until the shutdown token fires,
    /// once the informer has synced.
    pub async fn run(self) {
        let shutdown = self.queue.shutdown_token().clone();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            ok = self.synced.wait() => if !ok { return },
        }
        info!(workers = self.config.workers, "cloud-node controller started");
        let workers = Workers::new(
            self.reconciler.clone(),
            self.queue.clone(),
            WorkerConfig::new(CONTROLLER_NAME, self.config.workers),
        )
        .events(self.io.events(CONTROLLER_NAME))
        .metrics(self.io.metrics.clone());
        let status = self.reconciler.clone();
        let config = self.config;
        // On the pass runner: a refresh that panics (a provider bug) is counted and retried with
        // backoff; the next one comes a period after the previous ended (upstream `wait.Until`).
        let refresh = Passes::new(
            PassConfig {
                timer: PassTimer::Sliding(config.status_update_frequency),
                ..PassConfig::new(STATUS_UPDATE_NAME)
            },
            shutdown,
        )
        .metrics(self.io.metrics.clone());
        tokio::join!(
            workers.run(),
            refresh.run(|| async {
                status.update_node_status(&config).await;
                Ok::<_, std::convert::Infallible>(Reconciled::DONE)
            })
        );
    }
}

impl<C: Cloud> Reconciler for NodeReconciler<C> {
    type Resource = Node;
    type Error = SyncError;

    async fn reconcile(&self, key: &ObjectRef<Node>) -> Result<Reconciled, SyncError> {
        self.sync_node(key).await
    }

    fn regarding(&self, key: &ObjectRef<Node>) -> Option<ObjectReference> {
        self.store.get(key).map(|n| object_ref(n.as_ref()))
    }
}

/// How the conflict-retried initialization write ended.
enum InitWrite {
    Written,
    /// The node was initialized (or deleted) meanwhile.
    Gone,
    /// The fresh node cannot be initialized with the provider's answer.
    Replan(InvalidProvidedNodeIp),
}

impl<C: Cloud> NodeReconciler<C> {
    /// True (and records now) if no burst prefetch ran within [`BURST_PREFETCH_INTERVAL`].
    fn burst_prefetch_due(&self) -> bool {
        // A timestamp only; a poisoned lock still holds a valid one.
        let mut last = self.last_burst_prefetch.lock_unpoisoned();
        let now = tokio::time::Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < BURST_PREFETCH_INTERVAL) {
            return false;
        }
        *last = Some(now);
        true
    }

    /// Upstream `syncNode`.
    async fn sync_node(&self, key: &ObjectRef<Node>) -> Result<Reconciled, SyncError> {
        let Some(node) = self.store.get(key) else { return Ok(Reconciled::DONE) };
        let name = key.name.as_str();
        if is_uninitialized(&node)
            && let Some(v2) = self.cloud.instances_v2()
            && self.burst_prefetch_due()
        {
            // A burst of new nodes: let the provider fetch them in bulk instead of one by one.
            let pending: Vec<Arc<Node>> = self.store.state().into_iter().filter(|n| is_uninitialized(n)).collect();
            if pending.len() > 1 {
                v2.prefetch(&pending, LookupPurpose::Metadata).await;
            }
        }
        let kube_err = |action| move |source| SyncError::Kube { action, node: name.to_owned(), source };
        let (plan, metadata) = match plan_sync(&*self.cloud, &node).await? {
            SyncPlan::ReconcileLabels(labels) => {
                if !labels.is_empty() {
                    self.api
                        .patch(name, &self.params, &Patch::Merge(labels_patch(&labels)))
                        .await
                        .map_err(kube_err("reconcile labels of"))?;
                }
                return Ok(Reconciled::DONE);
            }
            SyncPlan::Skip => {
                info!(node = %name, "skip sync node because cloud provided nil metadata");
                return Ok(Reconciled::ANSWERED);
            }
            SyncPlan::Initialize { plan, metadata } => (*plan, *metadata),
        };
        info!(node = %name, "initializing node with cloud provider");

        // Addresses first; the spec write below continues from the object this returns, so it
        // does not conflict with our own status write.
        let mut node = node;
        if let Some(patch) = plan.status_patch() {
            match self.api.patch_status(name, &self.params, &Patch::Merge(patch)).await {
                Ok(patched) => node = Arc::new(patched),
                Err(e) if is_not_found(&e) => return Ok(Reconciled::ANSWERED),
                Err(e) => return Err(kube_err("write addresses of")(e)),
            }
        }

        let result = retry_on_conflict(ConflictRetry::UPDATE_NODE_SPEC, |attempt| {
            let node = node.clone();
            let (metadata, plan) = (&metadata, &plan);
            async move {
                let (current, plan) = if attempt == 0 {
                    (node, plan.clone())
                } else {
                    let fresh = self.api.get(name).await?;
                    if !is_uninitialized(&fresh) {
                        return Ok(InitWrite::Gone);
                    }
                    match plan_initialization(&fresh, metadata) {
                        Ok(replanned) => (Arc::new(fresh), replanned),
                        Err(e) => return Ok(InitWrite::Replan(e)),
                    }
                };
                let patch = plan.spec_patch(current.resource_version().as_deref());
                self.api.patch(name, &self.params, &Patch::Merge(patch)).await?;
                Ok(InitWrite::Written)
            }
        })
        .await;
        match result {
            Ok(InitWrite::Written) => {}
            Ok(InitWrite::Gone) => return Ok(Reconciled::ANSWERED),
            Ok(InitWrite::Replan(source)) => return Err(SyncError::Replan { node: name.to_owned(), source }),
            Err(e) if is_not_found(&e) => return Ok(Reconciled::ANSWERED),
            Err(e) => return Err(kube_err("initialize")(e)),
        }
        info!(node = %name, provider_id = %metadata.provider_id, "successfully initialized node with cloud provider");
        self.events.normal(&object_ref(node.as_ref()), "Synced", "Node synced successfully".to_owned()).await;
        Ok(Reconciled::ANSWERED)
    }

    /// Upstream `UpdateNodeStatus`: one pass of the periodic address refresh.
    async fn update_node_status(&self, config: &NodeControllerConfig) {
        let workers = if config.status_workers == 0 { config.workers } else { config.status_workers };
        let updates = plan_status_updates(&*self.cloud, &self.store.state(), workers).await;
        for (name, addresses) in updates {
            let patch = Patch::Merge(addresses_patch(&addresses));
            if let Err(e) = self.api.patch_status(&name, &self.params, &patch).await {
                error!(node = %name, error = %e, "error patching node addresses");
            }
        }
    }
}
