//! Ports of upstream's `controllers/service/controller_test.go` that need no API server
//! (predicates, `needsUpdate`, `needsCleanup`, the Service cache), and the class selector.

use std::sync::Arc;

use cloud_provider::well_known::{
    FINALIZER_LOAD_BALANCER_CLEANUP as FINALIZER, LABEL_EXCLUDE_FROM_EXTERNAL_LB as EXCLUDE,
    TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER as TO_BE_DELETED,
};
use k8s_openapi::api::core::v1::{Node, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::runtime::reflector::ObjectRef;
use pretty_assertions::assert_eq;

use super::cache::{CachedService, ServiceCache};
use super::filter::{needs_cleanup, needs_update, wants_load_balancer};
use super::fixtures::*;
use super::nodes::{
    ALL_NODE_PREDICATES, NodePredicate, changed_label_keys, filter_with_predicates, list_with_predicates,
    loggable_node_names, nodes_equal_for_label_keys, nodes_sufficiently_equal, respects_predicates,
    should_sync_updated_node,
};
use super::plan::{Operation, operation};

// ---------------------------------------------------------------------------------------------
// TestNeedsCleanup

/// Go `TestNeedsCleanup`.
#[test]
fn test_needs_cleanup() {
    let with = |finalizer: bool, deleting: bool, type_: Option<&str>| {
        let mut s = Service::default();
        if finalizer {
            s.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        }
        if deleting {
            tweak_add_deletion_timestamp()(&mut s);
        }
        if let Some(t) = type_ {
            s.spec.get_or_insert_with(Default::default).type_ = Some(t.to_owned());
        }
        s
    };
    let cases = [
        ("service without finalizer", with(false, false, None), false),
        ("service with finalizer without timestamp without LB", with(true, false, Some("NodePort")), true),
        ("service with finalizer without timestamp with LB", with(true, false, Some("LoadBalancer")), false),
        ("service with finalizer with timestamp", with(true, true, None), true),
    ];
    for (desc, svc, want) in cases {
        assert_eq!(needs_cleanup(&svc), want, "{desc}");
    }
}

// ---------------------------------------------------------------------------------------------
// TestNeedsUpdate

fn ports(ports: &[i32]) -> Vec<ServicePort> {
    ports.iter().map(|p| ServicePort { port: *p, ..Default::default() }).collect()
}

/// Go `TestNeedsUpdate`.
#[test]
fn test_needs_update() {
    type Pair = (Service, Service);
    let set = |f: &dyn Fn(&mut Service, &mut Service)| -> Pair {
        let (mut old, mut new) = (default_external_service(), default_external_service());
        f(&mut old, &mut new);
        (old, new)
    };
    let cases: Vec<(&str, Pair, bool)> = vec![
        (
            "If the service type is changed from LoadBalancer to ClusterIP",
            set(&|_, n| n.spec.as_mut().expect("spec").type_ = Some("ClusterIP".into())),
            true,
        ),
        (
            "If the Ports are different",
            set(&|o, n| {
                o.spec.as_mut().expect("spec").ports = Some(ports(&[8000, 9000, 10000]));
                n.spec.as_mut().expect("spec").ports = Some(ports(&[8001, 9001, 10001]));
            }),
            true,
        ),
        (
            "If external ip counts are different",
            set(&|o, n| {
                o.spec.as_mut().expect("spec").external_ips = Some(vec!["old.IP.1".into()]);
                n.spec.as_mut().expect("spec").external_ips = Some(vec!["new.IP.1".into(), "new.IP.2".into()]);
            }),
            true,
        ),
        (
            "If external ips are different",
            set(&|o, n| {
                o.spec.as_mut().expect("spec").external_ips = Some(vec!["old.IP.1".into(), "old.IP.2".into()]);
                n.spec.as_mut().expect("spec").external_ips = Some(vec!["new.IP.1".into(), "new.IP.2".into()]);
            }),
            true,
        ),
        (
            "If UID is different",
            set(&|o, n| {
                o.metadata.uid = Some("UID old".into());
                n.metadata.uid = Some("UID new".into());
            }),
            true,
        ),
        (
            "If ExternalTrafficPolicy is different",
            set(&|_, n| n.spec.as_mut().expect("spec").external_traffic_policy = Some("Local".into())),
            true,
        ),
        (
            "If HealthCheckNodePort is different",
            set(&|_, n| n.spec.as_mut().expect("spec").health_check_node_port = Some(30123)),
            true,
        ),
        (
            "If TargetGroup is different 1",
            {
                let old = new_service("tcp-service", "LoadBalancer", vec![tweak_add_ports("TCP", 20)]);
                let new = copy_service(&old, vec![tweak_add_ports("TCP", 21)]);
                (old, new)
            },
            true,
        ),
        (
            "If TargetGroup is different 2",
            {
                let old = new_service("tcp-service", "LoadBalancer", vec![tweak_add_ports("TCP", 22)]);
                let mut new = old.clone();
                new.spec.as_mut().expect("spec").ports.as_mut().expect("ports")[0].target_port =
                    Some(IntOrString::String("dns".into()));
                (old, new)
            },
            true,
        ),
        (
            "If appProtocol is the same",
            {
                let old = new_service("tcp-service", "LoadBalancer", vec![]);
                let new = copy_service(&old, vec![]);
                (old, new)
            },
            false,
        ),
        (
            "If service IPFamilies from single stack to dual stack",
            {
                let old = new_service("tcp-service", "LoadBalancer", vec![tweak_set_ip_families(&["IPv4"])]);
                let new = copy_service(&old, vec![tweak_set_ip_families(&["IPv4", "IPv6"])]);
                (old, new)
            },
            true,
        ),
        (
            "If service IPFamilies from dual stack to single stack",
            {
                let old = new_service("tcp-service", "LoadBalancer", vec![tweak_set_ip_families(&["IPv4", "IPv6"])]);
                let new = copy_service(&old, vec![tweak_set_ip_families(&["IPv4"])]);
                (old, new)
            },
            true,
        ),
        (
            "If service IPFamilies not change",
            {
                let old = new_service("tcp-service", "LoadBalancer", vec![tweak_set_ip_families(&["IPv4"])]);
                let new = copy_service(&old, vec![]);
                (old, new)
            },
            false,
        ),
        (
            "If appProtocol is set when previously unset",
            {
                let old = new_service("tcp-service", "LoadBalancer", vec![]);
                let new = copy_service(&old, vec![tweak_add_app_protocol("http")]);
                (old, new)
            },
            true,
        ),
        (
            "If appProtocol is set to a different value",
            {
                let old = new_service("tcp-service", "LoadBalancer", vec![tweak_add_app_protocol("http")]);
                let new = copy_service(&old, vec![tweak_add_app_protocol("tcp")]);
                (old, new)
            },
            true,
        ),
    ];
    for (name, (old, new), want) in cases {
        assert_eq!(needs_update(&old, &new, None), want, "{name}: needsUpdate() should have returned {want}");
    }
}

/// The remaining `needsUpdate` triggers and non-triggers, one at a time.
#[test]
fn needs_update_covers_exactly_upstreams_fields() {
    let base = default_external_service();
    let changed = |f: &dyn Fn(&mut Service)| {
        let mut n = base.clone();
        f(&mut n);
        needs_update(&base, &n, None)
    };
    fn spec(s: &mut Service) -> &mut k8s_openapi::api::core::v1::ServiceSpec {
        s.spec.as_mut().expect("spec")
    }
    assert!(changed(&|s| spec(s).load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()])));
    assert!(changed(&|s| spec(s).session_affinity = Some("ClientIP".into())));
    assert!(changed(&|s| spec(s).session_affinity_config = Some(Default::default())));
    assert!(changed(&|s| spec(s).load_balancer_ip = Some("1.2.3.4".into())));
    assert!(changed(&|s| s.metadata.annotations = Some([("a".into(), "b".into())].into())));
    assert!(changed(&|s| spec(s).ports.as_mut().expect("ports")[0].name = Some("http".into())));
    assert!(changed(&|s| spec(s).ports.as_mut().expect("ports")[0].node_port = Some(30080)));
    assert!(changed(&|s| spec(s).ports.as_mut().expect("ports")[0].protocol = Some("UDP".into())));
    // Not compared upstream.
    assert!(!changed(&|s| s.metadata.labels = Some([("a".into(), "b".into())].into())));
    assert!(!changed(&|s| s.metadata.finalizers = Some(vec![FINALIZER.into()])));
    assert!(!changed(&|s| spec(s).ip_family_policy = Some("PreferDualStack".into())));
    assert!(!changed(&|s| spec(s).cluster_ips = Some(vec!["10.0.0.1".into()])));
    assert!(!changed(&|s| spec(s).allocate_load_balancer_node_ports = Some(false)));
    assert!(!changed(&|s| spec(s).internal_traffic_policy = Some("Local".into())));
    assert!(!changed(&|s| tweak_add_lb_ingress("8.8.8.8")(s)));
    // Go's zero values: an absent node port or target port is 0.
    assert!(!changed(&|s| spec(s).ports.as_mut().expect("ports")[0].node_port = Some(0)));
    assert!(!changed(&|s| spec(s).ports.as_mut().expect("ports")[0].target_port = Some(IntOrString::Int(0))));
    // Neither wants a load balancer: nothing matters.
    let (a, mut b) = (new_service("s", "ClusterIP", vec![]), new_service("s", "ClusterIP", vec![]));
    b.metadata.annotations = Some([("a".into(), "b".into())].into());
    assert!(!needs_update(&a, &b, None));
}

