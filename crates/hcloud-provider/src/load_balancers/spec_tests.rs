//! Annotations and defaults → desired Load Balancer; official CCM test cases under their names
//! where they exist (`TestLoadBalancerOps_Create`, the options builder's internal tests).

use hcloud_api::models::CertificateId;
use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};

use super::*;

pub(crate) fn service(annotations: &[(&str, &str)], ports: &[(i32, &str, i32)]) -> Service {
    let mut svc = Service::default();
    svc.metadata.namespace = Some("shop".into());
    svc.metadata.name = Some("web".into());
    svc.metadata.uid = Some("0f9e2b7c-1d2a-4c3b-9a8e-7f6d5c4b3a21".into());
    svc.metadata.annotations = Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        ports: Some(
            ports
                .iter()
                .map(|(port, proto, node_port)| ServicePort {
                    port: *port,
                    protocol: Some((*proto).into()),
                    node_port: Some(*node_port),
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    });
    svc
}

fn spec(annotations: &[(&str, &str)]) -> LbSpec {
    spec_with(annotations, &LbDefaults::default(), None)
}

fn spec_with(annotations: &[(&str, &str)], d: &LbDefaults, network: Option<NetworkId>) -> LbSpec {
    LbSpec::from_service(&service(annotations, &[(80, "TCP", 30080)]), d, network).expect("valid")
}

fn problems(annotations: &[(&str, &str)], network: Option<NetworkId>) -> Vec<String> {
    LbSpec::from_service(&service(annotations, &[(80, "TCP", 30080)]), &LbDefaults::default(), network)
        .expect_err("invalid")
        .problems
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn loc(l: &str) -> Placement {
    Placement::Location(l.into())
}

fn zone(z: &str) -> Placement {
    Placement::NetworkZone(z.into())
}

#[test]
fn create_with_location_name_and_default_set() {
    let d = LbDefaults { location: Some("hel1".into()), ..Default::default() };
    assert_eq!(spec_with(&[(a::LOCATION, "fsn1")], &d, None).placement, loc("fsn1"));
}

#[test]
fn create_with_network_zone_name_only_and_default_set() {
    let d = LbDefaults { network_zone: Some("eu-central".into()), ..Default::default() };
    assert_eq!(spec_with(&[(a::NETWORK_ZONE, "eu-central")], &d, None).placement, zone("eu-central"));
}

#[test]
fn create_with_location_as_default_only() {
    let d = LbDefaults { location: Some("fsn1".into()), ..Default::default() };
    assert_eq!(spec_with(&[], &d, None).placement, loc("fsn1"));
}

#[test]
fn create_with_network_zone_as_default_only() {
    let d = LbDefaults { network_zone: Some("eu-central".into()), ..Default::default() };
    assert_eq!(spec_with(&[], &d, None).placement, zone("eu-central"));
}

#[test]
fn create_with_network_zone_and_reset_default_location() {
    let d = LbDefaults { location: Some("hel1".into()), ..Default::default() };
    let s = spec_with(&[(a::LOCATION, ""), (a::NETWORK_ZONE, "eu-central")], &d, None);
    assert_eq!(s.placement, zone("eu-central"));
}

#[test]
fn create_with_location_and_reset_default_network_zone() {
    let d = LbDefaults { network_zone: Some("eu-central".into()), ..Default::default() };
    let s = spec_with(&[(a::LOCATION, "fsn1"), (a::NETWORK_ZONE, "")], &d, None);
    assert_eq!(s.placement, loc("fsn1"));
}

/// Official `fails if location and network zone missing` (the error itself comes when a Load
/// Balancer would be created; an existing one needs neither).
#[test]
fn fails_if_location_and_network_zone_missing() {
    assert_eq!(spec(&[]).placement, Placement::Unset);
}

/// The official `gives preference to location name` test takes the location when both
/// annotations are set; the issue asks for a Warning instead: the two contradict each other.
#[test]
fn location_and_network_zone_annotations_together_are_refused() {
    let p = problems(&[(a::LOCATION, "nbg1"), (a::NETWORK_ZONE, "eu-central")], None);
    assert_eq!(p.len(), 1);
    assert!(
        p[0].contains("annotations load-balancer.hetzner.cloud/location and load-balancer.hetzner.cloud/network-zone"),
        "{}",
        p[0]
    );
    assert!(p[0].contains("\"nbg1, eu-central\"") && p[0].contains("set only one of them"), "{}", p[0]);
}

/// A default location still wins over an annotated zone unless the location annotation is
/// set to "" (the official CCM's precedence, kept for drop-in compatibility).
#[test]
fn default_location_wins_over_annotated_zone() {
    let d = LbDefaults { location: Some("hel1".into()), ..Default::default() };
    assert_eq!(spec_with(&[(a::NETWORK_ZONE, "eu-central")], &d, None).placement, loc("hel1"));
}

#[test]
fn set_load_balancer_type_name() {
    assert_eq!(spec(&[(a::TYPE, "lb21")]).lb_type.as_deref(), Some("lb21"));
    let d = LbDefaults { lb_type: Some("lb31".into()), ..Default::default() };
    assert_eq!(spec_with(&[], &d, None).lb_type.as_deref(), Some("lb31"), "create with load balancer type default");
    assert_eq!(spec_with(&[(a::TYPE, "lb11")], &d, None).lb_type.as_deref(), Some("lb11"), "annotation wins");
    assert_eq!(spec(&[]).lb_type, None, "unset: lb11 at create, never changed");
}

#[test]
fn set_load_balancer_algorithm_type() {
    assert_eq!(spec(&[(a::ALGORITHM_TYPE, "least_connections")]).algorithm, Some(Algorithm::LeastConnections));
    assert_eq!(spec(&[(a::ALGORITHM_TYPE, "Round_Robin")]).algorithm, Some(Algorithm::RoundRobin));
    let d = LbDefaults { algorithm: Some(Algorithm::LeastConnections), ..Default::default() };
    assert_eq!(spec_with(&[], &d, None).algorithm, Some(Algorithm::LeastConnections));
    assert_eq!(spec(&[]).algorithm, None);
}

#[test]
fn fail_on_invalid_load_balancer_algorithm_type() {
    let p = problems(&[(a::ALGORITHM_TYPE, "invalidType")], None);
    assert_eq!(
        p,
        vec![
            "annotation load-balancer.hetzner.cloud/algorithm-type: \"invalidType\" is invalid; accepted: round_robin, \
             least_connections"
        ]
    );
}

#[test]
fn disable_public_interface() {
    assert_eq!(spec(&[(a::DISABLE_PUBLIC_NETWORK, "true")]).public_interface, Some(false));
    let d = LbDefaults { disable_public_network: Some(true), ..Default::default() };
    assert_eq!(spec_with(&[], &d, None).public_interface, Some(false), "create disables public interface via default");
    assert_eq!(spec_with(&[(a::DISABLE_PUBLIC_NETWORK, "false")], &d, None).public_interface, Some(true));
    assert_eq!(spec(&[]).public_interface, None, "unset: not managed");
}

#[test]
fn name_defaults_to_upstreams_and_the_annotation_renames() {
    let s = spec(&[]);
    assert_eq!(s.name, "a0f9e2b7c1d2a4c3b9a8e7f6d5c4b3a2");
    assert!(!s.name_annotated);
    let s = spec(&[(a::NAME, "shop-web")]);
    assert_eq!((s.name.as_str(), s.name_annotated), ("shop-web", true));
    assert!(problems(&[(a::NAME, "")], None)[0].contains("1 to 63 characters"));
}

#[test]
fn network_attachment_needs_hcloud_network() {
    let net = Some(NetworkId(7));
    let d = LbDefaults { private_subnet_ip_range: Some("10.0.1.0/24".parse().expect("cidr")), ..Default::default() };
    let s = spec_with(&[(a::PRIVATE_IPV4, "10.0.1.5")], &d, net);
    assert_eq!(
        s.network,
        Some(NetworkSpec {
            id: NetworkId(7),
            ip: Some("10.0.1.5".parse().expect("ip")),
            ip_range: Some("10.0.1.0/24".parse().expect("cidr"))
        })
    );
    let s = spec_with(&[(a::PRIVATE_SUBNET_IP_RANGE, "10.0.2.0/24")], &d, net);
    assert_eq!(s.network.and_then(|n| n.ip_range).map(|r| r.to_string()).as_deref(), Some("10.0.2.0/24"));
    assert_eq!(spec(&[]).network, None);
    let p = problems(&[(a::PRIVATE_IPV4, "10.0.1.5"), (a::USE_PRIVATE_IP, "true")], None);
    assert_eq!(p.len(), 2, "{p:#?}");
    assert!(p[0].contains("private-ipv4") && p[0].contains("HCLOUD_NETWORK is not set"), "{}", p[0]);
    assert!(p[1].contains("use-private-ip: \"true\"") && p[1].contains("need a private network"), "{}", p[1]);
}

#[test]
fn use_private_ip_from_default_without_network_names_the_variable() {
    let d = LbDefaults { use_private_ip: true, ..Default::default() };
    let e = LbSpec::from_service(&service(&[], &[(80, "TCP", 30080)]), &d, None).expect_err("invalid");
    assert!(e.problems[0].setting == "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "{:?}", e.problems);
    assert!(spec_with(&[], &d, Some(NetworkId(1))).use_private_ip);
    assert!(!spec_with(&[(a::USE_PRIVATE_IP, "false")], &d, None).use_private_ip, "annotation wins");
}

/// Official `configure unsupported protocol`: UDP and SCTP ports are reported, TCP ports stay.
#[test]
fn configure_unsupported_protocol() {
    let svc = service(&[], &[(53, "UDP", 30053), (80, "TCP", 30080), (9, "SCTP", 30009), (443, "TCP", 30443)]);
    let s = LbSpec::from_service(&svc, &LbDefaults::default(), None).expect("valid");
    assert_eq!(s.ports, vec![PortSpec { port: 80, node_port: 30080 }, PortSpec { port: 443, node_port: 30443 }]);
    assert_eq!(s.unsupported_ports, vec!["53/UDP", "9/SCTP"]);
}

#[test]
fn ports_without_node_port_are_refused() {
    let svc = service(&[], &[(80, "TCP", 0)]);
    let e = LbSpec::from_service(&svc, &LbDefaults::default(), None).expect_err("invalid");
    assert!(e.to_string().contains("spec.ports[0].nodePort"), "{e}");
}

/// Official options-builder `defaults`, `enable proxy protocol`, `proxy protocol annotation
/// overrides config default`, and the status' `ipMode`.
#[test]
fn proxy_protocol_from_annotation_or_default() {
    let s = spec(&[]);
    assert_eq!((s.proxyprotocol, s.status.ip_mode), (None, IpMode::Vip));
    let s = spec(&[(a::USES_PROXYPROTOCOL, "true")]);
    assert_eq!((s.proxyprotocol, s.status.ip_mode), (Some(true), IpMode::Proxy));
    let d = LbDefaults { uses_proxyprotocol: Some(true), ..Default::default() };
    assert_eq!(spec_with(&[], &d, None).status.ip_mode, IpMode::Proxy);
    let s = spec_with(&[(a::USES_PROXYPROTOCOL, "false")], &d, None);
    assert_eq!((s.proxyprotocol, s.status.ip_mode), (Some(false), IpMode::Vip));
}

#[test]
fn status_options() {
    let s = spec(&[(a::HOSTNAME, "lb.example.com"), (a::IPV6_DISABLED, "true"), (a::DISABLE_PRIVATE_INGRESS, "1")]);
    assert_eq!(s.status.hostname.as_deref(), Some("lb.example.com"));
    assert!(!s.status.ipv6 && !s.status.private_ingress);
    let d = LbDefaults { disable_ipv6: true, disable_private_ingress: true, ..Default::default() };
    let s = spec_with(&[(a::IPV6_DISABLED, "false")], &d, None);
    assert!(s.status.ipv6 && !s.status.private_ingress);
}

/// Official `select HTTP protocol` plus every HTTP option.
#[test]
fn select_http_protocol_and_options() {
    let s = spec(&[
        (a::PROTOCOL, "HTTP"),
        (a::HTTP_COOKIE_NAME, "SESSION"),
        (a::HTTP_COOKIE_LIFETIME, "5m"),
        (a::HTTP_REDIRECT_HTTP, "false"),
        (a::HTTP_STICKY_SESSIONS, "true"),
        (a::HTTP_TIMEOUT_IDLE, "90s"),
    ]);
    assert_eq!(s.protocol, LbProtocol::Http);
    assert_eq!(
        s.http,
        HttpSpec {
            cookie_name: Some("SESSION".into()),
            cookie_lifetime: Some(300),
            redirect_http: Some(false),
            sticky_sessions: Some(true),
            timeout_idle: Some(90),
        }
    );
}

#[test]
fn certificates_by_id_or_name_and_managed() {
    let s = spec(&[(a::PROTOCOL, "https"), (a::HTTP_CERTIFICATES, "12, my-cert")]);
    assert_eq!(
        s.certificates,
        CertificateSpec::Uploaded(vec![CertRef::Id(CertificateId(12)), CertRef::Name("my-cert".into())])
    );
    let s = spec(&[
        (a::PROTOCOL, "https"),
        (a::CERTIFICATE_TYPE, "managed"),
        (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "a.example.com,b.example.com"),
        (a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING, "true"),
        (a::HTTP_CERTIFICATES, "ignored-with-managed"),
    ]);
    assert_eq!(
        s.certificates,
        CertificateSpec::Managed {
            name: "ccm-managed-certificate-0f9e2b7c-1d2a-4c3b-9a8e-7f6d5c4b3a21".into(),
            domains: vec!["a.example.com".into(), "b.example.com".into()],
            staging: true,
        }
    );
    let s = spec(&[
        (a::PROTOCOL, "https"),
        (a::CERTIFICATE_TYPE, "managed"),
        (a::HTTP_MANAGED_CERTIFICATE_NAME, "shop"),
        (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "a.example.com"),
    ]);
    assert!(matches!(&s.certificates, CertificateSpec::Managed { name, staging: false, .. } if name == "shop"));
}

#[test]
fn certificate_problems() {
    let p = problems(&[(a::PROTOCOL, "https"), (a::CERTIFICATE_TYPE, "managed")], None);
    assert!(p[0].contains("http-managed-certificate-domains") && p[0].contains("required with"), "{p:?}");
    let p = problems(&[(a::PROTOCOL, "https")], None);
    assert!(p[0].contains("http-certificates") && p[0].contains("protocol https needs a certificate"), "{p:?}");
    let p = problems(&[(a::CERTIFICATE_TYPE, "selfsigned")], None);
    assert!(p[0].contains("accepted: uploaded, managed"), "{p:?}");
}

/// Official `add health check with default protocol`, `add TCP health check`, `add HTTP
/// health check`, `set health check defaults via config`.
#[test]
fn health_checks() {
    let none = spec(&[(a::PROTOCOL, "http")]).health;
    assert_eq!(none.protocol, HealthProtocol::Tcp, "no health check setting: TCP on the NodePort");
    let default_protocol = spec(&[(a::PROTOCOL, "http"), (a::HEALTH_CHECK_RETRIES, "5")]).health;
    assert_eq!((default_protocol.protocol, default_protocol.retries), (HealthProtocol::Http, Some(5)));
    let tcp = spec(&[(a::PROTOCOL, "http"), (a::HEALTH_CHECK_PROTOCOL, "tcp"), (a::HEALTH_CHECK_PORT, "8080")]).health;
    assert_eq!((tcp.protocol, tcp.port, tcp.path), (HealthProtocol::Tcp, Some(8080), None));
    let http = spec(&[
        (a::HEALTH_CHECK_PROTOCOL, "http"),
        (a::HEALTH_CHECK_INTERVAL, "5s"),
        (a::HEALTH_CHECK_TIMEOUT, "3s"),
        (a::HEALTH_CHECK_HTTP_DOMAIN, "example.com"),
        (a::HEALTH_CHECK_HTTP_PATH, "/healthz"),
        (a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE, "true"),
        (a::HTTP_STATUS_CODES, "200,204"),
    ])
    .health;
    assert_eq!(
        http,
        HealthSpec {
            protocol: HealthProtocol::Http,
            port: None,
            interval: Some(5),
            timeout: Some(3),
            retries: None,
            domain: Some("example.com".into()),
            path: Some("/healthz".into()),
            status_codes: Some(vec!["200".into(), "204".into()]),
            tls: Some(true),
        }
    );
    let d = LbDefaults {
        health_check_interval: Some(7),
        health_check_timeout: Some(4),
        health_check_retries: Some(2),
        ..Default::default()
    };
    let via_config = spec_with(&[(a::PROTOCOL, "https"), (a::HTTP_CERTIFICATES, "1")], &d, None).health;
    assert_eq!(
        (via_config.protocol, via_config.interval, via_config.timeout, via_config.retries, via_config.tls),
        (HealthProtocol::Https, Some(7), Some(4), Some(2), Some(true))
    );
    let annotated = spec_with(&[(a::HEALTH_CHECK_INTERVAL, "30s")], &d, None).health;
    assert_eq!(annotated.interval, Some(30), "the annotation wins over the variable");
}

#[test]
fn node_selector_parse_errors_name_the_annotation() {
    assert!(
        spec(&[(a::NODE_SELECTOR, "role=worker")])
            .node_selector
            .matches(&[("role".to_owned(), "worker".to_owned())].into_iter().collect())
    );
    let p = problems(&[(a::NODE_SELECTOR, "role in ()")], None);
    assert!(
        p[0].starts_with("annotation load-balancer.hetzner.cloud/node-selector: \"role in ()\" is invalid"),
        "{p:?}"
    );
    assert!(p[0].contains("label selector"), "{p:?}");
}

#[test]
fn every_problem_is_reported_at_once_with_the_service() {
    let e = LbSpec::from_service(
        &service(
            &[
                (a::USE_PRIVATE_IP, "maybe"),
                (a::HEALTH_CHECK_INTERVAL, "10"),
                (a::PROTOCOL, "udp"),
                (a::HEALTH_CHECK_PORT, "70000"),
                (a::HTTP_REDIRECT_HTTP, "ja"),
            ],
            &[(80, "TCP", 30080)],
        ),
        &LbDefaults::default(),
        Some(NetworkId(1)),
    )
    .expect_err("invalid");
    assert_eq!(e.problems.len(), 5, "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with(
            "Service shop/web has an invalid load balancer configuration, so its Load Balancer is left unchanged: "
        ),
        "{text}"
    );
    for needle in [
        "use-private-ip: \"maybe\"",
        "health-check-interval: \"10\"",
        "protocol: \"udp\" is invalid; accepted: tcp, http, https",
        "health-check-port: \"70000\" is invalid; accepted: an integer from 1 to 65535",
        "http-redirect-http: \"ja\"",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in {text}");
    }
}

#[test]
fn a_service_is_leaving_when_deleted_or_no_longer_of_type_load_balancer() {
    let svc = service(&[], &[(80, "TCP", 30080)]);
    assert!(!leaving(&svc));
    let mut deleted = svc.clone();
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    assert!(leaving(&deleted));
    let mut retyped = svc.clone();
    if let Some(spec) = retyped.spec.as_mut() {
        spec.type_ = Some("ClusterIP".into());
    }
    assert!(leaving(&retyped));
    assert!(leaving(&Service::default()), "no spec: no Load Balancer wanted");
}
