//! keep-foreign (issue 20 item 2): only targets and services recorded as ours are removed; the
//! record is written before additions and pruned after removals; exact plans. Also the identity
//! label an adopted Load Balancer gets.

use hcloud_api::models::{Labels, ServerId, TargetSpec};
use serde_json::json;

use super::super::*;
use super::{Case, UID, observed, server_target, tcp_service};

const KEEP: (&str, &str) = (a::KEEP_FOREIGN, "true");

fn labels(record: &[&str]) -> Labels {
    let mut l: Labels = [("hcloud-ccm/service-uid".to_owned(), UID.to_owned())].into();
    for r in record {
        l.insert(format!("hcloud-ccm.managed/{r}"), "true".to_owned());
    }
    l
}

fn put(record: &[&str]) -> LbOp {
    LbOp::Update(UpdateLoadBalancerRequest { name: None, labels: Some(labels(record)) })
}

fn server(id: i64) -> TargetSpec {
    TargetSpec::Server { id: ServerId(id), use_private_ip: false }
}

/// A Load Balancer with our port 80 and server 1, a foreign service on 8080, a foreign server
/// 99 and a foreign IP target, recorded as `record`.
fn with_foreign(record: &[&str]) -> LoadBalancer {
    observed(json!({
        "labels": labels(record),
        "services": [tcp_service(80, 30080), tcp_service(8080, 31000)],
        "targets": [server_target(1, false), server_target(99, false), {"type": "ip", "ip": {"ip": "203.0.113.9"}}]
    }))
}

#[test]
fn without_the_option_everything_undescribed_goes_and_nothing_is_recorded() {
    let c = Case { nodes: vec![(1, "n1")], ..Default::default() };
    assert_eq!(
        c.converge(&with_foreign(&[])),
        vec![
            LbOp::DeleteService(8080),
            LbOp::RemoveTarget(server(99)),
            LbOp::RemoveTarget(TargetSpec::Ip("203.0.113.9".parse().expect("ip"))),
        ]
    );
}

#[test]
fn turned_on_the_record_is_written_once_and_foreign_ones_stay() {
    let c = Case { annotations: vec![KEEP], nodes: vec![(1, "n1")], ..Default::default() };
    assert_eq!(c.converge(&with_foreign(&[])), vec![put(&["port-80", "server-1"])], "one PUT, nothing removed");
    assert_eq!(c.converge(&with_foreign(&["port-80", "server-1"])), vec![], "recorded: nothing at all");
}

#[test]
fn ours_are_removed_exactly_and_the_record_pruned_after_the_removal() {
    let lb = observed(json!({
        "labels": labels(&["port-443", "port-80", "server-1", "server-2"]),
        "services": [tcp_service(80, 30080), tcp_service(443, 30443), tcp_service(8080, 31000)],
        "targets": [server_target(1, false), server_target(2, false), server_target(99, false)]
    }));
    let c = Case { annotations: vec![KEEP], nodes: vec![(1, "n1")], ..Default::default() };
    assert_eq!(
        c.converge(&lb),
        vec![LbOp::DeleteService(443), LbOp::RemoveTarget(server(2)), put(&["port-80", "server-1"])],
        "our 443 and server 2 go, then the record drops them; 8080 and 99 stay"
    );
}

#[test]
fn a_new_target_is_recorded_before_it_is_added() {
    let c = Case { annotations: vec![KEEP], nodes: vec![(1, "n1"), (3, "n3")], ..Default::default() };
    assert_eq!(
        c.converge(&with_foreign(&["port-80", "server-1"])),
        vec![put(&["port-80", "server-1", "server-3"]), LbOp::AddTarget { target: server(3), node: "n3".into() }]
    );
}

#[test]
fn a_target_over_the_limit_is_not_recorded() {
    let lb = with_foreign(&["port-80", "server-1"]);
    let c = Case { annotations: vec![KEEP], nodes: vec![(1, "n1"), (3, "n3")], lb_type: None, ..Default::default() };
    let mut full = lb.clone();
    full.load_balancer_type.max_targets = 3;
    let plan = c.plan(&full);
    assert_eq!(plan.ops, vec![], "no room for server 3: no record entry, no request");
    assert_eq!(plan.max_targets_reached.len(), 1);
}

#[test]
fn turned_off_the_record_is_dropped_after_the_removals() {
    let c = Case { nodes: vec![(1, "n1")], ..Default::default() };
    assert_eq!(
        c.converge(&with_foreign(&["port-80", "server-1"])),
        vec![
            LbOp::DeleteService(8080),
            LbOp::RemoveTarget(server(99)),
            LbOp::RemoveTarget(TargetSpec::Ip("203.0.113.9".parse().expect("ip"))),
            put(&[]),
        ]
    );
}

#[test]
fn a_created_load_balancer_carries_its_record() {
    let c = Case {
        annotations: vec![KEEP, (a::LOCATION, "fsn1")],
        nodes: vec![(1, "n1"), (2, "n2")],
        ..Default::default()
    };
    let (req, _) = c.create(&super::lb_type("lb11", 25)).expect("create");
    assert_eq!(req.labels, labels(&["port-80", "server-1", "server-2"]));
    let plain = Case { annotations: vec![(a::LOCATION, "fsn1")], ..Default::default() };
    assert_eq!(plain.create(&super::lb_type("lb11", 25)).expect("create").0.labels, labels(&[]));
}

#[test]
fn a_bad_value_names_the_annotation_and_what_is_accepted() {
    let svc = crate::load_balancers::spec::tests::service(&[(a::KEEP_FOREIGN, "maybe")], &[(80, "TCP", 30080)]);
    let err =
        LbSpec::from_service(&svc, &crate::load_balancers::defaults::LbDefaults::default(), None).expect_err("invalid");
    let problems: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        problems,
        ["annotation load-balancer.hetzner.cloud/keep-foreign: \"maybe\" is invalid; accepted: true, false, 1, 0, t, \
          f (Go ParseBool)"]
    );
}

