//! HcloudLoadBalancers against the Hetzner fake for issue 20's target and health features
//! (`externalTrafficPolicy: Local` health checks, unhealthy-target warnings, foreign targets
//! and services): what each step sends, and that a sync where nothing changed sends nothing.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::lb_support;

use cloud_provider::LoadBalancer as _;
use hcloud_provider::load_balancers::annotations as a;
use k8s_openapi::api::core::v1::Service;
use lb_support::*;

fn local(svc: &mut Service) {
    let spec = svc.spec.as_mut().unwrap();
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(32100);
}

/// (destination port, health protocol, health port, health path) of every LB service, sorted.
fn checks(lb: &hcloud_fake::wire::LoadBalancer) -> Vec<(u16, String, u16, Option<String>)> {
    let mut c: Vec<_> = lb
        .services
        .iter()
        .map(|s| {
            let h = &s.health_check;
            (s.destination_port, h.protocol.clone(), h.port, h.http.as_ref().map(|h| h.path.clone()))
        })
        .collect();
    c.sort();
    c
}

#[tokio::test]
async fn local_traffic_policy_checks_kube_proxy_and_costs_nothing_when_unchanged() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 2, None);
    let ports = [(80, "TCP", 30080), (443, "TCP", 30443)];
    let mut svc = service(&[(a::TYPE, "lb11"), (a::HEALTH_CHECK_LOCAL_ENDPOINTS, "true")], &ports);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    let tcp = |p: u16| (p, "tcp".to_owned(), p, None);
    assert_eq!(checks(&only_lb(&s.h)), vec![tcp(30080), tcp(30443)], "Cluster policy: the official check");

    // The Service switches to Local: one update_service per port, then nothing.
    settle(&s).await;
    local(&mut svc);
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure local");
    assert_eq!(
        mutating(&s.h),
        vec!["POST /v1/load_balancers/{id}/actions/update_service"; 2],
        "the health check of each port, nothing else"
    );
    settle(&s).await;
    let http = |p: u16| (p, "http".to_owned(), 32100, Some("/healthz".to_owned()));
    assert_eq!(checks(&only_lb(&s.h)), vec![http(30080), http(30443)]);

    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure again");
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(s.h.request_counts().total, 0, "nothing changed: no request at all");
}

