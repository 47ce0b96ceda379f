//! The controller registry: how each enabled controller is built (upstream `app/core.go`);
//! the names, aliases and `--controllers` selection are in [`crate::controller_set`].

use std::future::Future;
use std::pin::Pin;

use cloud_controllers::{
    CloudNodeController, CloudNodeLifecycleController, NodeIpamController, RouteController, ServiceController,
};
use cloud_provider::Cloud;
use tracing::{info, warn};

use crate::context::ControllerContext;
pub use crate::controller_set::{
    ALIASES, ALL, CLOUD_NODE, CLOUD_NODE_LIFECYCLE, ControllerSet, DISABLED_BY_DEFAULT, NODE_IPAM, NODE_ROUTE,
    SERVICE_LB, is_enabled, resolve,
};
use crate::error::ManagerError;

/// A built controller, ready to run.
pub(crate) type ControllerTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Constructs every enabled controller the provider supports (upstream `app/core.go`), wiring
/// them to the shared informers. Nothing runs yet.
pub(crate) fn build_controllers<C: Cloud>(
    ctx: &mut ControllerContext<C>,
) -> Result<Vec<(&'static str, ControllerTask)>, ManagerError> {
    let mut started: Vec<(&'static str, ControllerTask)> = Vec::new();
    let has_instances = ctx.cloud.instances_v2().is_some() || ctx.cloud.instances().is_some();
    for name in ALL {
        if !ctx.options.controllers.contains(name) {
            info!("{name} is disabled by --controllers");
            continue;
        }
        match name {
            CLOUD_NODE if has_instances => {
                let io = ctx.io(name)?;
                let c = CloudNodeController::new(
                    ctx.cloud.clone(),
                    &mut ctx.informers.nodes,
                    io,
                    ctx.options.node,
                    ctx.stop.clone(),
                );
                let metrics = c.metrics();
                ctx.metrics_registry().with(|r| metrics.register(r));
                started.push((name, Box::pin(c.run())));
            }
            CLOUD_NODE_LIFECYCLE if has_instances => {
                let c = CloudNodeLifecycleController::new(
                    ctx.cloud.clone(),
                    &ctx.informers.nodes,
                    ctx.io(name)?,
                    ctx.options.node_lifecycle,
                    ctx.stop.clone(),
                );
                let metrics = c.metrics();
                ctx.metrics_registry().with(|r| metrics.register(r));
                started.push((name, Box::pin(c.run())));
            }
            NODE_IPAM => match ctx.options.node_ipam.clone() {
                None => info!("{name} not started: it runs only with --allocate-node-cidrs=true"),
                Some(config) => {
                    let io = ctx.io(name)?;
                    let c = NodeIpamController::new(
                        ctx.cloud.clone(),
                        &mut ctx.informers.nodes,
                        io,
                        &config,
                        ctx.stop.clone(),
                    )
                    .map_err(ManagerError::NodeIpamConfig)?;
                    started.push((name, Box::pin(c.run())));
                }
            },
            CLOUD_NODE | CLOUD_NODE_LIFECYCLE => {
                warn!("{name} not started: the cloud provider supports neither InstancesV2 nor Instances");
            }
            SERVICE_LB => match ctx.cloud.load_balancer() {
                None => info!("{name} not started: the cloud provider does not offer load balancers"),
                Some(balancer) => {
                    // Upstream's client name for this controller.
                    let io = ctx.io(cloud_controllers::service::EVENT_COMPONENT)?;
                    let config = ctx.options.service_config();
                    let (nodes, services) = ctx.informers.nodes_and_services();
                    let c = ServiceController::new(balancer, services, nodes, io, config, ctx.stop.clone());
                    ctx.resyncs.register("Service", c.resync_handle());
                    let metrics = c.metrics();
                    ctx.metrics_registry().with(|r| metrics.register(r));
                    started.push((name, Box::pin(c.run())));
                }
            },
            NODE_ROUTE => match (ctx.options.route_config(), ctx.cloud.routes()) {
                (None, _) => info!(
                    "{name} not started: routes are configured only with --allocate-node-cidrs=true and \
                     --configure-cloud-routes=true"
                ),
                (Some(_), None) => warn!(
                    "{name} not started: --allocate-node-cidrs and --configure-cloud-routes are set, but the cloud \
                     provider does not offer routes"
                ),
                (Some(config), Some(routes)) => {
                    let io = ctx.io(name)?;
                    let c = RouteController::new(routes, &mut ctx.informers.nodes, io, config, ctx.stop.clone());
                    let metrics = c.metrics();
                    ctx.metrics_registry().with(|r| metrics.register(r));
                    started.push((name, Box::pin(c.run())));
                }
            },
            other => warn!("{other} is not a known controller"),
        }
    }
    Ok(started)
}
