//! The shared metrics registry: one `prometheus-client` [`Registry`] that many components
//! register into and that `/metrics` encodes as OpenMetrics text.

use std::fmt;
use std::sync::{Arc, Mutex};
use sync_lock::Unpoison as _;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::{Metric, Registry};

/// The `Content-Type` of the OpenMetrics text format served at `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Encoding the registry failed (a metric's own encoder returned an error).
#[derive(Debug, Clone, thiserror::Error)]
#[error("encoding the metrics failed (a registered metric could not be written as OpenMetrics text)")]
pub struct EncodeError;

/// A `prometheus-client` [`Registry`] shared by every component of the process.
///
/// Cloning is cheap and every clone sees the same registry. Metrics are registered once, at
/// start-up or when a component starts; their values are updated through the metric handles
/// (which are themselves cheap `Arc` clones) without touching the registry.
#[derive(Clone)]
pub struct MetricsRegistry {
    registry: Arc<Mutex<Registry>>,
}

impl Default for MetricsRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MetricsRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsRegistry").finish_non_exhaustive()
    }
}

impl MetricsRegistry {
    /// An empty registry without a name prefix.
    pub fn new() -> Self {
        Self::from_registry(Registry::default())
    }

    /// Share an existing registry (for example one built with [`Registry::with_prefix`]).
    pub fn from_registry(registry: Registry) -> Self {
        Self { registry: Arc::new(Mutex::new(registry)) }
    }

    /// Register `metric` under `name` with `help` (see [`Registry::register`]; a counter's
    /// `_total` suffix is added by the encoder).
    pub fn register(&self, name: impl Into<String>, help: impl Into<String>, metric: impl Metric) {
        self.with(|registry| registry.register(name, help, metric));
    }

    /// Run `f` with the registry locked, for everything [`Registry`] offers (units, sub-registries
    /// with a prefix or constant labels, collectors).
    pub fn with<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> R {
        let mut registry = self.registry.lock_unpoisoned();
        f(&mut registry)
    }

    /// The registry as OpenMetrics text (ending with `# EOF`), to be served with
    /// [`OPENMETRICS_CONTENT_TYPE`].
    pub fn encode(&self) -> Result<String, EncodeError> {
        let mut text = String::new();
        self.with(|registry| encode(&mut text, registry)).map_err(|_| EncodeError)?;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;

    use super::*;

    #[test]
    fn an_empty_registry_encodes_to_eof() {
        assert_eq!(MetricsRegistry::new().encode().ok().as_deref(), Some("# EOF\n"));
    }

    #[test]
    fn clones_share_one_registry_and_values_update_without_it() {
        let metrics = MetricsRegistry::new();
        let component = metrics.clone();
        let requests: Family<Vec<(String, String)>, Counter> = Family::default();
        component.register("demo_requests", "Requests by result.", requests.clone());
        let in_flight = Gauge::<i64>::default();
        component.with(|registry| {
            registry.sub_registry_with_prefix("sub").register("in_flight", "In-flight operations.", in_flight.clone())
        });
        requests.get_or_create(&vec![("result".to_owned(), "ok".to_owned())]).inc_by(3);
        in_flight.set(2);
        let text = metrics.encode().unwrap_or_default();
        assert!(text.contains("# TYPE demo_requests counter\n"), "{text}");
        assert!(text.contains("demo_requests_total{result=\"ok\"} 3\n"), "{text}");
        assert!(text.contains("sub_in_flight 2\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn a_prefixed_registry_can_be_shared() {
        let metrics = MetricsRegistry::from_registry(Registry::with_prefix("app"));
        let counter = Counter::<u64>::default();
        metrics.register("starts", "Starts.", counter.clone());
        counter.inc();
        assert!(metrics.encode().unwrap_or_default().contains("app_starts_total 1\n"));
    }
}
