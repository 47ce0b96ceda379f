//! The node IPAM controller (upstream `nodeipam` with the range allocator, as
//! kube-controller-manager runs it, plus a cloud allocator): gives each Node its pod ranges
//! in `spec.podCIDRs`.
//!
//! ```text
//!  Node informer ── add/update/delete ──► WorkQueue ──► Workers ──► reconcile(node)
//!   on start, once synced: Allocations rebuilt from every Node's spec.podCIDRs (restart-safe)
//!
//!   gone ─────────────► release its ranges (what another node or the service range still
//!                       covers stays taken)
//!   holds ranges ─────► record them; Warning for entries outside the cluster CIDRs and for
//!                       ranges overlapping another node's or the service range; with the
//!                       cloud allocator: Warning if its IPv6 range left the instance's prefix
//!                       (a failed lookup of that check: Warning + backoff)
//!   needs ranges ─────► cloud allocator: provider.instance_metadata (node_prefixes) first
//!                       ─► Allocations::assign (pure) ─► pod_cidrs_patch ─► Node
//!                       exhausted / no prefix / prefix's range held by another node:
//!                       Warning + backoff
//!   write pending ────► the same patch again (its earlier answer was lost)
//!
//!   a write is sent up to 3 times while its outcome is unknown (upstream); the ranges are
//!   released only if the API server's answer says nothing was stored (write.rs)
//! ```
//!
//! The cloud allocator asks the provider for the instance's own prefixes
//! ([`InstanceMetadata::node_prefixes`](cloud_provider::InstanceMetadata::node_prefixes)) and
//! writes the second block of the first IPv6 one at the configured mask after the cluster
//! ranges, so dual-stack nodes get `[IPv4 from --cluster-cidr, IPv6 from the instance]`. Such
//! a range needs no route (it lies in the node's own prefix).
//!
//! Apart from upstream: a Node that is being deleted keeps its ranges until it is gone (two
//! live Nodes never share one); a node without pod CIDRs is retried with backoff when its
//! cluster CIDR is exhausted, with a `CIDRNotAvailable` Warning on the first failure and each
//! doubling, and at once when a deleted node frees a range; a write whose outcome is unknown
//! keeps its ranges and is sent again (upstream keeps them on a server timeout only, and
//! leaks them until a restart); overlapping ranges are reported, and releasing one never
//! frees what another node still holds.

pub mod allocator;
pub mod cidr_set;
#[cfg(test)]
mod controller_fault_tests;
#[cfg(test)]
mod controller_tests;
mod holders;
pub mod write;

use std::sync::{Arc, Mutex};

use cloud_provider::Cloud;
use controller_runtime::{
    Change, ControllerIo, EventRecorder, ExponentialBackoff, Informer, ReconcileError, Reconciled, Reconciler, Synced,
    WorkQueue, WorkerConfig, Workers, key_of, object_ref,
};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use sync_lock::Unpoison as _;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

pub use allocator::{
    Allocations, AssignError, ClusterRange, NodeIpamConfig, Observed, Overlap, OverlapWith, pod_cidrs_patch,
};
pub use cidr_set::{CidrSet, CidrSetError};

use crate::node::metadata::{MetadataError, get_instance_metadata};

/// Upstream's name of this controller (queue, events, metrics).
pub const CONTROLLER_NAME: &str = "node-ipam-controller";

/// Upstream's event reason when a cluster CIDR is exhausted.
pub const CIDR_NOT_AVAILABLE: &str = "CIDRNotAvailable";
/// Upstream's event reason when writing a node's ranges failed.
pub const CIDR_ASSIGNMENT_FAILED: &str = "CIDRAssignmentFailed";
/// A node holds a pod CIDR this allocator does not manage.
pub const POD_CIDR_NOT_MANAGED: &str = "PodCIDRNotManaged";
/// The instance of a node has no IPv6 prefix for the cloud allocator.
pub const NO_IPV6_PREFIX: &str = "NodeIPv6PrefixMissing";
/// A node's IPv6 range is no longer inside its instance's prefix.
pub const PREFIX_CHANGED: &str = "PodCIDRNotInNodePrefix";
/// The IPv6 range of a node's instance prefix is another node's pod CIDR.
pub const IPV6_PREFIX_IN_USE: &str = "NodeIPv6PrefixInUse";
/// A node's pod CIDR overlaps another node's or the service range.
pub const POD_CIDR_OVERLAP: &str = "PodCIDROverlap";

