//! Running a controller manager: serving, clients, informers, leader election, the enabled
//! controllers, and an orderly stop.
//!
//! ```text
//!  run ─► serve /healthz /readyz /livez /metrics (secure port; optional plain listener)
//!      ─► clients, informers (warm up at once) ─► build enabled controllers (nothing runs)
//!      ─► [leader election: wait for the Lease; fence closed meanwhile]
//!      ─► run controllers ─► until SIGTERM: stop controllers, drain, release the Lease, exit 0
//!                          └ until the Lease is lost: close the fence, stop, exit non-zero
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cloud_provider::Cloud;
use controller_runtime::events::queue::DEFAULT_QUEUE_CAPACITY;
use controller_runtime::{EventQueue, EventRecorder, RuntimeMetrics};
use controller_serving::{Bound, Health, MetricsRegistry, Probe, SecureServing};
use leader_election::{LeaderElector, Leadership};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::context::{ClientFactory, ControllerContext, Informers};
use crate::controllers::{ControllerTask, build_controllers};
use crate::dry_run::DryRun;
use crate::election;
pub use crate::error::ManagerError;
use crate::fence::Fence;
use crate::kube_client::connection_config;
use crate::metrics::ManagerMetrics;
use crate::options::Options;
use crate::provider_events::{RecorderSink, Resyncs};
use crate::supervise::{Supervised, informers_synced, supervise};

/// How long controllers get to finish after a stop request.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long a leader may go without renewing before `/healthz` fails (upstream:
/// `NewLeaderHealthzAdaptor(20s)`).
const LEADER_HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

/// Common name of the self-signed serving certificate (upstream's pair name).
const SERVING_CERT_NAME: &str = "cloud-controller-manager";

/// Who runs the manager: names used in logs, User-Agents and writes.
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    /// The program (`<program> started`, User-Agent, `running_managed_controllers`).
    pub program: &'static str,
    /// The program's version, as `--version` and the startup log report it.
    pub version: &'static str,
    /// The field manager of every write to the API server.
    pub field_manager: &'static str,
}

/// A long-running task of the program itself, for [`Manager::spawn_task`].
#[derive(Debug, Clone, Copy)]
pub struct ProgramTask {
    /// Its health check: `/healthz/<check>`, also the `task` field of the logs.
    pub check: &'static str,
    /// How messages name it, e.g. `the credential rotation`.
    pub what: &'static str,
    /// What its end means, for the error log, e.g. `credentials are no longer rotated`.
    pub consequence: &'static str,
}

/// A controller manager, configured and ready to run.
pub struct Manager {
    identity: Identity,
    options: Options,
    fence: Fence,
    health: Health,
    registry: MetricsRegistry,
    runtime_metrics: RuntimeMetrics,
    metrics: ManagerMetrics,
    plain: Option<(SocketAddr, String)>,
    dry_run: Option<DryRun>,
}

impl Manager {
    /// A manager for `options`.
    pub fn new(identity: Identity, options: Options) -> Self {
        let registry = MetricsRegistry::new();
        let runtime_metrics = RuntimeMetrics::default();
        registry.with(|r| runtime_metrics.register(r));
        let metrics = ManagerMetrics::default();
        metrics.register(&registry);
        let dry_run = options.dry_run.then(DryRun::default);
        if let Some(d) = &dry_run {
            registry.with(|r| d.register(r));
        }
        Manager {
            identity,
            options,
            fence: Fence::default(),
            health: Health::new(),
            registry,
            runtime_metrics,
            metrics,
            plain: None,
            dry_run,
        }
    }

    /// In a dry run (`--dry-run`), the record a provider reports its writes to instead of
    /// making them ([`crate::dry_run`]).
    pub fn dry_run(&self) -> Option<DryRun> {
        self.dry_run.clone()
    }

    /// The fence a provider consults before every side effect.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// The metrics registry, for the provider's own metrics.
    pub fn metrics(&self) -> MetricsRegistry {
        self.registry.clone()
    }

    /// The health checks, for the provider's own checks.
    pub fn health(&self) -> Health {
        self.health.clone()
    }

