//! Service helpers for load balancers (upstream `service/helpers/helper.go`): source ranges,
//! traffic policy, health-check port, the cleanup finalizer and status equality. Pure
//! functions over `core/v1` Services, shared by the service controller and providers.

use std::collections::BTreeSet;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, PortStatus, Service};

use crate::helpers::address::parse_ip_sloppy;
use crate::well_known::FINALIZER_LOAD_BALANCER_CLEANUP;

/// Annotation with the allowed source ranges when `spec.loadBalancerSourceRanges` is empty
/// (upstream `v1.AnnotationLoadBalancerSourceRangesKey`).
pub const ANNOTATION_LOAD_BALANCER_SOURCE_RANGES: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";

/// The source range that allows everything; the default when none is given.
const DEFAULT_LOAD_BALANCER_SOURCE_RANGES: &str = "0.0.0.0/0";

/// A set of networks (upstream `utilnet.IPNetSet`): each CIDR is kept as its network (host
/// bits cleared), duplicates collapse.
pub type IpNetSet = BTreeSet<IpNet>;

/// The source ranges could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceRangesError(String);

/// `namespace/name` of a Service (`name` without a namespace), as client-go's
/// `MetaNamespaceKeyFunc` writes it: how messages name a Service.
pub fn service_name(service: &Service) -> String {
    let name = service.metadata.name.as_deref().unwrap_or_default();
    match service.metadata.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// Parses CIDRs like upstream's `utilnet.ParseIPNets` (Go's `ParseCIDRSloppy` on each trimmed
/// value): the address may have IPv4 octets with leading zeros; host bits are cleared.
pub fn parse_ip_nets<'a>(specs: impl IntoIterator<Item = &'a str>) -> Result<IpNetSet, String> {
    let mut set = IpNetSet::new();
    for spec in specs {
        let spec = spec.trim();
        let parsed = spec.split_once('/').and_then(|(ip, prefix)| {
            let ip = parse_ip_sloppy(ip)?;
            // Go accepts only decimal digits here (no sign, no spaces).
            if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) || prefix.len() > 3 {
                return None;
            }
            IpNet::new(ip, prefix.parse().ok()?).ok()
        });
        match parsed {
            Some(net) => {
                set.insert(net.trunc());
            }
            None => return Err(format!("invalid CIDR address: {spec}")),
        }
    }
    Ok(set)
}

/// True if the set allows traffic from `0.0.0.0/0` (upstream `IsAllowAll`).
pub fn is_allow_all(ipnets: &IpNetSet) -> bool {
    ipnets.iter().any(|n| n.to_string() == DEFAULT_LOAD_BALANCER_SOURCE_RANGES)
}

/// The source ranges a load balancer should allow (upstream `GetLoadBalancerSourceRanges`):
/// `spec.loadBalancerSourceRanges` if set, else the comma-separated annotation
/// [`ANNOTATION_LOAD_BALANCER_SOURCE_RANGES`], else allow-all.
pub fn load_balancer_source_ranges(service: &Service) -> Result<IpNetSet, SourceRangesError> {
    let spec_ranges = service.spec.as_ref().and_then(|s| s.load_balancer_source_ranges.as_deref()).unwrap_or_default();
    if !spec_ranges.is_empty() {
        return parse_ip_nets(spec_ranges.iter().map(String::as_str)).map_err(|e| {
            SourceRangesError(format!(
                "service.Spec.LoadBalancerSourceRanges: {spec_ranges:?} is not valid. Expecting a list of IP ranges. \
                 For example, 10.0.0.0/24. Error msg: {e}"
            ))
        });
    }
    let annotation = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_LOAD_BALANCER_SOURCE_RANGES))
        .map(|v| v.trim())
        .unwrap_or_default();
    let value = if annotation.is_empty() { DEFAULT_LOAD_BALANCER_SOURCE_RANGES } else { annotation };
    parse_ip_nets(value.split(',')).map_err(|_| {
        SourceRangesError(format!(
            "{ANNOTATION_LOAD_BALANCER_SOURCE_RANGES}: {value} is not valid. Expecting a comma-separated list of \
             source IP ranges. For example, 10.0.0.0/24,192.168.2.0/24"
        ))
    })
}

