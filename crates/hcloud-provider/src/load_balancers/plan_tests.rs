//! Observed + desired → operations. Official CCM cases (`TestLoadBalancerOps_ReconcileHCLB`,
//! `..._ReconcileHCLBTargets`, `..._ReconcileHCLBServices`, `..._Create`) under their names,
//! asserting the exact requests; plus: nothing planned when nothing changed, and planning again
//! after applying a plan yields nothing.

use cloud_provider::events::EventObject;
use hcloud_api::models::{CertificateId, LbProtocol, ServerId};
use serde_json::json;

use super::*;
use crate::load_balancers::defaults::LbDefaults;
use crate::load_balancers::services::desired_services;
use crate::load_balancers::spec::tests::service;

const UID: &str = "0f9e2b7c-1d2a-4c3b-9a8e-7f6d5c4b3a21";

fn lb_type(name: &str, max_targets: u32) -> LoadBalancerType {
    LoadBalancerType { name: name.into(), max_targets, max_services: 5, ..Default::default() }
}

/// An observed Load Balancer: `lb11` (25 targets), labelled for the Service, public
/// interface on, no network, plus `extra` fields.
fn observed(extra: serde_json::Value) -> LoadBalancer {
    let mut v = json!({
        "id": 4711, "name": "a0f9e2b7c1d2a4c3b9a8e7f6d5c4b3a2",
        "labels": {"hcloud-ccm/service-uid": UID},
        "load_balancer_type": {"name": "lb11", "max_targets": 25, "max_services": 5},
        "algorithm": {"type": "round_robin"},
        "public_net": {"enabled": true, "ipv4": {"ip": "198.51.100.7", "dns_ptr": "static.7.100.51.198.clients.your-server.de"},
                        "ipv6": {"ip": "2001:db8::1", "dns_ptr": "static.2001-db8--1.clients.your-server.de"}},
        "private_net": [], "services": [], "targets": []
    });
    if let (Some(base), Some(more)) = (v.as_object_mut(), extra.as_object()) {
        for (k, val) in more {
            base.insert(k.clone(), val.clone());
        }
    }
    serde_json::from_value(v).expect("load balancer")
}

fn tcp_service(listen: u16, dest: u16) -> serde_json::Value {
    json!({"protocol": "tcp", "listen_port": listen, "destination_port": dest, "proxyprotocol": false,
           "health_check": {"protocol": "tcp", "port": dest, "interval": 15, "timeout": 10, "retries": 3}})
}

fn server_target(id: i64, private: bool) -> serde_json::Value {
    json!({"type": "server", "server": {"id": id}, "use_private_ip": private})
}

struct Case {
    annotations: Vec<(&'static str, &'static str)>,
    ports: Vec<(i32, &'static str, i32)>,
    defaults: LbDefaults,
    network: Option<NetworkId>,
    nodes: Vec<(i64, &'static str)>,
    /// Robot Nodes: (IP, node name).
    robot_nodes: Vec<(&'static str, &'static str)>,
    certs: Vec<CertificateId>,
    lb_type: Option<LoadBalancerType>,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            annotations: Vec::new(),
            ports: vec![(80, "TCP", 30080)],
            defaults: LbDefaults::default(),
            network: None,
            nodes: Vec::new(),
            robot_nodes: Vec::new(),
            certs: Vec::new(),
            lb_type: None,
        }
    }
}

impl Case {
    fn with(annotations: &[(&'static str, &'static str)]) -> Case {
        Case { annotations: annotations.to_vec(), ..Default::default() }
    }

    fn spec(&self) -> LbSpec {
        LbSpec::from_service(&service(&self.annotations, &self.ports), &self.defaults, self.network).expect("valid")
    }

