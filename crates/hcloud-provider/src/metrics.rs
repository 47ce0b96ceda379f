//! The provider's Prometheus metrics, with the official CCM's names where they exist so its
//! dashboards keep working:
//!
//! - `hcloud_api_requests_total{code,method,api_endpoint}`, `hcloud_api_request_duration_seconds{method}`
//!   and `hcloud_api_in_flight_requests` (hcloud-go's instrumentation), fed by the client's
//!   observer hooks; exchanges without a status (transport failures) are not counted, as in
//!   hcloud-go;
//! - `cloud_controller_manager_operations_total{op}` (one per provider call, e.g.
//!   `hcloud/instancesv2.InstanceExists`);
//! - `cloud_controller_manager_server_cache_requests_total{subsystem,mode,result}` (server
//!   lookups answered from memory or not);
//!
//! and ours: the project's API budget as the API reports it (`hcloud_api_ratelimit_limit`,
//! `hcloud_api_ratelimit_remaining`), what the shared server inventory did
//! (`hcloud_ccm_inventory_{lists,single_requests,cooldowns}_total`), and the Robot webservice
//! requests (`hcloud_robot_requests_total{code,method,api_endpoint}`; its budget is a few hundred
//! requests per hour, and the official CCM does not count them), and what became of new
//! credentials found in the watched files (`hcloud_ccm_credential_rotations_total{credential,result}`,
//! see [`crate::rotation`]).

use std::sync::{Arc, OnceLock};

