//! The Hetzner Cloud provider: implements the `cloud-provider` traits with `hcloud-api`.
//!
//! ```text
//!  env ──► Config::from_env (all errors at once) ──► HcloudCloud::connect
//!                                                     │ token check (GET /locations)
//!                                                     │ HCLOUD_NETWORK resolved (id or name)
//!                                                     ▼
//!  controllers ──► HcloudInstances (InstancesV2) ──► Inventory (shared server cache,
//!     node → Lookup (providerID hcloud://<id>,        modes all/one/off, single-flight
//!            else node name)                          lists, no re-list storms)
//!     server → InstanceMetadata (type, region,            │
//!            zone = legacy datacenter, addresses)         │
//!  route controller ──► HcloudRoutes (Routes) ────────────┤ gateways → servers
//!     GET /networks/{id}, add_route/delete_route          ▼
//!     one change at a time, actions waited for       hcloud_api::Client
//!
//!  service controller ──► HcloudLoadBalancers (LoadBalancer) ──► load_balancers:
//!     Service + Nodes → spec (annotations, HCLOUD_LOAD_BALANCERS_*) → plan (exact requests,
//!     none when nothing changed) → one shared LB list, write-through; batched action waits
//! ```
//!
//! Robot (dedicated) servers (`ROBOT_ENABLED`): providerIDs `hrobot://<number>`; lookups go
//! through [`robot::RobotInventory`] (one cached `GET /server` per `ROBOT_CACHE_TIMEOUT`, a
//! rate-limit circuit breaker), metadata through the pure [`robot::metadata`] mapping.
//!
//! Credentials from files (`HCLOUD_TOKEN_FILE`, `ROBOT_USER_FILE`, `ROBOT_PASSWORD_FILE`)
//! rotate without a restart: [`rotation::CredentialRotation`] reads them every few seconds,
//! checks a new one once (a token: that it sees this cluster's project,
//! [`rotation::project`]) and puts it in the running clients.
//!
//! Compatible with the official Go CCM: same environment variables, providerIDs, labels.

mod api_error;
pub mod changes;
pub mod cloud;
pub mod config;
pub mod env;
pub mod instances;
pub mod inventory;
pub mod load_balancers;
pub mod metrics;
pub mod provider_id;
pub mod robot;
pub mod rotation;
pub mod routes;

pub use cloud::{ClientHooks, HcloudCloud, PROVIDER_NAME, StartupError};
pub use config::{AddressFamily, CacheMode, Config, ConfigErrors};
pub use hcloud_api::{WriteGate, WriteRequest};
pub use instances::HcloudInstances;
pub use inventory::{Inventory, Lookup};
pub use load_balancers::HcloudLoadBalancers;
pub use metrics::HcloudMetrics;
pub use provider_id::{ProviderId, ProviderIdError};
pub use robot::{RobotInventory, RobotMode};
pub use rotation::CredentialRotation;
pub use routes::{HcloudRoutes, RoutesConfig};