    fn targets(&self) -> Vec<ServerTarget> {
        self.nodes
            .iter()
            .map(|(id, n)| ServerTarget {
                target: TargetRef::Server(ServerId(*id)),
                node: (*n).into(),
                object: EventObject { kind: "Node", api_version: "v1", namespace: None, name: (*n).into(), uid: None },
            })
            .chain(self.robot_nodes.iter().map(|(ip, n)| ServerTarget {
                target: TargetRef::Ip(ip.parse().expect("ip")),
                node: (*n).into(),
                object: EventObject { kind: "Node", api_version: "v1", namespace: None, name: (*n).into(), uid: None },
            }))
            .collect()
    }

    fn plan(&self, lb: &LoadBalancer) -> Plan {
        let spec = self.spec();
        let services = desired_services(&spec, &self.certs);
        let targets = self.targets();
        plan_update(
            lb,
            &Desired { spec: &spec, services: &services, targets: &targets, lb_type: self.lb_type.as_ref() },
        )
    }

    fn create(&self, t: &LoadBalancerType) -> Result<(CreateLoadBalancerRequest, Vec<ServerTarget>), Invalid> {
        let spec = self.spec();
        let services = desired_services(&spec, &self.certs);
        let targets = self.targets();
        plan_create(&Desired { spec: &spec, services: &services, targets: &targets, lb_type: self.lb_type.as_ref() }, t)
    }

    /// The plan, then checks that planning again on the result is empty.
    fn converge(&self, lb: &LoadBalancer) -> Vec<LbOp> {
        let plan = self.plan(lb);
        let mut after = lb.clone();
        for op in &plan.ops {
            apply(&mut after, op);
        }
        let again = self.plan(&after);
        assert_eq!(again.ops, vec![], "planning again after applying {:#?}", plan.ops);
        plan.ops
    }
}

fn json_of<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("json")
}

#[test]
fn nothing_changed_nothing_planned() {
    let lb = observed(json!({"services": [tcp_service(80, 30080)], "targets": [server_target(1, false)]}));
    let c = Case { nodes: vec![(1, "n1")], ..Default::default() };
    assert_eq!(c.plan(&lb), Plan::default());
}

#[test]
fn update_algorithm() {
    let ops = Case::with(&[(a::ALGORITHM_TYPE, "least_connections")])
        .converge(&observed(json!({"services": [tcp_service(80, 30080)]})));
    assert_eq!(ops, vec![LbOp::ChangeAlgorithm(Algorithm::LeastConnections)]);
}

#[test]
fn dont_update_unchanged_algorithm() {
    let ops = Case::with(&[(a::ALGORITHM_TYPE, "round_robin")])
        .converge(&observed(json!({"services": [tcp_service(80, 30080)]})));
    assert_eq!(ops, vec![]);
}

#[test]
fn update_type() {
    let c = Case { lb_type: Some(lb_type("lb21", 75)), ..Case::with(&[(a::TYPE, "lb21")]) };
    assert_eq!(
        c.converge(&observed(json!({"services": [tcp_service(80, 30080)]}))),
        vec![LbOp::ChangeType(lb_type("lb21", 75))]
    );
}

#[test]
fn update_type_from_config_default() {
    let c = Case {
        defaults: LbDefaults { lb_type: Some("lb21".into()), ..Default::default() },
        lb_type: Some(lb_type("lb21", 75)),
        ..Default::default()
    };
    assert_eq!(
        c.converge(&observed(json!({"services": [tcp_service(80, 30080)]}))),
        vec![LbOp::ChangeType(lb_type("lb21", 75))]
    );
}

#[test]
fn dont_update_unchanged_type_and_never_downgrade_when_unset() {
    let lb = observed(
        json!({"load_balancer_type": {"name": "lb21", "max_targets": 75}, "services": [tcp_service(80, 30080)]}),
    );
    let c = Case { lb_type: Some(lb_type("lb21", 75)), ..Case::with(&[(a::TYPE, "lb21")]) };
    assert_eq!(c.converge(&lb), vec![]);
    assert_eq!(Case::default().converge(&lb), vec![], "no type configured: lb21 stays");
}

