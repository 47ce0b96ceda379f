//! Per-port annotations → the exact Load Balancer services, the problems they report, and the
//! status' `ipMode`.

use std::collections::BTreeMap;

use hcloud_api::models::{CertificateId, LbService, LoadBalancer};
use serde_json::json;

use super::*;
use crate::load_balancers::plan::{Desired, apply, plan_update};
use crate::load_balancers::services::desired_services_by_port;
use crate::load_balancers::spec::LbSpec;
use crate::load_balancers::spec::tests::service;

const WEB: &[(i32, &str, i32)] = &[(80, "TCP", 30080), (443, "TCP", 30443), (22, "TCP", 30022)];

fn spec(annotations: &[(&str, &str)], ports: &[(i32, &str, i32)]) -> LbSpec {
    LbSpec::from_service(&service(annotations, ports), &LbDefaults::default(), None).expect("valid")
}

fn problems(annotations: &[(&str, &str)], ports: &[(i32, &str, i32)]) -> Vec<String> {
    LbSpec::from_service(&service(annotations, ports), &LbDefaults::default(), None)
        .expect_err("invalid")
        .problems
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The `add_service` bodies, certificate names resolved as `7` (shared) and `port_certs`.
fn added(s: &LbSpec, shared: &[CertificateId], port_certs: &BTreeMap<u16, Vec<CertificateId>>) -> Vec<LbService> {
    desired_services_by_port(s, shared, port_certs).iter().map(|d| d.to_add()).collect()
}

fn tcp_check(port: u16) -> serde_json::Value {
    json!({"protocol": "tcp", "port": port, "interval": 15, "timeout": 10, "retries": 3})
}

/// The example: 80 → http, 443 → https with a certificate and an HTTP health check,
/// 22 → tcp without PROXY protocol; the Service-wide annotations give http + PROXY protocol.
#[test]
fn http_https_and_tcp_ports_on_one_service() {
    let s = spec(
        &[
            (a::PROTOCOL, "http"),
            (a::USES_PROXYPROTOCOL, "true"),
            ("load-balancer.hetzner.cloud/port.443.protocol", "https"),
            ("load-balancer.hetzner.cloud/port.443.http-certificates", "wildcard, 12"),
            ("load-balancer.hetzner.cloud/port.443.health-check-protocol", "http"),
            ("load-balancer.hetzner.cloud/port.443.health-check-http-path", "/healthz"),
            ("load-balancer.hetzner.cloud/port.22.protocol", "tcp"),
            ("load-balancer.hetzner.cloud/port.22.uses-proxyprotocol", "false"),
        ],
        WEB,
    );
    assert_eq!(s.port_settings.keys().copied().collect::<Vec<_>>(), vec![22, 443]);
    assert_eq!(
        s.port_settings[&443].certificates,
        Some(vec![CertRef::Name("wildcard".into()), CertRef::Id(CertificateId(12))])
    );
    let port_certs = BTreeMap::from([(443, vec![CertificateId(12), CertificateId(5)])]);
    let services = added(&s, &[], &port_certs);
    assert_eq!(
        serde_json::to_value(&services).expect("json"),
        json!([
            {"protocol": "http", "listen_port": 80, "destination_port": 30080, "proxyprotocol": true,
             "health_check": tcp_check(30080),
             "http": {"redirect_http": false, "sticky_sessions": false}},
            {"protocol": "https", "listen_port": 443, "destination_port": 30443, "proxyprotocol": true,
             "health_check": {"protocol": "http", "port": 30443, "interval": 15, "timeout": 10, "retries": 3,
                              "http": {"path": "/healthz", "status_codes": ["2??", "3??"], "tls": false}},
             "http": {"certificates": [5, 12], "redirect_http": false, "sticky_sessions": false}},
            {"protocol": "tcp", "listen_port": 22, "destination_port": 30022, "proxyprotocol": false,
             "health_check": tcp_check(30022)},
        ])
    );
    assert_eq!(s.status.ip_mode, IpMode::Proxy, "mixed PROXY protocol: Proxy (see ip_mode)");
}

/// Planned against the Load Balancer it describes, nothing is sent; a changed per-port value
/// updates only its port.
#[test]
fn steady_state_sends_nothing_and_a_change_touches_only_its_port() {
    let ann = [
        (a::PROTOCOL, "http"),
        ("load-balancer.hetzner.cloud/port.443.protocol", "https"),
        ("load-balancer.hetzner.cloud/port.443.http-certificates", "12"),
    ];
    let s = spec(&ann, WEB);
    let port_certs = BTreeMap::from([(443, vec![CertificateId(12)])]);
    let mut lb: LoadBalancer = serde_json::from_value(json!({
        "id": 1, "name": "x", "labels": {"hcloud-ccm/service-uid": s.uid},
        "load_balancer_type": {"name": "lb11", "max_targets": 25, "max_services": 5},
        "algorithm": {"type": "round_robin"}, "public_net": {"enabled": true, "ipv4": {}, "ipv6": {}},
        "private_net": [], "services": [], "targets": []
    }))
    .expect("lb");
    let plan = |s: &LbSpec, lb: &LoadBalancer| {
        let services = desired_services_by_port(s, &[], &port_certs);
        plan_update(lb, &Desired { spec: s, services: &services, targets: &[], lb_type: None }).ops
    };
    for op in plan(&s, &lb) {
        apply(&mut lb, &op);
    }
    assert_eq!(lb.services.len(), 3);
    assert_eq!(plan(&s, &lb), vec![]);

    let changed =
        spec(&[ann[0], ann[1], ann[2], ("load-balancer.hetzner.cloud/port.443.http-redirect-http", "true")], WEB);
    let ops = plan(&changed, &lb);
    let [crate::load_balancers::plan::LbOp::UpdateService(req)] = ops.as_slice() else { panic!("{ops:?}") };
    assert_eq!((req.listen_port, req.http.as_ref().and_then(|h| h.redirect_http)), (443, Some(true)));
}

/// Restating the Service-wide values per port changes nothing: a port inherits exactly what a
/// port without per-port annotations gets.
#[test]
fn per_port_values_equal_to_the_service_wide_ones_change_nothing() {
    let base = [(a::PROTOCOL, "https"), (a::HTTP_CERTIFICATES, "7"), (a::HEALTH_CHECK_INTERVAL, "5s")];
    let plain = spec(&base, WEB);
    let restated = spec(&[base[0], base[1], base[2], ("load-balancer.hetzner.cloud/port.80.protocol", "https")], WEB);
    let shared = [CertificateId(7)];
    assert_eq!(added(&plain, &shared, &BTreeMap::new()), added(&restated, &shared, &BTreeMap::new()));
    assert!(plain.port_settings.is_empty());
}

/// A port inherits the managed certificate when it has no `http-certificates` of its own.
#[test]
fn https_port_without_its_own_certificates_uses_the_service_wide_ones() {
    let s = spec(
        &[
            (a::CERTIFICATE_TYPE, "managed"),
            (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "example.com"),
            ("load-balancer.hetzner.cloud/port.443.protocol", "https"),
        ],
        WEB,
    );
    let services = added(&s, &[CertificateId(99)], &BTreeMap::new());
    let protocols: Vec<_> = services
        .iter()
        .map(|x| (x.listen_port, x.protocol.as_str(), x.http.as_ref().map(|h| h.certificates.clone())))
        .collect();
    assert_eq!(protocols, vec![(80, "tcp", None), (443, "https", Some(vec![CertificateId(99)])), (22, "tcp", None)]);
}

#[test]
fn bad_per_port_annotations_name_the_annotation_the_port_and_what_is_accepted() {
    let got = problems(
        &[
            ("load-balancer.hetzner.cloud/port.443.protocol", "quic"),
            ("load-balancer.hetzner.cloud/port.22.uses-proxyprotocol", "maybe"),
            ("load-balancer.hetzner.cloud/port.8443.protocol", "https"),
            ("load-balancer.hetzner.cloud/port.53.protocol", "tcp"),
            ("load-balancer.hetzner.cloud/port.0443.protocol", "tcp"),
            ("load-balancer.hetzner.cloud/port.80.name", "x"),
            ("load-balancer.hetzner.cloud/port.80.health-check-interval", "5"),
        ],
        &[(80, "TCP", 30080), (443, "TCP", 30443), (22, "TCP", 30022), (53, "UDP", 30053)],
    );
    assert_eq!(
        got,
        vec![
            "annotation load-balancer.hetzner.cloud/port.0443.protocol: \"tcp\" is invalid; port 0443 is not a TCP port \
             of this Service; accepted ports: 80, 443, 22",
            "annotation load-balancer.hetzner.cloud/port.53.protocol: \"tcp\" is invalid; port 53 is not a TCP port of \
             this Service; accepted ports: 80, 443, 22",
            "annotation load-balancer.hetzner.cloud/port.80.name: \"x\" is invalid; accepted: \
             load-balancer.hetzner.cloud/port.<port>.<option> with <option> one of protocol, uses-proxyprotocol, \
             http-certificates, http-cookie-name, http-cookie-lifetime, http-redirect-http, http-sticky-sessions, \
             http-timeout-idle, health-check-protocol, health-check-port, health-check-interval, \
             health-check-timeout, health-check-retries, health-check-http-domain, health-check-http-path, \
             health-check-http-validate-certificate, http-status-codes; the others are Service-wide",
            "annotation load-balancer.hetzner.cloud/port.8443.protocol: \"https\" is invalid; port 8443 is not a TCP \
             port of this Service; accepted ports: 80, 443, 22",
            "annotation load-balancer.hetzner.cloud/port.80.health-check-interval: \"5\" is invalid; accepted: a Go \
             duration like 15s, 1m30s or 2h (a number needs a unit)",
            "annotation load-balancer.hetzner.cloud/port.443.protocol: \"quic\" is invalid; accepted: tcp, http, https",
            "annotation load-balancer.hetzner.cloud/port.22.uses-proxyprotocol: \"maybe\" is invalid; accepted: true, \
             false, 1, 0, t, f (Go ParseBool)",
        ]
    );
}

#[test]
fn an_https_port_without_any_certificate_is_named() {
    let got = problems(&[("load-balancer.hetzner.cloud/port.443.protocol", "https")], WEB);
    assert_eq!(
        got,
        vec![
            "annotation load-balancer.hetzner.cloud/port.443.protocol: \"https\" is invalid; port 443 uses https and \
             needs a certificate: set load-balancer.hetzner.cloud/port.443.http-certificates or \
             load-balancer.hetzner.cloud/http-certificates to certificate ids or names, or \
             load-balancer.hetzner.cloud/certificate-type=managed"
        ]
    );
    // A bad Service-wide value is reported once, not once per port reading it.
    let got = problems(&[(a::PROTOCOL, "ftp"), ("load-balancer.hetzner.cloud/port.22.protocol", "tcp")], WEB);
    assert_eq!(
        got,
        vec!["annotation load-balancer.hetzner.cloud/protocol: \"ftp\" is invalid; accepted: tcp, http, https"]
    );
}

#[test]
fn ip_mode_is_proxy_when_any_port_uses_the_proxy_protocol() {
    let mode = |ann: &[(&str, &str)]| spec(ann, WEB).status.ip_mode;
    assert_eq!(mode(&[("load-balancer.hetzner.cloud/port.22.uses-proxyprotocol", "false")]), IpMode::Vip);
    assert_eq!(mode(&[("load-balancer.hetzner.cloud/port.22.uses-proxyprotocol", "true")]), IpMode::Proxy);
    let all_off = [
        (a::USES_PROXYPROTOCOL, "true"),
        ("load-balancer.hetzner.cloud/port.80.uses-proxyprotocol", "false"),
        ("load-balancer.hetzner.cloud/port.443.uses-proxyprotocol", "false"),
        ("load-balancer.hetzner.cloud/port.22.uses-proxyprotocol", "false"),
    ];
    assert_eq!(mode(&all_off), IpMode::Vip, "every port overrides the Service-wide true");
    assert_eq!(mode(&all_off[..3]), IpMode::Proxy, "port 22 keeps the Service-wide true");
}
