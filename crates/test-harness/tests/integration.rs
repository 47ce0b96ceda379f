//! The integration tests of `test-harness`: the harness's own tests: the control plane, lifelines,
//! the deploy artefacts and the file import graph of every crate. Each module is one test file;
//! together they are one test binary (`cargo test -p test-harness --test integration`), linked
//! once, whose end-to-end tests share one pool of control planes
//! (`test_harness::ControlPlane::exclusive`).

mod control_plane;
mod deploy;
mod lifeline;
mod module_graph;