#[test]
fn ipv4_and_ipv6_rdns() {
    let lb = observed(json!({"services": [tcp_service(80, 30080)]}));
    let c = Case::with(&[(a::IPV4_RDNS, "static.7.100.51.198.clients.your-server.de")]);
    assert_eq!(c.converge(&lb), vec![], "don't update correct IPv4 RNDS");
    let c = Case::with(&[(a::IPV4_RDNS, "lb.example.com"), (a::IPV6_RDNS, "lb6.example.com")]);
    assert_eq!(
        c.converge(&lb),
        vec![
            LbOp::ChangeDnsPtr { ip: "198.51.100.7".parse().expect("ip"), dns_ptr: "lb.example.com".into() },
            LbOp::ChangeDnsPtr { ip: "2001:db8::1".parse().expect("ip"), dns_ptr: "lb6.example.com".into() },
        ],
        "update incorrect IPv4 and IPv6 RNDS"
    );
}

#[test]
fn add_missing_service_uid_label_and_keep_other_labels() {
    let lb = observed(json!({"labels": {"team": "shop"}, "services": [tcp_service(80, 30080)]}));
    let ops = Case::default().converge(&lb);
    assert_eq!(ops.len(), 1);
    let LbOp::Update(req) = &ops[0] else { panic!("{ops:?}") };
    assert_eq!(json_of(req), json!({"labels": {"hcloud-ccm/service-uid": UID, "team": "shop"}}));
}

#[test]
fn replace_stale_service_uid_label() {
    let lb = observed(json!({"labels": {"hcloud-ccm/service-uid": "old"}, "services": [tcp_service(80, 30080)]}));
    let LbOp::Update(req) = &Case::default().converge(&lb)[0] else { panic!() };
    assert_eq!(json_of(req), json!({"labels": {"hcloud-ccm/service-uid": UID}}));
}

#[test]
fn rename_load_balancer() {
    let lb = observed(json!({"name": "old-name", "services": [tcp_service(80, 30080)]}));
    let ops = Case::with(&[(a::NAME, "new-name")]).converge(&lb);
    let [LbOp::Update(req)] = ops.as_slice() else { panic!("{ops:?}") };
    assert_eq!(json_of(req), json!({"name": "new-name"}));
    assert_eq!(Case::default().converge(&lb), vec![], "without the annotation an adopted name stays");
}

#[test]
fn attach_to_the_network_and_detach_from_foreign_ones() {
    let lb =
        observed(json!({"private_net": [{"network": 99, "ip": "192.168.0.2"}], "services": [tcp_service(80, 30080)]}));
    let c = Case { network: Some(NetworkId(7)), ..Default::default() };
    let ops = c.converge(&lb);
    assert_eq!(ops.len(), 2);
    assert_eq!(ops[0], LbOp::DetachFromNetwork(NetworkId(99)));
    let LbOp::AttachToNetwork(req) = &ops[1] else { panic!("{ops:?}") };
    assert_eq!(json_of(req), json!({"network": 7}));
}

#[test]
fn attach_load_balancer_to_network_with_specific_ip() {
    let c = Case {
        network: Some(NetworkId(7)),
        annotations: vec![(a::PRIVATE_IPV4, "10.0.1.9"), (a::PRIVATE_SUBNET_IP_RANGE, "10.0.1.0/24")],
        ..Default::default()
    };
    let ops = c.converge(&observed(json!({"services": [tcp_service(80, 30080)]})));
    let [LbOp::AttachToNetwork(req)] = ops.as_slice() else { panic!("{ops:?}") };
    assert_eq!(json_of(req), json!({"network": 7, "ip": "10.0.1.9", "ip_range": "10.0.1.0/24"}));
}

