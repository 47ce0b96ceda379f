//! HcloudLoadBalancers against the Hetzner fake when things go wrong: lost answers, foreign
//! Load Balancers, ambiguity, bad annotations, failed actions, locks, delete protection.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::lb_support;

use std::time::Duration;

use cloud_provider::CloudError;
use cloud_provider::LoadBalancer as _;
use hcloud_fake::control::{ActionFailure, ResourceRef, SeedLoadBalancer, SeedServer};
use hcloud_fake::faults::FaultRule;
use hcloud_provider::load_balancers::LbDefaults;
use hcloud_provider::load_balancers::annotations as a;
use hcloud_provider::load_balancers::tracker::TrackerPolicy;
use lb_support::*;
use tokio::time::Instant;

#[tokio::test]
async fn a_lost_create_answer_never_duplicates_the_load_balancer() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.h.inject_fault(FaultRule::html(Some("POST"), "/v1/load_balancers", 502).applied().times(1));

    match s.lbs.ensure_load_balancer("k", &svc, &nodes).await {
        // Found by its label right away: no error at all.
        Ok(status) => assert_eq!(status.ingress.len(), 2),
        Err(e) => panic!("the created Load Balancer should have been found by label: {e}"),
    }
    assert_eq!(s.h.request_count("POST /v1/load_balancers"), 1);
    assert!(s.h.request_log().iter().any(|r| r.query.as_deref().is_some_and(|q| q.contains("label_selector"))));
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure again");
    assert_eq!(s.h.request_count("POST /v1/load_balancers"), 1, "never created twice");
    only_lb(&s.h);
}

#[tokio::test]
async fn a_lost_create_that_did_not_happen_is_looked_up_before_the_next_create() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.h.inject_fault(FaultRule::reset(Some("POST"), "/v1/load_balancers").times(1));
    let err = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect_err("lost");
    assert!(matches!(err, CloudError::Failed { transient: true, .. }), "{err:?}");
    assert!(s.h.snapshot().load_balancers.is_empty());
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    let log = s.h.request_log();
    let lookup = log.iter().position(|r| r.query.as_deref().is_some_and(|q| q.contains("label_selector")));
    let create = log.iter().position(|r| r.endpoint == "POST /v1/load_balancers");
    assert!(lookup.is_some() && lookup < create, "looked up by label first: {:?}", sent(&s.h));
    only_lb(&s.h);
}

#[tokio::test]
async fn a_load_balancer_created_meanwhile_is_adopted_on_the_next_try() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    // The inventory lists first (empty)...
    let other = service(&[], &[(80, "TCP", 30080)]);
    let mut other = other.clone();
    other.metadata.uid = Some("11111111-2222-3333-4444-555555555555".into());
    s.lbs.ensure_load_balancer("k", &other, &nodes).await.expect("first service");
    // ...then someone creates the one to adopt.
    s.h.seed_load_balancer(&SeedLoadBalancer::new("shop-web")).expect("lb");
    let svc = service(&[(a::NAME, "shop-web")], &[(80, "TCP", 30080)]);
    let err = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect_err("name taken");
    assert!(matches!(err, CloudError::Retry { .. }), "{err:?}");
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("adopted on the next try");
    assert_eq!(s.h.snapshot().load_balancers.len(), 2);
}

#[tokio::test]
async fn two_load_balancers_with_the_label_are_an_error_not_a_guess() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    for name in ["one", "two"] {
        let mut lb = SeedLoadBalancer::new(name);
        lb.labels.insert("hcloud-ccm/service-uid".into(), UID.into());
        s.h.seed_load_balancer(&lb).expect("lb");
    }
    s.h.reset_requests();
    let err =
        s.lbs.ensure_load_balancer("k", &service(&[], &[(80, "TCP", 30080)]), &nodes).await.expect_err("ambiguous");
    assert_eq!(err.reason(), "NonUniqueLoadBalancer");
    assert!(
        err.to_string().starts_with(
            "NonUniqueLoadBalancer: Service shop/web: 2 Load Balancers carry the label hcloud-ccm/service-uid="
        ),
        "{err}"
    );
    assert!(mutating(&s.h).is_empty());
    let del = s.lbs.ensure_load_balancer_deleted("k", &service(&[], &[])).await.expect_err("ambiguous");
    assert_eq!(del.reason(), "NonUniqueLoadBalancer");
    assert_eq!(s.h.snapshot().load_balancers.len(), 2, "nothing deleted");
}