    /// Spawns the program's own long-running `future` (e.g. hcloud-ccm's credential rotation)
    /// under the supervision of the manager's tasks: if it ends before `shutdown` fired, by
    /// returning or by panicking, an error naming it is logged and `/healthz/<check>` fails
    /// from then on, so the liveness probe restarts the process. It runs in every replica, from
    /// now on (no leader fence of its own). The handle aborts it.
    pub fn spawn_task(
        &self,
        task: ProgramTask,
        shutdown: &CancellationToken,
        future: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> JoinHandle<()> {
        let supervised = Supervised::task(task.check, task.what, task.consequence, shutdown.clone());
        tokio::spawn(supervise(supervised, future, &self.health, || {}))
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Also serves `/metrics` and the health paths over plain HTTP on `addr`, without
    /// authentication (e.g. for a PodMonitor). `setting` names where the address came from,
    /// for start-up errors.
    pub fn serve_plain(mut self, addr: SocketAddr, setting: &str) -> Self {
        self.plain = Some((addr, setting.to_owned()));
        self
    }

    /// Runs until `shutdown` fires (then stops the controllers within a grace period and
    /// releases the Lease) or leadership is lost (then returns
    /// [`ManagerError::LeadershipLost`] at once).
    ///
    /// The phases: [`prepare`](Self::prepare) (clients, listeners, informers, controllers built
    /// but not running), [`lead`] (wait for the Lease, if elected), [`Running::start`] (the
    /// controllers), [`Running::serve_until_stopped`] and [`Running::stop`], the one teardown.
    pub async fn run<C: Cloud>(self, cloud: Arc<C>, shutdown: CancellationToken) -> Result<(), ManagerError> {
        let identity = self.identity;
        let (prepared, mut running) = self.prepare(cloud, &shutdown).await?;
        match lead(prepared.election.as_ref(), &running, &shutdown).await {
            Some(leadership) => running.leadership = leadership,
            None => {
                info!("stopped before becoming the leader");
                return running.stop(Ending::Shutdown).await;
            }
        }
        running.start(prepared.controllers, identity);
        let ending = running.serve_until_stopped(&shutdown).await;
        running.stop(ending).await
    }

    /// Connects, starts the listeners, the provider's event queue and the shared informers,
    /// builds the enabled controllers (nothing runs yet) and sets up leader election.
    async fn prepare<C: Cloud>(
        self,
        cloud: Arc<C>,
        shutdown: &CancellationToken,
    ) -> Result<(Prepared, Running), ManagerError> {
        let Manager { identity, options, fence, health, registry, runtime_metrics, metrics, plain, dry_run } = self;
        for w in &options.warnings {
            warn!("{w}");
        }
        let kube = &options.kube;
        let config = connection_config(kube.kubeconfig.as_deref(), kube.master.as_deref()).await?;
        if dry_run.is_some() {
            warn!(
                "dry run: nothing is written to the cluster or the cloud; every write is logged (\"dry run: write not made\") and counted in dry_run_planned_writes_total"
            );
        }
        let clients = ClientFactory::new(config, kube.qps, kube.burst, identity.program, identity.version, &metrics)
            .with_dry_run(dry_run);
        let listeners = serve(&options, &clients, plain, &health, &registry, shutdown).await?;
        // The provider's own events (upstream: its `Initialize` gets a client builder).
        let resyncs = Resyncs::default();
        let recorder = EventRecorder::new(clients.client("cloud-provider")?, identity.program);
        let provider_events = EventQueue::new(recorder, DEFAULT_QUEUE_CAPACITY, &runtime_metrics);
        tokio::spawn(supervise(
            Supervised::event_queue(shutdown.clone()),
            provider_events.clone().run(shutdown.clone()),
            &health,
            || {},
        ));
        cloud.initialize(RecorderSink::new(provider_events, resyncs.clone()));

        // One watch per resource, shared by every controller; replayed every [p, 2p).
        let resync = options.min_resync_period.mul_f64(1.0 + fastrand::f64());
        let informers = Informers::new(clients.client("shared-informers")?, resync, runtime_metrics.clone());
        let stopping = Arc::new(AtomicBool::new(false));
        let s = stopping.clone();
        health.register("shutdown", &[Probe::Readyz], move || {
            if s.load(Ordering::Relaxed) { Err("shutting down".to_owned()) } else { Ok(()) }
        });

        let stop = shutdown.child_token();
        let mut ctx = ControllerContext::new(
            cloud,
            options,
            informers,
            clients,
            identity.field_manager,
            runtime_metrics,
            stop.clone(),
        )
        .with_metrics_registry(registry.clone())
        .with_resyncs(resyncs);
        let controllers = build_controllers(&mut ctx)?;
        // Every informer a controller asked for (Nodes, and Services with a service controller).
        let synced = ctx.informers.synced();
        health.register("informer-sync", &[Probe::Readyz], move || informers_synced(&synced));
        let election = match &ctx.options.leader_election {
            Some(le) => {
                let client = ctx.clients().client("leader-election")?;
                let elector = election::elector(client.clone(), le)?;
                let check = elector.health_check(LEADER_HEALTH_TOLERANCE);
                health.register("leaderElection", &[Probe::Healthz], move || check.check().map_err(|e| e.to_string()));
                metrics.set_leader(&le.name, false);
                Some(Election {
                    elector,
                    events: EventRecorder::new(client, "leader-election"),
                    lease: le.name.clone(),
                })
            }
            None => None,
        };
        let lease = election.as_ref().map(|e| e.lease.clone());
        // Informers warm up before leadership is won; controllers start only once it is held.
        // Each watch is supervised: one that ends turns /healthz and /readyz red.
        let informer_tasks = ctx
            .informers
            .into_tasks(shutdown.clone())
            .into_iter()
            .map(|(kind, task)| {
                tokio::spawn(supervise(Supervised::informer(kind, shutdown.clone()), task, &health, || {}))
            })
            .collect();
        let running = Running {
            program: identity.program,
            fence,
            health,
            metrics,
            stop,
            stopping,
            informer_tasks,
            listeners,
            lease,
            leadership: None,
            tasks: JoinSet::new(),
            names: Vec::new(),
            started: false,
        };
        Ok((Prepared { controllers, election }, running))
    }
}

/// What [`Manager::prepare`] built that [`Manager::run`] uses once.
struct Prepared {
    /// The enabled controllers, built but not running.
    controllers: Vec<(&'static str, ControllerTask)>,
    /// Leader election, when `--leader-elect` is on.
    election: Option<Election>,
}

/// The leader elector with what announces its win.
struct Election {
    elector: LeaderElector,
    /// Records the `LeaderElection` event on the Lease.
    events: EventRecorder,
    /// The Lease's name, the `leader_election_master_status` label.
    lease: String,
}

/// Waits for leadership when elected (the fence stands by meanwhile, then lets calls pass while
/// the Lease is current). `Some(None)`: no election, run at once; `None`: `shutdown` fired first.
async fn lead(
    election: Option<&Election>,
    running: &Running,
    shutdown: &CancellationToken,
) -> Option<Option<Leadership>> {
    let Some(Election { elector, events, lease }) = election else { return Some(None) };
    running.fence.standby();
    let leadership = election::acquire(elector, events.clone(), shutdown).await?;
    let lease_fence = leadership.fence();
    running.fence.leading(move || lease_fence.is_current());
    running.metrics.set_leader(lease, true);
    Some(Some(leadership))
}

/// How a run ends.
enum Ending {
    /// `shutdown` fired: stop the controllers within the grace period, release the Lease.
    Shutdown,
    /// Leadership was lost: fail-stop.
    LeadershipLost(leader_election::Lost),
}

/// Everything [`Running::stop`] tears down, and the running controllers.
struct Running {
    program: &'static str,
    fence: Fence,
    health: Health,
    metrics: ManagerMetrics,
    /// Cancelled to stop the controllers (a child of `shutdown`).
    stop: CancellationToken,
    /// Turns `/readyz` red once the manager is stopping.
    stopping: Arc<AtomicBool>,
    informer_tasks: Vec<JoinHandle<()>>,
    /// The listeners; they stop when dropped.
    listeners: Vec<Bound>,
    /// The Lease's name when elected.
    lease: Option<String>,
    leadership: Option<Leadership>,
    tasks: JoinSet<()>,
    /// The started controllers' names.
    names: Vec<&'static str>,
    /// Whether [`Running::start`] ran (the "shutting down" and "stopped" logs are for a run that
    /// got that far).
    started: bool,
}

impl Running {
    /// Starts the controllers, each under [`supervise`]: one that ends before it is stopped
    /// turns `/healthz` red.
    fn start(&mut self, controllers: Vec<(&'static str, ControllerTask)>, identity: Identity) {
        for (name, task) in controllers {
            let stopped = running(&self.metrics, self.program, name);
            self.tasks.spawn(supervise(Supervised::controller(name, self.stop.clone()), task, &self.health, stopped));
            self.metrics.set_running(self.program, name, true);
            self.names.push(name);
        }
        self.started = true;
        info!(controllers = ?self.names, version = identity.version, "{} started", identity.program);
    }

    /// Keeps the Lease (if elected) until `shutdown` fires or leadership is lost.
    async fn serve_until_stopped(&mut self, shutdown: &CancellationToken) -> Ending {
        let outcome = match self.leadership.as_mut() {
            Some(l) => l.keep(shutdown).await,
            None => {
                shutdown.cancelled().await;
                Ok(())
            }
        };
        match outcome {
            Ok(()) => Ending::Shutdown,
            Err(lost) => Ending::LeadershipLost(lost),
        }
    }

    /// The one teardown: `/readyz` red, controllers reported stopped, the fence closed, the
    /// controllers stopped (waited for within [`SHUTDOWN_GRACE`] unless leadership was lost),
    /// the Lease released (on shutdown), the informers and listeners stopped.
    async fn stop(self, ending: Ending) -> Result<(), ManagerError> {
        let Running {
            program,
            fence,
            metrics,
            stop,
            stopping,
            informer_tasks,
            listeners,
            lease,
            leadership,
            mut tasks,
            names,
            started,
            ..
        } = self;
        stopping.store(true, Ordering::Relaxed);
        for name in &names {
            metrics.set_running(program, name, false);
        }
        let result = match ending {
            Ending::LeadershipLost(lost) => {
                // Fail-stop: nothing more reaches the cloud, the controllers stop, the process
                // exits non-zero (upstream: "leaderelection lost").
                fence.close(format!("leadership lost: {lost}"));
                if let Some(lease) = &lease {
                    metrics.set_leader(lease, false);
                }
                error!(error = %lost, "leadership lost; stopping");
                stop.cancel();
                Err(ManagerError::LeadershipLost(lost))
            }
            Ending::Shutdown => {
                if started {
                    info!("shutting down");
                }
                stop.cancel();
                let drained = async { while tasks.join_next().await.is_some() {} };
                if tokio::time::timeout(SHUTDOWN_GRACE, drained).await.is_err() {
                    warn!(grace = ?SHUTDOWN_GRACE, "controllers did not stop in time; exiting anyway");
                }
                fence.close("the controller manager stopped");
                if let Some(l) = leadership {
                    // Hand over at once instead of letting a standby wait out the lease.
                    match l.release().await {
                        Ok(()) => info!("leader lease released"),
                        Err(e) => {
                            warn!(error = %e, "could not release the leader lease; a standby takes over when it expires")
                        }
                    }
                }
                Ok(())
            }
        };
        for task in informer_tasks {
            task.abort();
        }
        drop(listeners);
        if result.is_ok() && started {
            info!("stopped");
        }
        result
    }
}

/// Sets `running_managed_controllers` of controller `name` to 0 (for [`supervise`]).
fn running(metrics: &ManagerMetrics, program: &'static str, name: &'static str) -> impl FnOnce() + Send + 'static {
    let metrics = metrics.clone();
    move || metrics.set_running(program, name, false)
}

/// Starts the secure port (unless `--secure-port=0`) and the plain listener, if any. Both
/// serve until `shutdown`.
async fn serve(
    options: &Options,
    clients: &ClientFactory,
    plain: Option<(SocketAddr, String)>,
    health: &Health,
    registry: &MetricsRegistry,
    shutdown: &CancellationToken,
) -> Result<Vec<Bound>, ManagerError> {
    let mut bound = Vec::new();
    let secure = SecureServing {
        bind_address: options.serving.bind_address,
        port: options.serving.port,
        cert_file: options.serving.cert_file.clone(),
        key_file: options.serving.key_file.clone(),
        cert_name: SERVING_CERT_NAME.to_owned(),
        tls: options.serving.tls.clone(),
        http2: options.serving.http2,
        http2_max_streams: options.serving.http2_max_streams,
        reuse_port: options.serving.reuse_port,
        sni_certificates: options.serving.sni_certificates.clone(),
    };
    if secure.port != 0 {
        let auth = crate::delegation::delegating_auth(&options.auth, clients).await?;
        if let Some(b) =
            controller_serving::serve_secure(&secure, health.clone(), registry.clone(), Some(auth), shutdown.clone())
                .await?
        {
            info!(address = %b.local_addr, "serving /healthz, /readyz, /livez and /metrics over HTTPS");
            bound.push(b);
        }
    }
    if let Some((addr, setting)) = plain {
        let b = controller_serving::serve_plain(addr, health.clone(), registry.clone(), shutdown.clone())
            .await
            .map_err(|source| ManagerError::PlainListener { setting, source })?;
        info!(address = %b.local_addr, "serving /metrics and the health paths over plain HTTP");
        bound.push(b);
    }
    Ok(bound)
}

/// A token cancelled on the first SIGTERM or SIGINT.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
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
                    warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops the process");
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        t.cancel();
    });
    token
}

#[cfg(test)]
mod tests {
    use test_harness::error_chain;

    use super::*;

    #[test]
    fn errors_name_each_cause_once() {
        let lost = leader_election::Lost {
            lease: "kube-system/cloud-controller-manager".to_owned(),
            reason: leader_election::LostReason::HolderChanged { holder: Some("other_1".to_owned()) },
        };
        let expected = format!("leaderelection lost: {lost}");
        assert_eq!(error_chain(&ManagerError::LeadershipLost(lost)), expected);
        let refused = leader_election::ConfigError::Empty { field: "name" };
        let expected = refused.to_string();
        assert_eq!(error_chain(&ManagerError::LeaderElectionConfig(refused)), expected);
    }
}