/// Official `reattach Load Balancer to network because private ipv4 annotation changed`: the
/// re-attach drops the private-IP targets, so they are added again after it.
#[test]
fn reattach_load_balancer_to_network_because_private_ipv4_annotation_changed() {
    let lb = observed(json!({
        "private_net": [{"network": 7, "ip": "10.0.0.2"}],
        "services": [tcp_service(80, 30080)],
        "targets": [server_target(1, true)]
    }));
    let c = Case {
        network: Some(NetworkId(7)),
        annotations: vec![(a::PRIVATE_IPV4, "10.0.0.9"), (a::USE_PRIVATE_IP, "true")],
        nodes: vec![(1, "n1")],
        ..Default::default()
    };
    let ops = c.converge(&lb);
    assert_eq!(ops[0], LbOp::DetachFromNetwork(NetworkId(7)));
    assert!(matches!(&ops[1], LbOp::AttachToNetwork(r) if r.ip == Some("10.0.0.9".parse().expect("ip"))));
    assert_eq!(
        ops[2],
        LbOp::AddTarget { target: TargetSpec::Server { id: ServerId(1), use_private_ip: true }, node: "n1".into() }
    );
    assert_eq!(ops.len(), 3);
}

#[test]
fn public_interface_toggles() {
    let on = observed(json!({"services": [tcp_service(80, 30080)]}));
    let mut off = on.clone();
    off.public_net.enabled = false;
    let disable_by_default = Case {
        defaults: LbDefaults { disable_public_network: Some(true), ..Default::default() },
        ..Default::default()
    };
    assert_eq!(
        disable_by_default.converge(&on),
        vec![LbOp::DisablePublicInterface],
        "disable enabled public network from config default"
    );
    assert_eq!(disable_by_default.converge(&off), vec![], "keep disabled public interface");
    assert_eq!(
        Case::with(&[(a::DISABLE_PUBLIC_NETWORK, "false")]).converge(&off),
        vec![LbOp::EnablePublicInterface],
        "enable disabled public interface"
    );
    assert_eq!(
        Case::with(&[(a::DISABLE_PUBLIC_NETWORK, "false")]).converge(&on),
        vec![],
        "keep enabled public interface"
    );
    assert_eq!(Case::default().converge(&off), vec![], "unset: not managed");
}

#[test]
fn add_k8s_nodes_as_hc_load_balancer_targets() {
    let lb = observed(json!({"services": [tcp_service(80, 30080)], "targets": [server_target(1, false)]}));
    let c = Case { nodes: vec![(1, "n1"), (2, "n2"), (3, "n3")], ..Default::default() };
    assert_eq!(
        c.converge(&lb),
        vec![
            LbOp::AddTarget {
                target: TargetSpec::Server { id: ServerId(2), use_private_ip: false },
                node: "n2".into()
            },
            LbOp::AddTarget {
                target: TargetSpec::Server { id: ServerId(3), use_private_ip: false },
                node: "n3".into()
            },
        ]
    );
}

#[test]
fn remove_unused_k8s_nodes_from_hc_load_balancer() {
    let lb = observed(json!({
        "services": [tcp_service(80, 30080)],
        "targets": [server_target(1, false), server_target(2, false),
                    {"type": "ip", "ip": {"ip": "203.0.113.9"}},
                    {"type": "label_selector", "label_selector": {"selector": "k8s=1"}}]
    }));
    let c = Case { nodes: vec![(1, "n1")], ..Default::default() };
    assert_eq!(
        c.converge(&lb),
        vec![
            LbOp::RemoveTarget(TargetSpec::Server { id: ServerId(2), use_private_ip: false }),
            LbOp::RemoveTarget(TargetSpec::Ip("203.0.113.9".parse().expect("ip"))),
        ],
        "foreign IP targets go (Robot is off), label-selector targets stay"
    );
}

