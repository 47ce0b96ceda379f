//! Shared Load Balancers: the exact writes of joining, syncing and leaving, and every conflict.

use cloud_provider::events::EventObject;
use hcloud_api::models::{LbService, ServerId};
use serde_json::json;

use super::*;
use crate::load_balancers::annotations as a;
use crate::load_balancers::defaults::LbDefaults;
use crate::load_balancers::services::desired_services;
use crate::load_balancers::spec::tests::service;
use crate::load_balancers::targets::{ServerTarget, TargetRef};

const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const B: &str = "bbbbbbbb-0000-4000-8000-000000000002";
const CLUSTER: &str = "prod";

fn group() -> Group {
    Group { scope: "shop".into(), key: "web".into() }
}

/// Service `name` (UID `uid`) in namespace shop, sharing key `web`, with `ports` (port, NodePort).
fn member(name: &str, uid: &str, annotations: &[(&str, &str)], ports: &[(i32, i32)]) -> LbSpec {
    let mut all = vec![(a::SHARING_KEY, "web")];
    all.extend_from_slice(annotations);
    let ports: Vec<(i32, &str, i32)> = ports.iter().map(|(p, n)| (*p, "TCP", *n)).collect();
    let mut svc = service(&all, &ports);
    svc.metadata.name = Some(name.into());
    svc.metadata.uid = Some(uid.into());
    LbSpec::from_service(&svc, &LbDefaults::default(), None).expect("valid")
}

fn targets(ids: &[i64]) -> Vec<ServerTarget> {
    ids.iter()
        .map(|id| ServerTarget {
            target: TargetRef::Server(ServerId(*id)),
            node: format!("n{id}"),
            object: EventObject { kind: "Node", api_version: "v1", namespace: None, name: format!("n{id}"), uid: None },
        })
        .collect()
}

fn tcp(listen: u16, dest: u16) -> serde_json::Value {
    json!({"protocol": "tcp", "listen_port": listen, "destination_port": dest, "proxyprotocol": false,
           "health_check": {"protocol": "tcp", "port": dest, "interval": 15, "timeout": 10, "retries": 3}})
}

/// The group's Load Balancer with `labels` (on top of the group's), `services` and servers 1, 2.
fn shared(labels: serde_json::Value, services: serde_json::Value) -> LoadBalancer {
    let mut all = json!({
        "hcloud-ccm/sharing-cluster": CLUSTER, "hcloud-ccm/sharing-namespace": "shop",
        "hcloud-ccm/sharing-key": "web", "hcloud-ccm.sharing/targets": "",
    });
    let fingerprint = targets_fingerprint(&member("x", A, &[], &[]));
    all["hcloud-ccm.sharing/targets"] = json!(fingerprint);
    for (k, v) in labels.as_object().expect("labels") {
        all[k] = v.clone();
    }
    serde_json::from_value(json!({
        "id": 7, "name": "shop-web-00000000", "labels": all,
        "load_balancer_type": {"name": "lb11", "max_targets": 25, "max_services": 5},
        "location": {"name": "fsn1", "network_zone": "eu-central"},
        "algorithm": {"type": "round_robin"},
        "public_net": {"enabled": true, "ipv4": {"ip": "198.51.100.7"}, "ipv6": {"ip": "2001:db8::1"}},
        "private_net": [], "services": services,
        "targets": [{"type": "server", "server": {"id": 1}, "use_private_ip": false},
                    {"type": "server", "server": {"id": 2}, "use_private_ip": false}]
    }))
    .expect("load balancer")
}

/// A's Load Balancer: A owns port 80.
fn a_alone() -> LoadBalancer {
    shared(json!({format!("{MEMBER_PREFIX}{A}"): "web", format!("{PORT_PREFIX}80"): A}), json!([tcp(80, 30080)]))
}

fn plan(lb: &LoadBalancer, spec: &LbSpec) -> Result<Plan, Vec<Conflict>> {
    let services = desired_services(spec, &[]);
    let targets = targets(&[1, 2]);
    plan_shared(lb, &Desired { spec, services: &services, targets: &targets, lb_type: None }, &group(), CLUSTER)
}

