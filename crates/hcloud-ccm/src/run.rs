//! Start-up, wiring and shutdown.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use cloud_controllers::{CloudNodeController, CloudNodeLifecycleController, Informer, NodeControllerConfig};
use cloud_provider::Cloud;
use hcloud_provider::{Config, HcloudCloud};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use tracing_subscriber::EnvFilter;

use crate::args::{Args, LogFormat, Settings};
use crate::controllers::{self, is_enabled};
use crate::kube_client::{connection_config, rate_limited_client};

/// How long controllers get to finish after SIGTERM/SIGINT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Validates flags and environment together, then runs until a signal.
pub fn main(args: Args) -> ExitCode {
    let settings = args.validate();
    let config = Config::from_env(|k| std::env::var(k).ok());
    let (settings, config) = match (settings, config) {
        (Ok(s), Ok(c)) => (s, c),
        (s, c) => {
            let mut errors = s.err().unwrap_or_default();
            errors.extend(c.err().map(|e| e.0).unwrap_or_default());
            eprintln!("hcloud-ccm: invalid configuration:\n  - {}", errors.join("\n  - "));
            return ExitCode::FAILURE;
        }
    };
    init_logging(args.log_format, args.verbosity, config.debug);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hcloud-ccm: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, settings, config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("hcloud-ccm: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(format: LogFormat, verbosity: u8, hcloud_debug: bool) {
    let default = match verbosity {
        0 | 1 => "info",
        2..=4 => "info,hcloud_ccm=debug,cloud_controllers=debug,hcloud_provider=debug,hcloud_api=debug",
        _ => "debug,hcloud_ccm=trace,cloud_controllers=trace,hcloud_provider=trace,hcloud_api=trace",
    };
    let mut filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => EnvFilter::try_new(&v).unwrap_or_else(|e| {
            eprintln!("hcloud-ccm: ignoring RUST_LOG={v:?}: {e}");
            EnvFilter::new(default)
        }),
        _ => EnvFilter::new(default),
    };
    if hcloud_debug && let Ok(d) = "hcloud_api::wire=debug".parse() {
        filter = filter.add_directive(d);
    }
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Plain => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn run(args: Args, settings: Settings, config: Config) -> anyhow::Result<()> {
    for w in &settings.warnings {
        warn!("{w}");
    }
    let shutdown = CancellationToken::new();
    tokio::spawn(watch_signals(shutdown.clone()));

    let kube_config = connection_config(args.kubeconfig.as_deref(), args.master.as_deref()).await?;
    let client = |qps, burst| rate_limited_client(kube_config.clone(), qps, burst);
    let cloud = Arc::new(tokio::select! {
        c = HcloudCloud::connect(&config, None) => c.context("cannot start the Hetzner Cloud provider")?,
        _ = shutdown.cancelled() => return Ok(()),
    });

    // One watch on Nodes shared by every controller.
    let resync = args.min_resync_period.mul_f64(1.0 + fastrand::f64());
    let mut informer =
        Informer::new(Api::<Node>::all(client(args.kube_api_qps, args.kube_api_burst)?), watcher::Config::default())
            .resync_every(resync);
    let mut tasks = tokio::task::JoinSet::new();
    let has_instances = cloud.instances_v2().is_some() || cloud.instances().is_some();
    let mut started = Vec::new();

    if is_enabled(&settings.controllers, controllers::CLOUD_NODE) {
        if has_instances {
            let config = NodeControllerConfig {
                workers: settings.node_syncs,
                status_workers: settings.node_status_updates,
                status_update_frequency: args.node_status_update_frequency,
            };
            let c = CloudNodeController::new(
                client(args.kube_api_qps, args.kube_api_burst)?,
                cloud.clone(),
                &mut informer,
                config,
                shutdown.clone(),
            );
            tasks.spawn(c.run(shutdown.clone()));
            started.push(controllers::CLOUD_NODE);
        } else {
            warn!("failed to start cloud node controller: the provider does not support instances");
        }
    }
    if is_enabled(&settings.controllers, controllers::CLOUD_NODE_LIFECYCLE) {
        if has_instances {
            let c = CloudNodeLifecycleController::new(
                client(args.kube_api_qps, args.kube_api_burst)?,
                cloud.clone(),
                &informer,
                args.node_monitor_period,
            );
            tasks.spawn(c.run(shutdown.clone()));
            started.push(controllers::CLOUD_NODE_LIFECYCLE);
        } else {
            warn!("failed to start cloud node lifecycle controller: the provider does not support instances");
        }
    }
    if is_enabled(&settings.controllers, controllers::SERVICE_LB) && cloud.load_balancer().is_none() {
        info!("{} not started: hcloud-ccm does not manage load balancers yet", controllers::SERVICE_LB);
    }
    if is_enabled(&settings.controllers, controllers::NODE_ROUTE)
        && args.configure_cloud_routes
        && cloud.routes().is_none()
    {
        info!("{} not started: hcloud-ccm does not manage routes yet", controllers::NODE_ROUTE);
    }
    tasks.spawn(informer.run(shutdown.clone()));
    info!(controllers = ?started, version = env!("CARGO_PKG_VERSION"), "hcloud-ccm started");

    shutdown.cancelled().await;
    info!("shutting down");
    if tokio::time::timeout(SHUTDOWN_GRACE, async { while tasks.join_next().await.is_some() {} }).await.is_err() {
        warn!(grace = ?SHUTDOWN_GRACE, "controllers did not stop in time; exiting anyway");
    }
    info!("stopped");
    Ok(())
}

async fn watch_signals(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => info!("received SIGTERM"),
                    _ = tokio::signal::ctrl_c() => info!("received SIGINT"),
                }
            }
            Err(e) => {
                warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops hcloud-ccm");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    shutdown.cancel();
}