#[tokio::test]
async fn bad_annotations_leave_the_load_balancer_untouched() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;
    let before = only_lb(&s.h);
    s.h.reset_requests();
    let bad = service(
        &[(a::ALGORITHM_TYPE, "fastest"), (a::HEALTH_CHECK_INTERVAL, "10"), (a::PROTOCOL, "http")],
        &[(80, "TCP", 30080)],
    );
    for call in 0..2 {
        let err = if call == 0 {
            s.lbs.ensure_load_balancer("k", &bad, &nodes).await.map(|_| ()).expect_err("invalid")
        } else {
            s.lbs.update_load_balancer("k", &bad, &nodes).await.expect_err("invalid")
        };
        assert_eq!(err.reason(), "InvalidLoadBalancerConfiguration");
        let text = err.to_string();
        assert!(text.starts_with("InvalidLoadBalancerConfiguration: Service shop/web has an invalid"), "{text}");
        assert!(text.contains("annotation load-balancer.hetzner.cloud/algorithm-type: \"fastest\" is invalid; accepted: round_robin, least_connections"), "{text}");
        assert!(text.contains("health-check-interval: \"10\""), "{text}");
    }
    assert_eq!(s.h.request_counts().total, 0, "nothing sent");
    assert_eq!(only_lb(&s.h), before);
    // Deletion still works with bad annotations.
    s.lbs.ensure_load_balancer_deleted("k", &bad).await.expect("deleted");
    assert!(s.h.snapshot().load_balancers.is_empty());
}

#[tokio::test]
async fn an_unknown_type_names_the_types_that_exist() {
    let s = setup().await;
    let err = s
        .lbs
        .ensure_load_balancer("k", &service(&[(a::TYPE, "lb99")], &[(80, "TCP", 30080)]), &[])
        .await
        .expect_err("unknown type");
    let text = err.to_string();
    assert!(text.contains("\"lb99\" is invalid; accepted: lb11, lb21, lb31"), "{text}");
    assert_eq!(s.h.request_count("POST /v1/load_balancers"), 0);
}

#[tokio::test]
async fn delete_protection_keeps_the_load_balancer_and_not_found_is_success() {
    let s = setup().await;
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    settle(&s).await;
    // Protected behind the inventory's back: the API's `protected` answer is enough.
    let id = only_lb(&s.h).id;
    hcloud_api::Client::load_balancers(&client(&s.fake))
        .change_protection(hcloud_api::models::LoadBalancerId(id as i64), true)
        .await
        .expect("protect");
    s.h.finish_all_actions();
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("skipped, not failed");
    assert_eq!(only_lb(&s.h).id, id);
    let ev = s.events.with_reason("LoadBalancerDeletionProtected");
    assert_eq!(ev.len(), 1);
    assert!(ev[0].message.contains("delete protection"), "{}", ev[0].message);
    // Known protected now: skipped without a request.
    s.h.reset_requests();
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("skipped");
    assert_eq!(s.h.request_count("DELETE /v1/load_balancers/{id}"), 0);

    let s = setup().await;
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    settle(&s).await;
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("deleted");
    assert!(s.h.snapshot().load_balancers.is_empty());
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("already gone is fine");
    assert_eq!(s.lbs.get_load_balancer("k", &svc).await.expect("get"), None);
}

