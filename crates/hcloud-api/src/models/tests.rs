//! Recorded-style JSON with extra and missing fields must parse.

use std::net::{IpAddr, Ipv4Addr};

use super::*;

/// A server as the API answers after the 2026 `datacenter` removal, plus fields this client
/// has never heard of.
const SERVER_2026: &str = r#"{
  "id": 42, "name": "node-1", "status": "running", "created": "2026-01-01T00:00:00+00:00",
  "public_net": {
    "ipv4": {"id": 1, "ip": "198.18.0.7", "blocked": false, "dns_ptr": "static.example"},
    "ipv6": {"id": 2, "ip": "2001:db8:7::/64", "blocked": false, "dns_ptr": []},
    "floating_ips": [], "firewalls": [], "brand_new_public_field": {"x": 1}
  },
  "private_net": [{"network": 4711, "ip": "10.0.0.2", "alias_ips": [], "mac_address": "86:00:00:00:00:01"}],
  "server_type": {"id": 1, "name": "cpx11", "cores": 2, "memory": 2.0, "disk": 40, "cpu_type": "shared",
                  "architecture": "x86", "deprecation": null, "category": "shared", "prices": []},
  "location": {"id": 1, "name": "fsn1", "description": "Falkenstein DC Park 1", "country": "DE", "city": "Falkenstein",
               "latitude": 50.47612, "longitude": 12.370071, "network_zone": "eu-central"},
  "labels": {"role": "worker"},
  "image": null, "iso": null, "rescue_enabled": false, "locked": false, "backup_window": null,
  "outgoing_traffic": 0, "ingoing_traffic": 0, "included_traffic": 0,
  "protection": {"delete": false, "rebuild": false}, "primary_disk_size": 40,
  "placement_group": null, "load_balancers": [], "volumes": [],
  "some_future_top_level_field": [1, 2, 3]
}"#;

#[test]
fn server_without_datacenter_and_with_unknown_fields_parses() {
    let s: Server = serde_json::from_str(SERVER_2026).expect("server parses");
    assert_eq!(s.id, ServerId(42));
    assert_eq!(s.status, ServerStatus::Running);
    assert_eq!(s.server_type.name, "cpx11");
    assert_eq!(s.location.name, "fsn1");
    assert_eq!(s.location.network_zone, "eu-central");
    assert_eq!(s.public_net.ipv4.as_ref().map(|v| v.ip), Some(Ipv4Addr::new(198, 18, 0, 7)));
    assert_eq!(s.public_net.ipv6.as_ref().map(|v| v.ip.to_string()), Some("2001:db8:7::/64".to_owned()));
    assert_eq!(s.private_ip_in(NetworkId(4711)), Some(IpAddr::from([10, 0, 0, 2])));
    assert_eq!(s.private_ip_in(NetworkId(1)), None);
    assert_eq!(s.labels.get("role").map(String::as_str), Some("worker"));
}