/// Official ReconcileHCLBTargets with Robot: Robot Nodes are IP targets; an IP target of a
/// Robot Node stays, a missing one is added, any other IP target goes, and server targets are
/// unaffected (private IPs apply to server targets only).
#[test]
fn robot_nodes_are_ip_targets() {
    let lb = observed(json!({
        "services": [tcp_service(80, 30080)],
        "targets": [server_target(1, false), {"type": "ip", "ip": {"ip": "198.19.0.1"}},
                    {"type": "ip", "ip": {"ip": "203.0.113.9"}}]
    }));
    let c = Case {
        nodes: vec![(1, "n1")],
        robot_nodes: vec![("198.19.0.1", "bm-1"), ("198.19.0.2", "bm-2")],
        annotations: vec![("load-balancer.hetzner.cloud/location", "fsn1")],
        ..Default::default()
    };
    assert_eq!(
        c.converge(&lb),
        vec![
            LbOp::RemoveTarget(TargetSpec::Ip("203.0.113.9".parse().expect("ip"))),
            LbOp::AddTarget { target: TargetSpec::Ip("198.19.0.2".parse().expect("ip")), node: "bm-2".into() },
        ]
    );
    let (req, full) = c.create(&lb_type("lb11", 25)).expect("create");
    assert!(full.is_empty());
    assert_eq!(
        req.targets,
        vec![
            TargetSpec::Server { id: ServerId(1), use_private_ip: false },
            TargetSpec::Ip("198.19.0.1".parse().expect("ip")),
            TargetSpec::Ip("198.19.0.2".parse().expect("ip")),
        ]
    );
}

/// Official `too many targets`: nodes beyond the type's `max_targets` are reported, not added.
#[test]
fn too_many_targets() {
    let lb = observed(json!({
        "load_balancer_type": {"name": "lb11", "max_targets": 2},
        "services": [tcp_service(80, 30080)],
        "targets": [server_target(1, false)]
    }));
    let c = Case { nodes: vec![(1, "n1"), (2, "n2"), (3, "n3"), (4, "n4")], ..Default::default() };
    let plan = c.plan(&lb);
    assert_eq!(
        plan.ops,
        vec![LbOp::AddTarget {
            target: TargetSpec::Server { id: ServerId(2), use_private_ip: false },
            node: "n2".into()
        }]
    );
    let full: Vec<&str> = plan.max_targets_reached.iter().map(|t| t.node.as_str()).collect();
    assert_eq!(full, vec!["n3", "n4"]);
}

#[test]
fn a_removal_frees_a_slot_for_an_addition() {
    let lb = observed(json!({
        "load_balancer_type": {"name": "lb11", "max_targets": 1},
        "services": [tcp_service(80, 30080)],
        "targets": [server_target(9, false)]
    }));
    let c = Case { nodes: vec![(1, "n1")], ..Default::default() };
    let plan = c.plan(&lb);
    assert_eq!(plan.ops.len(), 2);
    assert!(plan.max_targets_reached.is_empty());
}

/// Official `enable use of private network via default` / `... via annotation` / `disable
/// use of private network via annotation`: a target with the wrong flag is recreated.
#[test]
fn private_ip_targets_are_recreated_when_the_flag_flips() {
    let net = Some(NetworkId(7));
    let attached = json!([{"network": 7, "ip": "10.0.0.2"}]);
    let public = observed(
        json!({"private_net": attached, "services": [tcp_service(80, 30080)], "targets": [server_target(1, false)]}),
    );
    let by_default = Case {
        network: net,
        defaults: LbDefaults { use_private_ip: true, ..Default::default() },
        nodes: vec![(1, "n1")],
        ..Default::default()
    };
    let flip = vec![
        LbOp::RemoveTarget(TargetSpec::Server { id: ServerId(1), use_private_ip: false }),
        LbOp::AddTarget { target: TargetSpec::Server { id: ServerId(1), use_private_ip: true }, node: "n1".into() },
    ];
    assert_eq!(by_default.converge(&public), flip);
    let by_annotation = Case { network: net, nodes: vec![(1, "n1")], ..Case::with(&[(a::USE_PRIVATE_IP, "true")]) };
    assert_eq!(by_annotation.converge(&public), flip);
    let private = observed(
        json!({"private_net": attached, "services": [tcp_service(80, 30080)], "targets": [server_target(1, true)]}),
    );
    let disable = Case { network: net, nodes: vec![(1, "n1")], ..Case::with(&[(a::USE_PRIVATE_IP, "false")]) };
    assert_eq!(
        disable.converge(&private),
        vec![
            LbOp::RemoveTarget(TargetSpec::Server { id: ServerId(1), use_private_ip: true }),
            LbOp::AddTarget {
                target: TargetSpec::Server { id: ServerId(1), use_private_ip: false },
                node: "n1".into()
            },
        ]
    );
}