// ---------------------------------------------------------------------------------------------
// The class selector (an opt-in beyond upstream).

#[test]
fn the_class_selector_picks_exactly_one_class_instead_of_the_classless_services() {
    let classless = default_external_service();
    let ours = new_service("s", "LoadBalancer", vec![tweak_add_lb_class("example.com/cloud-lb")]);
    let other = new_service("s", "LoadBalancer", vec![tweak_add_lb_class("metallb.io/metallb")]);
    let cluster_ip = new_service("s", "ClusterIP", vec![]);
    // Upstream's default: only class-less LoadBalancer Services.
    assert!(wants_load_balancer(&classless, None));
    assert!(!wants_load_balancer(&ours, None) && !wants_load_balancer(&other, None));
    // With a class: exactly that class, and no longer the class-less ones.
    let class = Some("example.com/cloud-lb");
    assert!(wants_load_balancer(&ours, class));
    assert!(!wants_load_balancer(&classless, class) && !wants_load_balancer(&other, class));
    assert!(!wants_load_balancer(&cluster_ip, class));
    // What derives from it follows the selector.
    assert_eq!(operation(&ours, class), Operation::Ensure);
    assert_eq!(operation(&classless, class), Operation::Delete);
    assert!(!needs_update(&other, &copy_service(&other, vec![tweak_add_etp("Local")]), class), "not ours");
    assert!(needs_update(&ours, &copy_service(&ours, vec![tweak_add_etp("Local")]), class));
    // A type change away from LoadBalancer is a cleanup whatever the class.
    let mut gone = copy_service(&ours, vec![tweak_add_finalizers(&[FINALIZER])]);
    gone.spec.as_mut().expect("spec").type_ = Some("ClusterIP".into());
    assert!(needs_cleanup(&gone));
    assert_eq!(operation(&gone, class), Operation::Delete);
}

