//! The I/O layer of the service controller: upstream's `syncService` and `syncNodes` with
//! their cloud calls, events and API writes. Every decision is taken by the pure functions in
//! `filter`, `nodes` and `plan`; this file only sends what they planned.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use sync_lock::Unpoison as _;

use cloud_provider::{CloudError, LoadBalancer};
use controller_runtime::writes::{ConflictRetry, is_not_found, patch_replanned};
use controller_runtime::{
    EventRecorder, KeyName, KeyedGuard, KeyedLock, ReconcileError, Reconciled, key_of, object_ref,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;
use tracing::{debug, info, warn};

use super::cache::{CachedService, ServiceCache};
use super::filter::wants_load_balancer;
use super::metrics::ServiceMetrics;
use super::nodes::{
    NodeListError, NodeLister, STABLE_NODE_SET_PREDICATES, changed_label_keys, filter_with_predicates,
    list_with_predicates, loggable_node_names, nodes_equal_for_label_keys,
};
use super::plan::{
    Operation, StatusEcho, add_finalizer_patch, operation, remove_finalizer_patch, status_patch, to_kube_status,
};

/// The Service `name` as the API server has it now, read with a `list` by name (a quorum read,
/// as a GET is): the CCM needs only `list` and `watch` on Services, all the official ClusterRole
/// grants, so it runs under that role unchanged. No Service of that name is a 404, as a GET's.
async fn read_service(api: &Api<Service>, name: &str) -> Result<Service, kube::Error> {
    let params = ListParams::default().fields(&format!("metadata.name={name}"));
    api.list(&params).await?.items.into_iter().find(|s| s.metadata.name.as_deref() == Some(name)).ok_or_else(|| {
        kube::Error::Api(
            kube::core::Status::failure(&format!("services \"{name}\" not found"), "NotFound").with_code(404).boxed(),
        )
    })
}

/// Why syncing a Service failed. The messages are upstream's.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// `get_load_balancer` failed before a deletion.
    #[error("failed to check if load balancer exists before cleanup: {0}")]
    CheckExists(#[source] CloudError),
    /// `ensure_load_balancer_deleted` failed.
    #[error("failed to delete load balancer: {0}")]
    Delete(#[source] CloudError),
    /// Deleting the load balancer of a Service that is gone (or was re-created) failed; the
    /// provider's error as is.
    #[error("{0}")]
    DeleteGone(#[source] CloudError),
    /// The finalizer could not be removed.
    #[error("failed to remove load balancer cleanup finalizer: {0}")]
    RemoveFinalizer(#[source] kube::Error),
    /// The finalizer could not be added.
    #[error("failed to add load balancer cleanup finalizer: {0}")]
    AddFinalizer(#[source] kube::Error),
    /// The nodes could not be listed.
    #[error("failed to ensure load balancer: {0}")]
    ListNodes(#[source] NodeListError),
    /// `ensure_load_balancer` failed.
    #[error("failed to ensure load balancer: {0}")]
    Ensure(#[source] CloudError),
    /// The status could not be written.
    #[error("failed to update load balancer status: {0}")]
    UpdateStatus(#[source] kube::Error),
}

impl SyncError {
    fn cloud(&self) -> Option<&CloudError> {
        match self {
            SyncError::CheckExists(e) | SyncError::Delete(e) | SyncError::DeleteGone(e) | SyncError::Ensure(e) => {
                Some(e)
            }
            _ => None,
        }
    }
}

impl ReconcileError for SyncError {
    /// The controller publishes upstream's `SyncLoadBalancerFailed` (or
    /// `DeleteLoadBalancerFailed`) event itself on every failure, as upstream does.
    fn event_reason(&self) -> Option<&str> {
        None
    }

    fn is_transient(&self) -> bool {
        matches!(self.cloud(), Some(CloudError::Failed { transient: true, .. }))
    }

    /// A provider's `Retry` error is waited out exactly where upstream keeps its `RetryError`
    /// (wrapped with `%w` or returned as is): ensuring, and deleting the load balancer of a
    /// Service that is gone.
    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            SyncError::Ensure(e) | SyncError::DeleteGone(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// What the service controller works with; shared by the service workers and the node sync.
pub struct ServiceSyncer<L: LoadBalancer> {
    pub(crate) balancer: Arc<L>,
    pub(crate) cluster_name: String,
    pub(crate) class: Option<String>,
    services: Store<Service>,
    nodes: Arc<dyn NodeLister>,
    client: kube::Client,
    params: PatchParams,
    pub(crate) events: EventRecorder,
    pub(crate) cache: ServiceCache,
    /// The nodes each Service's load balancer was last given (upstream `lastSyncedNodes`).
    last_synced_nodes: Mutex<HashMap<ObjectRef<Service>, Vec<Arc<Node>>>>,
    /// What the API server made of the last status patch of each Service.
    status_echo: Mutex<HashMap<ObjectRef<Service>, StatusEcho>>,
    /// Held by a Service's sync and by the node sync's update of its load balancer, so the
    /// provider never gets two calls for one Service at once unless it says it takes them
    /// ([`LoadBalancer::calls_for_one_service_may_overlap`]; upstream's
    /// `lockedUpdateLoadBalancerHosts` names that intent).
    locks: KeyedLock<ObjectRef<Service>>,
    metrics: ServiceMetrics,
}

/// How [`ServiceSyncer`] reaches its surroundings.
pub struct SyncerParts<L: LoadBalancer> {
    /// The provider's load balancers.
    pub balancer: Arc<L>,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// The one `spec.loadBalancerClass` managed (`None`: Services without a class).
    pub class: Option<String>,
    /// The Service cache (the shared informer's store).
    pub services: Store<Service>,
    /// The nodes (the shared informer's store).
    pub nodes: Arc<dyn NodeLister>,
    /// The controller's client.
    pub client: kube::Client,
    /// Patch parameters (field manager).
    pub params: PatchParams,
    /// Events, as `service-controller`.
    pub events: EventRecorder,
    /// Upstream's service controller metrics.
    pub metrics: ServiceMetrics,
}

impl<L: LoadBalancer> ServiceSyncer<L> {
    /// A syncer with an empty cache.
    pub fn new(parts: SyncerParts<L>) -> Self {
        let SyncerParts { balancer, cluster_name, class, services, nodes, client, params, events, metrics } = parts;
        ServiceSyncer {
            balancer,
            cluster_name,
            class,
            services,
            nodes,
            client,
            params,
            events,
            cache: ServiceCache::default(),
            last_synced_nodes: Mutex::default(),
            status_echo: Mutex::default(),
            locks: KeyedLock::new(),
            metrics,
        }
    }

    /// The controller's metrics.
    pub fn metrics(&self) -> &ServiceMetrics {
        &self.metrics
    }

    fn class(&self) -> Option<&str> {
        self.class.as_deref()
    }

    /// Holds the Service's lock (see `locks`), unless the provider takes overlapping calls for
    /// one Service: then nothing is held, as upstream holds nothing.
    async fn exclusive(&self, key: &ObjectRef<Service>) -> Option<KeyedGuard<ObjectRef<Service>>> {
        if self.balancer.calls_for_one_service_may_overlap() {
            return None;
        }
        Some(self.locks.lock(key.clone()).await)
    }

    fn api(&self, service: &Service) -> Api<Service> {
        Api::namespaced(self.client.clone(), service.metadata.namespace.as_deref().unwrap_or_default())
    }

    /// The Service in the informer's cache.
    pub fn cached_service(&self, key: &ObjectRef<Service>) -> Option<Arc<Service>> {
        self.services.get(key)
    }

    /// Upstream `syncService`.
    pub async fn sync_service(&self, key: &ObjectRef<Service>) -> Result<Reconciled, SyncError> {
        let _held = self.exclusive(key).await;
        match self.services.get(key) {
            None => self.process_service_deletion(key).await,
            Some(service) => self.process_service_create_or_update(service, key).await,
        }
    }

    /// Upstream `processServiceDeletion`: the Service is gone from the cache; delete the load
    /// balancer of its last synced state, if any.
    pub async fn process_service_deletion(&self, key: &ObjectRef<Service>) -> Result<Reconciled, SyncError> {
        let Some(CachedService { state }) = self.cache.get(key) else { return Ok(Reconciled::DONE) };
        info!(service = %KeyName(key), "service has been deleted; attempting to clean up load balancer resources");
        let outcome = match state {
            Some(service) => self.process_load_balancer_delete(&service).await?,
            None => Reconciled::DONE,
        };
        self.forget(key);
        Ok(outcome)
    }

    fn forget(&self, key: &ObjectRef<Service>) {
        self.cache.delete(key);
        self.last_synced_nodes.lock_unpoisoned().remove(key);
        self.status_echo.lock_unpoisoned().remove(key);
    }

    /// Upstream `processLoadBalancerDelete`, for a Service that is gone or was replaced.
    async fn process_load_balancer_delete(&self, service: &Service) -> Result<Reconciled, SyncError> {
        if !wants_load_balancer(service, self.class()) {
            return Ok(Reconciled::DONE);
        }
        let reference = object_ref(service);
        self.events.normal(&reference, "DeletingLoadBalancer", "Deleting load balancer".to_owned()).await;
        if let Err(e) = self.balancer.ensure_load_balancer_deleted(&self.cluster_name, service).await {
            self.events
                .warning(&reference, "DeleteLoadBalancerFailed", format!("Error deleting load balancer: {e}"))
                .await;
            return Err(SyncError::DeleteGone(e));
        }
        self.events.normal(&reference, "DeletedLoadBalancer", "Deleted load balancer".to_owned()).await;
        Ok(Reconciled::ANSWERED)
    }

    /// Upstream `processServiceCreateOrUpdate`.
    pub async fn process_service_create_or_update(
        &self,
        service: Arc<Service>,
        key: &ObjectRef<Service>,
    ) -> Result<Reconciled, SyncError> {
        let cached = self.cache.get_or_create(key);
        if let Some(old) = cached.state
            && old.metadata.uid != service.metadata.uid
        {
            // Deleted and re-created without the finalizer meanwhile: the old load balancer goes.
            self.process_load_balancer_delete(&old).await?;
            self.status_echo.lock_unpoisoned().remove(key);
        }
        self.cache.set(key, CachedService { state: Some(service.clone()) });
        match self.sync_load_balancer_if_needed(&service, key).await {
            Err(e) => {
                self.events
                    .warning(
                        &object_ref(service.as_ref()),
                        "SyncLoadBalancerFailed",
                        format!("Error syncing load balancer: {e}"),
                    )
                    .await;
                Err(e)
            }
            Ok(op) => {
                if op == Operation::Delete {
                    self.forget(key);
                }
                // The sync asked the provider and got an answer.
                Ok(Reconciled::ANSWERED)
            }
        }
    }

    /// Upstream `syncLoadBalancerIfNeeded`: deletes or ensures the load balancer, manages the
    /// finalizer around it, and records the status. Returns the operation; every `Ok` asked
    /// the provider and got an answer.
    pub async fn sync_load_balancer_if_needed(
        &self,
        service: &Service,
        key: &ObjectRef<Service>,
    ) -> Result<Operation, SyncError> {
        let op = operation(service, self.class());
        let reference = object_ref(service);
        let new_status = match op {
            Operation::Delete => {
                let exists = self
                    .balancer
                    .get_load_balancer(&self.cluster_name, service)
                    .await
                    .map_err(SyncError::CheckExists)?
                    .is_some();
                if exists {
                    info!(service = %KeyName(key), "deleting existing load balancer");
                    self.events.normal(&reference, "DeletingLoadBalancer", "Deleting load balancer".to_owned()).await;
                    match self.balancer.ensure_load_balancer_deleted(&self.cluster_name, service).await {
                        Ok(()) => {}
                        Err(CloudError::ImplementedElsewhere) => {
                            debug!(service = %KeyName(key), "load balancer implemented by a different controller; ignoring")
                        }
                        Err(e) => return Err(SyncError::Delete(e)),
                    }
                }
                // Always remove the finalizer once the load balancer is gone, so the Service
                // can be deleted.
                self.remove_finalizer(service).await.map_err(SyncError::RemoveFinalizer)?;
                self.events.normal(&reference, "DeletedLoadBalancer", "Deleted load balancer".to_owned()).await;
                LoadBalancerStatus::default()
            }
            Operation::Ensure => {
                info!(service = %KeyName(key), "ensuring load balancer");
                self.events.normal(&reference, "EnsuringLoadBalancer", "Ensuring load balancer".to_owned()).await;
                // The finalizer goes on before any load balancer exists, so the Service cannot
                // be deleted without its load balancer being deleted too.
                self.add_finalizer(service).await.map_err(SyncError::AddFinalizer)?;
                let status = match self.ensure_load_balancer(service, key).await {
                    Ok(status) => status,
                    Err(SyncError::Ensure(CloudError::ImplementedElsewhere)) => {
                        debug!(service = %KeyName(key), "load balancer implemented by a different controller; ignoring");
                        return Ok(op);
                    }
                    Err(e) => return Err(e),
                };
                self.events.normal(&reference, "EnsuredLoadBalancer", "Ensured load balancer".to_owned()).await;
                to_kube_status(&status)
            }
        };
        match self.patch_status(service, key, &new_status).await {
            Ok(()) => {}
            // Usually the Service is gone right after its finalizer was removed.
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(SyncError::UpdateStatus(e)),
        }
        Ok(op)
    }

    /// Upstream `ensureLoadBalancer`: the stable node set goes to the provider and is
    /// remembered as the load balancer's nodes.
    async fn ensure_load_balancer(
        &self,
        service: &Service,
        key: &ObjectRef<Service>,
    ) -> Result<cloud_provider::LoadBalancerStatus, SyncError> {
        let nodes =
            list_with_predicates(self.nodes.as_ref(), &STABLE_NODE_SET_PREDICATES).map_err(SyncError::ListNodes)?;
        if nodes.is_empty() {
            self.events
                .warning(
                    &object_ref(service),
                    "UnAvailableLoadBalancer",
                    "There are no available nodes for LoadBalancer".to_owned(),
                )
                .await;
        }
        self.last_synced_nodes.lock_unpoisoned().insert(key.clone(), nodes.clone());
        let hosts: Vec<Node> = nodes.iter().map(|n| Node::clone(n)).collect();
        self.balancer.ensure_load_balancer(&self.cluster_name, service, &hosts).await.map_err(SyncError::Ensure)
    }

    /// Sends the finalizer patch `plan` makes of the Service; after a conflict, re-reads the
    /// Service and re-plans (another writer changed its finalizers meanwhile).
    async fn patch_finalizers(
        &self,
        service: &Service,
        plan: fn(&Service) -> Option<Value>,
    ) -> Result<(), kube::Error> {
        let api = self.api(service);
        let name = service.metadata.name.clone().unwrap_or_default();
        patch_replanned(
            ConflictRetry::NODE_HELPERS,
            service,
            || read_service(&api, &name),
            // A Service replaced by a new one (another UID) has nothing of ours to change.
            |current: &Service| (current.metadata.uid == service.metadata.uid).then(|| plan(current)).flatten(),
            |patch| {
                debug!(service = %name, %patch, "patching finalizers");
                let (api, name, params) = (&api, &name, &self.params);
                async move { api.patch_status(name, params, &Patch::Merge(patch)).await.map(drop) }
            },
        )
        .await
    }

    /// Upstream `addFinalizer`.
    pub async fn add_finalizer(&self, service: &Service) -> Result<(), kube::Error> {
        self.patch_finalizers(service, add_finalizer_patch).await
    }

    /// Upstream `removeFinalizer`; a Service that is gone has no finalizer left to remove.
    pub async fn remove_finalizer(&self, service: &Service) -> Result<(), kube::Error> {
        match self.patch_finalizers(service, remove_finalizer_patch).await {
            Err(e) if is_not_found(&e) => Ok(()),
            other => other,
        }
    }

    /// Upstream `patchStatus`: writes `status.loadBalancer` if it differs.
    pub async fn patch_status(
        &self,
        service: &Service,
        key: &ObjectRef<Service>,
        desired: &LoadBalancerStatus,
    ) -> Result<(), kube::Error> {
        let echo = self.status_echo.lock_unpoisoned().get(key).cloned();
        let Some(patch) = status_patch(service, desired, echo.as_ref()) else { return Ok(()) };
        let name = service.metadata.name.as_deref().unwrap_or_default();
        debug!(service = %KeyName(key), %patch, "patching status");
        let stored = self.api(service).patch_status(name, &self.params, &Patch::Merge(patch)).await?;
        self.status_echo.lock_unpoisoned().insert(key.clone(), StatusEcho::new(service, desired, &stored));
        Ok(())
    }

    /// Upstream `syncNodes`: brings every cached load balancer to the current node set, `workers`
    /// at a time. Returns the Services to retry with a full sync.
    pub async fn sync_nodes(&self, workers: usize) -> HashSet<ObjectRef<Service>> {
        let started = std::time::Instant::now();
        let services = self.cache.all_services();
        let total = services.len();
        let retry = self.update_load_balancer_hosts(&services, workers).await;
        ServiceMetrics::observe(&self.metrics.nodesync_latency, started.elapsed());
        debug!(
            services = total,
            failed = retry.len(),
            elapsed = ?started.elapsed(),
            "synced load balancer backends with the node set"
        );
        retry
    }

    /// True if a label that changed from `old` to `new` is one the provider reads for the
    /// backends of a cached Service's load balancer (a node sync is due).
    pub fn reads_changed_labels(&self, old: &Node, new: &Node) -> bool {
        let changed = changed_label_keys(old, new);
        !changed.is_empty()
            && self.cache.all_services().iter().flatten().any(|service| {
                wants_load_balancer(service, self.class())
                    && self.balancer.node_label_keys(service).iter().any(|k| changed.contains(k))
            })
    }

    /// Upstream `updateLoadBalancerHosts`.
    pub async fn update_load_balancer_hosts(
        &self,
        services: &[Option<Arc<Service>>],
        workers: usize,
    ) -> HashSet<ObjectRef<Service>> {
        let services: Vec<Arc<Service>> = services.iter().flatten().cloned().collect();
        futures::stream::iter(services)
            .map(|service: Arc<Service>| async move {
                let retry = self.node_sync_service(&service).await;
                retry.then(|| key_of(service.as_ref()))
            })
            .buffer_unordered(workers.max(1))
            .filter_map(std::future::ready)
            .collect()
            .await
    }

    /// Upstream `nodeSyncService`: `true` if the Service must be retried.
    pub async fn node_sync_service(&self, service: &Service) -> bool {
        if !wants_load_balancer(service, self.class()) {
            return false;
        }
        let key = key_of(service);
        let _held = self.exclusive(&key).await;
        let new_nodes = match list_with_predicates(self.nodes.as_ref(), &STABLE_NODE_SET_PREDICATES) {
            Ok(nodes) => nodes,
            Err(e) => {
                warn!(error = %e, "failed to retrieve node list");
                self.metrics.nodesync_error.inc();
                return true;
            }
        };
        let old_nodes = {
            let mut last = self.last_synced_nodes.lock_unpoisoned();
            let old =
                last.get(&key).map(|n| filter_with_predicates(n, &STABLE_NODE_SET_PREDICATES)).unwrap_or_default();
            // Stored before the provider is asked: a failure is retried by a full Service sync,
            // which stores its own node set.
            last.insert(key.clone(), new_nodes.clone());
            old
        };
        let label_keys = self.balancer.node_label_keys(service);
        if nodes_equal_for_label_keys(&old_nodes, &new_nodes, &label_keys) {
            return false;
        }
        match self.locked_update_load_balancer_hosts(service, &new_nodes).await {
            Ok(()) => false,
            Err(e) => {
                warn!(service = %KeyName(&key), error = %e, "failed to update load balancer hosts");
                self.metrics.nodesync_error.inc();
                true
            }
        }
    }

    /// Upstream `lockedUpdateLoadBalancerHosts`: gives the load balancer `hosts`; a failure
    /// counts only if the load balancer still exists.
    async fn locked_update_load_balancer_hosts(
        &self,
        service: &Service,
        hosts: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        let key = key_of(service);
        info!(service = %KeyName(&key), nodes = hosts.len(), names = ?loggable_node_names(hosts), "updating load balancer backends");
        let reference = object_ref(service);
        let nodes: Vec<Node> = hosts.iter().map(|n| Node::clone(n)).collect();
        self.metrics.loadbalancer_sync.inc();
        let started = std::time::Instant::now();
        let result = self.balancer.update_load_balancer(&self.cluster_name, service, &nodes).await;
        ServiceMetrics::observe(&self.metrics.update_host_latency, started.elapsed());
        let err = match result {
            Ok(()) => {
                if hosts.is_empty() {
                    self.events
                        .warning(
                            &reference,
                            "UnAvailableLoadBalancer",
                            "There are no available nodes for LoadBalancer".to_owned(),
                        )
                        .await;
                } else {
                    self.events
                        .normal(&reference, "UpdatedLoadBalancer", "Updated load balancer with new hosts".to_owned())
                        .await;
                }
                return Ok(());
            }
            Err(CloudError::ImplementedElsewhere) => return Ok(()),
            Err(e) => e,
        };
        match self.balancer.get_load_balancer(&self.cluster_name, service).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) => {}
            Err(check) => warn!(service = %KeyName(&key), error = %check, "failed to check if load balancer exists"),
        }
        self.events
            .warning(
                &reference,
                "UpdateLoadBalancerFailed",
                format!(
                    "Error updating load balancer with new hosts [{}] [node names limited, total number of nodes: {}], \
                     error: {err}",
                    loggable_node_names(hosts).join(" "),
                    hosts.len()
                ),
            )
            .await;
        Err(err)
    }

    /// How many Services' keys the syncer keeps a lock for.
    #[cfg(test)]
    pub(crate) fn locked_keys(&self) -> usize {
        self.locks.len()
    }

    /// Sets the nodes a Service's load balancer was last synced with (tests port upstream's
    /// direct writes to `lastSyncedNodes`).
    #[cfg(test)]
    pub(crate) fn store_last_synced_nodes(&self, key: &ObjectRef<Service>, nodes: Vec<Arc<Node>>) {
        self.last_synced_nodes.lock_unpoisoned().insert(key.clone(), nodes);
    }
}
