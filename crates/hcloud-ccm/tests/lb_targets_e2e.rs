//! End to end: issue 20's target and health features of the Load Balancers (real
//! kube-apiserver + etcd, the Hetzner fake, the `hcloud-ccm` binary): `externalTrafficPolicy:
//! Local` health checks, unhealthy-target warnings, foreign targets and services kept.
//! Split from `lb_e2e.rs` (same set-up in `common::lb`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use common::lb::{create, delete_node, ensured, fresh_namespace, lb_service, server_nodes, target_servers, wait_lb};
use common::{Env, REACT};
use hcloud_fake::FakeConfig;
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, Patch, PatchParams};
use test_harness::{wait_for, wait_for_event};

const LOCATION: (&str, &str) = ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1");

fn local_policy(mut svc: Service) -> Service {
    svc.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    svc
}

/// (protocol, port, path) of every LB service's health check.
fn checks(lb: &hcloud_fake::wire::LoadBalancer) -> Vec<(String, u16, Option<String>)> {
    lb.services
        .iter()
        .map(|s| {
            let h = &s.health_check;
            (h.protocol.clone(), h.port, h.http.as_ref().map(|h| h.path.clone()))
        })
        .collect()
}

/// `externalTrafficPolicy: Local`, opted in cluster-wide: the LB checks the
/// `healthCheckNodePort` the API server allocated, over HTTP on `/healthz` (also on a port with
/// a per-port option); a Service that opts out keeps the official TCP check on its NodePort; a
/// bad value is a Warning naming the annotation and what is accepted, and the Load Balancer
/// stays as it was.
#[tokio::test]
async fn local_traffic_policy_health_checks_kube_proxy() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1", "lb-n2"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION, ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_LOCAL_ENDPOINTS", "true")], &[]).await;
    create(&api, &local_policy(lb_service("local", &[], &[80, 443]))).await;
    let off = [("load-balancer.hetzner.cloud/health-check-local-endpoints", "false")];
    create(&api, &local_policy(lb_service("optout", &off, &[80]))).await;
    // A per-port option on one port keeps kube-proxy's check there too (issue 27 item 2).
    let per_port = [("load-balancer.hetzner.cloud/port.443.protocol", "tcp")];
    create(&api, &local_policy(lb_service("perport", &per_port, &[80, 443]))).await;

    let svc = ensured(&api, "local").await;
    let hc_port = svc.spec.as_ref().unwrap().health_check_node_port.expect("allocated") as u16;
    let want = vec![("http".to_owned(), hc_port, Some("/healthz".to_owned())); 2];
    wait_lb(&h, &svc, "kube-proxy's health check on every port", |l| checks(l) == want).await;

    let perport = ensured(&api, "perport").await;
    let hc = perport.spec.as_ref().unwrap().health_check_node_port.expect("allocated") as u16;
    let both = vec![("http".to_owned(), hc, Some("/healthz".to_owned())); 2];
    wait_lb(&h, &perport, "kube-proxy's check on the per-port port too", |l| checks(l) == both).await;

    let optout = ensured(&api, "optout").await;
    let node_port = optout.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].node_port.unwrap() as u16;
    wait_lb(&h, &optout, "the official TCP check", |l| checks(l) == vec![("tcp".to_owned(), node_port, None)]).await;

    let writes = |h: &hcloud_fake::FakeHandle| {
        h.request_counts().by_endpoint.into_iter().filter(|(k, _)| !k.starts_with("GET ")).collect::<Vec<_>>()
    };
    let before = writes(&h);
    let bad = serde_json::json!({"metadata": {"annotations": {
        "load-balancer.hetzner.cloud/health-check-local-endpoints": "yes"}}});
    api.patch("local", &PatchParams::default(), &Patch::Merge(&bad)).await.expect("patch");
    let e = wait_for_event(&env.client, "Service", "local", "SyncLoadBalancerFailed", REACT).await.expect("warning");
    assert_eq!(e.type_, "Warning");
    assert!(
        e.message.contains("annotation load-balancer.hetzner.cloud/health-check-local-endpoints: \"yes\" is invalid")
            && e.message.contains("accepted: true, false"),
        "{}",
        e.message
    );
    assert_eq!(writes(&h), before, "nothing was sent");
    assert_eq!(checks(&wait_lb(&h, &svc, "unchanged", |_| true).await), want);
}