// ---------------------------------------------------------------------------------------------
// TestServiceCache

/// Go `TestServiceCache` (the cases run in order on one cache).
#[test]
fn test_service_cache() {
    let sc = ServiceCache::default();
    let (add_test, add_test1) = (ObjectRef::new("addTest"), ObjectRef::new("addTest1"));
    let svc = || CachedService { state: Some(Arc::new(default_external_service())) };
    // "Add"
    sc.get_or_create(&add_test);
    sc.set(&add_test, svc());
    assert_eq!(sc.len(), 1, "Add");
    // "Del"
    sc.delete(&add_test);
    assert_eq!(sc.len(), 0, "Del");
    // "Set and Get"
    sc.set(&add_test, svc());
    let got = sc.get(&add_test).expect("Set and Get: is Available");
    assert!(got.state.is_some(), "Set and Get: cachedService expected non-nil");
    // "ListKeys"
    sc.set(&add_test1, svc());
    assert_eq!(sc.list_keys().len(), 2, "ListKeys");
    // "GetbyKeys"
    assert!(sc.get_by_key(&add_test).is_some_and(|c| c.state.is_some()), "GetbyKeys");
    // "allServices"
    assert_eq!(sc.all_services().len(), 2, "allServices");
}

// ---------------------------------------------------------------------------------------------
// Node predicates