/// Item 6: a target Hetzner reports unhealthy for longer than the configured time gets one
/// Warning on the Service, from the Load Balancer list (no request of its own); a sync where
/// nothing changed still sends nothing, and the background pass reads only the list, once per
/// max age, and stops when no Service wants the warning.
#[tokio::test]
async fn an_unhealthy_target_is_warned_about_from_the_list_alone() {
    use hcloud_fake::control::TargetHealthOverride;
    use hcloud_provider::HcloudLoadBalancers;
    use hcloud_provider::load_balancers::LbDefaults;
    use hcloud_provider::load_balancers::target_health::UNHEALTHY_TARGET;
    use std::sync::Arc;
    use std::time::Duration;

    let fake = hcloud_fake::FakeServer::start(hcloud_fake::FakeConfig::default()).await.expect("fake");
    let h = fake.handle();
    let defaults = LbDefaults { location: Some("fsn1".into()), ..Default::default() };
    let period = Duration::from_millis(300);
    let lbs = HcloudLoadBalancers::with_policy(client(&fake), defaults, None, period, fast_policy());
    let events = Arc::new(Events::default());
    lbs.set_events(events.clone());
    let s = Setup { fake, h, lbs, events };
    let nodes = seed_nodes(&s.h, 2, None);
    let svc = service(&[(a::TYPE, "lb11"), (a::UNHEALTHY_TARGET_WARNING_AFTER, "1s")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;
    assert!(s.lbs.health_warnings().watches(UID));

    // Steady state: a sync sends nothing, and the background pass only lists.
    s.h.reset_requests();
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    let started = std::time::Instant::now();
    test_harness_free_wait(Duration::from_secs(10), || s.h.request_count("GET /v1/load_balancers") >= 3).await;
    let elapsed = started.elapsed();
    let log = sent(&s.h);
    assert!(log.iter().all(|e| e == "GET /v1/load_balancers"), "only the list: {log:?}");
    let most = (elapsed.as_millis() / period.as_millis()) as usize + 2;
    assert!(log.len() <= most, "{} lists in {elapsed:?} with a {period:?} max age", log.len());
    assert!(s.events.with_reason(UNHEALTHY_TARGET).is_empty(), "every target is healthy");

    // Server 1 turns unhealthy on port 80: one Warning after the configured second.
    let lb = only_lb(&s.h);
    let sick = lb.targets[0].server.as_ref().unwrap().id;
    s.h.set_target_health(lb.id, &TargetHealthOverride::server(sick, "unhealthy").port(80)).expect("health");
    test_harness_free_wait(Duration::from_secs(10), || !s.events.with_reason(UNHEALTHY_TARGET).is_empty()).await;
    let warned = s.events.with_reason(UNHEALTHY_TARGET);
    assert_eq!(warned.len(), 1);
    assert_eq!(warned[0].object.name, "web");
    assert!(
        warned[0].message.starts_with(&format!(
            "Hetzner reports target server {sick} (Node node-0) of Load Balancer {} ({}) unhealthy on port 80",
            lb.name, lb.id
        )),
        "{}",
        warned[0].message
    );
    let lists = s.h.request_count("GET /v1/load_balancers");
    test_harness_free_wait(Duration::from_secs(10), || s.h.request_count("GET /v1/load_balancers") >= lists + 2).await;
    assert_eq!(s.events.with_reason(UNHEALTHY_TARGET).len(), 1, "once per unhealthy spell");

    // The Service is deleted: nothing is watched, the pass ends.
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("delete");
    assert!(!s.lbs.health_warnings().watches(UID));
    test_harness_free_wait(Duration::from_secs(10), || !s.lbs.health_warnings().pass_running()).await;
    s.h.reset_requests();
    tokio::time::sleep(period * 3).await; // a window in which a live pass would have listed
    assert_eq!(s.h.request_counts().total, 0, "no pass without a watched Service");
}

#[test]
fn the_warning_time_is_read_from_the_annotation_or_the_variable() {
    use hcloud_provider::load_balancers::LbDefaults;
    use hcloud_provider::load_balancers::spec::LbSpec;
    use std::time::Duration;

    let ports = [(80, "TCP", 30080)];
    let after = |ann: &[(&str, &str)], d: &LbDefaults| {
        LbSpec::from_service(&service(ann, &ports), d, None).map(|s| s.unhealthy_target_warning_after)
    };
    let env = LbDefaults { unhealthy_target_warning_after: Some(300), ..Default::default() };
    assert_eq!(after(&[], &LbDefaults::default()).unwrap(), None, "off by default");
    assert_eq!(after(&[], &env).unwrap(), Some(Duration::from_secs(300)));
    assert_eq!(after(&[(a::UNHEALTHY_TARGET_WARNING_AFTER, "90s")], &env).unwrap(), Some(Duration::from_secs(90)));
    assert_eq!(after(&[(a::UNHEALTHY_TARGET_WARNING_AFTER, "0s")], &env).unwrap(), None, "0s turns it off");
    let bad = after(&[(a::UNHEALTHY_TARGET_WARNING_AFTER, "soon")], &env).expect_err("invalid");
    assert_eq!(
        bad.problems[0].to_string(),
        "annotation load-balancer.hetzner.cloud/unhealthy-target-warning-after: \"soon\" is invalid; accepted: a Go \
         duration like 15s, 1m30s or 2h (a number needs a unit)"
    );
}

/// Item 2: with keep-foreign, a target and a service added by hand survive every sync; our own
/// stale target still goes (then the record is pruned); a sync where nothing changed sends
/// nothing.
#[tokio::test]
async fn foreign_targets_and_services_are_kept_and_ours_cleaned_exactly() {
    use hcloud_api::models::{LbProtocol, LbService, LoadBalancerId, ServerId, TargetSpec};
    use hcloud_fake::control::SeedServer;

    let s = setup().await;
    let mut nodes = seed_nodes(&s.h, 2, None);
    let svc = service(&[(a::TYPE, "lb11"), (a::KEEP_FOREIGN, "true")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;
    let lb = only_lb(&s.h);
    let record: Vec<&String> = lb.labels.keys().filter(|k| k.starts_with("hcloud-ccm.managed/")).collect();
    assert_eq!(record.len(), 3, "port 80 and both servers, written by the create itself: {record:?}");

    // Someone adds a server and a service by hand; the list is read again.
    let foreign = s.h.seed_server(&SeedServer::new("by-hand")).expect("server");
    let api = client(&s.fake);
    let id = LoadBalancerId(lb.id as i64);
    api.load_balancers()
        .add_target(id, &TargetSpec::Server { id: ServerId(foreign as i64), use_private_ip: false })
        .await
        .expect("add target by hand");
    s.h.finish_all_actions();
    let by_hand = LbService {
        protocol: LbProtocol::Tcp,
        listen_port: 9000,
        destination_port: 31900,
        proxyprotocol: false,
        health_check: None,
        http: None,
    };
    api.load_balancers().add_service(id, &by_hand).await.expect("add service by hand");
    s.h.finish_all_actions();
    s.lbs.inventory().relist().await.expect("relist");

    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(s.h.request_counts().total, 0, "foreign ones kept, nothing changed: no request at all");

    // One of our Nodes goes: exactly its target is removed, then the record is pruned.
    let gone = nodes.remove(0);
    s.h.reset_requests();
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(
        mutating(&s.h),
        vec!["POST /v1/load_balancers/{id}/actions/remove_target", "PUT /v1/load_balancers/{id}"]
    );
    settle(&s).await;
    let lb = only_lb(&s.h);
    let gone_id: u64 = gone.spec.unwrap().provider_id.unwrap().trim_start_matches("hcloud://").parse().unwrap();
    assert!(!target_ids(&lb).contains(&gone_id));
    assert!(target_ids(&lb).contains(&foreign), "the foreign target stays");
    assert!(lb.services.iter().any(|s| s.listen_port == 9000), "the foreign service stays");
    assert!(!lb.labels.contains_key(&format!("hcloud-ccm.managed/server-{gone_id}")), "record pruned");

    s.h.reset_requests();
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(s.h.request_counts().total, 0, "steady again");

    // Without the option (drop-in), the foreign ones go as with the official CCM.
    let plain = service(&[(a::TYPE, "lb11")], &[(80, "TCP", 30080)]);
    s.lbs.update_load_balancer("k", &plain, &nodes).await.expect("update");
    settle(&s).await;
    let lb = only_lb(&s.h);
    assert!(!target_ids(&lb).contains(&foreign));
    assert!(lb.services.iter().all(|s| s.listen_port == 80));
}

/// Issue 27 item 8: with keep-foreign, deleting the Service keeps a Load Balancer that still
/// has foreign parts: ours are removed, then the identity label and the record, and a Normal
/// event says so. The cached list does not show the parts added by hand here: a Load Balancer
/// is deleted only after a fresh read shows nothing foreign on it. Without foreign parts it is
/// deleted as before.
#[tokio::test]
async fn deleting_the_service_keeps_a_load_balancer_with_foreign_parts() {
    use hcloud_api::models::{LbProtocol, LbService, LoadBalancerId, ServerId, TargetSpec};
    use hcloud_fake::control::SeedServer;

    let s = setup().await;
    let nodes = seed_nodes(&s.h, 2, None);
    let svc = service(&[(a::TYPE, "lb11"), (a::KEEP_FOREIGN, "true")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;
    let lb = only_lb(&s.h);
    let foreign = s.h.seed_server(&SeedServer::new("by-hand")).expect("server");
    let api = client(&s.fake);
    let id = LoadBalancerId(lb.id as i64);
    let by_hand = TargetSpec::Server { id: ServerId(foreign as i64), use_private_ip: false };
    api.load_balancers().add_target(id, &by_hand).await.expect("add target by hand");
    s.h.finish_all_actions();
    let port = LbService {
        protocol: LbProtocol::Tcp,
        listen_port: 9000,
        destination_port: 31900,
        proxyprotocol: false,
        health_check: None,
        http: None,
    };
    api.load_balancers().add_service(id, &port).await.expect("add service by hand");
    s.h.finish_all_actions();

    s.h.reset_requests();
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("released");
    assert_eq!(
        mutating(&s.h),
        vec![
            "POST /v1/load_balancers/{id}/actions/delete_service",
            "POST /v1/load_balancers/{id}/actions/remove_target",
            "POST /v1/load_balancers/{id}/actions/remove_target",
            "PUT /v1/load_balancers/{id}",
        ],
        "ours removed, then the label and the record dropped; no delete"
    );
    assert_eq!(s.h.request_count("GET /v1/load_balancers/{id}"), 1, "one fresh read before deciding");
    settle(&s).await;
    let kept = only_lb(&s.h);
    assert_eq!((kept.id, target_ids(&kept)), (lb.id, vec![foreign]));
    assert_eq!(kept.services.iter().map(|s| s.listen_port).collect::<Vec<_>>(), vec![9000]);
    assert!(kept.labels.is_empty(), "neither the identity label nor the record is left: {:?}", kept.labels);
    let ev = s.events.with_reason("LoadBalancerKeptForForeignParts");
    assert_eq!(ev.len(), 1, "{:?}", s.events.reasons());
    assert_eq!((ev[0].object.kind, ev[0].object.name.as_str()), ("Service", "web"));
    assert_eq!(
        ev[0].message,
        format!(
            "Load Balancer {} ({}) is kept, not deleted: it has 1 service (port 9000) and 1 target that hcloud-ccm \
             did not add (keep-foreign); removed this Service's 1 service (port 80) and 2 targets and the label \
             hcloud-ccm/service-uid; delete the Load Balancer yourself when it is no longer needed",
            lb.name, lb.id
        )
    );
    assert_eq!(s.lbs.get_load_balancer("k", &svc).await.expect("get"), None, "no longer the Service's");
    s.h.reset_requests();
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("nothing left to do");
    assert_eq!(s.h.request_counts().total, 0);

    // Nothing foreign on it: deleted, as without the option.
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 2, None);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;
    s.lbs.ensure_load_balancer_deleted("k", &svc).await.expect("deleted");
    assert!(s.h.snapshot().load_balancers.is_empty());
    assert!(s.events.with_reason("LoadBalancerKeptForForeignParts").is_empty());
}
