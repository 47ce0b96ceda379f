//! The Rust counterpart of `k8s.io/cloud-provider`'s interfaces.
//!
//! ```text
//!   provider (e.g. hcloud-provider) ──implements──► Cloud ─┬─ InstancesV2 ──► cloud-node,
//!                                                          │                  cloud-node-lifecycle
//!                                                          ├─ LoadBalancer ──► service controller
//!                                                          └─ Routes ───────► route controller
//!                                        (cloud-controllers drives these, generic over Cloud)
//! ```
//!
//! This crate holds only what both sides share: the traits ([`Cloud`], [`InstancesV2`] and the
//! legacy [`Instances`]/[`Zones`],
//! [`LoadBalancer`], [`Routes`]), neutral types ([`InstanceMetadata`], [`NodeAddress`],
//! [`Route`], [`LoadBalancerStatus`]), the sentinel errors ([`CloudError`]), the well-known
//! names, the pure helpers for nodes (addresses, provided node IP, taints), load balancer
//! services (source ranges, health-check port, cleanup finalizer, status equality) and label
//! selectors, and the [`events::EventSink`] a provider raises its own events through. It has no
//! I/O.

mod error;
pub mod events;
pub mod helpers;
mod traits;
mod types;
pub mod well_known;

pub use error::{BoxError, CloudError};
pub use traits::{
    Cloud, Instances, InstancesV2, LoadBalancer, LookupPurpose, Routes, Unsupported, Zone, Zones,
    default_load_balancer_name,
};
pub use types::{AddressType, InstanceMetadata, IpMode, LoadBalancerIngress, LoadBalancerStatus, NodeAddress, Route};