#[tokio::test]
async fn a_failed_action_marks_the_load_balancer_for_a_fresh_read_and_raises_an_event() {
    let s = setup().await;
    let mut nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;
    nodes.push(node("node-x", s.h.seed_server(&SeedServer::new("node-x")).expect("server")));
    s.h.fail_next_actions(fail_add_target());
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("accepted");
    settle(&s).await;
    let ev = s.events.with_reason("LoadBalancerActionFailed");
    assert_eq!(ev.len(), 1, "{:?}", s.events.reasons());
    assert!(ev[0].message.contains("adding node node-x as a target failed"), "{}", ev[0].message);
    assert_eq!(only_lb(&s.h).targets.len(), 1, "the target did not arrive");
    // The provider asks for that next sync itself: nothing else would trigger it.
    assert_eq!(s.events.resyncs(), vec![format!("Service/{}", svc.metadata.name.clone().unwrap_or_default())]);
    // The next sync reads the Load Balancer again and repairs it.
    s.h.reset_requests();
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("repair");
    assert_eq!(sent(&s.h), vec!["GET /v1/load_balancers/{id}", "POST /v1/load_balancers/{id}/actions/add_target"]);
    settle(&s).await;
    assert_eq!(only_lb(&s.h).targets.len(), 2);
}

#[tokio::test]
async fn a_locked_load_balancer_is_retried_after_a_delay() {
    let s = setup().await;
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    settle(&s).await;
    let id = only_lb(&s.h).id;
    s.h.lock_resource(ResourceRef::load_balancer(id));
    let err = s.lbs.ensure_load_balancer("k", &service(&[], &[(81, "TCP", 30081)]), &[]).await.expect_err("locked");
    assert!(matches!(err, CloudError::Retry { .. }), "{err:?}");
    s.h.unlock_resource(ResourceRef::load_balancer(id));
    s.lbs.ensure_load_balancer("k", &service(&[], &[(81, "TCP", 30081)]), &[]).await.expect("after the lock");
    settle(&s).await;
    assert_eq!(only_lb(&s.h).services.iter().map(|s| s.listen_port).collect::<Vec<_>>(), vec![81]);
    assert_eq!(target_ids(&only_lb(&s.h)), Vec::<u64>::new());
}

/// The next `add_target` action fails with `boom`.
fn fail_add_target() -> ActionFailure {
    ActionFailure { count: 1, command: Some("add_target".into()), code: "action_failed".into(), message: "boom".into() }
}

/// Another Service's UID, in another namespace.
const VICTIM_UID: &str = "9a8b7c6d-0000-4e0b-9c1d-2e3f4a5b6c7d";

#[tokio::test]
async fn a_load_balancer_of_another_service_is_never_adopted_by_name() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let mut victim = service(&[(a::NAME, "shop-lb")], &[(443, "TCP", 30443)]);
    victim.metadata.namespace = Some("payments".into());
    victim.metadata.uid = Some(VICTIM_UID.into());
    s.lbs.ensure_load_balancer("k", &victim, &nodes).await.expect("the victim's Load Balancer");
    settle(&s).await;
    let before = only_lb(&s.h);
    s.h.reset_requests();

    // A Service elsewhere names that Load Balancer.
    let intruder = service(&[(a::NAME, "shop-lb")], &[(80, "TCP", 30080)]);
    for call in 0..2 {
        let err = if call == 0 {
            s.lbs.ensure_load_balancer("k", &intruder, &nodes).await.map(|_| ()).expect_err("adopted")
        } else {
            s.lbs.update_load_balancer("k", &intruder, &nodes).await.expect_err("adopted")
        };
        assert_eq!(err.reason(), "LoadBalancerOwnedElsewhere", "{err}");
        let text = err.to_string();
        // The reason leads the message: the service controller's Warning shows only the message.
        assert!(
            text.starts_with(&format!(
                "LoadBalancerOwnedElsewhere: Service shop/web: Load Balancer shop-lb ({})",
                before.id
            )),
            "{text}"
        );
        assert!(text.contains(&format!("hcloud-ccm/service-uid={VICTIM_UID}")), "{text}");
        assert!(text.contains("load-balancer.hetzner.cloud/name"), "{text}");
    }
    assert_eq!(mutating(&s.h), Vec::<String>::new(), "nothing sent");
    assert_eq!(s.lbs.get_load_balancer("k", &intruder).await.expect("get"), None);

    // Deleting the intruder leaves the victim's Load Balancer alone.
    s.lbs.ensure_load_balancer_deleted("k", &intruder).await.expect("nothing to delete");
    assert_eq!(mutating(&s.h), Vec::<String>::new(), "nothing sent");
    assert_eq!(only_lb(&s.h), before);
    assert!(s.lbs.get_load_balancer("k", &victim).await.expect("get").is_some());
}

