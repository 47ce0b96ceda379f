//! A small Kubernetes controller runtime: the plumbing every controller of a controller
//! manager shares, with client-go's semantics and no knowledge of any cloud.
//!
//! ```text
//!  kube-apiserver ──watch──► Informer<K> (one per resource, shared cache + handlers)
//!                                │ handlers (old, new)
//!                                ├──► WorkQueue<ObjectRef<K>> (dedup, per-key backoff)
//!                                │       │
//!                                │       ▼
//!                                │    Workers::run ── Reconciler::reconcile(key)
//!                                │       │ Ok: forget / requeue_after / retry what failed
//!                                │       │     during an outage
//!                                │       │ Err: backoff or retry_after; Warning event on
//!                                │       │      first failure + doublings
//!                                ├──► PassTrigger ──► Passes::run ── one pass over the cluster
//!                                │       (paced by a min interval, a burst is one pass, a
//!                                │        safety resync or period, backoff on error)
//!                                ▼       │
//!                          Store<K> (reads, by ObjectRef<K>)
//!                                        ▼
//!                                writes: merge patches (planned as data by pure planners),
//!                                retry_on_conflict, EventRecorder
//! ```
//!
//! - [`informer`]: a shared informer (one watch, one cache, many handlers, resync); a handler
//!   that panics misses one change, the watch goes on.
//! - [`workqueue`]: a deduplicating, rate-limited work queue.
//! - [`worker`]: the one reconcile loop ([`Reconciler`], [`Workers`]) over typed keys
//!   ([`ObjectRef`](kube::runtime::reflector::ObjectRef), shown as `namespace/name` by
//!   [`KeyName`]).
//! - [`pass`]: paced, single-flight passes over the whole cluster ([`Passes`]) for controllers
//!   whose work is not per object.
//! - [`events`]: core/v1 Events with client-go-style aggregation, and a bounded queue for
//!   callers that must not wait.
//! - [`writes`]: field-manager patch parameters, conflict retries, error classification.
//! - [`merge_patch`]: RFC 7386 as the API server applies it, so tests can check the exact
//!   patch a planner produced.
//! - [`metrics`]: workqueue and reconcile metrics under client-go's names.
//! - [`keyed_lock`]: one async mutex per key, kept only while held or waited for.
//! - [`ControllerIo`]: what a controller gets from its manager to talk to the API server.

pub mod events;
pub mod informer;
pub mod keyed_lock;
pub mod merge_patch;
pub mod metrics;
pub mod pass;
pub mod worker;
pub mod workqueue;
pub mod writes;

pub use events::queue::EventQueue;
pub use events::{EventRecorder, object_ref};

/// The I/O handles a controller gets from its manager.
#[derive(Clone)]
pub struct ControllerIo {
    /// The controller's own Kubernetes client (with its own request rate limit).
    pub client: kube::Client,
    /// The field manager recorded for the controller's writes.
    pub field_manager: String,
    /// The shared runtime metrics.
    pub metrics: RuntimeMetrics,
}

impl ControllerIo {
    /// An event recorder reporting as `component`.
    pub fn events(&self, component: &str) -> EventRecorder {
        EventRecorder::new(self.client.clone(), component)
    }

    /// Patch parameters with the field manager.
    pub fn patch_params(&self) -> kube::api::PatchParams {
        writes::patch_params(&self.field_manager)
    }
}
pub use informer::{Change, Informer, Synced};
pub use keyed_lock::{KeyedGuard, KeyedLock};
pub use metrics::RuntimeMetrics;
pub use pass::{PassConfig, PassTimer, PassTrigger, Passes};
pub use worker::{KeyName, ReconcileError, Reconciled, Reconciler, WorkerConfig, Workers, key_of, panic_message};
pub use workqueue::{ExponentialBackoff, WorkQueue};