/// Go `Test_respectsPredicates` (against `allNodePredicates`, readiness included).
#[test]
fn test_respects_predicates() {
    let ready = |n: Node| n.set_condition("Ready", "True");
    let bare = Node::default;
    let with_pid = |n: Node| n.provider_id(PROVIDER_ID);
    let with_labels = |mut n: Node| {
        n.metadata.labels = Some(Default::default());
        n
    };
    let mut tainted = ready(bare());
    tainted.spec.get_or_insert_with(Default::default).taints = Some(vec![k8s_openapi::api::core::v1::Taint {
        key: TO_BE_DELETED.into(),
        value: Some(format!("{}", k8s_openapi::jiff::Timestamp::now().as_second())),
        effect: "NoSchedule".into(),
        time_added: None,
    }]);
    let cases: Vec<(bool, Node)> = vec![
        (false, bare()),
        (true, ready(with_pid(bare()))),
        (true, ready(bare())),
        (false, bare().set_condition("Ready", "False")),
        (true, with_labels(ready(with_pid(bare())))),
        (false, ready(bare()).set_label(EXCLUDE, "")),
        (true, ready(bare()).set_label(EXCLUDE, "false")),
        (false, ready(bare()).set_label(EXCLUDE, "true")),
        (false, ready(bare()).set_label(EXCLUDE, "foo")),
        (false, tainted),
    ];
    for (i, (want, node)) in cases.into_iter().enumerate() {
        assert_eq!(respects_predicates(&node, &ALL_NODE_PREDICATES), want, "case {i}: {node:?}");
    }
}

/// Go `TestListWithPredicate` (node phases; the lister returns the five nodes).
#[test]
fn test_list_with_predicate() {
    let nodes: Vec<Arc<Node>> = (0..5)
        .map(|i| {
            let mut n = Node::default();
            n.metadata.name = Some(format!("node-{i}"));
            n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
                phase: Some(if i % 2 == 0 { "Pending" } else { "Running" }.into()),
                ..Default::default()
            });
            Arc::new(n)
        })
        .collect();
    let lister = FakeNodeLister::new(None, &nodes);
    let running: NodePredicate = |n| n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let pending: NodePredicate = |n| n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
    let terminated: NodePredicate = |n| n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminated");
    let cases: [(&str, NodePredicate, Vec<Arc<Node>>); 3] = [
        ("ListWithPredicate filter Running node", running, vec![nodes[1].clone(), nodes[3].clone()]),
        ("ListWithPredicate filter Pending node", pending, vec![nodes[0].clone(), nodes[2].clone(), nodes[4].clone()]),
        ("ListWithPredicate filter Terminated node", terminated, vec![]),
    ];
    for (name, predicate, expect) in cases {
        let mut got = list_with_predicates(lister.as_ref(), &[predicate]).expect(name);
        got.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        assert_eq!(got, expect, "{name}");
    }
}

/// Go `Test_shouldSyncUpdatedNode_individualPredicates`.
#[test]
fn test_should_sync_updated_node_individual_predicates() {
    let n = make_node;
    let cases: Vec<(&str, Node, Node, bool)> = vec![
        ("nothing changed", n(), n(), false),
        ("excluded F->T", n(), n().set_label(EXCLUDE, ""), true),
        ("excluded changed T->F", n().set_label(EXCLUDE, ""), n(), true),
        ("excluded changed T->T", n().set_label(EXCLUDE, ""), n().set_label(EXCLUDE, ""), false),
        ("other taint F->T", n(), n().add_taint("other"), false),
        ("other taint T->F", n().add_taint("other"), n(), false),
        ("other label changed F->T", n(), n().set_label("other", ""), false),
        ("other label changed T->F", n().set_label("other", ""), n(), false),
        ("readiness changed F->F", n().set_ready(false), n().set_ready(false), false),
        ("readiness changed F->unset", n().set_ready(false), n().unset_condition("Ready"), false),
        ("readiness changed unset->F", n().unset_condition("Ready"), n().set_ready(false), false),
        ("readiness changed unset->unset", n().unset_condition("Ready"), n().unset_condition("Ready"), false),
        (
            "ready F, other condition changed F->T",
            n().set_ready(false).set_condition("DiskPressure", "False"),
            n().set_ready(false).set_condition("DiskPressure", "True"),
            false,
        ),
        (
            "ready F, other condition changed T->F",
            n().set_ready(false).set_condition("DiskPressure", "True"),
            n().set_ready(false).set_condition("DiskPressure", "False"),
            false,
        ),
        (
            "ready T, other condition changed F->T",
            n().set_condition("Other", "False"),
            n().set_condition("Other", "True"),
            false,
        ),
        (
            "ready T, other condition changed T->F",
            n().set_condition("Other", "True"),
            n().set_condition("Other", "False"),
            false,
        ),
        ("deletionTimestamp F -> T", n(), n().deleted(), false),
        ("providerID set F -> T", n().provider_id(""), n(), true),
        // Upstream lists this case twice, identically.
        ("providerID set F -> T", n().provider_id(""), n(), true),
        ("providerID set T-> F", n(), n().provider_id(""), true),
        ("providerID change", n(), n().provider_id(&format!("{PROVIDER_ID}-2")), true),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(should_sync_updated_node(&old, &new), want, "{name}");
    }
}

