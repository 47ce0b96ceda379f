//! `externalTrafficPolicy: Local` health checks as the whole spec builds them.

use hcloud_api::models::LbProtocol;
use k8s_openapi::api::core::v1::Service;

use super::annotations as a;
use super::defaults::LbDefaults;
use super::port_spec::{HealthProtocol, HealthSpec};
use super::services::{DesiredHealth, DesiredHealthHttp, desired_services};
use super::spec::LbSpec;
use super::spec::tests::service;

fn local(annotations: &[(&str, &str)], policy: &str) -> Service {
    let mut svc = service(annotations, &[(80, "TCP", 30080), (443, "TCP", 30443)]);
    let spec = svc.spec.as_mut().expect("spec");
    spec.external_traffic_policy = Some(policy.into());
    spec.health_check_node_port = (policy == "Local").then_some(32100);
    svc
}

fn health_of(svc: &Service, d: &LbDefaults) -> HealthSpec {
    LbSpec::from_service(svc, d, None).expect("valid").health
}

fn tcp_on_node_port() -> HealthSpec {
    HealthSpec {
        protocol: HealthProtocol::Tcp,
        port: None,
        interval: None,
        timeout: None,
        retries: None,
        domain: None,
        path: None,
        status_codes: None,
        tls: None,
    }
}

fn kube_proxy() -> HealthSpec {
    HealthSpec {
        protocol: HealthProtocol::Http,
        port: Some(32100),
        path: Some("/healthz".into()),
        status_codes: Some(vec!["2??".into()]),
        tls: Some(false),
        ..tcp_on_node_port()
    }
}

const ON: (&str, &str) = (a::HEALTH_CHECK_LOCAL_ENDPOINTS, "true");

#[test]
fn off_by_default_the_official_tcp_check_on_the_node_port() {
    assert_eq!(health_of(&local(&[], "Local"), &LbDefaults::default()), tcp_on_node_port());
}

#[test]
fn opted_in_by_annotation_or_variable_a_local_service_gets_kube_proxys_check() {
    let env = LbDefaults { health_check_local_endpoints: true, ..Default::default() };
    assert_eq!(health_of(&local(&[ON], "Local"), &LbDefaults::default()), kube_proxy());
    assert_eq!(health_of(&local(&[], "Local"), &env), kube_proxy());
    let off = (a::HEALTH_CHECK_LOCAL_ENDPOINTS, "false");
    assert_eq!(health_of(&local(&[off], "Local"), &env), tcp_on_node_port(), "the annotation wins");
    assert_eq!(health_of(&local(&[ON], "Cluster"), &env), tcp_on_node_port(), "Cluster: unchanged");
}

#[test]
fn every_lb_service_checks_the_health_check_node_port() {
    let spec = LbSpec::from_service(&local(&[ON], "Local"), &LbDefaults::default(), None).expect("valid");
    let health: Vec<(u16, DesiredHealth)> =
        desired_services(&spec, &[]).into_iter().map(|s| (s.destination_port, s.health)).collect();
    let want = DesiredHealth {
        protocol: LbProtocol::Http,
        port: 32100,
        interval: None,
        timeout: None,
        retries: None,
        http: Some(DesiredHealthHttp {
            domain: None,
            path: Some("/healthz".into()),
            status_codes: Some(vec!["2??".into()]),
            tls: false,
        }),
    };
    assert_eq!(health, vec![(30080, want.clone()), (30443, want)]);
}

#[test]
fn the_services_own_check_wins_and_timings_apply() {
    let own = health_of(&local(&[ON, (a::HEALTH_CHECK_PORT, "8080")], "Local"), &LbDefaults::default());
    assert_eq!(own, HealthSpec { port: Some(8080), ..tcp_on_node_port() });
    let own = health_of(&local(&[ON, (a::HEALTH_CHECK_PROTOCOL, "tcp")], "Local"), &LbDefaults::default());
    assert_eq!(own, tcp_on_node_port());
    let timed = health_of(&local(&[ON, (a::HEALTH_CHECK_INTERVAL, "5s")], "Local"), &LbDefaults::default());
    assert_eq!(timed, HealthSpec { interval: Some(5), ..kube_proxy() });
}

#[test]
fn without_a_health_check_node_port_the_check_stays_as_configured() {
    let mut svc = local(&[ON], "Local");
    svc.spec.as_mut().expect("spec").health_check_node_port = None;
    assert_eq!(health_of(&svc, &LbDefaults::default()), tcp_on_node_port());
}

#[test]
fn a_bad_value_names_the_annotation_and_what_is_accepted() {
    let bad = local(&[(a::HEALTH_CHECK_LOCAL_ENDPOINTS, "yes")], "Local");
    let err = LbSpec::from_service(&bad, &LbDefaults::default(), None).expect_err("invalid");
    let problems: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        problems,
        ["annotation load-balancer.hetzner.cloud/health-check-local-endpoints: \"yes\" is invalid; accepted: true, \
          false, 1, 0, t, f (Go ParseBool)"]
    );
}

/// Issue 27 item 2: a per-port option on one port (here its protocol) keeps the Local check on
/// that port too; only a `health-check-protocol` or `health-check-port` of its own (per port or
/// Service-wide) replaces it, on the port it applies to.
#[test]
fn a_per_port_option_keeps_the_local_check_on_its_port() {
    let health_by_port = |annotations: &[(&str, &str)]| -> Vec<(u16, HealthSpec)> {
        let spec = LbSpec::from_service(&local(annotations, "Local"), &LbDefaults::default(), None).expect("valid");
        [80, 443]
            .into_iter()
            .map(|p| (p, spec.port_settings.get(&p).map_or(spec.health.clone(), |s| s.health.clone())))
            .collect()
    };
    let tcp_443 = ("load-balancer.hetzner.cloud/port.443.protocol", "tcp");
    assert_eq!(health_by_port(&[ON, tcp_443]), vec![(80, kube_proxy()), (443, kube_proxy())]);
    let timed_443 = ("load-balancer.hetzner.cloud/port.443.health-check-interval", "5s");
    assert_eq!(
        health_by_port(&[ON, timed_443]),
        vec![(80, kube_proxy()), (443, HealthSpec { interval: Some(5), ..kube_proxy() })],
        "timings apply to the Local check"
    );
    let own_443 = ("load-balancer.hetzner.cloud/port.443.health-check-port", "8443");
    assert_eq!(
        health_by_port(&[ON, own_443]),
        vec![(80, kube_proxy()), (443, HealthSpec { port: Some(8443), ..tcp_on_node_port() })],
        "the port's own check wins on that port only"
    );
    let service_wide = (a::HEALTH_CHECK_PROTOCOL, "tcp");
    assert_eq!(
        health_by_port(&[ON, service_wide, tcp_443]),
        vec![(80, tcp_on_node_port()), (443, tcp_on_node_port())],
        "a Service-wide check wins on every port"
    );

    // What is sent: both LB services check kube-proxy's port.
    let spec = LbSpec::from_service(&local(&[ON, tcp_443], "Local"), &LbDefaults::default(), None).expect("valid");
    let sent: Vec<(u16, LbProtocol, u16)> = super::services::desired_services_by_port(&spec, &[], &Default::default())
        .into_iter()
        .map(|s| (s.listen_port, s.health.protocol, s.health.port))
        .collect();
    assert_eq!(sent, vec![(80, LbProtocol::Http, 32100), (443, LbProtocol::Http, 32100)]);
}
