//! The integration tests of `hcloud-ccm`: the hcloud-ccm binary end to end against the fake and
//! real kube-apiservers, and the official CCM beside it (the differential and migration suites).
//! Each module is one test file; together they are one test binary (`cargo test -p hcloud-ccm
//! --test integration`), linked once, whose end-to-end tests share one pool of control planes
//! (`test_harness::ControlPlane::exclusive`).

mod common;
#[path = "differential/main.rs"]
mod differential;
mod dry_run_e2e;
mod idle_e2e;
mod image_e2e;
mod lb_certificates_e2e;
mod lb_e2e;
mod lb_ports_e2e;
mod lb_shared_e2e;
mod lb_targets_e2e;
mod lb_type_e2e;
mod leader_election_e2e;
mod migration;
mod monitoring_e2e;
mod node_ipam_e2e;
mod nodes_e2e;
mod official_role_e2e;
mod oracle;
mod real_nodes_e2e;
mod robot_e2e;
mod rotation_e2e;
mod routes_e2e;
mod serving_e2e;
mod serving_flags_e2e;
// The soak's code is the benchmark's (benches/soak), whose helpers load two files of `oracle`
// too: the same source, compiled twice, in two separate modules.
#[allow(clippy::duplicate_mod)]
mod soak_short;
mod suites_e2e;
