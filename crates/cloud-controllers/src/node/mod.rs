//! The cloud-node controller (upstream `controllers/node`).
//!
//! ```text
//!  Node informer ── add/update ──► WorkQueue<name> ──► N workers ──► sync_node
//!                                                                     │ tainted? ──no──► reconcile beta→GA labels
//!                                                                     │ yes
//!                                                                     ▼
//!                                    provider.instance_metadata ──► plan_initialization (pure)
//!                                                                     │
//!                                     patch status.addresses ◄────────┤
//!                                     patch providerID+labels+taints ◄┘ (taint removed last)
//!                                     Normal "Synced" event; errors: Warning event + backoff
//!
//!  every --node-status-update-frequency: prefetch(initialized nodes), then per node
//!  (--concurrent-node-status-updates at once) refresh status.addresses if they changed.
//! ```

pub mod metadata;
pub mod plan;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::{Cloud, InstancesV2, LookupPurpose};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::events::{EventRecorder, node_ref};
use crate::informer::{Change, Informer, Synced};
use crate::node_writes::{self, is_not_found, retry_on_conflict};
use crate::workqueue::{ExponentialBackoff, WorkQueue};
use metadata::{MetadataError, get_instance_metadata, get_instance_node_addresses};

use plan::{InvalidProvidedNodeIp, is_uninitialized, plan_addresses, plan_initialization, plan_label_reconcile};

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
        /// The node.
        node: String,
        /// Why.
        #[source]
        source: MetadataError,
    },
    /// The provided node IP does not match the cloud's addresses.
    #[error("failed to get node modifiers from cloud provider: {0}")]
    ProvidedNodeIp(#[from] InvalidProvidedNodeIp),
    /// A Kubernetes API call failed.
    #[error("failed to {action} node {node}: {source}")]
    Kube {
        /// What we tried.
        action: &'static str,
        /// The node.
        node: String,
        /// Why.
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
            SyncError::ProvidedNodeIp(_) => "InvalidProvidedNodeIP",
            SyncError::Kube { .. } => "NodeUpdateFailed",
        }
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
        /// The writes.
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
    inner: Arc<Inner<C>>,
}

/// How often one node that failed transiently is retried early to detect recovery.
const RECOVERY_PROBE_INTERVAL: Duration = Duration::from_secs(30);

/// How often the node controller announces a burst of uninitialized nodes to the provider.
const BURST_PREFETCH_INTERVAL: Duration = Duration::from_secs(1);

struct Inner<C: Cloud> {
    /// When the last burst prefetch ran (announcing every pending node on every sync would
    /// make a burst of n nodes cost O(n²)).
    last_burst_prefetch: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// Nodes whose last sync failed transiently (e.g. a Hetzner outage). Their backoff keeps
    /// client-go's semantics, but as soon as one of them (or any node) syncs successfully
    /// again, all of them are retried at once, so an outage ends for every node together.
    transient: std::sync::Mutex<std::collections::BTreeSet<String>>,
    api: Api<Node>,
    cloud: Arc<C>,
    store: Store<Node>,
    synced: Synced,
    queue: WorkQueue<String>,
    events: EventRecorder,
    config: NodeControllerConfig,
}

impl<C: Cloud> CloudNodeController<C> {
    /// Wires the controller to the shared node informer (every add and update, including
    /// resyncs, enqueues the node).
    pub fn new(
        client: Client,
        cloud: Arc<C>,
        informer: &mut Informer<Node>,
        config: NodeControllerConfig,
        shutdown: CancellationToken,
    ) -> Self {
        let queue = WorkQueue::new(ExponentialBackoff::CONTROLLER_DEFAULT, shutdown);
        let q = queue.clone();
        informer.on_change(move |change| {
            if let Change::Applied { new, .. } = change {
                q.add(new.name_any());
            }
        });
        CloudNodeController {
            inner: Arc::new(Inner {
                last_burst_prefetch: Default::default(),
                transient: Default::default(),
                api: Api::all(client.clone()),
                cloud,
                store: informer.store(),
                synced: informer.synced(),
                queue,
                events: EventRecorder::new(client, "cloud-node-controller"),
                config,
            }),
        }
    }

    /// Runs the workers and the periodic address refresh until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let inner = self.inner;
        tokio::select! {
            _ = shutdown.cancelled() => return,
            synced = inner.synced.wait() => if !synced { return },
        }
        info!(workers = inner.config.workers, "cloud-node controller started");
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..inner.config.workers.max(1) {
            let inner = inner.clone();
            tasks.spawn(async move { inner.worker().await });
        }
        let status = inner.clone();
        let token = shutdown.clone();
        tasks.spawn(async move { status.status_loop(token).await });
        let probe = inner.clone();
        let token = shutdown.clone();
        tasks.spawn(async move { probe.recovery_probe(token).await });
        shutdown.cancelled().await;
        tasks.shutdown().await;
    }
}

impl<C: Cloud> Inner<C> {
    async fn worker(&self) {
        while let Some(name) = self.queue.get().await {
            debug!(node = %name, "syncing node");
            match self.sync_node(&name).await {
                Ok(provider_answered) => {
                    self.queue.forget(&name);
                    self.transient_set().remove(&name);
                    if provider_answered {
                        self.retry_transient_failures();
                    }
                }
                Err(e) => {
                    if e.is_transient() {
                        self.transient_set().insert(name.clone());
                    } else {
                        self.transient_set().remove(&name);
                    }
                    let failures = self.queue.failures(&name);
                    // First failure, then every doubling: visible but not a flood.
                    if failures.is_power_of_two() || failures == 0 {
                        if let Some(node) = self.store.get(&ObjectRef::new(&name)) {
                            self.events.warning(&node_ref(&node), e.reason(), e.to_string()).await;
                        }
                    } else {
                        warn!(node = %name, error = %e, "node sync failed");
                    }
                    let delay = self.queue.add_rate_limited(name.clone());
                    debug!(node = %name, ?delay, "requeued");
                }
            }
            self.queue.done(&name);
        }
    }