/// Issue 27 item 3: adoption is decided on the Load Balancer as read just now; the adoption's
/// `PUT` carries the labels of that read plus the identity label.
#[test]
fn adoption_is_decided_on_the_fresh_read_and_writes_its_labels() {
    use std::sync::Arc;

    let name = "shop-lb";
    let fresh = |labels: serde_json::Value| Some(Arc::new(observed(json!({"name": name, "labels": labels}))));
    let adopted = decide_adoption(fresh(json!({"team": "payments"})), name, UID).expect("adoptable").expect("found");
    let c = Case { annotations: vec![(a::NAME, name)], ..Default::default() };
    let mut want: Labels = [("team".to_owned(), "payments".to_owned())].into();
    want.insert("hcloud-ccm/service-uid".to_owned(), UID.to_owned());
    assert_eq!(
        c.plan(&adopted).ops.first(),
        Some(&LbOp::Update(UpdateLoadBalancerRequest { name: None, labels: Some(want) })),
        "the label set after the list was read is kept"
    );

    let e = decide_adoption(fresh(json!({"hcloud-ccm/service-uid": "other-cluster"})), name, UID)
        .expect_err("labelled for someone else meanwhile");
    assert_eq!(e.owner, "other-cluster");
    assert_eq!(decide_adoption(None, name, UID), Ok(None), "gone meanwhile: nothing to adopt");
    let renamed = Some(Arc::new(observed(json!({"name": "renamed", "labels": {}}))));
    assert_eq!(decide_adoption(renamed, name, UID), Ok(None), "renamed meanwhile: not the one named like ours");
}

/// Issue 27 item 8: deleting the Service with keep-foreign releases a Load Balancer that has
/// foreign parts (ours removed, then the identity label and the record; other labels kept) and
/// deletes one without; without the option it is always deleted.
#[test]
fn deletion_releases_a_load_balancer_with_foreign_parts() {
    use crate::load_balancers::release_plan::{Deletion, keep_foreign_on_delete, plan_deletion};

    let mut lb = with_foreign(&["port-80", "server-1"]);
    lb.labels.insert("team".into(), "payments".into());
    let Deletion::Release(release) = plan_deletion(&lb, true) else { panic!("kept for its foreign parts") };
    assert_eq!(
        release.ops,
        vec![
            LbOp::DeleteService(80),
            LbOp::RemoveTarget(server(1)),
            LbOp::Update(UpdateLoadBalancerRequest {
                name: None,
                labels: Some([("team".to_owned(), "payments".to_owned())].into())
            }),
        ]
    );
    assert_eq!((release.foreign_ports.as_slice(), release.foreign_targets), ([8080].as_slice(), 2));
    assert_eq!(
        release.message(&lb),
        "Load Balancer a0f9e2b7c1d2a4c3b9a8e7f6d5c4b3a2 (4711) is kept, not deleted: it has 1 service (port 8080) and \
         2 targets that hcloud-ccm did not add (keep-foreign); removed this Service's 1 service (port 80) and 1 \
         target and the label hcloud-ccm/service-uid; delete the Load Balancer yourself when it is no longer needed"
    );
    assert_eq!(plan_deletion(&lb, false), Deletion::Delete, "without the option: the official CCM");

    let ours_only = observed(json!({
        "labels": labels(&["port-80", "server-1"]),
        "services": [tcp_service(80, 30080)],
        "targets": [server_target(1, false)]
    }));
    assert_eq!(plan_deletion(&ours_only, true), Deletion::Delete, "nothing foreign: deleted");

    // A label-selector target is never ours; nothing recorded: everything is foreign, only the
    // label goes.
    let selector = observed(json!({
        "labels": labels(&[]),
        "services": [tcp_service(80, 30080)],
        "targets": [{"type": "label_selector", "label_selector": {"selector": "role=web"}}]
    }));
    let Deletion::Release(release) = plan_deletion(&selector, true) else { panic!("kept") };
    assert_eq!(release.ops, vec![LbOp::Update(UpdateLoadBalancerRequest { name: None, labels: Some(Labels::new()) })]);
    assert!(release.message(&selector).contains("removed the label hcloud-ccm/service-uid;"));

    let ann = |v: &str| Some([(a::KEEP_FOREIGN.to_owned(), v.to_owned())].into_iter().collect());
    assert!(keep_foreign_on_delete(ann("true").as_ref(), false));
    assert!(!keep_foreign_on_delete(ann("false").as_ref(), true), "the annotation wins");
    assert!(keep_foreign_on_delete(ann("maybe").as_ref(), false), "unreadable: nothing foreign is deleted");
    assert!(keep_foreign_on_delete(None, true) && !keep_foreign_on_delete(None, false), "the variable");
}

/// The official CCM's "replace stale service UID label" (#1325): the new UID wins over the stale
/// one, the other labels stay, and the next plan is empty (`converge`: no second update).
#[test]
fn replace_stale_service_uid_label_and_keep_other_labels() {
    let lb = observed(json!({
        "labels": {"hcloud-ccm/service-uid": "stale-uid", "some-label": "some-value"},
        "services": [tcp_service(80, 30080)]
    }));
    let ops = Case::default().converge(&lb);
    assert_eq!(ops.len(), 1, "{ops:?}");
    let LbOp::Update(req) = &ops[0] else { panic!("{ops:?}") };
    assert_eq!(super::json_of(req), json!({"labels": {"hcloud-ccm/service-uid": UID, "some-label": "some-value"}}));
}
