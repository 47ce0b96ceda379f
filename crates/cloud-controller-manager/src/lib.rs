//! The Rust counterpart of `k8s.io/cloud-provider/app`: everything a cloud-controller-manager
//! binary needs besides its provider.
//!
//! ```text
//!  program's clap parser ──flatten──► ManagerArgs (upstream flags) ──validate──► Options
//!  program: provider config + Cloud (consults Manager::fence() before side effects)
//!                                   │
//!  Manager::run(cloud, shutdown) ───┤ per-user Kubernetes clients (QPS token buckets)
//!                                   │ shared informers (Nodes; Services on demand), each
//!                                   │   watch supervised: one that ends turns the probes red
//!                                   │ serving: /healthz /readyz /livez /metrics (HTTPS, delegated
//!                                   │   auth; optional plain listener), metrics registry
//!                                   │ registry: --controllers ─► build each enabled controller
//!                                   │   (cloud-node, cloud-node-lifecycle, ...) on a child token
//!                                   │ leader election (Lease): controllers run only while held;
//!                                   │   the fence lets cloud requests through only then
//!                                   └ SIGTERM/SIGINT ─► stop controllers, drain, release, exit 0
//!                                     lease lost ─► close fence, stop, exit non-zero
//! ```
//!
//! Nothing here names a particular cloud: the program passes its [`Identity`] (name, version,
//! field manager) and the `--cloud-provider` value it implements.

pub mod args;
pub mod context;
pub mod controller_set;
pub mod controllers;
mod delegation;
pub mod dry_run;
mod election;
mod error;
pub mod fence;
pub mod kube_client;
pub mod logging;
pub mod manager;
pub mod metrics;
pub mod options;
pub mod provider_events;
mod supervise;

pub use args::ManagerArgs;
pub use dry_run::{DryRun, PlannedWrite};
pub use fence::Fence;
pub use manager::{Identity, Manager, ManagerError, ProgramTask, shutdown_on_signals};
pub use options::{LogFormat, Options};
