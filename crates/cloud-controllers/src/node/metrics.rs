//! The cloud-node controller's metric (hcloud-ccm's own; upstream has none for this):
//! `cloud_node_controller_uninitialized_nodes`, the Nodes that carry the
//! `node.cloudprovider.kubernetes.io/uninitialized` taint, i.e. wait for this controller. Kept
//! by the informer's changes (each add, update and delete moves it by the difference), so it
//! costs nothing per scrape and is right after every re-list.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The controller's metrics. Cheap to clone; clones share the values.
#[derive(Debug, Clone, Default)]
pub struct NodeMetrics {
    uninitialized: Gauge,
}

impl NodeMetrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cloud_node_controller_uninitialized_nodes",
            "Nodes carrying the node.cloudprovider.kubernetes.io/uninitialized taint, waiting for the cloud-node \
             controller to initialize them",
            self.uninitialized.clone(),
        );
    }

    /// A Node changed from `was` to `is` uninitialized (`false` for one that did not exist or
    /// no longer does).
    pub(crate) fn changed(&self, was: bool, is: bool) {
        match (was, is) {
            (false, true) => {
                self.uninitialized.inc();
            }
            (true, false) => {
                self.uninitialized.dec();
            }
            _ => {}
        }
    }

    /// The Nodes waiting for initialization now.
    pub fn uninitialized(&self) -> i64 {
        self.uninitialized.get()
    }
}
