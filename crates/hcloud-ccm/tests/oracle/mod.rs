//! Running the official CCM and hcloud-ccm on the same scenario and comparing what each
//! produced: shared by the differential suite (`tests/differential`) and the migration suite
//! (`tests/migration.rs`).

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)] // Shared with the benchmarks, which use other parts.

pub mod clean;
pub mod cluster;
pub mod declared;
pub mod snapshot;
pub mod subject;
pub mod world;
