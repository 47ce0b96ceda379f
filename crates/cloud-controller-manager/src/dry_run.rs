//! `--dry-run`: every controller runs against the cluster and the cloud and writes nothing to
//! either; each write it would make is reported instead: logged once (`dry run: write not
//! made`, with the API, controller, verb, kind and object), counted by controller and kind in
//! `dry_run_planned_writes_total{api,controller,verb,kind}` (once per distinct write), and kept
//! for [`DryRun::planned`].
//!
//! - Kubernetes: every write of a controller's client (POST, PUT, PATCH, DELETE) is sent with
//!   `dryRun=All` ([`DryRunLayer`]): the API server authorizes, admits and validates it and
//!   answers as if it had been made, and stores nothing. Controllers go on with that answer.
//! - The cloud: the provider asks [`DryRun::record`] before every write and sends nothing
//!   (its controllers see the write refused and retry it later, as after a failed request).
//! - No leader election: a dry run takes no Lease, so it can run next to the CCM in charge.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use sync_lock::Unpoison as _;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tower::{Layer, Service};
use tracing::{debug, info};

/// The API a planned write was for.
pub const KUBERNETES: &str = "kubernetes";

/// One write a dry run did not make.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PlannedWrite {
    /// `kubernetes`, or the provider's name for its cloud (e.g. `hcloud`).
    pub api: String,
    /// The controller (Kubernetes: the client's user; the cloud: as the provider attributes it).
    pub controller: String,
    /// Kubernetes: `create`, `update`, `patch`, `delete`; the cloud: the HTTP method.
    pub verb: String,
    /// Kubernetes: the resource and subresource (`nodes/status`); the cloud: the endpoint
    /// template (`/load_balancers/{id}/actions/add_target`).
    pub kind: String,
    /// The object: Kubernetes `<namespace>/<name>` or `<name>`; the cloud: the request path.
    pub target: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    api: String,
    controller: String,
    verb: String,
    kind: String,
}

/// The dry run's record of planned writes. Cheap to clone; clones share it.
#[derive(Debug, Clone, Default)]
pub struct DryRun {
    planned: Arc<Mutex<BTreeSet<PlannedWrite>>>,
    counter: Family<Labels, Counter>,
}

impl DryRun {
    /// Registers `dry_run_planned_writes_total`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "dry_run_planned_writes",
            "Writes a dry run (--dry-run) did not make, once per distinct write, by API, controller, verb and kind",
            self.counter.clone(),
        );
    }

    /// Records `write`: logged and counted the first time, logged at debug level after.
    /// Returns whether it was new.
    pub fn record(&self, write: PlannedWrite) -> bool {
        let labels = Labels {
            api: write.api.clone(),
            controller: write.controller.clone(),
            verb: write.verb.clone(),
            kind: write.kind.clone(),
        };
        let new = self.planned.lock_unpoisoned().insert(write.clone());
        let PlannedWrite { api, controller, verb, kind, target } = &write;
        if new {
            self.counter.get_or_create(&labels).inc();
            info!(api, controller, verb, kind, target, "dry run: write not made");
        } else {
            debug!(api, controller, verb, kind, target, "dry run: write not made (again)");
        }
        new
    }

    /// Every distinct write planned so far, sorted.
    pub fn planned(&self) -> Vec<PlannedWrite> {
        self.planned.lock_unpoisoned().iter().cloned().collect()
    }
}

/// The Kubernetes write a request is, if it is one: `(verb, kind, target)` from the method and
/// the path (`/api/v1/namespaces/<ns>/services/<name>/status`, `/apis/<group>/<version>/...`).
pub fn kubernetes_write(method: &http::Method, path: &str) -> Option<(String, String, String)> {
    let verb = match *method {
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => return None,
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    // Past the group and version.
    let rest = match parts.first() {
        Some(&"api") => parts.get(2..)?,
        Some(&"apis") => parts.get(3..)?,
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(*ns), rest),
        _ => (None, rest),
    };
    let (resource, name, sub) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub, ..] => (*resource, Some(*name), Some(*sub)),
        [] => return None,
    };
    let kind = sub.map_or_else(|| resource.to_owned(), |s| format!("{resource}/{s}"));
    let target = match (namespace, name) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        (Some(ns), None) => format!("{ns}/"),
        (None, Some(n)) => n.to_owned(),
        (None, None) => String::new(),
    };
    Some((verb.to_owned(), kind, target))
}

