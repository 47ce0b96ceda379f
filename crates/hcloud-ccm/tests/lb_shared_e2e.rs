//! End to end: Load Balancers shared by several Services (`load-balancer.hetzner.cloud/sharing-key`)
//! against the fake: two Services on one Load Balancer (and what a join costs), a port conflict
//! and a settings conflict (Warnings, nothing changed), leaving and joining again (the last
//! member keeps the address), deletion with the last member, and a key in another namespace:
//! refused by default, shared once the operator lists both namespaces.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use common::lb::{
    annotate, create, ensured, fresh_namespace, ingress, lb_ports, lb_service, requests_of_an_unchanged_sync,
    server_nodes,
};
use common::{Env, REACT};
use hcloud_fake::FakeConfig;
use hcloud_fake::wire::LoadBalancer;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use test_harness::{events_for, unique_name, wait_for_value, wait_until};

const LOCATION: (&str, &str) = ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1");
const KEY: &str = "load-balancer.hetzner.cloud/sharing-key";

/// The fake's Load Balancers of the sharing key `key`.
fn shared_lbs(env: &Env, key: &str) -> Vec<LoadBalancer> {
    let lbs = env.fake.handle().snapshot().load_balancers;
    lbs.into_iter().filter(|l| l.labels.get("hcloud-ccm/sharing-key").map(String::as_str) == Some(key)).collect()
}