/// Official `add services to hc Load Balancer`: one service per port, listen = port,
/// destination = NodePort, a TCP health check on the NodePort.
#[test]
fn add_services_to_hc_load_balancer() {
    let c = Case { ports: vec![(80, "TCP", 30080), (443, "TCP", 30443)], ..Default::default() };
    let ops = c.converge(&observed(json!({})));
    let bodies: Vec<serde_json::Value> = ops
        .iter()
        .map(|op| match op {
            LbOp::AddService(s) => json_of(s),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        bodies,
        vec![
            json!({"protocol": "tcp", "listen_port": 80, "destination_port": 30080, "proxyprotocol": false,
                   "health_check": {"protocol": "tcp", "port": 30080, "interval": 15, "timeout": 10, "retries": 3}}),
            json!({"protocol": "tcp", "listen_port": 443, "destination_port": 30443, "proxyprotocol": false,
                   "health_check": {"protocol": "tcp", "port": 30443, "interval": 15, "timeout": 10, "retries": 3}}),
        ]
    );
}

/// Official `replace hc Load Balancer services`: stale ports go first, new ones are added.
#[test]
fn replace_hc_load_balancer_services() {
    let lb = observed(json!({"services": [tcp_service(81, 30081), tcp_service(82, 30082)]}));
    let ops = Case::default().converge(&lb);
    assert_eq!(ops[0], LbOp::DeleteService(81));
    assert_eq!(ops[1], LbOp::DeleteService(82));
    assert!(matches!(&ops[2], LbOp::AddService(s) if s.listen_port == 80 && s.destination_port == 30080));
    assert_eq!(ops.len(), 3);
}

/// Official `update already exposed ports with new hc Load Balancer services`: a changed
/// NodePort (and health check port) is one `update_service`; unchanged ports send nothing.
#[test]
fn update_already_exposed_ports_with_new_hc_load_balancer_services() {
    let lb = observed(json!({"services": [tcp_service(80, 30999), tcp_service(443, 30443)]}));
    let c = Case { ports: vec![(80, "TCP", 30080), (443, "TCP", 30443)], ..Default::default() };
    let ops = c.converge(&lb);
    let [LbOp::UpdateService(req)] = ops.as_slice() else { panic!("{ops:?}") };
    assert_eq!(
        json_of(req),
        json!({"listen_port": 80, "protocol": "tcp", "destination_port": 30080,
               "health_check": {"protocol": "tcp", "port": 30080, "interval": 15, "timeout": 10, "retries": 3}})
    );
}

/// Settings left unset keep what the API has (an interval set by hand stays), and the
/// defaults the API filled in do not look like changes.
#[test]
fn unset_settings_keep_the_apis_values() {
    let mut svc = tcp_service(80, 30080);
    svc["health_check"]["interval"] = json!(5);
    svc["proxyprotocol"] = json!(true);
    let lb = observed(json!({"services": [svc]}));
    assert_eq!(Case::default().converge(&lb), vec![]);
    let ops = Case::with(&[(a::USES_PROXYPROTOCOL, "false"), (a::HEALTH_CHECK_RETRIES, "5")]).converge(&lb);
    let [LbOp::UpdateService(req)] = ops.as_slice() else { panic!("{ops:?}") };
    assert_eq!(
        json_of(req),
        json!({"listen_port": 80, "protocol": "tcp", "destination_port": 30080, "proxyprotocol": false,
               "health_check": {"protocol": "tcp", "port": 30080, "interval": 5, "timeout": 10, "retries": 5}}),
        "the hand-set interval is kept"
    );
}

/// Official `reference TLS certificate by id` with HTTP options and an HTTPS health check.
#[test]
fn https_with_certificates_http_options_and_health_check() {
    let c = Case {
        certs: vec![CertificateId(12), CertificateId(3)],
        ..Case::with(&[
            (a::PROTOCOL, "https"),
            (a::HTTP_CERTIFICATES, "12,3"),
            (a::HTTP_REDIRECT_HTTP, "true"),
            (a::HTTP_TIMEOUT_IDLE, "2m"),
            (a::HEALTH_CHECK_PROTOCOL, "https"),
            (a::HEALTH_CHECK_HTTP_PATH, "/healthz"),
        ])
    };
    let ops = c.converge(&observed(json!({})));
    let [LbOp::AddService(s)] = ops.as_slice() else { panic!("{ops:?}") };
    assert_eq!(
        json_of(s),
        json!({"protocol": "https", "listen_port": 80, "destination_port": 30080, "proxyprotocol": false,
               "health_check": {"protocol": "http", "port": 30080, "interval": 15, "timeout": 10, "retries": 3,
                                "http": {"path": "/healthz", "status_codes": ["2??", "3??"], "tls": true}},
               "http": {"certificates": [3, 12], "redirect_http": true, "sticky_sessions": false, "timeout_idle": 120}})
    );
    // The API answers with its defaults filled in: still nothing to do.
    let mut have = json_of(s);
    have["http"]["cookie_name"] = json!("HCLBSTICKY");
    have["http"]["cookie_lifetime"] = json!(300);
    have["health_check"]["http"]["domain"] = json!(null);
    have["health_check"]["http"]["response"] = json!("");
    let lb = observed(json!({"services": [have]}));
    assert_eq!(c.converge(&lb), vec![]);
    // Switching to plain http clears the certificates.
    let http = Case::with(&[(a::PROTOCOL, "http")]);
    let ops = http.converge(&lb);
    let [LbOp::UpdateService(req)] = ops.as_slice() else { panic!("{ops:?}") };
    assert_eq!(req.protocol, Some(LbProtocol::Http));
    assert_eq!(req.http.as_ref().and_then(|h| h.certificates.clone()), Some(vec![]));
}

#[test]
fn create_in_one_request_with_services_targets_network_and_labels() {
    let c = Case {
        network: Some(NetworkId(7)),
        nodes: vec![(1, "n1"), (2, "n2")],
        ..Case::with(&[(a::LOCATION, "fsn1"), (a::ALGORITHM_TYPE, "least_connections"), (a::USE_PRIVATE_IP, "true")])
    };
    let (req, full) = c.create(&lb_type("lb11", 25)).expect("create");
    assert!(full.is_empty());
    assert_eq!(
        json_of(&req),
        json!({
            "name": "a0f9e2b7c1d2a4c3b9a8e7f6d5c4b3a2", "load_balancer_type": "lb11", "location": "fsn1",
            "algorithm": {"type": "least_connections"}, "labels": {"hcloud-ccm/service-uid": UID}, "network": 7,
            "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30080, "proxyprotocol": false,
                          "health_check": {"protocol": "tcp", "port": 30080, "interval": 15, "timeout": 10, "retries": 3}}],
            "targets": [{"type": "server", "server": {"id": 1}, "use_private_ip": true},
                        {"type": "server", "server": {"id": 2}, "use_private_ip": true}]
        })
    );
}