use hcloud_api::{Client, RequestEvent, RequestObserver, RequestStart};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::config::CacheMode;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
    api_endpoint: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    op: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RotationLabels {
    credential: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetHealthLabels {
    /// `<namespace>/<name>` of the Service (not `service`, which a ServiceMonitor's target
    /// label would shadow).
    service_name: String,
    /// `healthy`, `unhealthy` or `unknown`.
    status: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    subsystem: &'static str,
    mode: &'static str,
    result: &'static str,
}

fn request_duration() -> Histogram {
    // Prometheus' default buckets, as hcloud-go's histogram uses.
    Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
}

/// The provider's metrics. Cheap to clone; clones share the values.
#[derive(Clone)]
pub struct HcloudMetrics {
    requests: Family<RequestLabels, Counter>,
    robot_requests: Family<RequestLabels, Counter>,
    duration: Family<MethodLabels, Histogram, fn() -> Histogram>,
    in_flight: Gauge,
    operations: Family<OpLabels, Counter>,
    cache: Family<CacheLabels, Counter>,
    rotations: Family<RotationLabels, Counter>,
    target_ports: Family<TargetHealthLabels, Gauge>,
    ratelimit_limit: Gauge,
    ratelimit_remaining: Gauge,
    inventory: InventoryCounters,
    /// The client whose `RateLimit-*` headers the gauges show (set once it exists).
    client: Arc<OnceLock<Client>>,
}

/// What the inventory counts besides cache hits and misses.
#[derive(Debug, Clone, Default)]
pub(crate) struct InventoryCounters {
    pub lists: Counter,
    pub singles: Counter,
    pub cooldowns: Counter,
}

impl Default for HcloudMetrics {
    fn default() -> Self {
        HcloudMetrics {
            requests: Family::default(),
            robot_requests: Family::default(),
            duration: Family::new_with_constructor(request_duration),
            in_flight: Gauge::default(),
            operations: Family::default(),
            cache: Family::default(),
            rotations: Family::default(),
            target_ports: Family::default(),
            ratelimit_limit: Gauge::default(),
            ratelimit_remaining: Gauge::default(),
            inventory: InventoryCounters::default(),
            client: Arc::default(),
        }
    }
}

impl HcloudMetrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "hcloud_api_requests",
            "A counter for requests to the Hetzner Cloud API, by status code, method and endpoint",
            self.requests.clone(),
        );
        registry.register_with_unit(
            "hcloud_api_request_duration",
            "A histogram of request latencies to the Hetzner Cloud API",
            Unit::Seconds,
            self.duration.clone(),
        );
        registry.register(
            "hcloud_api_in_flight_requests",
            "A gauge of in-flight requests to the Hetzner Cloud API",
            self.in_flight.clone(),
        );
        registry.register(
            "hcloud_api_ratelimit_limit",
            "The project's request budget per hour, as the API last reported it (RateLimit-Limit)",
            self.ratelimit_limit.clone(),
        );
        registry.register(
            "hcloud_api_ratelimit_remaining",
            "Requests left in the project's budget, as the API last reported it (RateLimit-Remaining)",
            self.ratelimit_remaining.clone(),
        );
        registry.register(
            "cloud_controller_manager_operations",
            "Provider operations called, by operation",
            self.operations.clone(),
        );
        registry.register(
            "cloud_controller_manager_server_cache_requests",
            "Server lookups by subsystem, cache mode and result (hit: answered from memory)",
            self.cache.clone(),
        );
        registry.register(
            "hcloud_robot_requests",
            "A counter for requests to the Hetzner Robot webservice, by status code, method and endpoint",
            self.robot_requests.clone(),
        );
        registry.register(
            "hcloud_ccm_credential_rotations",
            "New credentials found in a watched file (HCLOUD_TOKEN_FILE, ROBOT_USER_FILE, ROBOT_PASSWORD_FILE), by \
             credential and result: accepted (checked and in use), rejected (refused by the API, not used), \
             check_failed (the API could not be asked, retried), invalid (no usable credential in the file), \
             unreadable (the file cannot be read)",
            self.rotations.clone(),
        );
        registry.register(
            "hcloud_ccm_load_balancer_target_ports",
            "Target ports of a Service's Load Balancer by the health Hetzner reports for them (healthy, unhealthy, \
             unknown), as its last sync read the Load Balancer",
            self.target_ports.clone(),
        );
        registry.register(
            "hcloud_ccm_inventory_lists",
            "Paginated server lists (snapshot refreshes) of the shared server inventory",
            self.inventory.lists.clone(),
        );
        registry.register(
            "hcloud_ccm_inventory_single_requests",
            "Single-server requests of the shared server inventory",
            self.inventory.singles.clone(),
        );
        registry.register(
            "hcloud_ccm_inventory_cooldowns",
            "Cooldowns the shared server inventory started after transient API failures",
            self.inventory.cooldowns.clone(),
        );
    }

    /// The observer to give the API client.
    pub fn observer(&self) -> Arc<dyn RequestObserver> {
        Arc::new(self.clone())
    }

    /// The observer to give the Robot client (`hcloud_robot_requests_total`).
    pub fn robot_observer(&self) -> Arc<dyn RequestObserver> {
        let requests = self.robot_requests.clone();
        Arc::new(move |event: &RequestEvent<'_>| {
            let Some(status) = event.status else { return };
            let labels = RequestLabels {
                code: status.to_string(),
                method: event.method_label(),
                api_endpoint: event.api_endpoint.to_owned(),
            };
            requests.get_or_create(&labels).inc();
        })
    }

    /// Shows `client`'s rate-limit headers in the rate-limit gauges.
    pub(crate) fn watch_rate_limit(&self, client: &Client) {
        let _ = self.client.set(client.clone());
    }

    /// Counts a provider operation (`cloud_controller_manager_operations_total{op}`).
    pub(crate) fn operation(&self, op: &'static str) {
        self.operations.get_or_create(&OpLabels { op }).inc();
    }

    /// Counts what became of a new `credential` (`hcloud_token`, `robot`):
    /// `hcloud_ccm_credential_rotations_total{credential,result}`.
    pub(crate) fn credential_rotation(&self, credential: &'static str, result: &'static str) {
        self.rotations.get_or_create(&RotationLabels { credential, result }).inc();
    }

    /// Shows the health of the target ports of `service`'s Load Balancer:
    /// `hcloud_ccm_load_balancer_target_ports{service_name,status}`.
    pub(crate) fn target_ports(&self, service: &str, counts: &[(&'static str, usize)]) {
        for (status, n) in counts {
            let labels = TargetHealthLabels { service_name: service.to_owned(), status };
            self.target_ports.get_or_create(&labels).set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }

    /// Drops the target-port series of `service` (its Load Balancer is gone).
    pub(crate) fn forget_target_ports(&self, service: &str) {
        for status in crate::load_balancers::target_health::HEALTH_STATUSES {
            self.target_ports.remove(&TargetHealthLabels { service_name: service.to_owned(), status });
        }
    }

    /// Counts one server lookup of `subsystem` (`hit`: answered from memory) in
    /// `cloud_controller_manager_server_cache_requests_total`.
    pub(crate) fn cache_lookup(&self, subsystem: &'static str, mode: CacheMode, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.cache.get_or_create(&CacheLabels { subsystem, mode: mode_label(mode), result }).inc();
    }

    /// The counters of a server inventory in `mode`: hits and misses of subsystem `instances`.
    pub(crate) fn inventory(&self, mode: CacheMode) -> InventoryStats {
        let mode = mode_label(mode);
        let counter = |result| self.cache.get_or_create(&CacheLabels { subsystem: "instances", mode, result }).clone();
        InventoryStats::with_counters(counter("hit"), counter("miss"), self.inventory.clone())
    }
}

fn mode_label(mode: CacheMode) -> &'static str {
    match mode {
        CacheMode::All => "all",
        CacheMode::One => "one",
        CacheMode::Off => "off",
    }
}

impl RequestObserver for HcloudMetrics {
    fn started(&self, _: &RequestStart<'_>) {
        self.in_flight.inc();
    }

    fn observe(&self, event: &RequestEvent<'_>) {
        self.in_flight.dec();
        let Some(status) = event.status else { return };
        let method = event.method_label();
        self.requests
            .get_or_create(&RequestLabels {
                code: status.to_string(),
                method: method.clone(),
                api_endpoint: event.api_endpoint.to_owned(),
            })
            .inc();
        self.duration.get_or_create(&MethodLabels { method }).observe(event.duration.as_secs_f64());
        if let Some(rl) = self.client.get().and_then(Client::rate_limit) {
            self.ratelimit_limit.set(i64::from(rl.limit));
            self.ratelimit_remaining.set(i64::from(rl.remaining));
        }
    }
}

/// Counters of what the inventory did (Prometheus counters, exported by [`HcloudMetrics`]).
#[derive(Debug, Default, Clone)]
pub struct InventoryStats {
    /// Lookups answered from memory, positively or negatively.
    pub hits: Counter,
    /// Lookups that needed the API.
    pub misses: Counter,
    /// Snapshot refreshes (each is one paginated list).
    pub lists: Counter,
    /// Single-server requests.
    pub singles: Counter,
    /// Cooldowns started by transient API failures.
    pub cooldowns: Counter,
}

impl InventoryStats {
    pub(crate) fn with_counters(hits: Counter, misses: Counter, other: InventoryCounters) -> Self {
        InventoryStats { hits, misses, lists: other.lists, singles: other.singles, cooldowns: other.cooldowns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robot_requests_are_counted_apart_from_the_cloud_api() {
        let metrics = HcloudMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let observer = metrics.robot_observer();
        let event = |status| RequestEvent {
            method: &hcloud_api::Method::GET,
            endpoint: "/server",
            api_endpoint: "/server",
            status,
            duration: std::time::Duration::from_millis(3),
            attempt: 0,
            trial: false,
        };
        observer.observe(&event(Some(200)));
        observer.observe(&event(Some(200)));
        observer.observe(&event(Some(403)));
        observer.observe(&event(None));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        // A family's series come out in hash order.
        let mut lines: Vec<&str> = text.lines().filter(|l| l.starts_with("hcloud_robot_requests_total")).collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            vec![
                r#"hcloud_robot_requests_total{code="200",method="get",api_endpoint="/server"} 2"#,
                r#"hcloud_robot_requests_total{code="403",method="get",api_endpoint="/server"} 1"#,
            ],
            "{text}"
        );
        assert!(!text.lines().any(|l| l.starts_with("hcloud_api_requests_total{")), "cloud counter untouched: {text}");
    }
}
