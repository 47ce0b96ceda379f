//! Start-up: flags and environment validated together, then the Hetzner provider and the
//! generic manager.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cloud_controller_manager::{Identity, Manager, logging, shutdown_on_signals};
use controller_serving::parse_listen_address;
use hcloud_provider::{ClientHooks, Config, HcloudCloud, HcloudMetrics, PROVIDER_NAME};

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
    let metrics = match &config {
        Ok(c) => c
            .metrics_address
            .as_deref()
            .map(|a| parse_listen_address(a).map_err(|e| format!("HCLOUD_METRICS_ADDRESS: {e}")))
            .transpose(),
        Err(_) => Ok(None),
    };
    let (options, mut config, metrics) = match (options, config, metrics) {
        (Ok(o), Ok(c), Ok(m)) => (o, c, m),
        (o, c, m) => {
            let mut errors = o.err().unwrap_or_default();
            errors.extend(c.err().map(|e| e.0).unwrap_or_default());
            errors.extend(m.err());
            eprintln!("hcloud-ccm: invalid configuration:\n  - {}", errors.join("\n  - "));
            return ExitCode::FAILURE;
        }
    };
    // The routes' cluster CIDRs come from --cluster-cidr, as in the official CCM.
    config.cluster_cidrs = options.routes.as_ref().map(|r| r.cluster_cidrs.clone()).unwrap_or_default();
    let wire_log: &[&str] = if config.debug { &["hcloud_api::wire=debug"] } else { &[] };
    logging::init(options.logging, LOG_CRATES, wire_log);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hcloud-ccm: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut manager = Manager::new(IDENTITY, options);
    if let Some(addr) = metrics {
        manager = manager.serve_plain(addr, "HCLOUD_METRICS_ADDRESS");
    }
    match runtime.block_on(run(manager, config)) {
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
    let metrics = HcloudMetrics::default();
    manager.metrics().with(|registry| metrics.register(registry));
    // Every Hetzner request passes the manager's fence: nothing is sent while standing by or
    // after leadership is lost.
    let fence = manager.fence();
    let hooks = ClientHooks { metrics: Some(metrics), gate: Some(Arc::new(move || fence.check())) };
    let cloud = tokio::select! {
        c = HcloudCloud::connect(&config, hooks) => c.context("cannot start the Hetzner Cloud provider")?,
        _ = shutdown.cancelled() => return Ok(()),
    };
    manager.run(Arc::new(cloud), shutdown).await?;
    Ok(())
}