fn service_type(service: &Service) -> &str {
    service.spec.as_ref().and_then(|s| s.type_.as_deref()).unwrap_or_default()
}

/// True if the service is of type LoadBalancer or NodePort with `externalTrafficPolicy: Local`
/// (upstream `RequestsOnlyLocalTraffic`).
pub fn requests_only_local_traffic(service: &Service) -> bool {
    if !matches!(service_type(service), "LoadBalancer" | "NodePort") {
        return false;
    }
    service.spec.as_ref().and_then(|s| s.external_traffic_policy.as_deref()) == Some("Local")
}

/// True if the service's load balancer needs a health check on the health-check node port
/// (type LoadBalancer with `externalTrafficPolicy: Local`; upstream `NeedsHealthCheck`).
pub fn needs_health_check(service: &Service) -> bool {
    service_type(service) == "LoadBalancer" && requests_only_local_traffic(service)
}

/// The path and node port a load balancer's health check should probe, if the service needs
/// one (upstream `GetServiceHealthCheckPathPort`: `/healthz` on `spec.healthCheckNodePort`).
pub fn service_health_check_path_port(service: &Service) -> Option<(&'static str, i32)> {
    if !needs_health_check(service) {
        return None;
    }
    match service.spec.as_ref().and_then(|s| s.health_check_node_port) {
        Some(port) if port != 0 => Some(("/healthz", port)),
        _ => None,
    }
}

/// True if the service carries the load balancer cleanup finalizer (upstream `HasLBFinalizer`).
pub fn has_lb_finalizer(service: &Service) -> bool {
    service.metadata.finalizers.as_deref().unwrap_or_default().iter().any(|f| f == FINALIZER_LOAD_BALANCER_CLEANUP)
}

/// Upstream `LoadBalancerStatusEqual`: the ingress lists are semantically equal (apimachinery's
/// `Semantic.DeepEqual`, for which an absent list equals an empty one).
pub fn load_balancer_status_equal(l: &LoadBalancerStatus, r: &LoadBalancerStatus) -> bool {
    ingress_equal(l.ingress.as_deref().unwrap_or_default(), r.ingress.as_deref().unwrap_or_default())
}

