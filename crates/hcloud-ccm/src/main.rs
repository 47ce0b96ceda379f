//! hcloud-ccm: a Kubernetes cloud-controller-manager for Hetzner Cloud.
//!
//! ```text
//!  flags (upstream names, cloud-controller-manager::ManagerArgs) ─┐
//!  env (official HCLOUD_* names, hcloud-provider::Config) ───────┴► validated together
//!    ─► logging ─► HcloudCloud::connect (token check, network resolved; requests pass the
//!       manager's fence) ─► Manager::run: clients, informers, controllers until SIGTERM
//! ```
//!
//! Everything generic lives in `cloud-controller-manager` (app layer), `cloud-controllers`
//! and `controller-runtime`; this binary adds only what is Hetzner's.

#[cfg(test)]
mod build_date;
mod cli;
mod dry_run;
#[cfg(test)]
mod env_reads;
#[cfg(test)]
mod official_flags;
mod run;

use clap::Parser;

fn main() -> std::process::ExitCode {
    run::main(cli::Cli::parse())
}
