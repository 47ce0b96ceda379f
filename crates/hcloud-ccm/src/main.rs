//! hcloud-ccm: a Kubernetes cloud-controller-manager for Hetzner Cloud.
//!
//! ```text
//!  flags (upstream names) ─┐
//!  env (official HCLOUD_*) ┴► validated together ─► logging ─► kube clients (per controller,
//!                                                                 QPS-limited)
//!                                                       ─► HcloudCloud::connect (token check,
//!                                                          network resolved)
//!                                                       ─► shared Node informer
//!                                                       ─► enabled controllers ─► run until
//!                                                          SIGTERM/SIGINT, then drain
//! ```

mod args;
mod controllers;
mod kube_client;
mod run;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = args::Args::parse();
    run::main(args)
}