#[tokio::test]
async fn a_load_balancer_labelled_by_another_system_is_never_adopted_by_name() {
    let s = setup().await;
    let mut lb = SeedLoadBalancer::new("shared");
    lb.labels.insert("hcloud-ccm/service-uid".into(), "other-cluster".into());
    s.h.seed_load_balancer(&lb).expect("lb");
    let before = only_lb(&s.h);
    s.h.reset_requests();
    let err = s
        .lbs
        .ensure_load_balancer("k", &service(&[(a::NAME, "shared")], &[(80, "TCP", 30080)]), &[])
        .await
        .expect_err("adopted");
    assert_eq!(err.reason(), "LoadBalancerOwnedElsewhere", "{err}");
    assert!(err.to_string().contains("hcloud-ccm/service-uid=other-cluster"), "{err}");
    assert_eq!(mutating(&s.h), Vec::<String>::new(), "nothing sent");
    assert_eq!(only_lb(&s.h), before);
}

/// Issue 27 item 3: adoption by name is decided on one fresh `GET` of that Load Balancer, not
/// on the cached list: an owner label set behind the list refuses the adoption (nothing
/// written), another label set behind it is kept by the adoption's `PUT`.
#[tokio::test]
async fn adoption_is_decided_on_a_fresh_read_of_the_load_balancer() {
    use hcloud_api::models::{LoadBalancerId, UpdateLoadBalancerRequest};

    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let taken = s.h.seed_load_balancer(&SeedLoadBalancer::new("taken-lb")).expect("lb");
    let team = s.h.seed_load_balancer(&SeedLoadBalancer::new("team-lb")).expect("lb");
    s.lbs.inventory().refresh().await.expect("list: both unlabelled");
    // Labelled by another cluster and by another tool after the list was read.
    let api = client(&s.fake);
    for (id, key, value) in [(taken, "hcloud-ccm/service-uid", "other-cluster"), (team, "team", "payments")] {
        let labels = [(key.to_owned(), value.to_owned())].into_iter().collect();
        let req = UpdateLoadBalancerRequest { name: None, labels: Some(labels) };
        api.load_balancers().update(LoadBalancerId(id as i64), &req).await.expect("label");
    }

    s.h.reset_requests();
    let svc = service(&[(a::NAME, "taken-lb")], &[(80, "TCP", 30080)]);
    let err = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect_err("adopted");
    assert_eq!(err.reason(), "LoadBalancerOwnedElsewhere", "{err}");
    assert!(err.to_string().contains("hcloud-ccm/service-uid=other-cluster"), "{err}");
    assert_eq!(sent(&s.h), vec!["GET /v1/load_balancers/{id}"], "one fresh read, nothing written");
    let labels = |id: u64| s.h.load_balancer(id).expect("lb").labels;
    assert_eq!(labels(taken).get("hcloud-ccm/service-uid").map(String::as_str), Some("other-cluster"));

    s.h.reset_requests();
    let mut adopter = service(&[(a::NAME, "team-lb")], &[(80, "TCP", 30080)]);
    adopter.metadata.uid = Some(VICTIM_UID.into());
    s.lbs.ensure_load_balancer("k", &adopter, &nodes).await.expect("adopted");
    assert_eq!(s.h.request_count("GET /v1/load_balancers/{id}"), 1, "one fresh read, only on adoption");
    assert_eq!(mutating(&s.h).first().map(String::as_str), Some("PUT /v1/load_balancers/{id}"));
    let got = labels(team);
    assert_eq!(
        (got.get("team").map(String::as_str), got.get("hcloud-ccm/service-uid").map(String::as_str)),
        (Some("payments"), Some(VICTIM_UID)),
        "the label set meanwhile is kept: {got:?}"
    );
    settle(&s).await;
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &adopter, &nodes).await.expect("adopted already");
    assert_eq!(s.h.request_counts().total, 0, "found by its label now: no read at all");
}

