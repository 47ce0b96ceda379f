//! The integration tests of `cloud-controller-manager`: the app layer against a real kube-
//! apiserver. Each module is one test file; together they are one test binary (`cargo test -p
//! cloud-controller-manager --test integration`), linked once, whose end-to-end tests share one
//! pool of control planes (`test_harness::ControlPlane::exclusive`).

mod common;
mod informer_handler_panic;
mod service_lb;