/// The plan, then checks that planning again on its result sends nothing (a restart).
fn converge(lb: &LoadBalancer, spec: &LbSpec) -> (Vec<LbOp>, LoadBalancer) {
    let ops = plan(lb, spec).expect("no conflict").ops;
    let mut after = lb.clone();
    for op in &ops {
        apply(&mut after, op);
    }
    assert_eq!(plan(&after, spec).expect("no conflict").ops, vec![], "again after {ops:#?}");
    (ops, after)
}

fn labels_of(op: &LbOp) -> &Labels {
    match op {
        LbOp::Update(UpdateLoadBalancerRequest { labels: Some(l), .. }) => l,
        other => panic!("not a label write: {other:?}"),
    }
}

#[test]
fn a_key_is_shared_within_its_namespace_unless_the_operator_lists_it() {
    let none = SharingNamespaces::default();
    assert_eq!(Group::of("shop", "web", &none), Ok(Group { scope: "shop".into(), key: "web".into() }));
    let listed = SharingNamespaces::parse(" shop, edge ,").expect("valid");
    assert_eq!(Group::of("shop", "web", &listed).map(|g| g.scope), Ok(ACROSS_NAMESPACES.to_owned()));
    assert_eq!(Group::of("team-b", "web", &listed).map(|g| g.scope), Ok("team-b".to_owned()), "not listed");
    assert_eq!(
        Group::of("any", "web", &SharingNamespaces::parse("*").expect("all")).map(|g| g.scope),
        Ok(ACROSS_NAMESPACES.to_owned())
    );
    assert!(Group::of("shop", "web/x", &none).expect_err("slash").contains("accepted: 1 to 63"));
    assert!(Group::of("shop", &"k".repeat(64), &none).is_err());
    assert_eq!(SharingNamespaces::parse(""), Ok(SharingNamespaces::None));
    assert!(SharingNamespaces::parse("shop,Team_A").expect_err("bad").starts_with("Team_A is not a namespace name"));
}

#[test]
fn the_default_name_is_readable_unique_per_cluster_and_within_63_characters() {
    let g = group();
    assert_eq!(g.default_name(CLUSTER), g.default_name(CLUSTER), "stable");
    assert!(g.default_name(CLUSTER).starts_with("shop-web-"), "{}", g.default_name(CLUSTER));
    assert_ne!(g.default_name(CLUSTER), g.default_name("staging"));
    let across = Group { scope: ACROSS_NAMESPACES.into(), key: "web".into() };
    assert!(across.default_name(CLUSTER).starts_with("shared-web-"));
    let long = Group { scope: "n".repeat(63), key: "k".repeat(63) };
    assert_eq!(long.default_name(CLUSTER).len(), 63);
}