#[test]
fn create_respects_max_targets_and_leaves_a_fixed_ip_attach_for_later() {
    let c = Case { nodes: vec![(1, "n1"), (2, "n2"), (3, "n3")], ..Case::with(&[(a::NETWORK_ZONE, "eu-central")]) };
    let (req, full) = c.create(&lb_type("lb11", 2)).expect("create");
    assert_eq!(
        (req.targets.len(), req.network_zone.as_deref(), req.location.as_deref()),
        (2, Some("eu-central"), None)
    );
    assert_eq!(full.iter().map(|t| t.node.as_str()).collect::<Vec<_>>(), vec!["n3"]);

    let fixed = Case {
        network: Some(NetworkId(7)),
        nodes: vec![(1, "n1")],
        ..Case::with(&[(a::LOCATION, "fsn1"), (a::PRIVATE_IPV4, "10.0.0.9"), (a::USE_PRIVATE_IP, "true")])
    };
    let (req, _) = fixed.create(&lb_type("lb11", 25)).expect("create");
    assert_eq!((req.network, req.targets.len()), (None, 0), "attached with its IP afterwards, then the targets");
}

#[test]
fn create_needs_a_location_or_network_zone() {
    let e = Case::default().create(&lb_type("lb11", 25)).expect_err("no placement");
    assert!(e.to_string().contains("a new Load Balancer needs one of them"), "{e}");
}

