//! The integration tests of `hcloud-provider`: the provider against the fake over real HTTP. Each
//! module is one test file; together they are one test binary (`cargo test -p hcloud-provider
//! --test integration`), linked once, whose end-to-end tests share one pool of control planes
//! (`test_harness::ControlPlane::exclusive`).

mod clock;
mod fake_client;
mod inventory;
mod inventory_changes;
mod lb_support;
mod load_balancer_failures;
mod load_balancer_targets;
mod load_balancer_types;
mod load_balancers;
mod robot;
mod rotation;
mod routes;
