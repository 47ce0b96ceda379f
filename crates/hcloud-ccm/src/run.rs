//! Start-up: flags and environment validated together, then the Hetzner provider and the
//! generic manager.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cloud_controller_manager::{Identity, Manager, logging, shutdown_on_signals};
use hcloud_provider::{Config, HcloudCloud, PROVIDER_NAME};

use crate::cli::Cli;

/// How hcloud-ccm shows up in logs, User-Agents and `managedFields`.
const IDENTITY: Identity =
    Identity { program: "hcloud-ccm", version: env!("CARGO_PKG_VERSION"), field_manager: "hcloud-ccm" };

/// Crates whose logs `-v` raises.
const LOG_CRATES: &[&str] = &[
    "hcloud_ccm",
    "cloud_controller_manager",
    "controller_runtime",
    "cloud_controllers",
    "hcloud_provider",
    "hcloud_api",
];

/// Validates flags and environment together, then runs until a signal.
pub fn main(cli: Cli) -> ExitCode {
    let options = cli.manager.validate(PROVIDER_NAME);
    let config = Config::from_env(|k| std::env::var(k).ok());
    let (options, config) = match (options, config) {
        (Ok(o), Ok(c)) => (o, c),
        (o, c) => {
            let mut errors = o.err().unwrap_or_default();
            errors.extend(c.err().map(|e| e.0).unwrap_or_default());
            eprintln!("hcloud-ccm: invalid configuration:\n  - {}", errors.join("\n  - "));
            return ExitCode::FAILURE;
        }
    };
    let wire_log: &[&str] = if config.debug { &["hcloud_api::wire=debug"] } else { &[] };
    logging::init(options.logging, LOG_CRATES, wire_log);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hcloud-ccm: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(Manager::new(IDENTITY, options), config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("hcloud-ccm: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(manager: Manager, config: Config) -> anyhow::Result<()> {
    let shutdown = shutdown_on_signals();
    let cloud = tokio::select! {
        c = HcloudCloud::connect(&config, None) => c.context("cannot start the Hetzner Cloud provider")?,
        _ = shutdown.cancelled() => return Ok(()),
    };
    manager.run(Arc::new(cloud), shutdown).await?;
    Ok(())
}
