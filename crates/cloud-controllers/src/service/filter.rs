//! Which Services the controller manages and which changes trigger a sync (upstream
//! `wantsLoadBalancer`, `needsCleanup`, `needsUpdate`). Pure functions.
//!
//! The one extension over upstream is the class selector: with `class == None` (upstream's
//! behaviour) the controller manages `type: LoadBalancer` Services without
//! `spec.loadBalancerClass`; with `class == Some(c)` it manages exactly the LoadBalancer
//! Services whose class is `c` instead, so it can run beside another load balancer
//! implementation that serves the class-less ones. Everything derived from "wants a load
//! balancer" (cleanup on type change, `needs_update`) follows the selector.

use cloud_provider::helpers::service::has_lb_finalizer;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// `type: LoadBalancer`.
pub const TYPE_LOAD_BALANCER: &str = "LoadBalancer";

fn spec(service: &Service) -> Option<&ServiceSpec> {
    service.spec.as_ref()
}

fn service_type(service: &Service) -> &str {
    spec(service).and_then(|s| s.type_.as_deref()).unwrap_or_default()
}

/// True if the service is of type LoadBalancer and its `spec.loadBalancerClass` is the one
/// this controller manages: none (upstream `wantsLoadBalancer`), or exactly `class`.
pub fn wants_load_balancer(service: &Service, class: Option<&str>) -> bool {
    service_type(service) == TYPE_LOAD_BALANCER && spec(service).and_then(|s| s.load_balancer_class.as_deref()) == class
}

/// True if the service carries the cleanup finalizer and is being deleted or is no longer of
/// type LoadBalancer (upstream `needsCleanup`).
pub fn needs_cleanup(service: &Service) -> bool {
    has_lb_finalizer(service)
        && (service.metadata.deletion_timestamp.is_some() || service_type(service) != TYPE_LOAD_BALANCER)
}

/// True if a change from `old` to `new` needs the load balancer synced (upstream
/// `needsUpdate`): whether it wants a load balancer, source ranges, ports, session affinity
/// (and its config), load balancer IP, external IPs, annotations, UID, external traffic
/// policy, health-check node port, and the number of IP families. Nothing else (labels,
/// status, finalizers, ...) triggers a sync.
pub fn needs_update(old: &Service, new: &Service, class: Option<&str>) -> bool {
    let (old_wants, new_wants) = (wants_load_balancer(old, class), wants_load_balancer(new, class));
    if !old_wants && !new_wants {
        return false;
    }
    if old_wants != new_wants {
        return true;
    }
    let (o, n) = (spec(old).cloned().unwrap_or_default(), spec(new).cloned().unwrap_or_default());
    if new_wants && o.load_balancer_source_ranges != n.load_balancer_source_ranges {
        return true;
    }
    if !ports_equal_for_lb(old, new) || o.session_affinity.unwrap_or_default() != n.session_affinity.unwrap_or_default()
    {
        return true;
    }
    if o.session_affinity_config != n.session_affinity_config {
        return true;
    }
    if o.load_balancer_ip.unwrap_or_default() != n.load_balancer_ip.unwrap_or_default() {
        return true;
    }
    if o.external_ips.unwrap_or_default() != n.external_ips.unwrap_or_default() {
        return true;
    }
    if old.metadata.annotations != new.metadata.annotations {
        return true;
    }
    if old.metadata.uid != new.metadata.uid {
        return true;
    }
    if o.external_traffic_policy.unwrap_or_default() != n.external_traffic_policy.unwrap_or_default() {
        return true;
    }
    if o.health_check_node_port.unwrap_or(0) != n.health_check_node_port.unwrap_or(0) {
        return true;
    }
    // Families can be added or removed but not swapped, so only the count matters.
    o.ip_families.map_or(0, |f| f.len()) != n.ip_families.map_or(0, |f| f.len())
}

/// Upstream `portsEqualForLB`: same number of ports, index-wise equal.
pub fn ports_equal_for_lb(x: &Service, y: &Service) -> bool {
    let ports = |s: &Service| spec(s).and_then(|s| s.ports.clone()).unwrap_or_default();
    let (x, y) = (ports(x), ports(y));
    x.len() == y.len() && x.iter().zip(&y).all(|(a, b)| port_equal_for_lb(a, b))
}

/// Upstream `portEqualForLB`: name, protocol, port, node port, target port and app protocol.
pub fn port_equal_for_lb(x: &ServicePort, y: &ServicePort) -> bool {
    // Go's zero values: an absent target port is the integer 0.
    let target = |p: &ServicePort| p.target_port.clone().unwrap_or(IntOrString::Int(0));
    x.name.as_deref().unwrap_or_default() == y.name.as_deref().unwrap_or_default()
        && x.protocol.as_deref().unwrap_or_default() == y.protocol.as_deref().unwrap_or_default()
        && x.port == y.port
        && x.node_port.unwrap_or(0) == y.node_port.unwrap_or(0)
        && target(x) == target(y)
        && x.app_protocol == y.app_protocol
}