#[test]
fn a_new_shared_load_balancer_carries_the_group_and_its_creator_but_no_identity_label() {
    let spec = member("web", A, &[], &[(80, 30080), (443, 30443)]);
    let base: Labels = [(LABEL_SERVICE_UID.to_owned(), A.to_owned()), ("env".to_owned(), "prod".to_owned())].into();
    let labels = create_labels(&base, &spec, &group(), CLUSTER, &[80, 443]);
    let want: Labels = [
        ("env", "prod".to_owned()),
        ("hcloud-ccm.sharing/member-aaaaaaaa-0000-4000-8000-000000000001", "web".to_owned()),
        ("hcloud-ccm.sharing/port-443", A.to_owned()),
        ("hcloud-ccm.sharing/port-80", A.to_owned()),
        ("hcloud-ccm.sharing/targets", targets_fingerprint(&spec)),
        ("hcloud-ccm/sharing-cluster", CLUSTER.to_owned()),
        ("hcloud-ccm/sharing-key", "web".to_owned()),
        ("hcloud-ccm/sharing-namespace", "shop".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(labels, want);
}

#[test]
fn joining_with_one_port_costs_two_requests_and_a_restart_none() {
    let b = member("mail", B, &[], &[(25, 30025)]);
    let (ops, after) = converge(&a_alone(), &b);
    assert_eq!(ops.len(), 2, "{ops:#?}");
    let labels = labels_of(&ops[0]);
    assert_eq!(labels.get(&format!("{MEMBER_PREFIX}{B}")).map(String::as_str), Some("mail"));
    assert_eq!(labels.get(&format!("{PORT_PREFIX}25")).map(String::as_str), Some(B));
    assert_eq!(labels.get(&format!("{PORT_PREFIX}80")).map(String::as_str), Some(A), "A's port stays A's");
    assert!(matches!(&ops[1], LbOp::AddService(LbService { listen_port: 25, destination_port: 30025, .. })));
    // A's sync after B joined leaves B's service alone.
    let a = member("web", A, &[], &[(80, 30080)]);
    assert_eq!(plan(&after, &a).expect("no conflict").ops, vec![]);
}

#[test]
fn a_port_another_member_or_nobody_has_is_a_conflict_and_nothing_is_sent() {
    let b = member("mail", B, &[], &[(80, 30081), (25, 30025)]);
    let e = plan(&a_alone(), &b).expect_err("port 80 is A's");
    assert_eq!(e, vec![Conflict::Port { port: 80, owner: "Service web".into() }]);
    assert_eq!(e[0].reason(), "SharedLoadBalancerPortConflict");
    let mut foreign = a_alone();
    foreign.services.push(serde_json::from_value(tcp(25, 31000)).expect("service"));
    let e = plan(&foreign, &member("mail", B, &[], &[(25, 30025)])).expect_err("someone's 25");
    assert_eq!(e, vec![Conflict::Port { port: 25, owner: "a service hcloud-ccm did not add".into() }]);
}

#[test]
fn settings_that_disagree_name_the_setting_and_the_value_in_force() {
    let b = member("mail", B, &[(a::ALGORITHM_TYPE, "least_connections"), (a::LOCATION, "nbg1")], &[(25, 30025)]);
    let e = plan(&a_alone(), &b).expect_err("disagrees");
    let text: Vec<String> = e.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "load-balancer.hetzner.cloud/location is nbg1, but the shared Load Balancer has fsn1 (in force)",
            "load-balancer.hetzner.cloud/algorithm-type is least_connections, but the shared Load Balancer has \
             round_robin (in force)",
        ]
    );
    assert_eq!(e[0].reason(), "SharedLoadBalancerSettingConflict");
    let selecting = member("mail", B, &[(a::NODE_SELECTOR, "pool=edge")], &[(25, 30025)]);
    let e = plan(&a_alone(), &selecting).expect_err("other Nodes");
    assert!(e[0].to_string().starts_with("load-balancer.hetzner.cloud/node-selector and use-private-ip"), "{}", e[0]);
    assert!(e[0].to_string().contains("the selection of web"), "{}", e[0]);
    // Agreeing settings are no conflict.
    assert!(plan(&a_alone(), &member("mail", B, &[(a::LOCATION, "fsn1")], &[(25, 30025)])).is_ok());
}

#[test]
fn more_ports_than_the_type_holds_names_the_limit() {
    let lb = shared(
        json!({format!("{MEMBER_PREFIX}{A}"): "web", format!("{PORT_PREFIX}80"): A, format!("{PORT_PREFIX}81"): A,
               format!("{PORT_PREFIX}82"): A, format!("{PORT_PREFIX}83"): A}),
        json!([tcp(80, 30080), tcp(81, 30081), tcp(82, 30082), tcp(83, 30083)]),
    );
    let e = plan(&lb, &member("mail", B, &[], &[(25, 30025), (587, 30587)])).expect_err("6 > 5");
    assert_eq!(e, vec![Conflict::Full { lb_type: "lb11".into(), limit: 5, needed: 6 }]);
    assert!(e[0].to_string().contains("a lb11 holds 5"), "{}", e[0]);
}

