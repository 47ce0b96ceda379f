//! Generic cloud-controller-manager controllers with `k8s.io/cloud-provider`'s semantics,
//! driven by any provider implementing the `cloud-provider` traits, running on the
//! `controller-runtime` crate's informers, workqueue and reconcile loop.
//!
//! ```text
//!   kube-apiserver ──watch──► Informer<Node> (one shared cache, controller-runtime)
//!                                 │                                    │ handlers enqueue
//!                                 │ Store (read by every controller)   ▼
//!                                 │                          WorkQueue ─► Workers (one reconcile
//!                                 ▼                                        loop for every controller)
//!   cloud-node-lifecycle (periodic) ◄── Store          cloud-node: NodeReconciler::sync_node
//!        decide(node, provider) ─► write (patch/delete)   plan (pure) ─► patches sent as planned
//!   route (node events + safety resync, or periodic): list_routes ─► route::plan (pure) ─►
//!        route::exec (create/delete, bounded) ─► NetworkUnavailable patches
//!                                 └──────────── provider: cloud_provider::Cloud ───────────┘
//!
//!   kube-apiserver ──watch──► Informer<Service> ─► WorkQueue "service" ─► Workers ─► service:
//!   Informer<Node> (shared) ─► WorkQueue "node" ─► node sync   ServiceSyncer: filter/nodes/plan
//!        (pure) ─► provider LoadBalancer (ensure/update/delete) ─► finalizer + status patches
//! ```
//!
//! Each controller splits into pure decisions (`node::plan`, `lifecycle::decide`, `route::plan`,
//! `service::{filter, nodes, plan}`: observed state in, the exact API writes out — JSON merge
//! patches, deletions with preconditions) and a thin I/O layer that sends them. List-replacing
//! writes are guarded by `resourceVersion` and re-planned from a fresh read on conflict.

pub mod ipam;
pub mod lifecycle;
pub mod node;
pub mod route;
pub mod service;
#[cfg(test)]
mod testing;

pub use ipam::{NodeIpamConfig, NodeIpamController};
pub use lifecycle::{CloudNodeLifecycleController, NodeLifecycleConfig};
pub use node::{CloudNodeController, NodeControllerConfig};
pub use route::{ReconcileMode, RouteController, RouteControllerConfig};
pub use service::{ServiceController, ServiceControllerConfig};
