//! Upstream's service controller metrics (`controllers/service/metrics.go`), under the same
//! names: load balancer host updates, node sync errors, and the latency of node syncs and of
//! single host updates.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// Upstream's buckets: `ExponentialBuckets(1, 2, 15)`, 1 s to 16384 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

/// The service controller's metrics. Cheap to clone; clones share the values.
#[derive(Debug, Clone)]
pub struct ServiceMetrics {
    /// `service_controller_loadbalancer_sync_total`: load balancer host updates attempted.
    pub(crate) loadbalancer_sync: Counter,
    /// `service_controller_nodesync_error_total`: node syncs of a Service that failed.
    pub(crate) nodesync_error: Counter,
    /// `service_controller_nodesync_latency_seconds`: one pass over every load balancer.
    pub(crate) nodesync_latency: Histogram,
    /// `service_controller_update_loadbalancer_host_latency_seconds`: one host update.
    pub(crate) update_host_latency: Histogram,
}

impl Default for ServiceMetrics {
    fn default() -> Self {
        ServiceMetrics {
            loadbalancer_sync: Counter::default(),
            nodesync_error: Counter::default(),
            nodesync_latency: latency_histogram(),
            update_host_latency: latency_histogram(),
        }
    }
}

impl ServiceMetrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "service_controller_loadbalancer_sync",
            "A metric counting the amount of times any load balancer has been configured, as an effect of \
             service/node changes on the cluster",
            self.loadbalancer_sync.clone(),
        );
        registry.register(
            "service_controller_nodesync_error",
            "A metric counting the amount of times any load balancer has been configured and errored, as an \
             effect of node changes on the cluster",
            self.nodesync_error.clone(),
        );
        registry.register_with_unit(
            "service_controller_nodesync_latency",
            "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.",
            Unit::Seconds,
            self.nodesync_latency.clone(),
        );
        registry.register_with_unit(
            "service_controller_update_loadbalancer_host_latency",
            "A metric measuring the latency for updating each load balancer hosts.",
            Unit::Seconds,
            self.update_host_latency.clone(),
        );
    }

    pub(crate) fn observe(histogram: &Histogram, elapsed: Duration) {
        histogram.observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn names_match_upstream() {
        let m = ServiceMetrics::default();
        let mut registry = Registry::default();
        m.register(&mut registry);
        m.loadbalancer_sync.inc();
        ServiceMetrics::observe(&m.nodesync_latency, Duration::from_millis(1500));
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for needle in [
            "service_controller_loadbalancer_sync_total 1",
            "service_controller_nodesync_error_total 0",
            "service_controller_nodesync_latency_seconds_count 1",
            "service_controller_nodesync_latency_seconds_bucket{le=\"2.0\"} 1",
            "service_controller_nodesync_latency_seconds_bucket{le=\"16384.0\"} 1",
            "service_controller_update_loadbalancer_host_latency_seconds_count 0",
        ] {
            assert!(text.contains(needle), "{needle} missing in\n{text}");
        }
    }
}
