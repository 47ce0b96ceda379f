//! The integration tests of `test-harness`: the harness's own tests: the control plane, lifelines,
//! the deploy artefacts (their renders, the switch from the official install) and the file import graph of every crate. Each module is one test file;
//! together they are one test binary (`cargo test -p test-harness --test integration`), linked
//! once, whose end-to-end tests share one pool of control planes
//! (`test_harness::ControlPlane::exclusive`).

mod control_plane;
mod deploy;
mod deploy_alerts;
mod deploy_crds;
mod deploy_switch;
mod deploy_values;
mod lifeline;
mod module_graph;
mod project_files;
