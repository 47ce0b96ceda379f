//! The manager's own metrics, with upstream's names: which controllers run
//! (`running_managed_controllers`), whether this replica leads (`leader_election_master_status`,
//! client-go's name) and every Kubernetes API request its clients make
//! (`rest_client_requests_total`, client-go's name), beside the runtime's workqueue metrics.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use controller_serving::MetricsRegistry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tower::{Layer, Service};

/// `running_managed_controllers` labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    manager: String,
    name: String,
}

/// `leader_election_master_status` labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

/// `rest_client_requests_total` labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RestLabels {
    code: String,
    method: String,
    host: String,
}

/// The manager's metrics. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ManagerMetrics {
    running: Family<ControllerLabels, Gauge>,
    leader: Family<LeaseLabels, Gauge>,
    rest: Family<RestLabels, Counter>,
}

impl ManagerMetrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &MetricsRegistry) {
        registry.register(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            self.running.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
            self.leader.clone(),
        );
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests to the Kubernetes API, partitioned by status code, method, and host",
            self.rest.clone(),
        );
    }

    /// Controller `name` of `manager` runs (1) or not (0).
    pub fn set_running(&self, manager: &str, name: &str, running: bool) {
        let labels = ControllerLabels { manager: manager.to_owned(), name: name.to_owned() };
        self.running.get_or_create(&labels).set(i64::from(running));
    }

    /// This replica holds lease `name` (1) or not (0).
    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.leader.get_or_create(&LeaseLabels { name: lease.to_owned() }).set(i64::from(leading));
    }

    /// A layer counting every request of a client to `host`.
    pub fn rest_client_layer(&self, host: &str) -> RestClientMetricsLayer {
        RestClientMetricsLayer { metrics: self.rest.clone(), host: host.to_owned() }
    }
}

/// Tower layer counting requests in `rest_client_requests_total`.
#[derive(Debug, Clone)]
pub struct RestClientMetricsLayer {
    metrics: Family<RestLabels, Counter>,
    host: String,
}

impl<S> Layer<S> for RestClientMetricsLayer {
    type Service = RestClientMetrics<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RestClientMetrics { inner, metrics: self.metrics.clone(), host: self.host.clone() }
    }
}

/// Service produced by [`RestClientMetricsLayer`].
#[derive(Debug, Clone)]
pub struct RestClientMetrics<S> {
    inner: S,
    metrics: Family<RestLabels, Counter>,
    host: String,
}

impl<S, B, RB> Service<http::Request<B>> for RestClientMetrics<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req.method().to_string();
        let (metrics, host) = (self.metrics.clone(), self.host.clone());
        let fut = self.inner.call(req);
        Box::pin(async move {
            let result = fut.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            metrics.get_or_create(&RestLabels { code, method, host }).inc();
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_are_counted_by_code_method_and_host() {
        let m = ManagerMetrics::default();
        let registry = MetricsRegistry::new();
        m.register(&registry);
        let svc = tower::service_fn(|req: http::Request<()>| async move {
            let status = if req.uri().path() == "/missing" { 404 } else { 200 };
            Ok::<_, std::convert::Infallible>(http::Response::builder().status(status).body(()).expect("response"))
        });
        let mut svc = m.rest_client_layer("10.0.0.1:6443").layer(svc);
        for path in ["/api", "/api", "/missing"] {
            let req = http::Request::get(path).body(()).expect("request");
            Service::call(&mut svc, req).await.expect("answered");
        }
        m.set_running("ccm", "cloud-node-controller", true);
        m.set_leader("cloud-controller-manager", false);
        let text = registry.encode().expect("encodes");
        for needle in [
            "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"10.0.0.1:6443\"} 2",
            "rest_client_requests_total{code=\"404\",method=\"GET\",host=\"10.0.0.1:6443\"} 1",
            "running_managed_controllers{manager=\"ccm\",name=\"cloud-node-controller\"} 1",
            "leader_election_master_status{name=\"cloud-controller-manager\"} 0",
        ] {
            assert!(text.contains(needle), "{needle} missing in\n{text}");
        }
    }
}