/// Go `Test_shouldSyncUpdatedNode_compoundedPredicates`.
#[test]
fn test_should_sync_updated_node_compounded_predicates() {
    let n = make_node;
    let t = || make_node().add_taint(TO_BE_DELETED);
    let x = || make_node().set_label(EXCLUDE, "");
    let p2 = format!("{PROVIDER_ID}-2");
    let cases: Vec<(&str, Node, Node, bool)> = vec![
        ("tainted T, excluded F->T", t(), t().set_label(EXCLUDE, ""), true),
        ("tainted T, excluded T->F", t().set_label(EXCLUDE, ""), t(), true),
        ("tainted T, providerID set F->T", t().provider_id(""), t(), true),
        ("tainted T, providerID set T->F", t(), t().provider_id(""), true),
        ("tainted T, providerID change", t(), t().provider_id(&p2), true),
        ("tainted T, ready F->T", t().set_ready(false), t(), false),
        ("tainted T, ready T->F", t(), t().set_ready(false), false),
        ("excluded T, tainted F->T", x(), x().add_taint(TO_BE_DELETED), false),
        ("excluded T, tainted T->F", x().add_taint(TO_BE_DELETED), x(), false),
        ("excluded T, ready F->T", x().set_ready(false), x(), false),
        ("excluded T, ready T->F", x(), x().set_ready(false), false),
        ("excluded T, providerID set F->T", x().provider_id(""), x(), true),
        ("excluded T, providerID set T->F", x(), x().provider_id(""), true),
        ("excluded T, providerID change", x(), x().provider_id(&p2), true),
        ("ready F, tainted F->T", n().set_ready(false), n().set_ready(false).add_taint(TO_BE_DELETED), false),
        ("ready F, tainted T->F", n().set_ready(false).add_taint(TO_BE_DELETED), n().set_ready(false), false),
        ("ready F, excluded F->T", n().set_ready(false), n().set_ready(false).set_label(EXCLUDE, ""), true),
        ("ready F, excluded T->F", n().set_ready(false).set_label(EXCLUDE, ""), n().set_ready(false), true),
        ("ready F, providerID set F->T", n().set_ready(false).provider_id(""), n().set_ready(false), true),
        ("ready F, providerID set T->F", n().set_ready(false), n().set_ready(false).provider_id(""), true),
        ("ready F, providerID change", n().set_ready(false), n().set_ready(false).provider_id(&p2), true),
        ("providerID unset, excluded F->T", n().provider_id(""), n().provider_id("").set_label(EXCLUDE, ""), true),
        ("providerID unset, excluded T->F", n().provider_id("").set_label(EXCLUDE, ""), n().provider_id(""), true),
        ("providerID unset, ready T->F", n().provider_id(""), n().provider_id("").set_ready(true), false),
        ("providerID unset, ready F->T", n().provider_id(""), n().provider_id("").set_ready(false), false),
        ("providerID unset, tainted T->F", n().provider_id("").add_taint(TO_BE_DELETED), n().provider_id(""), false),
        ("providerID unset, tainted F->T", n().provider_id(""), n().provider_id("").add_taint(TO_BE_DELETED), false),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(should_sync_updated_node(&old, &new), want, "{name}");
    }
}

