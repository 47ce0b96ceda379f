//! Start-up: flags and environment validated together, then the Hetzner provider and the
//! generic manager.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cloud_controller_manager::{Identity, Manager, ProgramTask, logging, shutdown_on_signals};
use controller_serving::parse_listen_address;
use hcloud_provider::{ClientHooks, Config, HcloudCloud, HcloudMetrics, PROVIDER_NAME};
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, VersionRequest};

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
    let version_warning = match cli.version_request() {
        VersionRequest::Print(text) => {
            println!("{text}");
            return ExitCode::SUCCESS;
        }
        VersionRequest::RunWithWarning(warning) => Some(warning),
        VersionRequest::Run => None,
    };
    let options = cli.manager.validate(PROVIDER_NAME).map(|mut o| {
        o.warnings.extend(version_warning);
        o
    });
    // The routes' cluster CIDRs come from --cluster-cidr, as in the official CCM.
    let cluster_cidrs = options.as_ref().ok().and_then(|o| o.routes.as_ref()).map(|r| r.cluster_cidrs.clone());
    let config = Config::from_env(|k| std::env::var(k).ok(), cluster_cidrs.unwrap_or_default());
    let metrics = match &config {
        Ok(c) => c
            .metrics_address
            .as_deref()
            .map(|a| parse_listen_address(a).map_err(|e| format!("HCLOUD_METRICS_ADDRESS: {e}")))
            .transpose(),
        Err(_) => Ok(None),
    };
    let (options, config, metrics) = match (options, config, metrics) {
        (Ok(o), Ok(c), Ok(m)) => (o, c, m),
        (o, c, m) => {
            let mut errors = o.err().unwrap_or_default();
            errors.extend(c.err().map(|e| e.0).unwrap_or_default());
            errors.extend(m.err());
            eprintln!("hcloud-ccm: invalid configuration:\n  - {}", errors.join("\n  - "));
            return ExitCode::FAILURE;
        }
    };
    let wire_log: &[&str] = if config.debug { &["hcloud_api::wire=debug"] } else { &[] };
    logging::init(options.logging.clone(), LOG_CRATES, wire_log);
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
    // after leadership is lost. (Only the check of a new token or Robot pair from a watched
    // file does not: a read, which a standby needs as much as the leader.)
    let fence = manager.fence();
    // In a dry run no Cloud API write is sent: each is reported instead.
    let write_gate = manager.dry_run().map(crate::dry_run::write_gate);
    let hooks = ClientHooks { metrics: Some(metrics), gate: Some(Arc::new(move || fence.check())), write_gate };
    let cloud = tokio::select! {
        c = HcloudCloud::connect(&config, hooks) => c.context("cannot start the Hetzner Cloud provider")?,
        _ = shutdown.cancelled() => return Ok(()),
    };
    // Credentials from files rotate without a restart, in every replica.
    let rotation = cloud.take_credential_rotation().map(|r| spawn_rotation(&manager, r.run(), &shutdown));
    let result = manager.run(Arc::new(cloud), shutdown).await;
    if let Some(task) = rotation {
        task.abort();
    }
    result?;
    Ok(())
}

/// The credential rotation as the manager supervises it.
const ROTATION: ProgramTask = ProgramTask {
    check: "credential-rotation",
    what: "the credential rotation",
    consequence: "credentials from files are no longer rotated",
};

/// Runs the credential rotation `task` until `shutdown`, supervised like the controllers: if
/// it ends or panics before, `/healthz/credential-rotation` fails (the liveness probe restarts
/// the process) instead of rotation ending for good behind a green probe.
fn spawn_rotation(
    manager: &Manager,
    task: impl Future<Output = ()> + Send + 'static,
    shutdown: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    manager.spawn_task(ROTATION, shutdown, task)
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr, TcpListener};

    use cloud_controller_manager::ManagerError;
    use controller_serving::{Health, MetricsRegistry, SecureServing, serve_plain, serve_secure};
    use tokio_util::sync::CancellationToken;

    /// A port of 127.0.0.1 that is taken while the listener lives, and what the operating
    /// system says when it is bound a second time.
    fn taken() -> (TcpListener, SocketAddr, String) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a free port");
        let addr = listener.local_addr().expect("its address");
        let cause = match TcpListener::bind(addr) {
            Ok(_) => panic!("{addr} must be taken"),
            Err(error) => error.to_string(),
        };
        (listener, addr, cause)
    }

    /// Issue 38, finding 6: the credential rotation runs under the manager's supervision: a
    /// panic turns `/healthz` red (the liveness probe restarts the process) instead of ending
    /// rotation for good behind a green probe.
    #[tokio::test]
    async fn a_panic_of_the_credential_rotation_turns_healthz_red() {
        use clap::Parser as _;
        use controller_serving::Probe;

        let cli = crate::cli::Cli::try_parse_from(["hcloud-ccm", "--cloud-provider=hcloud", "--allow-untagged-cloud"])
            .expect("flags");
        let manager =
            cloud_controller_manager::Manager::new(super::IDENTITY, cli.manager.validate("hcloud").expect("valid"));
        let health = manager.health();
        let shutdown = CancellationToken::new();
        let _task = super::spawn_rotation(&manager, async { panic!("a bug in the rotation") }, &shutdown);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while health.run(Probe::Healthz, &[]).passed() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!health.run(Probe::Healthz, &[]).passed(), "/healthz stays green after the rotation panicked");
        assert_eq!(
            health.run_one(Probe::Healthz, "credential-rotation"),
            Some(controller_serving::Outcome::Failed("the credential rotation stopped".to_owned()))
        );
        assert!(health.run(Probe::Readyz, &[]).passed(), "the replica still serves");

        // Ended by the shutdown: no failure.
        let manager =
            cloud_controller_manager::Manager::new(super::IDENTITY, cli.manager.validate("hcloud").expect("valid"));
        let health = manager.health();
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let task = super::spawn_rotation(&manager, async move { stop.cancelled().await }, &shutdown);
        shutdown.cancel();
        task.await.expect("ends");
        assert!(health.run(Probe::Healthz, &[]).passed(), "stopped on purpose");
    }

    /// What `main` prints: the error with its chain of causes.
    fn report(error: ManagerError) -> String {
        format!("{:#}", anyhow::Error::from(error))
    }

    #[tokio::test]
    async fn a_port_in_use_is_reported_with_its_cause_once() {
        let (_plain_port, addr, cause) = taken();
        let Err(error) = serve_plain(addr, Health::new(), MetricsRegistry::new(), CancellationToken::new()).await
        else {
            panic!("{addr} is taken; serving on it must fail");
        };
        let plain = ManagerError::PlainListener { setting: "HCLOUD_METRICS_ADDRESS".to_owned(), source: error };
        assert_eq!(
            report(plain),
            format!("HCLOUD_METRICS_ADDRESS: cannot listen on {addr} (plain HTTP listener): {cause}")
        );

        let (_secure_port, addr, cause) = taken();
        let settings = SecureServing {
            bind_address: Ipv4Addr::LOCALHOST.into(),
            port: addr.port(),
            cert_file: None,
            key_file: None,
            cert_name: "test".to_owned(),
            ..SecureServing::default()
        };
        let result =
            serve_secure(&settings, Health::new(), MetricsRegistry::new(), None, CancellationToken::new()).await;
        let Err(error) = result else {
            panic!("{addr} is taken; serving on it must fail");
        };
        assert_eq!(
            report(ManagerError::Serve(error)),
            format!("cannot listen on {addr} (--bind-address/--secure-port): {cause}")
        );
    }
}
