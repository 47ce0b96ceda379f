//! The controller registry: names, aliases and `--controllers` selection (upstream `names/`
//! and controller-manager's `IsControllerEnabled`), and how each controller is built
//! (upstream `app/core.go`).

use std::future::Future;
use std::pin::Pin;

use cloud_controllers::{CloudNodeController, CloudNodeLifecycleController, RouteController, ServiceController};
use cloud_provider::Cloud;
use tracing::{info, warn};

use crate::context::ControllerContext;
use crate::manager::ManagerError;

/// A built controller, ready to run.
pub(crate) type ControllerTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// `cloud-node-controller`.
pub const CLOUD_NODE: &str = cloud_controllers::node::CONTROLLER_NAME;
/// `cloud-node-lifecycle-controller`.
pub const CLOUD_NODE_LIFECYCLE: &str = cloud_controllers::lifecycle::CONTROLLER_NAME;
/// `service-lb-controller`.
pub const SERVICE_LB: &str = cloud_controllers::service::CONTROLLER_NAME;
/// `node-route-controller`.
pub const NODE_ROUTE: &str = cloud_controllers::route::CONTROLLER_NAME;

/// Every controller, in start order.
pub const ALL: [&str; 4] = [CLOUD_NODE, CLOUD_NODE_LIFECYCLE, SERVICE_LB, NODE_ROUTE];

/// Upstream's aliases.
pub const ALIASES: [(&str, &str); 4] = [
    ("cloud-node", CLOUD_NODE),
    ("service", SERVICE_LB),
    ("route", NODE_ROUTE),
    ("cloud-node-lifecycle", CLOUD_NODE_LIFECYCLE),
];

/// Resolves aliases in a `--controllers` list (keeping `-` prefixes and `*`) and rejects
/// unknown names.
pub fn resolve(list: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut unknown = Vec::new();
    for item in list.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if item == "*" {
            out.push(item.to_owned());
            continue;
        }
        let (prefix, name) = match item.strip_prefix('-') {
            Some(rest) => ("-", rest),
            None => ("", item),
        };
        let canonical = ALIASES.iter().find(|(a, _)| *a == name).map(|(_, c)| *c).unwrap_or(name);
        if ALL.contains(&canonical) {
            out.push(format!("{prefix}{canonical}"));
        } else {
            unknown.push(item.to_owned());
        }
    }
    if unknown.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "--controllers: unknown controller(s) {}; known: {} (aliases: {}), '*' for all, '-name' to disable",
            unknown.join(", "),
            ALL.join(", "),
            ALIASES.iter().map(|(a, _)| *a).collect::<Vec<_>>().join(", ")
        ))
    }
}

/// Upstream `IsControllerEnabled` over a resolved list: named ⇒ on, `-named` ⇒ off,
/// otherwise on iff `*` is present (no controller is disabled by default).
pub fn is_enabled(resolved: &[String], name: &str) -> bool {
    if resolved.iter().any(|c| c == name) {
        return true;
    }
    if resolved.iter().any(|c| c.strip_prefix('-') == Some(name)) {
        return false;
    }
    resolved.iter().any(|c| c == "*")
}

/// Constructs every enabled controller the provider supports (upstream `app/core.go`), wiring
/// them to the shared informers. Nothing runs yet.
pub(crate) fn build_controllers<C: Cloud>(
    ctx: &mut ControllerContext<C>,
) -> Result<Vec<(&'static str, ControllerTask)>, ManagerError> {
    let mut started: Vec<(&'static str, ControllerTask)> = Vec::new();
    let has_instances = ctx.cloud.instances_v2().is_some() || ctx.cloud.instances().is_some();
    for name in ALL {
        if !is_enabled(&ctx.options.controllers, name) {
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
                started.push((name, Box::pin(c.run())));
            }
            CLOUD_NODE_LIFECYCLE if has_instances => {
                let c = CloudNodeLifecycleController::new(
                    ctx.cloud.clone(),
                    &ctx.informers.nodes,
                    ctx.io(name)?,
                    ctx.options.node_monitor_period,
                    ctx.stop.clone(),
                );
                started.push((name, Box::pin(c.run())));
            }
            CLOUD_NODE | CLOUD_NODE_LIFECYCLE => {
                warn!("{name} not started: the cloud provider supports neither InstancesV2 nor Instances");
            }
            SERVICE_LB => match ctx.cloud.load_balancer() {
                None => info!("{name} not started: the cloud provider does not offer load balancers"),
                Some(balancer) => {
                    // Upstream's client name for this controller.
                    let io = ctx.io(cloud_controllers::service::EVENT_COMPONENT)?;
                    let config = ctx.options.service.clone();
                    let (nodes, services) = ctx.informers.nodes_and_services();
                    let c = ServiceController::new(balancer, services, nodes, io, config, ctx.stop.clone());
                    ctx.resyncs.register("Service", c.resync_handle());
                    let metrics = c.metrics();
                    ctx.metrics_registry().with(|r| metrics.register(r));
                    started.push((name, Box::pin(c.run())));
                }
            },
            NODE_ROUTE => match (ctx.options.routes.clone(), ctx.cloud.routes()) {
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
                    started.push((name, Box::pin(c.run())));
                }
            },
            other => warn!("{other} is not a known controller"),
        }
    }
    Ok(started)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// Upstream `TestCloudControllerManagerAliases`, with this project's controller names.
    #[test]
    fn test_cloud_controller_manager_aliases() {
        let resolved = resolve(&s(&["service-lb-controller", "-service", "route", "-cloud-node-lifecycle-controller"]))
            .expect("valid");
        assert_eq!(
            resolved,
            s(&[
                "service-lb-controller",
                "-service-lb-controller",
                "node-route-controller",
                "-cloud-node-lifecycle-controller"
            ])
        );
    }

    /// Upstream `TestCloudControllerNamesConsistency`: names match `^[a-z]([-a-z]*[a-z])?$`
    /// and end in `-controller`.
    #[test]
    fn test_cloud_controller_names_consistency() {
        for name in ALL {
            assert!(name.ends_with("-controller"), "{name}");
            let bytes = name.as_bytes();
            assert!(
                bytes.first().is_some_and(u8::is_ascii_lowercase) && bytes.last().is_some_and(u8::is_ascii_lowercase)
            );
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{name}");
        }
    }

    /// Upstream `TestCloudControllerNamesDeclaration`: every alias points at a declared name.
    #[test]
    fn test_cloud_controller_names_declaration() {
        for (alias, name) in ALIASES {
            assert!(ALL.contains(&name), "{alias} -> {name}");
        }
    }

    #[test]
    fn enablement() {
        let all = resolve(&s(&["*"])).expect("valid");
        assert!(ALL.iter().all(|c| is_enabled(&all, c)));
        let some = resolve(&s(&["*", "-route", "-service"])).expect("valid");
        assert!(is_enabled(&some, CLOUD_NODE) && is_enabled(&some, CLOUD_NODE_LIFECYCLE));
        assert!(!is_enabled(&some, NODE_ROUTE) && !is_enabled(&some, SERVICE_LB));
        let only = resolve(&s(&["cloud-node"])).expect("valid");
        assert!(is_enabled(&only, CLOUD_NODE) && !is_enabled(&only, CLOUD_NODE_LIFECYCLE));
        let err = resolve(&s(&["*", "nodes", "-bogus"])).unwrap_err();
        assert!(err.contains("nodes, -bogus") && err.contains("cloud-node-controller"), "{err}");
    }
}