#[tokio::test]
async fn an_action_that_never_finishes_fails_the_sync_after_the_deadline_and_frees_the_service() {
    let deadline = Duration::from_millis(500);
    let defaults = LbDefaults { location: Some("fsn1".into()), ..Default::default() };
    let s = setup_with_policy(defaults, None, TrackerPolicy { wait_deadline: deadline, ..fast_policy() }).await;
    // The create's action never finishes; the reverse DNS needs the Load Balancer unlocked.
    s.h.set_action_delay(Duration::from_secs(3600));
    let svc = service(&[(a::IPV4_RDNS, "lb.example.com")], &[(80, "TCP", 30080)]);
    let sync = async || {
        tokio::time::timeout(Duration::from_secs(10), s.lbs.ensure_load_balancer("k", &svc, &[]))
            .await
            .expect("the wait has no deadline: the sync hangs holding the Service's lock")
            .map(|_| ())
    };
    let started = Instant::now();
    let err = sync().await.expect_err("the action is still running");
    assert!(started.elapsed() >= deadline, "gave up after {:?}", started.elapsed());
    assert_eq!(err.reason(), "LoadBalancerActionTimeout");
    assert!(matches!(err, CloudError::Failed { transient: true, .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("action create_load_balancer ("), "{text}");
    assert!(text.contains("still running 500ms after it was started"), "{text}");
    assert_eq!(mutating(&s.h), vec!["POST /v1/load_balancers"], "nothing sent after the wait");

    // The next sync is not blocked: it fails at once (one fresh poll), without waiting again.
    let again = Instant::now();
    let err = sync().await.expect_err("still running");
    assert_eq!(err.reason(), "LoadBalancerActionTimeout");
    assert!(again.elapsed() < deadline, "waited {:?} again", again.elapsed());

    // Once the action has finished, the sync goes on.
    s.h.finish_all_actions();
    s.h.set_action_delay(Duration::from_millis(30));
    sync().await.expect("after the action");
    settle(&s).await;
    assert_eq!(only_lb(&s.h).public_net.ipv4.dns_ptr.as_deref(), Some("lb.example.com"));
    assert_eq!(s.h.request_count("POST /v1/load_balancers"), 1);
}

#[tokio::test]
async fn a_deleted_service_leaves_no_uncertain_mark_behind() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080)]);
    // The answer to the create is lost (and it did not happen): the UID is marked uncertain.
    s.h.inject_fault(FaultRule::reset(Some("POST"), "/v1/load_balancers").times(1));
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect_err("lost");
    assert_eq!(s.lbs.inventory().uncertain_len(), 1);
    // The Service is deleted: the controller asks for its Load Balancer (none), then is done.
    let mut deleted = svc.clone();
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()));
    assert_eq!(s.lbs.get_load_balancer("k", &deleted).await.expect("get"), None);
    assert_eq!(s.lbs.inventory().uncertain_len(), 0, "forgotten once the Service is being deleted");

    // The same through ensure_load_balancer_deleted (a Service gone from the controller's cache).
    s.h.inject_fault(FaultRule::reset(Some("POST"), "/v1/load_balancers").times(1));
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect_err("lost");
    assert_eq!(s.lbs.inventory().uncertain_len(), 1);
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("nothing to delete");
    assert_eq!(s.lbs.inventory().uncertain_len(), 0);
    assert!(s.h.snapshot().load_balancers.is_empty());
}

