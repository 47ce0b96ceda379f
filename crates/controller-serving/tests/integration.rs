//! The integration tests of `controller-serving`: the serving endpoints over real TCP and TLS, with
//! delegated authentication against a real kube-apiserver. Each module is one test file; together
//! they are one test binary (`cargo test -p controller-serving --test integration`), linked once,
//! whose end-to-end tests share one pool of control planes
//! (`test_harness::ControlPlane::exclusive`).

mod client_certs;
mod cluster_lookup;
mod common;
mod delegated_auth;
mod one_client;
mod plain;
mod secure;
mod slow_clients;
mod tls_params;