/// Why a node's reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    /// The provider could not tell the instance's prefixes (nothing was taken).
    #[error("failed to get instance metadata for node {node}: {source}")]
    Metadata {
        /// The node.
        node: String,
        /// The provider's failure.
        #[source]
        source: MetadataError,
    },
    /// No ranges could be taken.
    #[error("failed to allocate pod CIDRs for node {node}: {source}")]
    Assign {
        /// The node.
        node: String,
        /// Why.
        #[source]
        source: AssignError,
    },
    /// Writing the ranges failed.
    #[error("failed to write pod CIDRs {cidrs} to node {node} (attempts: {attempts}): {source}; {}", kept_note(*.kept))]
    Write {
        /// The node.
        node: String,
        /// The ranges that were to be written.
        cidrs: String,
        /// Attempts made.
        attempts: usize,
        /// The ranges are kept for the node (the write's outcome is unknown).
        kept: bool,
        /// The last attempt's error (the API server's, or the connection's).
        #[source]
        source: kube::Error,
    },
    /// The cloud allocator's check of a node's IPv6 range could not look the instance up.
    #[error("could not check that pod CIDR {range} of node {node} is inside its instance's IPv6 prefix: {source}")]
    PrefixCheck {
        /// The node.
        node: String,
        /// Its IPv6 pod range.
        range: IpNet,
        /// The provider's failure.
        #[source]
        source: MetadataError,
    },
}

fn kept_note(kept: bool) -> &'static str {
    if kept {
        "the API server may have stored it, so the ranges stay the node's and the same write is sent again"
    } else {
        "nothing was stored, the ranges were released"
    }
}

impl ReconcileError for IpamError {
    fn event_reason(&self) -> Option<&str> {
        Some(match self {
            IpamError::Metadata { source, .. } | IpamError::PrefixCheck { source, .. } => source.reason(),
            IpamError::Assign { source: AssignError::Exhausted { .. }, .. } => CIDR_NOT_AVAILABLE,
            IpamError::Assign { source: AssignError::NoIpv6Prefix { .. }, .. } => NO_IPV6_PREFIX,
            IpamError::Assign { source: AssignError::Ipv6RangeInUse { .. }, .. } => IPV6_PREFIX_IN_USE,
            IpamError::Write { .. } => CIDR_ASSIGNMENT_FAILED,
        })
    }

    fn is_transient(&self) -> bool {
        matches!(self, IpamError::Metadata { source, .. } | IpamError::PrefixCheck { source, .. } if source.is_transient())
    }
}

/// Whether a node change concerns the allocator: a new node, a resync (the same object
/// replayed), or a change of its pod CIDRs, UID, provider ID or addresses. Status heartbeats
/// are not: each look may cost the cloud allocator a provider lookup.
pub fn needs_a_look(old: Option<&Node>, new: &Node) -> bool {
    let Some(old) = old else { return true };
    // Compared by reference: this runs on every change of every Node.
    fn spec(n: &Node) -> Option<(Option<&Vec<String>>, Option<&String>)> {
        n.spec.as_ref().map(|s| (s.pod_cidrs.as_ref(), s.provider_id.as_ref()))
    }
    fn addresses(n: &Node) -> Option<&Vec<k8s_openapi::api::core::v1::NodeAddress>> {
        n.status.as_ref().and_then(|s| s.addresses.as_ref())
    }
    old.metadata.resource_version == new.metadata.resource_version
        || old.metadata.uid != new.metadata.uid
        || spec(old) != spec(new)
        || addresses(old) != addresses(new)
}

/// The node IPAM controller.
pub struct NodeIpamController<C: Cloud> {
    reconciler: Arc<IpamReconciler<C>>,
    queue: WorkQueue<ObjectRef<Node>>,
    synced: Synced,
    io: ControllerIo,
    workers: usize,
}

struct IpamReconciler<C: Cloud> {
    allocations: Mutex<Allocations>,
    /// The controller's queue, to wake nodes waiting for a range when one is released.
    queue: WorkQueue<ObjectRef<Node>>,
    /// The cloud allocator is on: IPv6 ranges come from the instance's prefix.
    cloud_ipv6: bool,
    api: Api<Node>,
    params: PatchParams,
    cloud: Arc<C>,
    store: Store<Node>,
    events: EventRecorder,
}