#[test]
fn a_member_alone_may_change_the_settings_and_drops_the_ports_it_no_longer_has() {
    let lb = shared(
        json!({format!("{MEMBER_PREFIX}{A}"): "web", format!("{PORT_PREFIX}80"): A, format!("{PORT_PREFIX}8080"): A}),
        json!([tcp(80, 30080), tcp(8080, 38080)]),
    );
    let a = member("web", A, &[(a::ALGORITHM_TYPE, "least_connections")], &[(80, 30080)]);
    let (ops, after) = converge(&lb, &a);
    assert_eq!(
        ops[..2],
        [LbOp::ChangeAlgorithm(hcloud_api::models::Algorithm::LeastConnections), LbOp::DeleteService(8080)]
    );
    assert!(!labels_of(&ops[2]).contains_key(&format!("{PORT_PREFIX}8080")), "its label goes after the service");
    assert_eq!(ops.len(), 3);
    assert!(!after.labels.contains_key(&format!("{PORT_PREFIX}8080")));
}

#[test]
fn a_services_own_load_balancer_becomes_the_groups_in_one_label_write() {
    let mut own = a_alone();
    own.labels = [(LABEL_SERVICE_UID.to_owned(), A.to_owned())].into();
    let a = member("web", A, &[], &[(80, 30080)]);
    let (ops, after) = converge(&own, &a);
    assert_eq!(ops.len(), 1, "{ops:#?}");
    assert!(!after.labels.contains_key(LABEL_SERVICE_UID));
    assert!(group().owns(&after, CLUSTER) && is_member(&after, A));
    assert_eq!(after.labels.get(&format!("{PORT_PREFIX}80")).map(String::as_str), Some(A));
    assert_eq!(group_of(&after, CLUSTER), Some(group()));
    assert_eq!(group_of(&after, "staging"), None, "another cluster's");
}

#[test]
fn leaving_removes_only_the_members_parts_and_the_last_one_deletes() {
    let b = member("mail", B, &[], &[(25, 30025)]);
    let (_, both) = converge(&a_alone(), &b);
    let Leave::Ops(ops) = plan_leave(&both, B, After::Nothing, false) else { panic!("A stays") };
    assert_eq!(ops[0], LbOp::DeleteService(25));
    let labels = labels_of(&ops[1]);
    assert!(!labels.contains_key(&format!("{MEMBER_PREFIX}{B}")) && !labels.contains_key(&format!("{PORT_PREFIX}25")));
    assert_eq!(labels, &a_alone().labels, "as before B joined");
    assert_eq!(ops.len(), 2, "targets stay: A needs them");
    assert_eq!(plan_leave(&a_alone(), A, After::Nothing, false), Leave::Delete);
}

#[test]
fn the_last_member_keeps_the_address_when_it_stays_a_load_balancer_service() {
    let Leave::Ops(ops) = plan_leave(&a_alone(), A, After::OwnLoadBalancer, false) else { panic!("kept") };
    let labels = labels_of(&ops[0]);
    let want: Labels = [(LABEL_SERVICE_UID.to_owned(), A.to_owned())].into();
    assert_eq!(labels, &want, "only its identity label: an own Load Balancer again");
    assert_eq!(ops.len(), 1);
}

#[test]
fn with_keep_foreign_the_last_member_leaves_parts_hcloud_ccm_did_not_add() {
    let mut lb = a_alone();
    lb.services.push(serde_json::from_value(tcp(25, 31000)).expect("service"));
    assert_eq!(plan_leave(&lb, A, After::Nothing, false), Leave::Delete, "without keep-foreign");
    let Leave::Ops(ops) = plan_leave(&lb, A, After::Nothing, true) else { panic!("kept") };
    assert_eq!(ops[0], LbOp::DeleteService(80));
    assert!(labels_of(&ops[1]).is_empty(), "nobody's now: {:?}", labels_of(&ops[1]));
}