/// Semantic equality of two ingress lists (absent and empty lists are equal).
pub fn ingress_equal(l: &[LoadBalancerIngress], r: &[LoadBalancerIngress]) -> bool {
    fn ports(i: &LoadBalancerIngress) -> &[PortStatus] {
        i.ports.as_deref().unwrap_or_default()
    }
    l.len() == r.len()
        && l.iter()
            .zip(r)
            .all(|(a, b)| a.ip == b.ip && a.hostname == b.hostname && a.ip_mode == b.ip_mode && ports(a) == ports(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServiceSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn with_annotation(v: &str) -> Service {
        let mut svc = Service::default();
        svc.metadata.annotations =
            Some([(ANNOTATION_LOAD_BALANCER_SOURCE_RANGES.to_owned(), v.to_owned())].into_iter().collect());
        svc
    }

    fn with_spec_ranges(v: &str) -> Service {
        Service {
            spec: Some(ServiceSpec {
                load_balancer_source_ranges: Some(v.split(',').map(str::to_owned).collect()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Upstream `TestGetLoadBalancerSourceRanges`.
    #[test]
    fn test_get_load_balancer_source_ranges() {
        for v in ["10.0.0.1/33", "foo.bar", "10.0.0.1/32,*", "10.0.0.1/32,", "10.0.0.1/32, ", "10.0.0.1"] {
            assert!(load_balancer_source_ranges(&with_annotation(v)).is_err(), "Expected error parsing: {v:?}");
            assert!(load_balancer_source_ranges(&with_spec_ranges(v)).is_err(), "Expected error parsing: {v:?}");
        }
        let check_ok = |v: &str| {
            load_balancer_source_ranges(&with_annotation(v)).unwrap_or_else(|e| panic!("{v:?}: {e}"));
            load_balancer_source_ranges(&with_spec_ranges(v)).unwrap_or_else(|e| panic!("{v:?}: {e}"))
        };
        assert_eq!(check_ok("192.168.0.1/32").len(), 1, "Expected exactly one CIDR");
        assert_eq!(check_ok("192.168.0.1/32,192.168.0.1/32").len(), 1, "Expected exactly one CIDR (after de-dup)");
        assert_eq!(check_ok("192.168.0.1/32,192.168.0.2/32").len(), 2, "Expected two CIDRs");
        assert_eq!(check_ok("  192.168.0.1/32 , 192.168.0.2/32   ").len(), 2, "Expected two CIDRs");
        // LoadBalancerSourceRanges not specified.
        let cidrs = load_balancer_source_ranges(&Service::default()).expect("default");
        assert_eq!(cidrs.len(), 1);
        assert!(is_allow_all(&cidrs), "Expected default to be allow-all: {cidrs:?}");
        // The annotation is empty.
        let cidrs = load_balancer_source_ranges(&with_annotation("")).expect("empty annotation");
        assert_eq!(cidrs.len(), 1);
        assert!(is_allow_all(&cidrs), "Expected default to be allow-all: {cidrs:?}");
    }

    #[test]
    fn source_range_errors_name_the_field_and_what_is_accepted() {
        let e = load_balancer_source_ranges(&with_annotation("10.0.0.1")).unwrap_err().to_string();
        assert_eq!(
            e,
            "service.beta.kubernetes.io/load-balancer-source-ranges: 10.0.0.1 is not valid. Expecting a \
             comma-separated list of source IP ranges. For example, 10.0.0.0/24,192.168.2.0/24"
        );
        let e = load_balancer_source_ranges(&with_spec_ranges("foo")).unwrap_err().to_string();
        assert!(e.starts_with("service.Spec.LoadBalancerSourceRanges: [\"foo\"] is not valid."), "{e}");
        assert!(e.ends_with("Error msg: invalid CIDR address: foo"), "{e}");
    }

    /// Upstream `TestAllowAll`.
    #[test]
    fn test_allow_all() {
        let check = |allow_all: bool, cidrs: &[&str]| {
            let nets = parse_ip_nets(cidrs.iter().copied()).expect("valid cidrs");
            assert_eq!(is_allow_all(&nets), allow_all, "IsAllowAll did not return expected value for {cidrs:?}");
        };
        check(false, &["10.0.0.1/32"]);
        check(false, &["10.0.0.1/32", "10.0.0.2/32"]);
        check(false, &["10.0.0.1/32", "10.0.0.1/32"]);
        check(true, &["0.0.0.0/0"]);
        check(true, &["192.168.0.0/0"]);
        check(true, &["192.168.0.1/32", "0.0.0.0/0"]);
    }

    fn svc(type_: Option<&str>, etp: Option<&str>) -> Service {
        Service {
            spec: Some(ServiceSpec {
                type_: type_.map(str::to_owned),
                external_traffic_policy: etp.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Upstream `TestRequestsOnlyLocalTraffic`.
    #[test]
    fn test_requests_only_local_traffic() {
        assert!(!requests_only_local_traffic(&Service::default()));
        assert!(!requests_only_local_traffic(&svc(Some("ClusterIP"), None)));
        assert!(!requests_only_local_traffic(&svc(Some("NodePort"), None)));
        assert!(!requests_only_local_traffic(&svc(Some("NodePort"), Some("Cluster"))));
        assert!(requests_only_local_traffic(&svc(Some("NodePort"), Some("Local"))));
        assert!(!requests_only_local_traffic(&svc(Some("LoadBalancer"), Some("Cluster"))));
        assert!(requests_only_local_traffic(&svc(Some("LoadBalancer"), Some("Local"))));
    }

    /// Upstream `TestNeedsHealthCheck`.
    #[test]
    fn test_needs_health_check() {
        assert!(!needs_health_check(&svc(Some("ClusterIP"), None)));
        assert!(!needs_health_check(&svc(Some("NodePort"), Some("Cluster"))));
        assert!(!needs_health_check(&svc(Some("NodePort"), Some("Local"))));
        assert!(!needs_health_check(&svc(Some("LoadBalancer"), Some("Cluster"))));
        assert!(needs_health_check(&svc(Some("LoadBalancer"), Some("Local"))));
    }

    #[test]
    fn health_check_path_port_needs_local_traffic_and_a_port() {
        let mut s = svc(Some("LoadBalancer"), Some("Local"));
        assert_eq!(service_health_check_path_port(&s), None, "no port allocated yet");
        s.spec.as_mut().expect("spec").health_check_node_port = Some(30123);
        assert_eq!(service_health_check_path_port(&s), Some(("/healthz", 30123)));
        let mut cluster = svc(Some("LoadBalancer"), Some("Cluster"));
        cluster.spec.as_mut().expect("spec").health_check_node_port = Some(30123);
        assert_eq!(service_health_check_path_port(&cluster), None);
    }

    /// Upstream `TestHasLBFinalizer`.
    #[test]
    fn test_has_lb_finalizer() {
        let with = |f: &[&str]| Service {
            metadata: ObjectMeta { finalizers: Some(f.iter().map(|s| s.to_string()).collect()), ..Default::default() },
            ..Default::default()
        };
        let cases = [
            ("service without finalizer", Service::default(), false),
            ("service with unrelated finalizer", with(&["unrelated"]), false),
            ("service with one finalizer", with(&[FINALIZER_LOAD_BALANCER_CLEANUP]), true),
            ("service with multiple finalizers", with(&[FINALIZER_LOAD_BALANCER_CLEANUP, "unrelated"]), true),
        ];
        for (desc, svc, want) in cases {
            assert_eq!(has_lb_finalizer(&svc), want, "{desc}");
        }
    }

    fn status(ingress: Vec<LoadBalancerIngress>) -> LoadBalancerStatus {
        LoadBalancerStatus { ingress: Some(ingress) }
    }

    fn ing(ip: &str, ip_mode: Option<&str>, ports: Option<Vec<(i32, &str)>>) -> LoadBalancerIngress {
        LoadBalancerIngress {
            ip: Some(ip.to_owned()),
            ip_mode: ip_mode.map(str::to_owned),
            ports: ports.map(|p| {
                p.into_iter()
                    .map(|(port, protocol)| PortStatus { port, protocol: protocol.to_owned(), error: None })
                    .collect()
            }),
            ..Default::default()
        }
    }

    /// Upstream `TestLoadBalancerStatusEqual`.
    #[test]
    fn test_load_balancer_status_equal() {
        let one = "192.168.0.1";
        let cases = [
            ("empty", LoadBalancerStatus::default(), LoadBalancerStatus::default(), true),
            ("same ip", status(vec![ing(one, None, None)]), status(vec![ing(one, None, None)]), true),
            ("different ip", status(vec![ing("192.168.0.2", None, None)]), status(vec![ing(one, None, None)]), false),
            ("same ipmode", status(vec![ing(one, Some("VIP"), None)]), status(vec![ing(one, Some("VIP"), None)]), true),
            (
                "only one ipmode set",
                status(vec![ing(one, None, None)]),
                status(vec![ing(one, Some("VIP"), None)]),
                false,
            ),
            (
                "different ipmode",
                status(vec![ing(one, Some("Proxy"), None)]),
                status(vec![ing(one, Some("VIP"), None)]),
                false,
            ),
            (
                "same ports",
                status(vec![ing(one, None, Some(vec![(80, "TCP")]))]),
                status(vec![ing(one, None, Some(vec![(80, "TCP")]))]),
                true,
            ),
            (
                "same ports different protocol",
                status(vec![ing(one, None, Some(vec![(80, "TCP")]))]),
                status(vec![ing(one, None, Some(vec![(80, "UDP")]))]),
                false,
            ),
            // Upstream lists this case twice, identically.
            (
                "only one port",
                status(vec![ing(one, None, Some(vec![(80, "TCP")]))]),
                status(vec![ing(one, None, Some(vec![]))]),
                false,
            ),
        ];
        for (name, l, r, want) in cases {
            assert_eq!(load_balancer_status_equal(&l, &r), want, "{name}");
        }
        // Semantic equality: an absent list equals an empty one.
        assert!(load_balancer_status_equal(&LoadBalancerStatus { ingress: None }, &status(vec![])));
        assert!(load_balancer_status_equal(
            &status(vec![ing(one, None, None)]),
            &status(vec![ing(one, None, Some(vec![]))])
        ));
    }
}
