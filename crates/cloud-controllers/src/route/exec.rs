//! Carrying out a [`RoutePlan`] against the provider: deletions and creations with bounded
//! concurrency (upstream `maxConcurrentRouteOperations`), and per node the outcome that
//! decides its `NetworkUnavailable` condition. Kubernetes writes are the [`RouteSink`]'s,
//! so the controller and the tests run exactly this code.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use cloud_provider::{CloudError, Route, Routes};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::{error, info};

use super::plan::{PlannedCreate, RoutePlan};

/// Upstream's `maxConcurrentRouteOperations`: provider calls in flight at once.
pub const MAX_CONCURRENT_ROUTE_OPERATIONS: usize = 200;

/// Where the outcome of each node's route work goes.
pub trait RouteSink: Send + Sync {
    /// A route could not be created (upstream: the `FailedToCreateRoute` event).
    fn creation_failed(
        &self,
        node: &Node,
        create: &PlannedCreate,
        elapsed: Duration,
        error: &CloudError,
    ) -> impl Future<Output = ()> + Send;

    /// All of the node's creations ran; `routes_created` is upstream's `allRoutesCreated`.
    fn node_done(&self, node: &Arc<Node>, routes_created: bool) -> impl Future<Output = ()> + Send;
}

/// What carrying out a plan came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExecutionReport {
    /// Routes deleted.
    pub deleted: usize,
    /// Deletions that failed.
    pub delete_failures: usize,
    /// Routes created.
    pub created: usize,
    /// Creations that failed.
    pub create_failures: usize,
    /// Some failure was transient (outage, rate limit, busy network).
    pub transient: bool,
    /// Failures (of either kind) the provider refused until their input changes
    /// ([`CloudError::awaits_input_change`]): retrying them unchanged cannot succeed.
    pub awaiting_change: usize,
}

impl ExecutionReport {
    /// True if every operation succeeded.
    pub fn complete(&self) -> bool {
        self.delete_failures == 0 && self.create_failures == 0
    }

    /// True if some failed operation may succeed when retried as it is (a failure other
    /// than a refusal that waits for its input to change).
    pub fn retry_may_help(&self) -> bool {
        self.delete_failures + self.create_failures > self.awaiting_change
    }

    fn failed(&mut self, e: &CloudError) {
        self.transient |= is_transient(e);
        if e.awaits_input_change() {
            self.awaiting_change += 1;
        }
    }
}

fn is_transient(e: &CloudError) -> bool {
    matches!(e, CloudError::Failed { transient: true, .. } | CloudError::Retry { .. })
}

/// Runs the plan's deletions and creations (deletions first if the plan says so, else at the
/// same time), at most `max_concurrent` provider calls at once, and reports each node of
/// `plan.nodes` found in `nodes` to `sink` once its creations ran.
pub async fn execute<R: Routes, S: RouteSink>(
    routes: &R,
    cluster_name: &str,
    plan: &RoutePlan,
    nodes: &[Arc<Node>],
    sink: &S,
    max_concurrent: usize,
) -> ExecutionReport {
    let permits = Semaphore::new(max_concurrent.max(1));
    let deletions = async {
        let results =
            futures::future::join_all(plan.deletions.iter().map(|route| delete(routes, cluster_name, route, &permits)))
                .await;
        let mut report = ExecutionReport::default();
        for r in results {
            match r {
                Ok(()) => report.deleted += 1,
                Err(e) => {
                    report.delete_failures += 1;
                    report.failed(&e);
                }
            }
        }
        report
    };
    let planned: Vec<Arc<Node>> = nodes
        .iter()
        .filter(|n| n.metadata.name.as_deref().is_some_and(|name| plan.nodes.contains_key(name)))
        .cloned()
        .collect();
    let creations = async {
        let reports: Vec<ExecutionReport> = futures::stream::iter(planned)
            .map(|node| create_for_node(routes, cluster_name, plan, node, sink, &permits))
            .buffer_unordered(max_concurrent.max(1))
            .collect()
            .await;
        reports.into_iter().fold(ExecutionReport::default(), |mut acc, r| {
            acc.created += r.created;
            acc.create_failures += r.create_failures;
            acc.transient |= r.transient;
            acc.awaiting_change += r.awaiting_change;
            acc
        })
    };
    let (d, c) = if plan.deletions_first {
        let d = deletions.await;
        (d, creations.await)
    } else {
        tokio::join!(deletions, creations)
    };
    ExecutionReport {
        deleted: d.deleted,
        delete_failures: d.delete_failures,
        created: c.created,
        create_failures: c.create_failures,
        transient: d.transient || c.transient,
        awaiting_change: d.awaiting_change + c.awaiting_change,
    }
}

/// Deletes one route; the error on failure (logged, as upstream does).
async fn delete<R: Routes>(
    routes: &R,
    cluster_name: &str,
    route: &Route,
    permits: &Semaphore,
) -> Result<(), CloudError> {
    let started = Instant::now();
    let _permit =
        permits.acquire().await.map_err(|_| CloudError::failed("Stopped", "the route controller is stopping"))?;
    info!(route = %route.name, destination = %route.destination_cidr, target = %route.target_node, blackhole = route.blackhole, "deleting route");
    match routes.delete_route(cluster_name, route).await {
        Ok(()) => {
            info!(route = %route.name, destination = %route.destination_cidr, after = ?started.elapsed(), "deleted route");
            Ok(())
        }
        Err(e) => {
            error!(route = %route.name, destination = %route.destination_cidr, after = ?started.elapsed(), error = %e, "could not delete route");
            Err(e)
        }
    }
}

/// Creates the node's planned routes one after the other, then reports the node.
async fn create_for_node<R: Routes, S: RouteSink>(
    routes: &R,
    cluster_name: &str,
    plan: &RoutePlan,
    node: Arc<Node>,
    sink: &S,
    permits: &Semaphore,
) -> ExecutionReport {
    let mut report = ExecutionReport::default();
    let name = node.metadata.name.clone().unwrap_or_default();
    let Some(entry) = plan.nodes.get(&name) else { return report };
    let mut failed: Vec<String> = Vec::new();
    for create in &entry.creations {
        let started = Instant::now();
        let result = match permits.acquire().await {
            Ok(_permit) => {
                info!(node = %name, destination = %create.route.destination_cidr, name_hint = %create.name_hint, "creating route");
                routes.create_route(cluster_name, &create.name_hint, &create.route).await
            }
            Err(_) => Err(CloudError::failed("Stopped", "the route controller is stopping")),
        };
        match result {
            Ok(()) => {
                info!(node = %name, destination = %create.route.destination_cidr, after = ?started.elapsed(), "created route");
                report.created += 1;
            }
            Err(e) => {
                report.create_failures += 1;
                report.failed(&e);
                failed.push(create.route.destination_cidr.clone());
                sink.creation_failed(&node, create, started.elapsed(), &e).await;
            }
        }
    }
    sink.node_done(&node, entry.all_created(&failed)).await;
    report
}