#[tokio::test]
async fn a_deleted_load_balancer_leaves_no_failure_behind_in_the_tracker() {
    for protected in [false, true] {
        let s = setup().await;
        let mut nodes = seed_nodes(&s.h, 1, None);
        let svc = service(&[], &[(80, "TCP", 30080)]);
        s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
        settle(&s).await;
        let id = only_lb(&s.h).id;
        if protected {
            hcloud_api::Client::load_balancers(&client(&s.fake))
                .change_protection(hcloud_api::models::LoadBalancerId(id as i64), true)
                .await
                .expect("protect");
            s.h.finish_all_actions();
            s.lbs.inventory().mark_stale(hcloud_api::models::LoadBalancerId(id as i64));
        }
        // The last change's action fails in the background: recorded for the next waiter.
        nodes.push(node("node-x", s.h.seed_server(&SeedServer::new("node-x")).expect("server")));
        s.h.fail_next_actions(fail_add_target());
        s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("accepted");
        settle(&s).await;
        assert_eq!(s.lbs.tracker().failed_len(), 1);
        // The Service goes (its Load Balancer with it, or kept for its protection).
        s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("deleted");
        assert_eq!(s.h.snapshot().load_balancers.len(), usize::from(protected));
        assert_eq!(
            (s.lbs.tracker().failed_len(), s.lbs.tracker().outstanding(), s.lbs.inventory().uncertain_len()),
            (0, 0, 0),
            "protected: {protected}"
        );
    }
}

#[tokio::test]
async fn a_failure_of_a_load_balancer_deleted_outside_is_dropped_with_the_next_failure() {
    let s = setup().await;
    let mut nodes = seed_nodes(&s.h, 1, None);
    nodes.push(node("node-x", s.h.seed_server(&SeedServer::new("node-x")).expect("server")));
    let mut services = Vec::new();
    for (uid, port) in [(UID, 80), (VICTIM_UID, 81)] {
        let mut svc = service(&[], &[(port, "TCP", 30000 + port)]);
        svc.metadata.uid = Some(uid.into());
        s.lbs.ensure_load_balancer("k", &svc, &nodes[..1]).await.expect("ensure");
        settle(&s).await;
        services.push(svc);
    }
    let (first, second) = (&services[0], &services[1]);
    s.h.fail_next_actions(fail_add_target());
    s.lbs.update_load_balancer("k", first, &nodes).await.expect("accepted");
    settle(&s).await;
    assert_eq!(s.lbs.tracker().failed_len(), 1);
    // The first Load Balancer is deleted outside the CCM; its Service's next sync finds it gone.
    let uid_of = |l: &hcloud_fake::wire::LoadBalancer| l.labels.get("hcloud-ccm/service-uid").cloned();
    let gone = s.h.snapshot().load_balancers.into_iter().find(|l| uid_of(l).as_deref() == Some(UID)).expect("lb").id;
    client(&s.fake).load_balancers().delete(hcloud_api::models::LoadBalancerId(gone as i64)).await.expect("delete");
    s.lbs.update_load_balancer("k", first, &nodes).await.expect("nothing to update");
    assert!(!s.lbs.inventory().contains(hcloud_api::models::LoadBalancerId(gone as i64)));
    // The next failure (of the second Load Balancer) drops the first one's.
    s.h.fail_next_actions(fail_add_target());
    s.lbs.update_load_balancer("k", second, &nodes).await.expect("accepted");
    settle(&s).await;
    assert_eq!(s.events.with_reason("LoadBalancerActionFailed").len(), 2);
    assert_eq!(s.lbs.tracker().failed_len(), 1, "only the second Load Balancer's failure");
}
