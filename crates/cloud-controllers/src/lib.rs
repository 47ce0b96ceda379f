//! Generic cloud-controller-manager controllers with `k8s.io/cloud-provider`'s semantics,
//! driven by any provider implementing the `cloud-provider` traits.
//!
//! ```text
//!   kube-apiserver ──watch──► Informer<Node> (one shared cache) ──► handlers enqueue
//!                                 │                                    │
//!                                 │ Store (read by every controller)   ▼
//!                                 │                          WorkQueue (client-go semantics:
//!                                 │                           dedup, per-key backoff 5ms→1000s)
//!                                 ▼                                    │
//!   cloud-node-lifecycle (periodic) ◄── Store          cloud-node workers (sync_node)
//!        decide(node, provider) ─► apply                  plan (pure) ─► apply
//!                                 └──────────── provider: cloud_provider::Cloud ───────────┘
//! ```
//!
//! Each controller splits into pure decisions (`node::plan`, `lifecycle::decide`: observed
//! state in, planned changes out) and a thin I/O layer (`node_writes`, events). Writes are
//! patches; list-replacing writes are guarded by `resourceVersion` and retried on conflict.

pub mod events;
pub mod informer;
pub mod lifecycle;
pub mod node;
pub mod node_writes;
#[cfg(test)]
mod testing;
pub mod workqueue;

pub use informer::{Change, Informer, Synced};
pub use lifecycle::CloudNodeLifecycleController;
pub use node::{CloudNodeController, NodeControllerConfig};
