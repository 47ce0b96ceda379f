//! Upstream's node-lifecycle controller metrics (`controllers/nodelifecycle/metrics.go`,
//! k8s.io/cloud-provider 1.37) under the same names, labels and values:
//!
//! - `cloud_node_lifecycle_controller_monitor_nodes_duration_seconds`: one pass over every
//!   node (upstream `MonitorNodes`; buckets 1 ms doubling to 16.384 s).
//! - `cloud_node_lifecycle_controller_cloud_provider_calls_total{operation, result}`: calls to
//!   the provider, `operation` one of `instance_exists`, `instance_shutdown`,
//!   `instance_metadata` (the provider ID of a node without one, legacy Instances only),
//!   `result` one of `success`, `error`, `instance_not_found` (also an existence check that
//!   answered "no"), `not_implemented`, `canceled`. A pass stopped by shutdown is dropped
//!   between calls here, so `canceled` never occurs; the value is listed for completeness.

use std::time::Duration;

use cloud_provider::CloudError;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::node::metadata::MetadataError;

/// A provider call the lifecycle controller makes (upstream's `operation` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstanceOp {
    /// `InstanceExists` / `InstanceExistsByProviderID`.
    Exists,
    /// `InstanceShutdown` / `InstanceShutdownByProviderID`.
    Shutdown,
    /// The provider ID of a node without one (`InstanceID`).
    Metadata,
}

impl InstanceOp {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceOp::Exists => "instance_exists",
            InstanceOp::Shutdown => "instance_shutdown",
            InstanceOp::Metadata => "instance_metadata",
        }
    }
}

/// Upstream `observeInstanceOp`: the `result` label of a call that failed with `error`, or
/// `success`.
pub fn call_result(error: Option<&CloudError>) -> &'static str {
    match error {
        None => "success",
        Some(CloudError::NotImplemented) => "not_implemented",
        Some(CloudError::InstanceNotFound) => "instance_not_found",
        Some(_) => "error",
    }
}

/// The `result` label of an existence check: a "no" counts as `instance_not_found`, as
/// upstream counts it.
pub fn exists_result(answer: &Result<bool, CloudError>) -> &'static str {
    match answer {
        Ok(false) => call_result(Some(&CloudError::InstanceNotFound)),
        Ok(true) => call_result(None),
        Err(e) => call_result(Some(e)),
    }
}

/// The `result` label of a provider-ID lookup (`GetInstanceProviderID` passes
/// `NotImplemented` and `InstanceNotFound` through, wraps the rest).
pub fn metadata_result<T>(answer: &Result<T, MetadataError>) -> &'static str {
    match answer {
        Ok(_) => call_result(None),
        Err(MetadataError::Cloud(e)) => call_result(Some(e)),
        Err(_) => "error",
    }
}

/// `cloud_provider_calls_total` labels, in upstream's order.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    operation: &'static str,
    result: &'static str,
}

/// The lifecycle controller's metrics. Cheap to clone; clones share the values.
#[derive(Debug, Clone)]
pub struct LifecycleMetrics {
    monitor_duration: Histogram,
    calls: Family<CallLabels, Counter>,
}

impl Default for LifecycleMetrics {
    fn default() -> Self {
        // Upstream: ExponentialBuckets(0.001, 2, 15).
        LifecycleMetrics {
            monitor_duration: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            calls: Family::default(),
        }
    }
}

impl LifecycleMetrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_with_unit(
            "cloud_node_lifecycle_controller_monitor_nodes_duration",
            "A metric measuring the duration in seconds of a single MonitorNodes loop execution.",
            Unit::Seconds,
            self.monitor_duration.clone(),
        );
        registry.register(
            "cloud_node_lifecycle_controller_cloud_provider_calls",
            "The total number of cloud provider API calls, labeled by operation and result.",
            self.calls.clone(),
        );
    }

    /// Counts one provider call.
    pub fn call(&self, operation: InstanceOp, result: &'static str) {
        self.calls.get_or_create(&CallLabels { operation: operation.as_str(), result }).inc();
    }

    /// The count of calls with these labels so far.
    pub fn calls(&self, operation: InstanceOp, result: &'static str) -> u64 {
        self.calls.get_or_create(&CallLabels { operation: operation.as_str(), result }).get()
    }

    /// Records the duration of one pass over every node.
    pub fn monitored(&self, elapsed: Duration) {
        self.monitor_duration.observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn names_labels_and_buckets_match_upstream() {
        let m = LifecycleMetrics::default();
        let mut registry = Registry::default();
        m.register(&mut registry);
        m.call(InstanceOp::Exists, exists_result(&Ok(false)));
        m.call(InstanceOp::Shutdown, call_result(None));
        m.monitored(Duration::from_millis(3));
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for needle in [
            "cloud_node_lifecycle_controller_cloud_provider_calls_total{operation=\"instance_exists\",result=\"instance_not_found\"} 1",
            "cloud_node_lifecycle_controller_cloud_provider_calls_total{operation=\"instance_shutdown\",result=\"success\"} 1",
            "cloud_node_lifecycle_controller_monitor_nodes_duration_seconds_count 1",
            "cloud_node_lifecycle_controller_monitor_nodes_duration_seconds_bucket{le=\"0.001\"} 0",
            "cloud_node_lifecycle_controller_monitor_nodes_duration_seconds_bucket{le=\"0.004\"} 1",
            "cloud_node_lifecycle_controller_monitor_nodes_duration_seconds_bucket{le=\"16.384\"} 1",
        ] {
            assert!(text.contains(needle), "{needle} missing in\n{text}");
        }
    }

    /// Upstream `observeInstanceOp` and the existence checks' "no" as `instance_not_found`.
    #[test]
    fn results_follow_upstream() {
        let failed = || CloudError::transient("InstanceLookupFailed", "outage", None);
        assert_eq!(call_result(None), "success");
        assert_eq!(call_result(Some(&CloudError::NotImplemented)), "not_implemented");
        assert_eq!(call_result(Some(&CloudError::InstanceNotFound)), "instance_not_found");
        assert_eq!(call_result(Some(&failed())), "error");
        assert_eq!(exists_result(&Ok(true)), "success");
        assert_eq!(exists_result(&Ok(false)), "instance_not_found");
        assert_eq!(exists_result(&Err(CloudError::InstanceNotFound)), "instance_not_found");
        assert_eq!(exists_result(&Err(failed())), "error");
        assert_eq!(metadata_result(&Ok("fake://1")), "success");
        assert_eq!(metadata_result::<()>(&Err(MetadataError::Cloud(CloudError::NotImplemented))), "not_implemented");
        assert_eq!(metadata_result::<()>(&Err(MetadataError::InstanceId(failed()))), "error");
    }
}
