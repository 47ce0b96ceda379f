//! Running a controller manager: clients, informers, the enabled controllers, and an orderly
//! stop on SIGTERM/SIGINT.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use cloud_controllers::{CloudNodeController, CloudNodeLifecycleController};
use cloud_provider::Cloud;
use controller_runtime::{EventRecorder, RuntimeMetrics};
use k8s_openapi::api::core::v1::ObjectReference;
use leader_election::{ElectionConfig, LeaderElector, Leadership, default_identity};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::context::{ClientFactory, ControllerContext, Informers};
use crate::controllers::{self, is_enabled};
use crate::fence::Fence;
use crate::kube_client::{KubeClientError, connection_config};
use crate::options::{LeaderElectionOptions, Options};

/// How long controllers get to finish after a stop request.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Who runs the manager: names used in logs, User-Agents and writes.
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    /// The program (`<program> started`, User-Agent).
    pub program: &'static str,
    /// Its version.
    pub version: &'static str,
    /// The field manager of every write to the API server.
    pub field_manager: &'static str,
}

/// Why the manager stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// No Kubernetes client.
    #[error(transparent)]
    Kube(#[from] KubeClientError),
    /// The leader election settings were refused.
    #[error("leader election: {0}")]
    LeaderElectionConfig(#[from] leader_election::ConfigError),
    /// Leadership was lost: the process stops so that only the new leader acts (fail-stop).
    #[error("leaderelection lost: {0}")]
    LeadershipLost(#[from] leader_election::Lost),
}

type ControllerTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A controller manager, configured and ready to run.
pub struct Manager {
    identity: Identity,
    options: Options,
    fence: Fence,
    metrics: RuntimeMetrics,
}

impl Manager {
    /// A manager for `options`.
    pub fn new(identity: Identity, options: Options) -> Self {
        Manager { identity, options, fence: Fence::default(), metrics: RuntimeMetrics::default() }
    }

    /// The fence a provider consults before every side effect.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Runs until `shutdown` fires, then stops the controllers (within a grace period).
    pub async fn run<C: Cloud>(self, cloud: Arc<C>, shutdown: CancellationToken) -> Result<(), ManagerError> {
        let Manager { identity, options, fence, metrics } = self;
        for w in &options.warnings {
            warn!("{w}");
        }
        let kube = &options.kube;
        let config = connection_config(kube.kubeconfig.as_deref(), kube.master.as_deref()).await?;
        let clients = ClientFactory::new(config, kube.qps, kube.burst, identity.program, identity.version);

        // One watch per resource, shared by every controller; replayed every [p, 2p).
        let resync = options.min_resync_period.mul_f64(1.0 + fastrand::f64());
        let informers = Informers::new(clients.client("shared-informers")?, resync);
        let stop = shutdown.child_token();
        let mut ctx =
            ControllerContext::new(cloud, options, informers, clients, identity.field_manager, metrics, stop.clone());
        let controllers = build_controllers(&mut ctx)?;
        let election = match &ctx.options.leader_election {
            Some(le) => Some((le.clone(), ctx.clients().client("leader-election")?)),
            None => None,
        };
        // Informers warm up before leadership is won; controllers start only once it is held.
        let informer_task = tokio::spawn(ctx.informers.run(shutdown.clone()));

        let mut leadership = match election {
            None => None,
            Some((le, client)) => {
                fence.standby();
                match acquire(client, &le, &shutdown).await? {
                    Some(l) => Some(l),
                    None => {
                        info!("stopped before becoming the leader");
                        fence.close("the controller manager stopped");
                        informer_task.abort();
                        return Ok(());
                    }
                }
            }
        };
        if let Some(l) = &leadership {
            let lease = l.fence();
            fence.leading(move || lease.is_current());
        }

        let names: Vec<&str> = controllers.iter().map(|(name, _)| *name).collect();
        let mut tasks = tokio::task::JoinSet::new();
        for (_, task) in controllers {
            tasks.spawn(task);
        }
        info!(controllers = ?names, version = identity.version, "{} started", identity.program);

        let outcome = match leadership.as_mut() {
            Some(l) => l.keep(&shutdown).await,
            None => {
                shutdown.cancelled().await;
                Ok(())
            }
        };
        if let Err(lost) = outcome {
            // Fail-stop: nothing more reaches the cloud, the controllers stop, the process
            // exits non-zero (upstream: "leaderelection lost").
            fence.close(format!("leadership lost: {lost}"));
            error!(error = %lost, "leadership lost; stopping");
            stop.cancel();
            informer_task.abort();
            return Err(ManagerError::LeadershipLost(lost));
        }
        info!("shutting down");
        stop.cancel();
        if tokio::time::timeout(SHUTDOWN_GRACE, async { while tasks.join_next().await.is_some() {} }).await.is_err() {
            warn!(grace = ?SHUTDOWN_GRACE, "controllers did not stop in time; exiting anyway");
        }
        fence.close("the controller manager stopped");
        if let Some(l) = leadership {
            // Hand over at once instead of letting a standby wait out the lease.
            match l.release().await {
                Ok(()) => info!("leader lease released"),
                Err(e) => warn!(error = %e, "could not release the leader lease; a standby takes over when it expires"),
            }
        }
        informer_task.abort();
        info!("stopped");
        Ok(())
    }
}

/// Waits for leadership (upstream: `leaderelection.RunOrDie`), announcing it with a
/// `LeaderElection` event on the Lease like client-go. `None` if `shutdown` fired first.
async fn acquire(
    client: kube::Client,
    options: &LeaderElectionOptions,
    shutdown: &CancellationToken,
) -> Result<Option<Leadership>, ManagerError> {
    let identity = default_identity();
    let config = ElectionConfig {
        namespace: options.namespace.clone(),
        name: options.name.clone(),
        identity: identity.clone(),
        lease_duration: options.lease_duration,
        renew_deadline: options.renew_deadline,
        retry_period: options.retry_period,
    };
    let elector = LeaderElector::new(client.clone(), config)?;
    info!(lease = %elector.config().lease_ref(), %identity, "attempting to acquire leader lease");
    let Some(leadership) = elector.acquire(shutdown).await else { return Ok(None) };
    info!(lease = %elector.config().lease_ref(), %identity, "successfully acquired lease");
    let lease = ObjectReference {
        api_version: Some("coordination.k8s.io/v1".to_owned()),
        kind: Some("Lease".to_owned()),
        namespace: Some(options.namespace.clone()),
        name: Some(options.name.clone()),
        ..Default::default()
    };
    EventRecorder::new(client, "leader-election")
        .normal(&lease, "LeaderElection", format!("{identity} became leader"))
        .await;
    Ok(Some(leadership))
}

/// Constructs every enabled controller the provider supports (upstream `app/core.go`), wiring
/// them to the shared informers. Nothing runs yet.
fn build_controllers<C: Cloud>(
    ctx: &mut ControllerContext<C>,
) -> Result<Vec<(&'static str, ControllerTask)>, ManagerError> {
    let mut started: Vec<(&'static str, ControllerTask)> = Vec::new();
    let has_instances = ctx.cloud.instances_v2().is_some() || ctx.cloud.instances().is_some();
    for name in controllers::ALL {
        if !is_enabled(&ctx.options.controllers, name) {
            info!("{name} is disabled by --controllers");
            continue;
        }
        match name {
            controllers::CLOUD_NODE if has_instances => {
                let io = ctx.io(name)?;
                let c = CloudNodeController::new(
                    ctx.cloud.clone(),
                    &mut ctx.informers.nodes,
                    io,
                    ctx.options.node,
                    ctx.stop.clone(),
                );
                started.push((name, Box::pin(c.run())));
            }
            controllers::CLOUD_NODE_LIFECYCLE if has_instances => {
                let c = CloudNodeLifecycleController::new(
                    ctx.cloud.clone(),
                    &ctx.informers.nodes,
                    ctx.io(name)?,
                    ctx.options.node_monitor_period,
                    ctx.stop.clone(),
                );
                started.push((name, Box::pin(c.run())));
            }
            controllers::CLOUD_NODE | controllers::CLOUD_NODE_LIFECYCLE => {
                warn!("{name} not started: the cloud provider supports neither InstancesV2 nor Instances");
            }
            controllers::SERVICE_LB => {
                if ctx.cloud.load_balancer().is_none() {
                    info!("{name} not started: the cloud provider does not offer load balancers");
                } else {
                    warn!("{name} not started: the service controller is not implemented yet");
                }
            }
            controllers::NODE_ROUTE => {
                if ctx.cloud.routes().is_none() {
                    info!("{name} not started: the cloud provider does not offer routes");
                } else {
                    warn!("{name} not started: the route controller is not implemented yet");
                }
            }
            other => warn!("{other} is not a known controller"),
        }
    }
    Ok(started)
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