/// `uri` with `dryRun=All` added to its query.
fn with_dry_run(uri: &http::Uri) -> Option<http::Uri> {
    let pq = uri.path_and_query()?;
    let joined = match pq.query() {
        Some(q) if !q.is_empty() => format!("{}?{q}&dryRun=All", pq.path()),
        _ => format!("{}?dryRun=All", pq.path()),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(joined.parse().ok()?);
    http::Uri::from_parts(parts).ok()
}

/// Tower layer of a controller's Kubernetes client in a dry run: writes go out with
/// `dryRun=All` and are recorded as `controller`'s.
#[derive(Debug, Clone)]
pub struct DryRunLayer {
    dry_run: DryRun,
    controller: String,
}

impl DryRunLayer {
    /// The layer for `controller`'s client.
    pub fn new(dry_run: DryRun, controller: &str) -> Self {
        DryRunLayer { dry_run, controller: controller.to_owned() }
    }
}

impl<S> Layer<S> for DryRunLayer {
    type Service = DryRunService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        DryRunService { inner, layer: self.clone() }
    }
}

/// Service produced by [`DryRunLayer`].
#[derive(Debug, Clone)]
pub struct DryRunService<S> {
    inner: S,
    layer: DryRunLayer,
}

impl<S, B> Service<http::Request<B>> for DryRunService<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        if let Some((verb, kind, target)) = kubernetes_write(req.method(), req.uri().path()) {
            // Nothing may be stored: should the URI not take the query, the request goes out
            // as OPTIONS, which the API server refuses.
            match with_dry_run(req.uri()) {
                Some(uri) => *req.uri_mut() = uri,
                None => *req.method_mut() = http::Method::OPTIONS,
            }
            self.layer.dry_run.record(PlannedWrite {
                api: KUBERNETES.to_owned(),
                controller: self.layer.controller.clone(),
                verb,
                kind,
                target,
            });
        }
        Box::pin(self.inner.call(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(method: http::Method, path: &str) -> Option<(String, String, String)> {
        kubernetes_write(&method, path)
    }

    fn triple(v: &str, k: &str, t: &str) -> Option<(String, String, String)> {
        Some((v.to_owned(), k.to_owned(), t.to_owned()))
    }

    #[test]
    fn writes_are_told_by_method_and_named_by_path() {
        use http::Method;
        assert_eq!(write(Method::GET, "/api/v1/nodes/n1"), None);
        assert_eq!(write(Method::PATCH, "/api/v1/nodes/n1"), triple("patch", "nodes", "n1"));
        assert_eq!(write(Method::PATCH, "/api/v1/nodes/n1/status"), triple("patch", "nodes/status", "n1"));
        assert_eq!(
            write(Method::PATCH, "/api/v1/namespaces/web/services/front/status"),
            triple("patch", "services/status", "web/front")
        );
        assert_eq!(write(Method::POST, "/api/v1/namespaces/web/events"), triple("create", "events", "web/"));
        assert_eq!(
            write(Method::PUT, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ccm"),
            triple("update", "leases", "kube-system/ccm")
        );
        assert_eq!(write(Method::DELETE, "/api/v1/nodes/gone"), triple("delete", "nodes", "gone"));
        assert_eq!(write(Method::POST, "/healthz"), None);
    }

    #[test]
    fn the_query_gets_dry_run_all() {
        let with = |u: &str| with_dry_run(&u.parse().expect("uri")).map(|u| u.to_string());
        assert_eq!(
            with("https://10.0.0.1:6443/api/v1/nodes/n1?fieldManager=ccm").as_deref(),
            Some("https://10.0.0.1:6443/api/v1/nodes/n1?fieldManager=ccm&dryRun=All")
        );
        assert_eq!(with("/api/v1/nodes/n1").as_deref(), Some("/api/v1/nodes/n1?dryRun=All"));
    }

    #[test]
    fn a_write_is_counted_once_and_kept() {
        let dry = DryRun::default();
        let mut registry = Registry::default();
        dry.register(&mut registry);
        let w = PlannedWrite {
            api: KUBERNETES.to_owned(),
            controller: "cloud-node-controller".to_owned(),
            verb: "patch".to_owned(),
            kind: "nodes".to_owned(),
            target: "n1".to_owned(),
        };
        assert!(dry.record(w.clone()));
        assert!(!dry.record(w.clone()), "the same write again is not new");
        assert_eq!(dry.planned(), [w]);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains(
                "dry_run_planned_writes_total{api=\"kubernetes\",controller=\"cloud-node-controller\",verb=\"patch\",kind=\"nodes\"} 1\n"
            ),
            "{text}"
        );
    }
}