/// Waits until exactly one Load Balancer has the key and `ok` holds for it.
async fn wait_shared(env: &Env, key: &str, what: &str, ok: impl Fn(&LoadBalancer) -> bool) -> LoadBalancer {
    wait_for_value(REACT, what, async || match shared_lbs(env, key).as_slice() {
        [lb] if ok(lb) => Some(lb.clone()),
        _ => None,
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:#?}", shared_lbs(env, key)))
}

fn ips(svc: &Service) -> Vec<String> {
    let mut ips: Vec<String> = ingress(svc).into_iter().map(|(ip, _)| ip).collect();
    ips.sort();
    ips
}

/// Waits for a Warning on the Service whose message contains `needle`.
async fn warning(env: &Env, name: &str, needle: &str) -> String {
    wait_for_value(REACT, &format!("a Warning on {name} with {needle:?}"), async || {
        let events = events_for(&env.client, "Service", name).await.ok()?;
        events.into_iter().find(|e| e.type_ == "Warning" && e.message.contains(needle)).map(|e| e.message)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn mutations(env: &Env) -> Vec<String> {
    env.fake.handle().request_log().into_iter().filter(|r| r.method != "GET").map(|r| r.endpoint).collect()
}

#[tokio::test]
async fn two_services_share_one_load_balancer_and_leave_it_one_by_one() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["share-n1", "share-n2"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;

    create(&api, &lb_service("web", &[(KEY, "edge")], &[80])).await;
    let web = ensured(&api, "web").await;
    let lb = wait_shared(&env, "edge", "web's shared Load Balancer", |l| l.targets.len() == 2).await;
    assert!(!lb.labels.contains_key("hcloud-ccm/service-uid"), "a shared one has no identity label: {:?}", lb.labels);

    // A second Service joins: one label write and one service, the targets are there already.
    h.reset_requests();
    create(&api, &lb_service("mail", &[(KEY, "edge")], &[25])).await;
    let mail = ensured(&api, "mail").await;
    let joined = wait_shared(&env, "edge", "both ports", |l| lb_ports(l).len() == 2).await;
    assert_eq!(joined.id, lb.id);
    assert_eq!(ips(&mail), ips(&web), "every member shows the shared addresses");
    assert_eq!(
        mutations(&env),
        ["PUT /v1/load_balancers/{id}", "POST /v1/load_balancers/{id}/actions/add_service"],
        "a join costs one label write and one service"
    );

    // A port another member has: a Warning on the later Service, nothing sent for it.
    h.reset_requests();
    create(&api, &lb_service("late", &[(KEY, "edge")], &[80])).await;
    let m = warning(&env, "late", "SharedLoadBalancerPortConflict").await;
    assert!(m.contains("port 80 is already used by Service web"), "{m}");
    // A setting that disagrees: named, with the value in force.
    create(
        &api,
        &lb_service(
            "odd",
            &[(KEY, "edge"), ("load-balancer.hetzner.cloud/algorithm-type", "least_connections")],
            &[8080],
        ),
    )
    .await;
    let m = warning(&env, "odd", "SharedLoadBalancerSettingConflict").await;
    assert!(
        m.contains("algorithm-type is least_connections, but the shared Load Balancer has round_robin (in force)"),
        "{m}"
    );
    assert_eq!(mutations(&env), Vec::<String>::new(), "nothing was changed for either");
    assert_eq!(lb_ports(&shared_lbs(&env, "edge")[0]).len(), 2);
    for name in ["late", "odd"] {
        api.delete(name, &DeleteParams::default()).await.expect("delete");
    }
    wait_until(REACT, "the refused Services are gone", async || {
        api.get_opt("late").await.ok().flatten().is_none() && api.get_opt("odd").await.ok().flatten().is_none()
    })
    .await
    .unwrap();
    // A member's sync where nothing changed sends nothing (as a restart's resync).
    assert_eq!(requests_of_an_unchanged_sync(&env, &api, "mail").await, Vec::<String>::new());

    // mail leaves (deleted): only its service goes.
    api.delete("mail", &DeleteParams::default()).await.expect("delete mail");
    let left = wait_shared(&env, "edge", "mail's service removed", |l| lb_ports(l).len() == 1).await;
    assert_eq!(lb_ports(&left), [(80, node_port(&web, 80))]);
    assert_eq!(left.targets.len(), 2, "web still needs the targets");

    // web, the last member, drops the annotation: the Load Balancer becomes its own, same address.
    annotate(&api, "web", serde_json::json!({KEY: null})).await;
    let uid = web.metadata.uid.clone().expect("uid");
    let own = wait_for_value(REACT, "web's own Load Balancer again", async || {
        h.snapshot().load_balancers.into_iter().find(|l| {
            l.labels.get("hcloud-ccm/service-uid") == Some(&uid) && !l.labels.contains_key("hcloud-ccm/sharing-key")
        })
    })
    .await
    .unwrap();
    assert_eq!(own.id, lb.id, "the same Load Balancer, so the same address");
    assert_eq!(h.snapshot().load_balancers.len(), 1);

    // And joins again; deleting the last member deletes the Load Balancer.
    annotate(&api, "web", serde_json::json!({KEY: "edge"})).await;
    let again =
        wait_shared(&env, "edge", "web shares again", |l| !l.labels.contains_key("hcloud-ccm/service-uid")).await;
    assert_eq!(again.id, lb.id);
    api.delete("web", &DeleteParams::default()).await.expect("delete web");
    wait_until(REACT, "the last member took the Load Balancer with it", async || {
        h.snapshot().load_balancers.is_empty()
    })
    .await
    .unwrap();
}

fn node_port(svc: &Service, port: i32) -> u16 {
    let ports = svc.spec.as_ref().and_then(|s| s.ports.clone()).unwrap_or_default();
    ports.iter().find(|p| p.port == port).and_then(|p| p.node_port).expect("node port") as u16
}

#[tokio::test]
async fn a_key_in_another_namespace_is_refused_until_the_operator_lists_both() {
    let env = Env::start(FakeConfig::default()).await;
    let (ns_a, api_a) = fresh_namespace(&env).await;
    let ns_b = unique_name("lb-b");
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(ns_b.clone());
    namespaces.create(&PostParams::default(), &n).await.expect("namespace");
    let api_b: Api<Service> = Api::namespaced(env.client.clone(), &ns_b);
    server_nodes(&env, &["cross-n1"], None, &[]).await;

    let ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api_a, &lb_service("ingress", &[(KEY, "front")], &[80])).await;
    create(&api_b, &lb_service("intruder", &[(KEY, "front")], &[81])).await;
    let a = ensured(&api_a, "ingress").await;
    let b = ensured(&api_b, "intruder").await;
    assert_ne!(ips(&a), ips(&b), "a key does not reach into another namespace");
    let lbs = shared_lbs(&env, "front");
    assert_eq!(lbs.len(), 2, "one per namespace: {lbs:#?}");
    drop(ccm);

    // The operator allows the two namespaces to share: one Load Balancer, a's address kept or b's.
    let allowed = format!("{ns_a},{ns_b}");
    let _ccm = env.ccm(&[LOCATION, ("HCLOUD_LOAD_BALANCERS_SHARING_NAMESPACES", &allowed)], &[]).await;
    let lb = wait_shared(&env, "front", "one Load Balancer across both namespaces", |l| {
        lb_ports(l).len() == 2
            && l.labels.get("hcloud-ccm/sharing-namespace").map(String::as_str) == Some("across.namespaces")
    })
    .await;
    let same = wait_for_value(REACT, "both Services show one address", async || {
        let a = api_a.get("ingress").await.ok()?;
        let b = api_b.get("intruder").await.ok()?;
        (ips(&a) == ips(&b) && !ips(&a).is_empty()).then(|| ips(&a))
    })
    .await
    .unwrap();
    let v4 = lb.public_net.ipv4.ip.clone().expect("ipv4");
    assert!(same.contains(&v4), "{same:?} vs {v4}");
}