impl<C: Cloud> NodeIpamController<C> {
    /// Wires the controller to the shared node informer (adds, resyncs, deletes and the
    /// updates [`needs_a_look`] picks enqueue the node). Fails if `config` cannot be cut into
    /// node ranges.
    pub fn new(
        cloud: Arc<C>,
        informer: &mut Informer<Node>,
        io: ControllerIo,
        config: &NodeIpamConfig,
        shutdown: CancellationToken,
    ) -> Result<Self, CidrSetError> {
        let allocations = Allocations::new(config)?;
        let queue =
            WorkQueue::new(CONTROLLER_NAME, ExponentialBackoff::CONTROLLER_DEFAULT, shutdown).with_metrics(&io.metrics);
        let q = queue.clone();
        informer.on_change(CONTROLLER_NAME, move |change| match change {
            Change::Applied { old, new } => {
                if needs_a_look(old.map(|o| o.as_ref()), new) {
                    q.add(key_of(new.as_ref()))
                }
            }
            Change::Deleted(old) => q.add(key_of(old.as_ref())),
        });
        let reconciler = Arc::new(IpamReconciler {
            allocations: Mutex::new(allocations),
            queue: queue.clone(),
            cloud_ipv6: config.node_prefix_ipv6_mask.is_some(),
            api: Api::all(io.client.clone()),
            params: io.patch_params(),
            cloud,
            store: informer.store(),
            events: io.events(CONTROLLER_NAME),
        });
        Ok(NodeIpamController { reconciler, queue, synced: informer.synced(), io, workers: config.workers.max(1) })
    }

    /// Once the informer has synced, takes every range the Nodes hold (so none is handed out
    /// twice after a restart), then runs the workers until the shutdown token fires.
    pub async fn run(self) {
        let shutdown = self.queue.shutdown_token().clone();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            ok = self.synced.wait() => if !ok { return },
        }
        let nodes = self.reconciler.store.state();
        {
            let mut allocations = self.reconciler.allocations.lock_unpoisoned();
            for node in &nodes {
                allocations.observe(node);
            }
            let taken: Vec<String> = allocations
                .sets()
                .iter()
                .map(|s| format!("{}: {} of /{} taken", s.cluster(), s.taken_count(), s.node_mask()))
                .collect();
            info!(nodes = nodes.len(), sets = ?taken, cloud_ipv6 = self.reconciler.cloud_ipv6, "node IPAM controller started");
        }
        Workers::new(self.reconciler.clone(), self.queue.clone(), WorkerConfig::new(CONTROLLER_NAME, self.workers))
            .events(self.io.events(CONTROLLER_NAME))
            .metrics(self.io.metrics.clone())
            .run()
            .await;
    }
}

impl<C: Cloud> Reconciler for IpamReconciler<C> {
    type Resource = Node;
    type Error = IpamError;

    async fn reconcile(&self, key: &ObjectRef<Node>) -> Result<Reconciled, IpamError> {
        let Some(node) = self.store.get(key) else {
            if self.allocations.lock_unpoisoned().forget(&key.name) {
                // Nodes waiting for a range (backing off after CIDRNotAvailable) get it now.
                let waiting: Vec<Arc<Node>> =
                    self.store.state().into_iter().filter(|n| allocator::node_pod_cidrs(n).is_empty()).collect();
                debug!(node = %key.name, waiting = waiting.len(), "node gone: its pod CIDRs are free");
                for n in waiting {
                    self.queue.add(key_of(n.as_ref()));
                }
            }
            return Ok(Reconciled::DONE);
        };
        let observed = self.allocations.lock_unpoisoned().observe(&node);
        let deleting = node.metadata.deletion_timestamp.is_some();
        match observed {
            Observed::Assigned => Ok(Reconciled::DONE),
            Observed::Holds { ipv6_from_prefix, foreign, overlaps } => {
                let regarding = object_ref(node.as_ref());
                for f in foreign {
                    let note = format!(
                        "pod CIDR {:?} of node {} {}: it is not managed by {CONTROLLER_NAME} and is left as it is",
                        f.cidr, key.name, f.why
                    );
                    self.events.warning(&regarding, POD_CIDR_NOT_MANAGED, note).await;
                }
                for o in overlaps {
                    self.events.warning(&regarding, POD_CIDR_OVERLAP, o.message(&key.name)).await;
                }
                match ipv6_from_prefix {
                    Some(range) if self.cloud_ipv6 => self.check_prefix(&node, range).await,
                    _ => Ok(Reconciled::DONE),
                }
            }
            Observed::NeedsRanges | Observed::Pending(_) if deleting => Ok(Reconciled::DONE),
            Observed::NeedsRanges => self.assign(&node).await,
            Observed::Pending(cidrs) => {
                info!(node = %key.name, "the answer to the last pod CIDR write was lost: sending the same write again");
                self.write(&key.name, &cidrs, false).await
            }
        }
    }

