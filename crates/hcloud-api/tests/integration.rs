//! The integration tests of `hcloud-api`: the client against the fake over real HTTP. Each module
//! is one test file; together they are one test binary (`cargo test -p hcloud-api --test
//! integration`), linked once, whose end-to-end tests share one pool of control planes
//! (`test_harness::ControlPlane::exclusive`).

mod against_fake;
mod common;
mod credential_swap;
mod failure_modes;
mod hooks;
mod load_balancer_options;
mod lost_answers;
mod robot_against_fake;