/// Upstream's `EnsuringLoadBalancer` / `EnsuredLoadBalancer`, and a Warning
/// `UnhealthyLoadBalancerTarget` on the Service once Hetzner reports one of its targets
/// unhealthy for longer than `unhealthy-target-warning-after`, read from the Load Balancer list
/// (re-read here every second: `HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE=1s`).
#[tokio::test]
async fn an_unhealthy_target_gives_a_warning_on_the_service() {
    use hcloud_fake::control::TargetHealthOverride;

    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let nodes = server_nodes(&env, &["lb-n1", "lb-n2"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION, ("HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE", "1s")], &[]).await;
    let after = [("load-balancer.hetzner.cloud/unhealthy-target-warning-after", "2s")];
    create(&api, &lb_service("health", &after, &[80])).await;
    let svc = ensured(&api, "health").await;
    let lb = wait_lb(&h, &svc, "both targets", |l| l.targets.len() == 2).await;
    for reason in ["EnsuringLoadBalancer", "EnsuredLoadBalancer"] {
        let e = wait_for_event(&env.client, "Service", "health", reason, REACT).await.expect("upstream event");
        assert_eq!(e.type_, "Normal");
    }

    h.set_target_health(lb.id, &TargetHealthOverride::server(nodes[1].0, "unhealthy").port(80)).expect("health");
    let e =
        wait_for_event(&env.client, "Service", "health", "UnhealthyLoadBalancerTarget", REACT).await.expect("warning");
    assert_eq!(e.type_, "Warning");
    assert!(
        e.message.starts_with(&format!(
            "Hetzner reports target server {} (Node lb-n2) of Load Balancer {} ({}) unhealthy on port 80 for at least",
            nodes[1].0, lb.name, lb.id
        )),
        "{}",
        e.message
    );
}

/// Foreign targets and services are kept (`HCLOUD_LOAD_BALANCERS_KEEP_FOREIGN=true`): a Load
/// Balancer made by hand with a target and a service of its own is adopted by name; the
/// Service's port and Nodes are added and recorded in `hcloud-ccm.managed/*` labels, the hand-made
/// ones survive the adoption and a Node's removal, which removes exactly that Node's target.
/// Deleting the Service keeps the Load Balancer for them: only its own port and target go, then
/// its identity label and record, and a Normal event says so (issue 27 item 8).
#[tokio::test]
async fn foreign_targets_and_services_survive_every_sync() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let nodes = server_nodes(&env, &["lb-n1", "lb-n2"], None, &[]).await;
    let by_hand = h.seed_server(&hcloud_fake::control::SeedServer::new("by-hand")).expect("server");
    let seed: hcloud_fake::control::SeedLoadBalancer = serde_json::from_value(serde_json::json!({
        "name": "shop-lb",
        "services": [{"protocol": "tcp", "listen_port": 9000, "destination_port": 31900}],
        "targets": [{"type": "server", "server": {"id": by_hand}}]
    }))
    .expect("seed");
    h.seed_load_balancer(&seed).expect("load balancer made by hand");
    let _ccm = env.ccm(&[LOCATION, ("HCLOUD_LOAD_BALANCERS_KEEP_FOREIGN", "true")], &[]).await;
    create(&api, &lb_service("keep", &[("load-balancer.hetzner.cloud/name", "shop-lb")], &[80])).await;
    let svc = ensured(&api, "keep").await;
    let ports = |l: &hcloud_fake::wire::LoadBalancer| {
        let mut p: Vec<u16> = l.services.iter().map(|s| s.listen_port).collect();
        p.sort_unstable();
        p
    };
    let mut all = vec![nodes[0].0, nodes[1].0, by_hand];
    all.sort_unstable();
    let lb = wait_lb(&h, &svc, "adopted, ours added, the hand-made ones kept", |l| {
        target_servers(l) == all && ports(l) == [80, 9000]
    })
    .await;
    let record: Vec<&str> =
        lb.labels.keys().filter(|k| k.starts_with("hcloud-ccm.managed/")).map(String::as_str).collect();
    let want = [
        "hcloud-ccm.managed/port-80".to_owned(),
        format!("hcloud-ccm.managed/server-{}", nodes[0].0),
        format!("hcloud-ccm.managed/server-{}", nodes[1].0),
    ];
    let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(record, want);

    delete_node(&env, "lb-n1").await;
    let mut left = vec![nodes[1].0, by_hand];
    left.sort_unstable();
    let lb = wait_lb(&h, &svc, "exactly the deleted Node's target goes", |l| {
        target_servers(l) == left && !l.labels.contains_key(&format!("hcloud-ccm.managed/server-{}", nodes[0].0))
    })
    .await;
    assert_eq!(ports(&lb), [80, 9000]);

    api.delete("keep", &DeleteParams::default()).await.expect("delete");
    wait_for(&api, "keep", REACT, "the Service is gone (finalizer removed)", |s| s.is_none()).await.expect("gone");
    let kept = h.load_balancer(lb.id).expect("the Load Balancer is kept for its hand-made parts");
    assert_eq!((target_servers(&kept), ports(&kept)), (vec![by_hand], vec![9000]));
    assert!(kept.labels.is_empty(), "no identity label, no record: {:?}", kept.labels);
    let e =
        wait_for_event(&env.client, "Service", "keep", "LoadBalancerKeptForForeignParts", REACT).await.expect("event");
    assert_eq!(e.type_, "Normal");
    assert_eq!(
        e.message,
        format!(
            "Load Balancer shop-lb ({}) is kept, not deleted: it has 1 service (port 9000) and 1 target that \
             hcloud-ccm did not add (keep-foreign); removed this Service's 1 service (port 80) and 1 target and the \
             label hcloud-ccm/service-uid; delete the Load Balancer yourself when it is no longer needed",
            lb.id
        )
    );
}