#[test]
fn minimal_server_parses_with_defaults() {
    // Only an id and a name: everything else defaults.
    let s: Server = serde_json::from_str(r#"{"id": 1, "name": "x"}"#).expect("parses");
    assert_eq!(s.name, "x");
    assert!(s.public_net.ipv4.is_none());
    assert!(s.private_net.is_empty());
    assert_eq!(s.status, ServerStatus::Unknown(String::new()));
}

#[test]
fn server_with_disabled_public_ips_parses() {
    let s: Server = serde_json::from_str(
        r#"{"id": 1, "name": "x", "status": "off", "public_net": {"ipv4": null, "ipv6": null, "floating_ips": []}}"#,
    )
    .expect("parses");
    assert_eq!(s.status, ServerStatus::Off);
    assert!(s.public_net.ipv4.is_none() && s.public_net.ipv6.is_none());
}

#[test]
fn unknown_enum_values_are_kept() {
    let s: Server = serde_json::from_str(r#"{"id": 1, "name": "x", "status": "hibernating"}"#).expect("parses");
    assert_eq!(s.status, ServerStatus::Unknown("hibernating".into()));
    assert_eq!(s.status.to_string(), "hibernating");

    let lb: LoadBalancer = serde_json::from_str(
        r#"{"id": 3, "name": "lb", "algorithm": {"type": "weighted_magic"},
            "services": [{"protocol": "quic", "listen_port": 443, "destination_port": 30443, "proxyprotocol": false,
                          "health_check": {"protocol": "grpc", "port": 1, "interval": 15, "timeout": 10, "retries": 3}}],
            "targets": [{"type": "cluster", "use_private_ip": false,
                         "health_status": [{"listen_port": 443, "status": "degraded"}]}]}"#,
    )
    .expect("parses");
    assert_eq!(lb.algorithm.kind, Algorithm::Unknown("weighted_magic".into()));
    assert_eq!(lb.services[0].protocol, LbProtocol::Unknown("quic".into()));
    assert_eq!(lb.targets[0].kind, TargetKind::Unknown("cluster".into()));
    assert_eq!(lb.targets[0].health_status[0].status, HealthStatus::Unknown("degraded".into()));
}

#[test]
fn load_balancer_parses() {
    let lb: LoadBalancer = serde_json::from_str(
        r#"{
      "id": 30001, "name": "a1234", "labels": {"hcloud-ccm/service-uid": "1234"},
      "load_balancer_type": {"id": 1, "name": "lb11", "description": "LB11", "max_targets": 25,
                             "max_services": 5, "max_connections": 10000, "max_assigned_certificates": 10,
                             "deprecated": null, "prices": []},
      "location": {"id": 1, "name": "nbg1", "network_zone": "eu-central"},
      "algorithm": {"type": "least_connections"}, "protection": {"delete": true},
      "public_net": {"enabled": true, "ipv4": {"ip": "198.18.1.1", "dns_ptr": "lb.example"},
                     "ipv6": {"ip": "2001:db8:99::1", "dns_ptr": null}},
      "private_net": [{"network": 20001, "ip": "10.0.0.5"}],
      "services": [{"protocol": "http", "listen_port": 80, "destination_port": 30080, "proxyprotocol": true,
                    "health_check": {"protocol": "http", "port": 30080, "interval": 15, "timeout": 10, "retries": 3,
                                     "http": {"domain": null, "path": "/healthz", "response": "", "status_codes": ["2??"], "tls": false}},
                    "http": {"cookie_name": "HCLBSTICKY", "cookie_lifetime": 300, "certificates": [40001],
                             "redirect_http": false, "sticky_sessions": true, "timeout_idle": 60}}],
      "targets": [{"type": "server", "server": {"id": 10000001}, "use_private_ip": true,
                   "health_status": [{"listen_port": 80, "status": "healthy"}]},
                  {"type": "ip", "ip": {"ip": "203.0.113.9"}, "health_status": []}],
      "outgoing_traffic": null, "ingoing_traffic": null, "included_traffic": 0, "created": "2026-01-01T00:00:00+00:00"
    }"#,
    )
    .expect("parses");
    assert_eq!(lb.load_balancer_type.max_targets, 25);
    assert!(lb.protection.delete);
    assert_eq!(lb.algorithm.kind, Algorithm::LeastConnections);
    assert_eq!(lb.public_net.ipv6.ip.map(|i| i.to_string()), Some("2001:db8:99::1".to_owned()));
    assert_eq!(lb.private_net[0].network, NetworkId(20001));
    let svc = &lb.services[0];
    assert_eq!(svc.protocol, LbProtocol::Http);
    assert!(svc.proxyprotocol);
    assert_eq!(svc.http.as_ref().and_then(|h| h.timeout_idle), Some(60));
    assert_eq!(svc.http.as_ref().map(|h| h.certificates.clone()), Some(vec![CertificateId(40001)]));
    assert_eq!(lb.targets[0].server.map(|s| s.id), Some(ServerId(10000001)));
    assert_eq!(lb.targets[0].health_status[0].status, HealthStatus::Healthy);
    assert_eq!(lb.targets[1].ip.as_ref().map(|i| i.ip.to_string()), Some("203.0.113.9".to_owned()));
}

#[test]
fn network_and_action_parse() {
    let n: Network = serde_json::from_str(
        r#"{"id": 20001, "name": "k8s", "ip_range": "10.0.0.0/8",
            "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/24", "network_zone": "eu-central", "gateway": "10.0.0.1", "vswitch_id": null}],
            "routes": [{"destination": "10.244.0.0/24", "gateway": "10.0.0.2"}],
            "servers": [10000001], "load_balancers": [], "protection": {"delete": false}, "labels": {},
            "created": "2026-01-01T00:00:00+00:00", "expose_routes_to_vswitch": false}"#,
    )
    .expect("parses");
    assert_eq!(n.routes[0].destination.to_string(), "10.244.0.0/24");
    assert_eq!(n.subnets[0].gateway, Some(IpAddr::from([10, 0, 0, 1])));

    let a: Action = serde_json::from_str(
        r#"{"id": 1000001, "command": "add_target", "status": "error", "progress": 100,
            "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:00:01+00:00",
            "resources": [{"id": 30001, "type": "load_balancer"}],
            "error": {"code": "target_already_defined", "message": "already defined"}}"#,
    )
    .expect("parses");
    assert_eq!(a.status, ActionStatus::Error);
    assert_eq!(a.error.map(|e| e.code), Some(crate::ErrorCode::TargetAlreadyDefined));
}

#[test]
fn target_spec_serialises_like_the_api_expects() {
    let server = serde_json::to_value(TargetSpec::Server { id: ServerId(7), use_private_ip: true }).expect("json");
    assert_eq!(server, serde_json::json!({"type": "server", "server": {"id": 7}, "use_private_ip": true}));
    let ip = serde_json::to_value(TargetSpec::Ip(IpAddr::from([203, 0, 113, 9]))).expect("json");
    assert_eq!(ip, serde_json::json!({"type": "ip", "ip": {"ip": "203.0.113.9"}}));
}

#[test]
fn uploaded_certificate_key_is_not_in_debug_output() {
    let req = CreateCertificateRequest::Uploaded {
        name: "c".into(),
        certificate: "-----BEGIN CERTIFICATE-----".into(),
        private_key: secrecy::SecretString::from("very-secret-key-material"),
        labels: Labels::new(),
    };
    assert!(!format!("{req:?}").contains("very-secret-key-material"));
    let json = serde_json::to_value(&req).expect("json");
    assert_eq!(json["private_key"], "very-secret-key-material");
    assert_eq!(json["type"], "uploaded");
}
