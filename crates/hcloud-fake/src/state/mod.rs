//! The in-memory state of one fake: resources, actions, locks and id counters.
//!
//! All mutations go through [`State`] methods, which validate like the API and return
//! [`ApiError`]s. Each resource kind lives in its own submodule. Actions are settled lazily:
//! [`State::settle`] finishes every action whose due time has passed and applies (or, on an
//! injected failure, discards) its effect; it runs at the start of every request and every
//! library call, so no background timer exists — except with the opt-in Load Balancer data
//! plane ([`crate::data_plane`]), whose reconciler also settles at every pass.
//!
//! Locking: a resource is locked while it is the *first* resource of a running action (the
//! resource the action was started on) or while a test locked it explicitly. Mutations of a
//! locked resource (POST actions, PUT, DELETE) answer `423 locked`; GETs always work.
//!
//! Referenced resources: a missing resource in the path answers `404 not_found`; a missing
//! resource referenced in the body (e.g. `network` of `attach_to_network`) answers
//! `400 invalid_input` naming the field.
//!
//! Files: [`store`] holds [`State`] itself (collections, id counters, locks), [`records`] the
//! per-resource records, [`effect`] what an action does when it finishes, [`validate`] the
//! shared input checks and [`ipam`] the public address pools. One module per resource kind adds
//! the API operations on top ([`servers`], [`networks`] and [`load_balancers`] are directories
//! split by concern; [`certificates`], [`primary_ips`], [`actions`]). This file only declares
//! and re-exports: no submodule imports from it.

mod actions;
mod certificates;
mod effect;
mod ipam;
mod load_balancers;
mod networks;
mod primary_ip_actions;
mod primary_ips;
pub(crate) mod records;
mod servers;
mod store;
mod validate;

pub(crate) use actions::{ACTION_SORT_FIELDS, ActionFilter};
pub(crate) use certificates::CertificateFilter;
pub(crate) use load_balancers::LoadBalancerFilter;
pub(crate) use networks::NetworkFilter;
pub(crate) use primary_ips::PrimaryIpFilter;
pub(crate) use records::{HealthKey, TargetRecord};
pub(crate) use servers::ServerFilter;
pub use store::PROJECT_ID_STRIDE;
pub(crate) use store::State;