/// The exclusion label is read like Go's `strconv.ParseBool`: only its "false" spellings
/// keep a node; anything unparsable excludes it, like `true`.
#[test]
fn the_exclusion_label_is_parsed_like_go_parse_bool() {
    for v in ["0", "f", "F", "FALSE", "false", "False"] {
        assert!(
            respects_predicates(&make_node().set_label(EXCLUDE, v), &super::nodes::STABLE_NODE_SET_PREDICATES),
            "{v}"
        );
    }
    for v in ["1", "t", "T", "TRUE", "true", "True", "", "yes", "no", "off", " false"] {
        assert!(
            !respects_predicates(&make_node().set_label(EXCLUDE, v), &super::nodes::STABLE_NODE_SET_PREDICATES),
            "{v:?}"
        );
    }
    // Readiness and other taints do not matter to the stable set; deletion does.
    let stable = &super::nodes::STABLE_NODE_SET_PREDICATES;
    assert!(respects_predicates(&make_node().set_ready(false), stable));
    assert!(respects_predicates(&make_node().add_taint("node.kubernetes.io/unschedulable"), stable));
    assert!(!respects_predicates(&make_node().deleted(), stable));
    assert!(!respects_predicates(&make_node().add_taint(TO_BE_DELETED), stable));
}

#[test]
fn node_sets_are_equal_by_name_and_provider_id_only() {
    let a = named_node("a");
    let b = named_node("b");
    let b_not_ready = Arc::new(make_node().name("b").set_ready(false));
    let b_other_pid = Arc::new(make_node().name("b").provider_id("other"));
    assert!(nodes_sufficiently_equal(&[a.clone(), b.clone()], &[b.clone(), a.clone()]), "order does not matter");
    assert!(nodes_sufficiently_equal(&[a.clone(), b.clone()], &[a.clone(), b_not_ready]));
    assert!(!nodes_sufficiently_equal(&[a.clone(), b.clone()], &[a.clone(), b_other_pid]));
    assert!(!nodes_sufficiently_equal(&[a.clone(), b.clone()], std::slice::from_ref(&a)));
    assert!(!nodes_sufficiently_equal(std::slice::from_ref(&a), std::slice::from_ref(&b)));
    assert!(nodes_sufficiently_equal(&[], &[]));
    // Upstream filters the remembered set with today's predicates before comparing.
    let excluded_now = Arc::new(make_node().name("a").set_label(EXCLUDE, "true"));
    let stable = &super::nodes::STABLE_NODE_SET_PREDICATES;
    assert_eq!(filter_with_predicates(&[excluded_now, b.clone()], stable), vec![b]);
}

#[test]
fn node_sets_also_compare_the_label_values_the_provider_reads() {
    let a = named_node("a");
    let b_edge = Arc::new(make_node().name("b").set_label("role", "edge").set_label("team", "x"));
    let b_worker = Arc::new(make_node().name("b").set_label("role", "worker").set_label("team", "x"));
    let b_team = Arc::new(make_node().name("b").set_label("role", "edge").set_label("team", "y"));
    let b_bare = Arc::new(make_node().name("b"));
    let role = ["role".to_owned()];
    let (edge, worker) = ([a.clone(), b_edge.clone()], [a.clone(), b_worker]);
    assert!(!nodes_equal_for_label_keys(&edge, &worker, &role), "value changed");
    assert!(!nodes_equal_for_label_keys(&edge, &[a.clone(), b_bare.clone()], &role), "label removed");
    assert!(nodes_equal_for_label_keys(&edge, &[a.clone(), b_team.clone()], &role), "unread label");
    assert!(nodes_equal_for_label_keys(&edge, &[a.clone(), b_bare], &[]), "no keys: upstream's comparison");
    assert!(nodes_sufficiently_equal(&edge, &worker));
}

#[test]
fn changed_label_keys_are_those_added_removed_or_changed() {
    let old = make_node().set_label("keep", "1").set_label("change", "a").set_label("drop", "x");
    let new = make_node().set_label("keep", "1").set_label("change", "b").set_label("add", "y");
    let keys: Vec<String> = changed_label_keys(&old, &new).into_iter().collect();
    assert_eq!(keys, ["add", "change", "drop"]);
    assert!(changed_label_keys(&old, &old).is_empty());
}

#[test]
fn loggable_node_names_are_sorted_and_limited_to_twenty() {
    let few = vec![named_node("b"), named_node("a")];
    assert_eq!(loggable_node_names(&few), vec!["a", "b"]);
    let many: Vec<Arc<Node>> = (0..25).rev().map(|i| named_node(&format!("n{i:02}"))).collect();
    let names = loggable_node_names(&many);
    assert_eq!(names.len(), 21);
    assert_eq!(names[0], "n05", "the first 20 in lister order (n24..n05), sorted");
    assert_eq!(names[19], "n24");
    assert_eq!(names[20], "<5 more>");
}
