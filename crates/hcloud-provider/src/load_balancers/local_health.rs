//! `externalTrafficPolicy: Local` health checks (hcloud-ccm only, opt-in), pure.
//!
//! With `externalTrafficPolicy: Local`, kube-proxy forwards a NodePort only to endpoints on the
//! same node and serves `healthCheckNodePort` (`/healthz`: 200 on a node with a ready local
//! endpoint, 503 on one without or while the last one terminates). The official CCM's TCP check
//! on the NodePort passes on every node, so the Load Balancer sends traffic to nodes that drop
//! it. Opted in with the annotation `health-check-local-endpoints` or cluster-wide with
//! `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_LOCAL_ENDPOINTS`, such a Service's health check becomes
//! HTTP on `healthCheckNodePort`, path `/healthz`, so only nodes with ready pods get traffic
//! and a node drains as its pods terminate. A Service that configures `health-check-protocol`
//! or `health-check-port` keeps its own check; interval, timeout and retries apply either way.
//! A port with per-port annotations gets the same check (read through its port's reader), so
//! only its own `port.<port>.health-check-protocol` / `-port` (or the Service-wide ones)
//! replace it there.

use k8s_openapi::api::core::v1::Service;

use super::annotations::{self as a, Reader};
use super::defaults::LbDefaults;
use super::port_spec::{HealthProtocol, HealthSpec};

/// kube-proxy's health check path.
pub const KUBE_PROXY_HEALTH_PATH: &str = "/healthz";

/// `health` as configured, or the kube-proxy check when the Service opted in, has
/// `externalTrafficPolicy: Local` and a `healthCheckNodePort`, and configures neither protocol
/// nor port of its check. A bad annotation value is recorded in `r` (nothing is sent).
pub fn local_endpoints_health(
    r: &mut Reader<'_>,
    svc: &Service,
    defaults: &LbDefaults,
    health: HealthSpec,
) -> HealthSpec {
    let enabled = match r.raw(a::HEALTH_CHECK_LOCAL_ENDPOINTS) {
        Some(_) => r.bool(a::HEALTH_CHECK_LOCAL_ENDPOINTS).unwrap_or(false),
        None => defaults.health_check_local_endpoints,
    };
    let spec = svc.spec.as_ref();
    let local = spec.and_then(|s| s.external_traffic_policy.as_deref()) == Some("Local");
    let port = spec.and_then(|s| s.health_check_node_port).and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0);
    let own_check = r.raw(a::HEALTH_CHECK_PROTOCOL).is_some() || r.raw(a::HEALTH_CHECK_PORT).is_some();
    match port {
        Some(port) if enabled && local && !own_check => HealthSpec {
            protocol: HealthProtocol::Http,
            port: Some(port),
            domain: None,
            path: Some(KUBE_PROXY_HEALTH_PATH.to_owned()),
            // kube-proxy answers 200 or 503.
            status_codes: Some(vec!["2??".to_owned()]),
            tls: Some(false),
            ..health
        },
        _ => health,
    }
}
