//! The integration tests of `hcloud-fake`: the fake over real HTTP, its data plane, and Hetzner's
//! own clients (the Python library, the CLI) and OpenAPI document against it. Each module is one
//! test file; together they are one test binary (`cargo test -p hcloud-fake --test integration`),
//! linked once, whose end-to-end tests share one pool of control planes
//! (`test_harness::ControlPlane::exclusive`).

#[path = "api/main.rs"]
mod api;
mod data_plane;
mod data_plane_http;
mod hcloud_cli;
mod openapi_conformance;
mod python_hcloud;