    /// True (and records now) if no burst prefetch ran within [`BURST_PREFETCH_INTERVAL`].
    fn burst_prefetch_due(&self) -> bool {
        // A timestamp only; a poisoned lock still holds a valid one.
        let mut last = self.last_burst_prefetch.lock().unwrap_or_else(|e| e.into_inner());
        let now = tokio::time::Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < BURST_PREFETCH_INTERVAL) {
            return false;
        }
        *last = Some(now);
        true
    }

    fn transient_set(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeSet<String>> {
        // Inserts and removes only; a poisoned set is still a valid set.
        self.transient.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// After the provider answered again, retries every node that failed transiently, now.
    fn retry_transient_failures(&self) {
        let waiting: Vec<String> = std::mem::take(&mut *self.transient_set()).into_iter().collect();
        if !waiting.is_empty() {
            info!(nodes = waiting.len(), "cloud provider answers again; retrying nodes that failed during the outage");
            for name in waiting {
                self.queue.add(name);
            }
        }
    }

    /// Every [`RECOVERY_PROBE_INTERVAL`], retries one transiently failed node early.
    async fn recovery_probe(&self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(RECOVERY_PROBE_INTERVAL) => {}
            }
            let probe = self.transient_set().iter().next().cloned();
            if let Some(name) = probe {
                debug!(node = %name, "probing whether the cloud provider recovered");
                self.queue.add(name);
            }
        }
    }

    /// Upstream `syncNode`. `Ok(true)` if the provider was asked and answered.
    async fn sync_node(&self, name: &str) -> Result<bool, SyncError> {
        let Some(node) = self.store.get(&ObjectRef::new(name)) else { return Ok(false) };
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
        let (plan, metadata) =
            match plan_sync(&*self.cloud, &node).await? {
                SyncPlan::ReconcileLabels(labels) => {
                    if !labels.is_empty() {
                        node_writes::patch_labels(&self.api, name, &labels).await.map_err(|source| {
                            SyncError::Kube { action: "reconcile labels of", node: name.to_owned(), source }
                        })?;
                    }
                    return Ok(false);
                }
                SyncPlan::Skip => {
                    info!(node = %name, "skip sync node because cloud provided nil metadata");
                    return Ok(true);
                }
                SyncPlan::Initialize { plan, metadata } => (*plan, *metadata),
            };
        info!(node = %name, "initializing node with cloud provider");
        let kube_err = |action| move |source| SyncError::Kube { action, node: name.to_owned(), source };

        // Addresses first; the spec write below continues from the object this returns, so it
        // does not conflict with our own status write.
        let mut node = node;
        if let Some(addresses) = &plan.addresses {
            match node_writes::patch_addresses(&self.api, name, addresses).await {
                Ok(patched) => node = Arc::new(patched),
                Err(e) if is_not_found(&e) => return Ok(true),
                Err(e) => return Err(kube_err("write addresses of")(e)),
            }
        }

        let result = retry_on_conflict(20, Duration::from_millis(50), |attempt| {
            let node = node.clone();
            let metadata = &metadata;
            let plan = &plan;
            async move {
                let (current, plan) = if attempt == 0 {
                    (node, plan.clone())
                } else {
                    let fresh = self.api.get(name).await?;
                    if !is_uninitialized(&fresh) {
                        return Ok(false);
                    }
                    let replanned = plan_initialization(&fresh, metadata).unwrap_or_else(|_| plan.clone());
                    (Arc::new(fresh), replanned)
                };
                let rv = current.resource_version().unwrap_or_default();
                node_writes::patch_spec_and_labels(
                    &self.api,
                    name,
                    &rv,
                    plan.provider_id.as_deref(),
                    &plan.labels,
                    &plan.taints,
                )
                .await
                .map(|_| true)
            }
        })
        .await;
        match result {
            Ok(true) => {}
            Ok(false) => return Ok(true),
            Err(e) if is_not_found(&e) => return Ok(true),
            Err(e) => return Err(kube_err("initialize")(e)),
        }
        info!(node = %name, provider_id = %metadata.provider_id, "successfully initialized node with cloud provider");
        self.events.normal(&node_ref(&node), "Synced", "Node synced successfully".to_owned()).await;
        Ok(true)
    }

    /// Upstream `UpdateNodeStatus`, every `status_update_frequency` (sliding).
    async fn status_loop(&self, shutdown: CancellationToken) {
        loop {
            self.update_node_status().await;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(self.config.status_update_frequency) => {}
            }
        }
    }

    async fn update_node_status(&self) {
        let workers = if self.config.status_workers == 0 { self.config.workers } else { self.config.status_workers };
        let updates = plan_status_updates(&*self.cloud, &self.store.state(), workers).await;
        for (name, addresses) in updates {
            if let Err(e) = node_writes::patch_addresses(&self.api, &name, &addresses).await {
                error!(node = %name, error = %e, "error patching node addresses");
            }
        }
    }
}
