//! Hetzner Cloud Load Balancers for `type: LoadBalancer` Services (the `LoadBalancer`
//! capability), compatible with the official CCM: same annotations, variables, identity label
//! (`hcloud-ccm/service-uid`) and adoption by name.
//!
//! ```text
//!  Service + Nodes ─► spec::LbSpec::from_service (every annotation parsed; bad input ⇒ error,
//!        │                 nothing sent)      targets::desired_targets (node-selector, providerIDs)
//!        ▼
//!  lb_inventory::find ─ one shared list of the project's LBs (UID label, then name; by name
//!        │                 only without another owner's UID label, decided on one fresh GET
//!        │                 of that LB: plan::decide_adoption)
//!        │ none ─► plan::plan_create ─► one POST /load_balancers with services, targets,
//!        │                               network and labels
//!        ▼
//!  plan::plan_update(observed, desired) ─► [LbOp] (empty when nothing changed)
//!        ▼
//!  provider: send each op; wait (tracker, batched) only where the API needs the LB unlocked;
//!            write each accepted op's effect into the inventory (no reloads)
//!        ▼
//!  status::status ─► Service status (IPs / hostname, ipMode VIP or Proxy)
//! ```
//!
//! Decisions live in the pure modules (`spec`, `services`, `targets`, `type_choice`, `plan`,
//! `status`);
//! `provider`, `lb_inventory`, `tracker` and `catalog` do the I/O.

pub mod annotations;
pub mod catalog;
pub mod defaults;
pub mod groups;
pub mod lb_inventory;
pub mod local_health;
#[cfg(test)]
mod local_health_tests;
pub mod managed_cert;
pub mod ownership;
pub mod plan;
pub mod port_spec;
mod ports;
mod provider;
pub mod release_plan;
pub mod services;
pub mod sharing;
pub mod spec;
pub mod status;
pub mod target_health;
pub mod targets;
pub mod tracker;
pub mod type_choice;

pub use defaults::LbDefaults;
pub use provider::HcloudLoadBalancers;
