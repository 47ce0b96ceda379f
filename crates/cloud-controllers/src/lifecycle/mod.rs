//! The cloud-node-lifecycle controller (upstream `controllers/nodelifecycle`).
//!
//! ```text
//!  every --node-monitor-period: nodes from the shared cache
//!     ├─ prefetch(not-ready nodes)                  (one bulk lookup where it pays off)
//!     └─ per node, concurrently: decide (Ready? exists? shut down?) ──► apply
//!            Ready=True          → remove the shutdown taint if present
//!            instance gone       → Normal DeletingNode event, delete the Node
//!            instance shut down  → add node.cloudprovider.kubernetes.io/shutdown:NoSchedule
//!            any provider error  → keep the node untouched
//! ```

pub mod decide;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::helpers::taints::{add_or_update_taint, remove_taint};
use cloud_provider::{Cloud, InstancesV2};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::events::{EventRecorder, node_ref};
use crate::informer::{Informer, Synced};
use crate::node_writes::{self, is_not_found, retry_on_conflict};
use decide::{LifecycleDecision, decide, is_ready, shutdown_taint};

/// How many nodes are checked at once.
const CONCURRENCY: usize = 16;

/// The cloud-node-lifecycle controller.
pub struct CloudNodeLifecycleController<C: Cloud> {
    api: Api<Node>,
    cloud: Arc<C>,
    store: Store<Node>,
    synced: Synced,
    events: EventRecorder,
    period: Duration,
}

impl<C: Cloud> CloudNodeLifecycleController<C> {
    /// A controller checking nodes every `period` (`--node-monitor-period`).
    pub fn new(client: Client, cloud: Arc<C>, informer: &Informer<Node>, period: Duration) -> Self {
        CloudNodeLifecycleController {
            api: Api::all(client.clone()),
            cloud,
            store: informer.store(),
            synced: informer.synced(),
            events: EventRecorder::new(client, "cloud-node-lifecycle-controller"),
            period,
        }
    }

    /// Monitors nodes until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            synced = self.synced.wait() => if !synced { return },
        }
        info!(period = ?self.period, "cloud-node-lifecycle controller started");
        loop {
            self.monitor_nodes().await;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(self.period) => {}
            }
        }
    }

    /// One pass over all nodes (upstream `MonitorNodes`, concurrently).
    pub async fn monitor_nodes(&self) {
        let nodes = self.store.state();
        let not_ready: Vec<Arc<Node>> = nodes.iter().filter(|n| !is_ready(n)).cloned().collect();
        if !not_ready.is_empty()
            && let Some(v2) = self.cloud.instances_v2()
        {
            v2.prefetch(&not_ready, cloud_provider::LookupPurpose::Lifecycle).await;
        }
        futures::stream::iter(nodes)
            .for_each_concurrent(CONCURRENCY, |node| async move { self.monitor_node(&node).await })
            .await;
    }

    async fn monitor_node(&self, node: &Node) {
        let name = node.name_any();
        match decide(&*self.cloud, node).await {
            Ok(LifecycleDecision::Keep) => {}
            Ok(LifecycleDecision::RemoveShutdownTaint) => {
                if let Err(e) = self.update_taints(node, |t| remove_taint(t, &shutdown_taint())).await {
                    error!(node = %name, error = %e, "error patching node taints");
                }
            }
            Ok(LifecycleDecision::AddShutdownTaint) => {
                if let Err(e) = self.update_taints(node, |t| add_or_update_taint(t, &shutdown_taint())).await {
                    error!(node = %name, error = %e, "failed to apply shutdown taint to node, it may have been deleted");
                }
            }
            Ok(LifecycleDecision::Delete) => self.delete(node).await,
            Err(e) => error!(node = %name, error = %e, "error checking if node exists; keeping it"),
        }
    }

    async fn delete(&self, node: &Node) {
        let name = node.name_any();
        let reference = node_ref(node);
        self.events
            .normal(
                &reference,
                "DeletingNode",
                format!("Deleting node {name} because it does not exist in the cloud provider"),
            )
            .await;
        // The UID precondition makes sure we delete the Node we decided about, not a new
        // Node registered under the same name meanwhile.
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: node.metadata.uid.clone(), resource_version: None }),
            ..Default::default()
        };
        match self.api.delete(&name, &params).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                error!(node = %name, error = %e, "unable to delete node");
                self.events
                    .warning(&reference, "DeletingNodeFailed", format!("Failed deleting node {name}: {e}"))
                    .await;
            }
        }
    }

    /// Applies `change` to the node's taints with a resourceVersion-guarded patch, retrying
    /// on conflict from a fresh read (upstream: `RetryOnConflict`, 5 steps, 100 ms).
    async fn update_taints(
        &self,
        node: &Node,
        change: impl Fn(&[Taint]) -> (Vec<Taint>, bool),
    ) -> Result<(), kube::Error> {
        let name = node.name_any();
        let change = &change;
        let result = retry_on_conflict(5, Duration::from_millis(100), |attempt| {
            let name = name.clone();
            async move {
                let current = if attempt == 0 { node.clone() } else { self.api.get(&name).await? };
                let taints = current.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
                let (new, changed) = change(&taints);
                if !changed {
                    return Ok(());
                }
                let rv = current.resource_version().unwrap_or_default();
                node_writes::patch_taints(&self.api, &name, &rv, &new).await.map(|_| ())
            }
        })
        .await;
        match result {
            Err(e) if is_not_found(&e) => Ok(()),
            other => other,
        }
    }
}
