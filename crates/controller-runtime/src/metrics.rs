//! Prometheus metrics of the runtime, with client-go's and controller-runtime's names so
//! existing dashboards work: workqueue depth, adds, retries, queue and work durations per queue
//! (`workqueue_*{name}`), reconcile outcomes and panics per controller, and events dropped per
//! reporting component.
//!
//! One [`RuntimeMetrics`] is shared by every queue and worker of a process and registered once.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// Labels of the workqueue metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The queue's name (the controller's name).
    pub name: String,
}

/// Labels of the per-controller metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// The controller's name (its `WorkerConfig::name`, e.g. `service-lb-controller`).
    pub controller: String,
}

/// Labels of the event metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ComponentLabels {
    /// The component the events are reported as.
    pub component: String,
}

/// Labels of the reconcile metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// The controller's name (its `WorkerConfig::name`, e.g. `service-lb-controller`).
    pub controller: String,
    /// `success`, `error` (backed off), `requeue_after` (fixed retry delay).
    pub result: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // client-go's workqueue buckets: ExponentialBuckets(10e-9, 10, 10), 10 ns to 10 s.
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

/// The runtime's metrics. Cheap to clone; clones share the values.
#[derive(Debug, Clone)]
pub struct RuntimeMetrics {
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    queue_duration: HistogramFamily<QueueLabels>,
    work_duration: HistogramFamily<QueueLabels>,
    reconciles: Family<ReconcileLabels, Counter>,
    panics: Family<ControllerLabels, Counter>,
    events_dropped: Family<ComponentLabels, Counter>,
}

impl Default for RuntimeMetrics {
    fn default() -> Self {
        RuntimeMetrics {
            depth: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            reconciles: Family::default(),
            panics: Family::default(),
            events_dropped: Family::default(),
        }
    }
}

impl RuntimeMetrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("workqueue_depth", "Current depth of workqueue", self.depth.clone());
        registry.register("workqueue_adds", "Total number of adds handled by workqueue", self.adds.clone());
        registry.register("workqueue_retries", "Total number of retries handled by workqueue", self.retries.clone());
        registry.register_with_unit(
            "workqueue_queue_duration",
            "How long an item stays in workqueue before being requested",
            Unit::Seconds,
            self.queue_duration.clone(),
        );
        registry.register_with_unit(
            "workqueue_work_duration",
            "How long processing an item from workqueue takes",
            Unit::Seconds,
            self.work_duration.clone(),
        );
        registry.register(
            "controller_reconcile",
            "Reconciliations per controller and result (success, error, requeue_after)",
            self.reconciles.clone(),
        );
        registry.register(
            "controller_reconcile_panics",
            "Reconciliations (and informer handler calls) per controller that panicked (also counted as errors in controller_reconcile_total)",
            self.panics.clone(),
        );
        registry.register(
            "events_dropped",
            "Events dropped per reporting component because the queue of events waiting to be published was full",
            self.events_dropped.clone(),
        );
    }

    pub(crate) fn queue(&self, name: &str) -> QueueMetrics {
        let labels = QueueLabels { name: name.to_owned() };
        QueueMetrics {
            depth: self.depth.get_or_create(&labels).clone(),
            adds: self.adds.get_or_create(&labels).clone(),
            retries: self.retries.get_or_create(&labels).clone(),
            queue_duration: self.queue_duration.get_or_create(&labels).clone().into(),
            work_duration: self.work_duration.get_or_create(&labels).clone().into(),
        }
    }

    pub(crate) fn reconciled(&self, controller: &str, result: &'static str) {
        self.reconciles.get_or_create(&ReconcileLabels { controller: controller.to_owned(), result }).inc();
    }

    pub(crate) fn reconcile_panicked(&self, controller: &str) {
        self.panics.get_or_create(&ControllerLabels { controller: controller.to_owned() }).inc();
    }

    pub(crate) fn events_dropped(&self, component: &str) -> Counter {
        self.events_dropped.get_or_create(&ComponentLabels { component: component.to_owned() }).clone()
    }
}

/// One queue's handles into [`RuntimeMetrics`] (or detached metrics when none were given).
#[derive(Debug, Clone, Default)]
pub(crate) struct QueueMetrics {
    pub depth: Gauge,
    pub adds: Counter,
    pub retries: Counter,
    pub queue_duration: HistogramOrNone,
    pub work_duration: HistogramOrNone,
}

/// A histogram, or nothing for queues without metrics (a `Histogram` has no `Default`).
#[derive(Debug, Clone, Default)]
pub(crate) struct HistogramOrNone(Option<Histogram>);

impl From<Histogram> for HistogramOrNone {
    fn from(h: Histogram) -> Self {
        HistogramOrNone(Some(h))
    }
}

impl HistogramOrNone {
    pub fn observe(&self, d: Duration) {
        if let Some(h) = &self.0 {
            h.observe(d.as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn names_match_client_go() {
        let m = RuntimeMetrics::default();
        let mut registry = Registry::default();
        m.register(&mut registry);
        let q = m.queue("cloud-node-controller");
        q.adds.inc();
        q.depth.set(3);
        q.work_duration.observe(Duration::from_millis(2));
        m.reconciled("cloud-node-controller", "success");
        m.reconcile_panicked("cloud-node-controller");
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for needle in [
            "workqueue_adds_total{name=\"cloud-node-controller\"} 1",
            "workqueue_depth{name=\"cloud-node-controller\"} 3",
            "workqueue_work_duration_seconds_count{name=\"cloud-node-controller\"} 1",
            "workqueue_retries_total{name=\"cloud-node-controller\"} 0",
            "controller_reconcile_total{controller=\"cloud-node-controller\",result=\"success\"} 1",
            "controller_reconcile_panics_total{controller=\"cloud-node-controller\"} 1",
        ] {
            assert!(text.contains(needle), "{needle} missing in\n{text}");
        }
    }
}