    fn regarding(&self, key: &ObjectRef<Node>) -> Option<ObjectReference> {
        self.store.get(key).map(|n| object_ref(n.as_ref()))
    }
}

impl<C: Cloud> IpamReconciler<C> {
    /// The instance's own prefixes; `None`: the provider has no answer yet (skip the node
    /// until its next event, upstream's nil metadata).
    async fn prefixes(&self, node: &Node) -> Result<Option<Vec<IpNet>>, IpamError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let metadata = get_instance_metadata(&*self.cloud, node)
            .await
            .map_err(|source| IpamError::Metadata { node: name, source })?;
        Ok(metadata.map(|m| m.node_prefixes))
    }

    /// Looks the instance up first (cloud allocator), then takes and writes the ranges.
    async fn assign(&self, node: &Node) -> Result<Reconciled, IpamError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let (prefixes, answered) = if self.cloud_ipv6 {
            match self.prefixes(node).await? {
                Some(p) => (p, true),
                None => {
                    info!(node = %name, "no instance metadata yet: pod CIDRs wait for the node's next change");
                    return Ok(Reconciled::ANSWERED);
                }
            }
        } else {
            (Vec::new(), false)
        };
        let cidrs = self
            .allocations
            .lock_unpoisoned()
            .assign(node, &prefixes)
            .map_err(|source| IpamError::Assign { node: name.clone(), source })?;
        self.write(&name, &cidrs, answered).await
    }

    /// Writes the node's assigned ranges (upstream `updateCIDRsAllocation`): up to
    /// [`write::WRITE_ATTEMPTS`] attempts while the outcome is unknown; the ranges are
    /// released only if the API server's answer says nothing was stored.
    async fn write(&self, name: &str, cidrs: &[IpNet], answered: bool) -> Result<Reconciled, IpamError> {
        let shown = cidrs.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        let patch = Patch::Merge(pod_cidrs_patch(cidrs));
        let mut failures = Vec::with_capacity(write::WRITE_ATTEMPTS);
        let mut last = None;
        while failures.len() < write::WRITE_ATTEMPTS {
            match self.api.patch(name, &self.params, &patch).await {
                Ok(_) => {
                    self.allocations.lock_unpoisoned().written(name);
                    info!(node = %name, pod_cidrs = %shown, "pod CIDRs assigned");
                    return Ok(Reconciled { remote_answered: answered, requeue_after: None });
                }
                Err(e) => {
                    let failure = write::classify(&e);
                    failures.push(failure);
                    debug!(node = %name, attempt = failures.len(), error = %e, ?failure, "pod CIDR write failed");
                    last = Some(e);
                    if !write::retry(failure) {
                        break;
                    }
                }
            }
        }
        let kept = !write::release(&failures);
        if !kept {
            self.allocations.lock_unpoisoned().unassign(name);
        }
        // WRITE_ATTEMPTS > 0, so the loop ran and failed at least once.
        let Some(e) = last else { return Ok(Reconciled::DONE) };
        match failures.last() {
            Some(write::WriteFailure::NodeGone) => Ok(Reconciled::DONE),
            // Someone else set the node's pod CIDRs meanwhile: the API server refuses any
            // change, and the next event of the node records what it holds.
            Some(write::WriteFailure::OtherCidrs) => {
                warn!(node = %name, error = %e, "pod CIDRs not written: the node got pod CIDRs from elsewhere");
                Ok(Reconciled::DONE)
            }
            _ => {
                Err(IpamError::Write { node: name.to_owned(), cidrs: shown, attempts: failures.len(), kept, source: e })
            }
        }
    }

    /// Cloud allocator: the node's IPv6 range must still lie in its instance's prefix (the
    /// prefix can change with the instance's addresses; `spec.podCIDRs` cannot). A failed
    /// lookup is an error: retried with backoff, with a Warning on the first failure and each
    /// doubling.
    async fn check_prefix(&self, node: &Node, range: IpNet) -> Result<Reconciled, IpamError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let metadata = get_instance_metadata(&*self.cloud, node).await;
        let prefixes = match metadata {
            Ok(Some(m)) => m.node_prefixes,
            Ok(None) => return Ok(Reconciled::ANSWERED),
            Err(source) => return Err(IpamError::PrefixCheck { node: name, range, source }),
        };
        if let Some(note) = allocator::check_in_prefixes(&name, range, &prefixes) {
            warn!(node = %name, "{note}");
            self.events.warning(&object_ref(node), PREFIX_CHANGED, note).await;
        }
        Ok(Reconciled::ANSWERED)
    }
}