#[test]
fn a_shared_load_balancer_is_never_adopted_by_name() {
    // Even without an identity label: naming it must not let a Service take over its members'
    // services and targets.
    let shared = observed(json!({"name": "shop-web-1a2b3c4d", "labels": {"hcloud-ccm/sharing-key": "web"}}));
    let e = check_adoption(&shared, UID).expect_err("a group's");
    assert_eq!(e.label, "hcloud-ccm/sharing-key");
    assert!(e.to_string().contains("carries the label hcloud-ccm/sharing-key=web"), "{e}");
}

#[test]
fn adoption_by_name_only_of_an_unlabelled_load_balancer_or_our_own() {
    let unlabelled = observed(json!({"name": "shop-lb", "labels": {"env": "prod"}}));
    assert_eq!(check_adoption(&unlabelled, UID), Ok(()), "the upgrade path from older official CCMs");
    assert_eq!(check_adoption(&observed(json!({"name": "shop-lb"})), UID), Ok(()));
    for owner in ["9a8b7c6d-0000-4e0b-9c1d-2e3f4a5b6c7d", ""] {
        let foreign = observed(json!({"name": "shop-lb", "labels": {"hcloud-ccm/service-uid": owner}}));
        let e = check_adoption(&foreign, UID).expect_err("someone else's");
        assert_eq!(
            e,
            OwnedElsewhere {
                name: "shop-lb".into(),
                id: hcloud_api::models::LoadBalancerId(4711),
                label: LABEL_SERVICE_UID,
                owner: owner.into()
            }
        );
        assert!(
            e.to_string().starts_with(&format!(
                "Load Balancer shop-lb (4711) carries the label hcloud-ccm/service-uid={owner}: it belongs to another \
                 Service"
            )),
            "{e}"
        );
        assert!(e.to_string().contains("annotation load-balancer.hetzner.cloud/name"), "{e}");
    }
}

/// A Service written for the official CCM (Service-wide annotations only, several ports) gets
/// exactly the create request it got before per-port annotations existed (the expected value
/// was recorded with the code before them).
#[test]
fn official_ccm_service_with_several_ports_is_unchanged_by_per_port_support() {
    let c = Case {
        ports: vec![(80, "TCP", 30080), (443, "TCP", 30443), (53, "UDP", 30053)],
        certs: vec![CertificateId(7)],
        ..Case::with(&[
            (a::LOCATION, "fsn1"),
            (a::PROTOCOL, "https"),
            (a::HTTP_CERTIFICATES, "7"),
            (a::USES_PROXYPROTOCOL, "true"),
            (a::HTTP_REDIRECT_HTTP, "true"),
            (a::HEALTH_CHECK_INTERVAL, "5s"),
            (a::HEALTH_CHECK_HTTP_PATH, "/ready"),
        ])
    };
    let spec = c.spec();
    assert_eq!(spec.status.ip_mode, cloud_provider::IpMode::Proxy);
    let (req, _) = c.create(&lb_type("lb11", 25)).expect("create");
    let service = |listen: u16, dest: u16| {
        json!({"protocol": "https", "listen_port": listen, "destination_port": dest, "proxyprotocol": true,
               "health_check": {"protocol": "http", "port": dest, "interval": 5, "timeout": 10, "retries": 3,
                                "http": {"path": "/ready", "status_codes": ["2??", "3??"], "tls": true}},
               "http": {"certificates": [7], "redirect_http": true, "sticky_sessions": false}})
    };
    assert_eq!(json_of(&req.services), json!([service(80, 30080), service(443, 30443)]));
}

#[path = "ownership_plan_tests.rs"]
mod ownership_plan_tests;
