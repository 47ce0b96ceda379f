//! End to end: Services of type LoadBalancer get Hetzner Load Balancers (real kube-apiserver +
//! etcd, the Hetzner fake, the `hcloud-ccm` binary). The official CCM's e2e cases translated to
//! the fake, plus the Service and Node lifecycle around them.
//!
//! Runs against the provisioned control plane (Kubernetes 1.37 by default, 1.33 in CI's second
//! pass), which keeps `spec.loadBalancerClass`, `status.loadBalancer.ingress[].ipMode` and
//! mixed-protocol ports: each is asserted here as stored by the API server.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use common::lb::{
    create, delete_node, ensured, fresh_namespace, has_finalizer, ingress, lb_of, lb_ports, lb_service, node_ports,
    patch, server_nodes, target_servers, wait_lb,
};
use common::{Env, REACT};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::{SeedCertificate, SeedLoadBalancer, SeedNetwork};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use test_harness::{wait_for, wait_for_event};

const LOCATION: (&str, &str) = ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1");

/// `TestServiceLoadBalancersMinimalSetup`: a location is enough; the Service gets the Load
/// Balancer's IPv4 and IPv6, the finalizer and the upstream events.
#[tokio::test]
async fn service_load_balancers_minimal_setup() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let nodes = server_nodes(&env, &["lb-n1", "lb-n2"], None, &[]).await;
    let _ccm = env.ccm(&[], &[]).await;
    create(&api, &lb_service("web", &[("load-balancer.hetzner.cloud/location", "nbg1")], &[80])).await;

    let svc = ensured(&api, "web").await;
    let lb = wait_lb(&h, &svc, "LB with both targets", |l| l.targets.len() == 2).await;
    assert_eq!(lb.location.name, "nbg1");
    let default_name: String =
        format!("a{}", svc.metadata.uid.clone().unwrap().replace('-', "")).chars().take(32).collect();
    assert_eq!(lb.name, default_name, "upstream's default name");
    assert_eq!(target_servers(&lb), {
        let mut v: Vec<u64> = nodes.iter().map(|n| n.0).collect();
        v.sort_unstable();
        v
    });
    assert_eq!(lb_ports(&lb), node_ports(&svc));
    let ips: Vec<String> = ingress(&svc).into_iter().map(|(ip, _)| ip).collect();
    assert_eq!(ips, vec![lb.public_net.ipv4.ip.clone().unwrap(), lb.public_net.ipv6.ip.clone().unwrap()]);
    assert!(has_finalizer(&svc));
    for reason in ["EnsuringLoadBalancer", "EnsuredLoadBalancer"] {
        let e = wait_for_event(&env.client, "Service", "web", reason, REACT).await.expect(reason);
        assert_eq!(e.type_, "Normal");
    }
    // No type configured: the official CCM's warning.
    let e = wait_for_event(&env.client, "Service", "web", "LoadBalancerTypeUnconfigured", REACT).await.expect("event");
    assert_eq!(e.type_, "Warning");
    // One create carried services and targets: no add_service / add_target requests.
    assert_eq!(h.request_count("POST /v1/load_balancers"), 1);
    assert_eq!(h.request_count("POST /v1/load_balancers/{id}/actions/add_target"), 0);
    assert_eq!(h.request_count("POST /v1/load_balancers/{id}/actions/add_service"), 0);
}

/// `TestServiceLoadBalancersHTTPS`: an uploaded certificate by name on port 443.
#[tokio::test]
async fn service_load_balancers_https() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let cert = h.seed_certificate(&SeedCertificate::uploaded("shop-tls", &["shop.example.com"])).expect("cert");
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    let svc = lb_service(
        "tls",
        &[
            ("load-balancer.hetzner.cloud/protocol", "https"),
            ("load-balancer.hetzner.cloud/http-certificates", "shop-tls"),
            ("load-balancer.hetzner.cloud/type", "lb11"),
        ],
        &[443],
    );
    create(&api, &svc).await;
    let svc = ensured(&api, "tls").await;
    let lb = wait_lb(&h, &svc, "LB", |_| true).await;
    assert_eq!(lb.services.len(), 1);
    assert_eq!(lb.services[0].protocol, "https");
    assert_eq!(lb.services[0].listen_port, 443);
    assert_eq!(lb.services[0].http.as_ref().map(|h| h.certificates.clone()), Some(vec![cert]));
}

/// `TestServiceLoadBalancersHTTPSWithManagedCertificate`: exactly one certificate carries the
/// Service-UID label, with the ACME staging label.
#[tokio::test]
async fn service_load_balancers_https_with_managed_certificate() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    let svc = lb_service(
        "managed",
        &[
            ("load-balancer.hetzner.cloud/protocol", "https"),
            ("load-balancer.hetzner.cloud/certificate-type", "managed"),
            ("load-balancer.hetzner.cloud/http-managed-certificate-domains", "shop.ccm-test.example.com"),
            ("load-balancer.hetzner.cloud/http-managed-certificate-acme-staging", "true"),
        ],
        &[443],
    );
    create(&api, &svc).await;
    let svc = ensured(&api, "managed").await;
    let uid = svc.metadata.uid.clone().unwrap();
    let certs: Vec<_> = h
        .snapshot()
        .certificates
        .into_iter()
        .filter(|c| c.labels.get("hcloud-ccm/service-uid") == Some(&uid))
        .collect();
    assert_eq!(certs.len(), 1, "exactly one certificate with the Service-UID label");
    assert_eq!(certs[0].kind, "managed");
    assert_eq!(certs[0].domain_names, vec!["shop.ccm-test.example.com"]);
    assert_eq!(certs[0].labels.get("HC-Use-Staging-CA").map(String::as_str), Some("true"));
    let lb = wait_lb(&h, &svc, "LB", |_| true).await;
    assert_eq!(lb.services[0].http.as_ref().map(|h| h.certificates.clone()), Some(vec![certs[0].id]));
}

/// `TestServiceLoadBalancersWithPrivateNetwork`: `use-private-ip` with a subnet; one ingress IP
/// lies in the subnet (private ingress).
#[tokio::test]
async fn service_load_balancers_with_private_network() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = h
        .seed_network(
            &SeedNetwork::new("k8s", "10.0.0.0/8")
                .subnet("10.0.0.0/24", "eu-central")
                .subnet("10.1.0.0/24", "eu-central"),
        )
        .expect("net");
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1", "lb-n2"], Some(net), &[]).await;
    let _ccm = env.ccm(&[LOCATION, ("HCLOUD_NETWORK", "k8s")], &[]).await;
    let svc = lb_service(
        "private",
        &[
            ("load-balancer.hetzner.cloud/use-private-ip", "true"),
            ("load-balancer.hetzner.cloud/private-subnet-ip-range", "10.0.0.0/24"),
        ],
        &[80],
    );
    create(&api, &svc).await;
    let svc = ensured(&api, "private").await;
    let lb = wait_lb(&h, &svc, "LB with private targets", |l| {
        l.targets.len() == 2 && l.targets.iter().all(|t| t.use_private_ip == Some(true))
    })
    .await;
    let private = lb.private_net.first().map(|n| n.ip.clone()).expect("attached");
    assert!(private.starts_with("10.0.0."), "{private}");
    let svc = wait_for(&api, "private", REACT, "private ingress", |s| {
        s.is_some_and(|s| ingress(s).iter().any(|(ip, _)| ip.starts_with("10.0.0.")))
    })
    .await
    .expect("private ingress")
    .unwrap();
    assert!(ingress(&svc).iter().any(|(ip, _)| *ip == private));
}

/// `node-selector`: only matching Nodes become targets, and relabelling a Node follows within
/// seconds (the official CCM waits for an unrelated change); a label no selector looks at costs
/// no request, one it looks at costs exactly the target change.
#[tokio::test]
async fn node_selector_picks_the_targets_and_follows_node_labels() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let workers = server_nodes(&env, &["lb-w1", "lb-w2"], None, &[("role", "worker")]).await;
    let edge = server_nodes(&env, &["lb-edge"], None, &[("role", "edge")]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("sel", &[("load-balancer.hetzner.cloud/node-selector", "role=worker")], &[80])).await;
    let svc = ensured(&api, "sel").await;
    let lb = wait_lb(&h, &svc, "LB", |l| !l.targets.is_empty()).await;
    let mut want: Vec<u64> = workers.iter().map(|w| w.0).collect();
    want.sort_unstable();
    assert_eq!(target_servers(&lb), want);
    h.finish_all_actions();
    wait_for_event(&env.client, "Service", "sel", "EnsuredLoadBalancer", REACT).await.expect("ensured");

    let before = h.request_counts();
    let label = |k: &str, v: &str| serde_json::json!({"metadata": {"labels": {k: v}}});
    // Read by no selector: nothing happens. Then one the selector reads: the edge Node joins.
    env.nodes.patch("lb-w1", &PatchParams::default(), &Patch::Merge(&label("team", "a"))).await.expect("label");
    env.nodes.patch("lb-edge", &PatchParams::default(), &Patch::Merge(&label("role", "worker"))).await.expect("label");
    let lb = wait_lb(&h, &svc, "the relabelled Node joins", |l| target_servers(l).contains(&edge[0].0)).await;
    assert_eq!(lb.targets.len(), 3);
    wait_for_event(&env.client, "Service", "sel", "UpdatedLoadBalancer", REACT).await.expect("updated event");
    let after = h.request_counts();
    let writes: Vec<(String, u64)> = after
        .by_endpoint
        .iter()
        .filter(|(k, _)| !k.starts_with("GET "))
        .map(|(k, n)| (k.clone(), n - before.get(k)))
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(writes, [("POST /v1/load_balancers/{id}/actions/add_target".to_owned(), 1)], "{after:?}");
    assert_eq!(after.get("GET /v1/load_balancers"), before.get("GET /v1/load_balancers"), "the list is not re-read");

    env.nodes.patch("lb-w2", &PatchParams::default(), &Patch::Merge(&label("role", "edge"))).await.expect("label");
    let lb = wait_lb(&h, &svc, "the relabelled Node leaves", |l| !target_servers(l).contains(&workers[1].0)).await;
    let mut want = vec![workers[0].0, edge[0].0];
    want.sort_unstable();
    assert_eq!(target_servers(&lb), want);
}

/// Ports added, removed and NodePorts changed: the LB services follow, one service per port.
#[tokio::test]
async fn ports_added_removed_and_node_port_changed() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("ports", &[], &[80, 443])).await;
    let svc = ensured(&api, "ports").await;
    wait_lb(&h, &svc, "two ports", |l| lb_ports(l) == node_ports(&svc)).await;

    // 443 removed, 8080 added, 80 moved to another NodePort.
    let mut spec = svc.spec.clone().unwrap();
    let mut ports = spec.ports.take().unwrap();
    ports.retain(|p| p.port == 80);
    ports[0].node_port = Some(if ports[0].node_port == Some(31999) { 31998 } else { 31999 });
    ports.push(k8s_openapi::api::core::v1::ServicePort {
        name: Some("p8080".into()),
        port: 8080,
        protocol: Some("TCP".into()),
        ..Default::default()
    });
    spec.ports = Some(ports);
    let mut updated = svc.clone();
    updated.spec = Some(spec);
    updated.status = None;
    let svc = api.replace("ports", &PostParams::default(), &updated).await.expect("replace");
    assert_eq!(node_ports(&svc).len(), 2);
    let lb = wait_lb(&h, &svc, "ports follow", |l| lb_ports(l) == node_ports(&svc)).await;
    assert!(lb.services.iter().all(|s| s.health_check.port == s.destination_port), "health checks on the NodePort");
}

/// Nodes added, deleted, or excluded by label: the targets follow. The label's value `false`
/// includes the node again (upstream since 1.34; before, any value excluded).
#[tokio::test]
async fn targets_follow_nodes_added_deleted_and_excluded() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let first = server_nodes(&env, &["lb-n1", "lb-n2"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("nodes", &[], &[80])).await;
    let svc = ensured(&api, "nodes").await;
    wait_lb(&h, &svc, "two targets", |l| l.targets.len() == 2).await;

    let added = server_nodes(&env, &["lb-n3"], None, &[]).await;
    wait_lb(&h, &svc, "node added", |l| target_servers(l).contains(&added[0].0)).await;
    wait_for_event(&env.client, "Service", "nodes", "UpdatedLoadBalancer", REACT).await.expect("updated event");

    delete_node(&env, "lb-n1").await;
    wait_lb(&h, &svc, "node deleted", |l| !target_servers(l).contains(&first[0].0) && l.targets.len() == 2).await;

    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client.clone());
    let exclude = serde_json::json!({"metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}}});
    nodes.patch("lb-n2", &PatchParams::default(), &Patch::Merge(&exclude)).await.expect("label");
    let lb = wait_lb(&h, &svc, "node excluded", |l| !target_servers(l).contains(&first[1].0)).await;
    assert_eq!(target_servers(&lb), vec![added[0].0]);
    let include = serde_json::json!({"metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "false"}}});
    nodes.patch("lb-n2", &PatchParams::default(), &Patch::Merge(&include)).await.expect("label");
    wait_lb(&h, &svc, "exclude=false includes the node again", |l| target_servers(l).contains(&first[1].0)).await;
}

/// A change the provider let finish in the background fails (the fake fails the `add_target`
/// action after accepting it): the provider warns and asks for the Service to be synced again,
/// and the target arrives without any further change to the Service or the nodes.
#[tokio::test]
async fn a_failed_background_action_is_repaired_without_another_change() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-f1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("repair", &[], &[80])).await;
    let svc = ensured(&api, "repair").await;
    wait_lb(&h, &svc, "one target", |l| l.targets.len() == 1).await;

    h.fail_next_actions(hcloud_fake::control::ActionFailure {
        count: 1,
        command: Some("add_target".into()),
        code: "action_failed".into(),
        message: "injected".into(),
    });
    let added = server_nodes(&env, &["lb-f2"], None, &[]).await;
    let warning =
        wait_for_event(&env.client, "Service", "repair", "LoadBalancerActionFailed", REACT).await.expect("warning");
    assert_eq!(warning.type_, "Warning");
    let lb = wait_lb(&h, &svc, "the failed target added again", |l| target_servers(l).contains(&added[0].0)).await;
    assert_eq!(lb.targets.len(), 2);
}

/// Service deleted: the Load Balancer is deleted and the finalizer removed.
#[tokio::test]
async fn service_deleted_deletes_the_load_balancer() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("gone", &[], &[80])).await;
    let svc = ensured(&api, "gone").await;
    wait_lb(&h, &svc, "LB", |_| true).await;
    api.delete("gone", &DeleteParams::default()).await.expect("delete");
    wait_for(&api, "gone", REACT, "the Service is gone (finalizer removed)", |s| s.is_none()).await.expect("gone");
    assert!(lb_of(&h, &svc).is_none(), "the Load Balancer is deleted");
    assert!(h.snapshot().load_balancers.is_empty());
}

/// Type changed from LoadBalancer to ClusterIP: the Load Balancer is deleted and the finalizer
/// removed; the Service stays.
#[tokio::test]
async fn type_changed_to_cluster_ip_deletes_the_load_balancer() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("retype", &[], &[80])).await;
    let svc = ensured(&api, "retype").await;
    wait_lb(&h, &svc, "LB", |_| true).await;
    let mut spec = svc.spec.clone().unwrap();
    spec.type_ = Some("ClusterIP".into());
    for p in spec.ports.iter_mut().flatten() {
        p.node_port = None;
    }
    let mut updated = svc.clone();
    updated.spec = Some(spec);
    updated.status = None;
    api.replace("retype", &PostParams::default(), &updated).await.expect("replace");
    wait_for(&api, "retype", REACT, "finalizer removed", |s| s.is_some_and(|s| !has_finalizer(s))).await.expect("fin");
    assert!(h.snapshot().load_balancers.is_empty(), "the Load Balancer is deleted");
    wait_for_event(&env.client, "Service", "retype", "DeletedLoadBalancer", REACT).await.expect("deleted event");
}

/// A delete-protected Load Balancer survives the deletion of its Service; the Service goes.
#[tokio::test]
async fn protected_load_balancer_survives_deletion_of_its_service() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("keep", &[], &[80])).await;
    let svc = ensured(&api, "keep").await;
    let lb = wait_lb(&h, &svc, "LB", |_| true).await;
    // Protected outside the CCM, as users do in the console.
    let client = hcloud_api::Client::builder(hcloud_api::SecretString::from(common::TOKEN.to_owned()))
        .endpoint(env.fake.base_url())
        .build()
        .expect("client");
    let id = hcloud_api::models::LoadBalancerId(lb.id as i64);
    // The Load Balancer is locked while the CCM's create action runs.
    let action = test_harness::wait_for_value(REACT, "change_protection accepted", async || {
        client.load_balancers().change_protection(id, true).await.ok()
    })
    .await
    .expect("protect");
    client.wait_for_action(&action, REACT).await.expect("protected");
    api.delete("keep", &DeleteParams::default()).await.expect("delete");
    wait_for(&api, "keep", REACT, "the Service is gone", |s| s.is_none()).await.expect("gone");
    let kept = h.load_balancer(lb.id).expect("the Load Balancer is still there");
    assert!(kept.protection.delete);
    let e =
        wait_for_event(&env.client, "Service", "keep", "LoadBalancerDeletionProtected", REACT).await.expect("event");
    assert_eq!(e.type_, "Warning");
}

/// The `name` annotation renames the Load Balancer.
#[tokio::test]
async fn load_balancer_renamed_through_the_name_annotation() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("rename", &[], &[80])).await;
    let svc = ensured(&api, "rename").await;
    let before = wait_lb(&h, &svc, "LB", |_| true).await;
    patch(
        &api,
        "rename",
        serde_json::json!({"metadata": {"annotations": {"load-balancer.hetzner.cloud/name": "shop-front"}}}),
    )
    .await;
    let after = wait_lb(&h, &svc, "renamed", |l| l.name == "shop-front").await;
    assert_eq!(after.id, before.id, "renamed, not replaced");
    assert_eq!(h.snapshot().load_balancers.len(), 1);
}

/// An existing Load Balancer is adopted by name: labelled, configured, not duplicated.
#[tokio::test]
async fn existing_load_balancer_adopted_by_name() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let existing = h.seed_load_balancer(&SeedLoadBalancer::new("imported")).expect("lb");
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("adopt", &[("load-balancer.hetzner.cloud/name", "imported")], &[80])).await;
    let svc = ensured(&api, "adopt").await;
    let lb = wait_lb(&h, &svc, "adopted and configured", |l| l.targets.len() == 1 && !l.services.is_empty()).await;
    assert_eq!(lb.id, existing);
    assert_eq!(h.snapshot().load_balancers.len(), 1);
    assert_eq!(h.request_count("POST /v1/load_balancers"), 0);
}

/// A Service in another namespace naming another Service's Load Balancer: refused with a
/// Warning event naming the Load Balancer and its owner label; nothing is changed, and deleting
/// that Service leaves the Load Balancer to its owner.
#[tokio::test]
async fn load_balancer_of_another_service_is_not_taken_over_by_name() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, owners) = fresh_namespace(&env).await;
    let other_ns = test_harness::unique_name("lb");
    let mut ns = k8s_openapi::api::core::v1::Namespace::default();
    ns.metadata.name = Some(other_ns.clone());
    Api::all(env.client.clone()).create(&PostParams::default(), &ns).await.expect("namespace");
    let intruders: Api<Service> = Api::namespaced(env.client.clone(), &other_ns);
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    let name = ("load-balancer.hetzner.cloud/name", "shop-lb");
    create(&owners, &lb_service("shop", &[name], &[443])).await;
    let owner = ensured(&owners, "shop").await;
    let before = wait_lb(&h, &owner, "the owner's Load Balancer with its target", |l| l.targets.len() == 1).await;
    let uid = owner.metadata.uid.clone().expect("uid");

    create(&intruders, &lb_service("grab", &[name], &[80])).await;
    let e = wait_for_event(&env.client, "Service", "grab", "SyncLoadBalancerFailed", REACT).await.expect("warning");
    assert_eq!(e.type_, "Warning");
    // The reason the docs name is in the text, so events can be searched by it.
    let lead = format!(
        "Error syncing load balancer: failed to ensure load balancer: LoadBalancerOwnedElsewhere: Service {other_ns}/grab: \
         Load Balancer shop-lb ({})",
        before.id
    );
    assert!(e.message.starts_with(&lead), "{}", e.message);
    assert!(e.message.contains(&format!("hcloud-ccm/service-uid={uid}")), "{}", e.message);
    intruders.delete("grab", &DeleteParams::default()).await.expect("delete");
    wait_for(&intruders, "grab", REACT, "the refused Service is gone", |s| s.is_none()).await.expect("gone");

    let after = h.load_balancer(before.id).expect("the owner's Load Balancer is still there");
    assert_eq!(after.labels.get("hcloud-ccm/service-uid"), Some(&uid));
    assert_eq!((lb_ports(&after), target_servers(&after)), (lb_ports(&before), target_servers(&before)));
    assert_eq!(h.snapshot().load_balancers.len(), 1);
}

/// A bad annotation: a Warning event naming the annotation, the value and what is accepted;
/// the Load Balancer stays as it was.
#[tokio::test]
async fn bad_annotation_gives_a_warning_and_leaves_the_load_balancer_alone() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("bad", &[], &[80])).await;
    let svc = ensured(&api, "bad").await;
    let before = wait_lb(&h, &svc, "LB with its target", |l| l.targets.len() == 1).await;
    let mutations = |h: &hcloud_fake::FakeHandle| h.request_log().into_iter().filter(|r| r.method != "GET").count();
    let sent_before = mutations(&h);
    patch(
        &api,
        "bad",
        serde_json::json!({"metadata": {"annotations": {"load-balancer.hetzner.cloud/algorithm-type": "fastest"}}}),
    )
    .await;
    let e = wait_for_event(&env.client, "Service", "bad", "SyncLoadBalancerFailed", REACT).await.expect("warning");
    assert_eq!(e.type_, "Warning");
    assert!(
        e.message.contains("annotation load-balancer.hetzner.cloud/algorithm-type: \"fastest\" is invalid; accepted: round_robin, least_connections"),
        "{}",
        e.message
    );
    assert!(
        e.message.starts_with(
            "Error syncing load balancer: failed to ensure load balancer: InvalidLoadBalancerConfiguration: Service "
        ),
        "{}",
        e.message
    );
    assert_eq!(mutations(&h), sent_before, "nothing was changed");
    let after = lb_of(&h, &svc).expect("still there");
    assert_eq!(
        (after.algorithm.kind.as_str(), after.services.len(), after.targets.len()),
        ("round_robin", before.services.len(), 1)
    );
}

/// The fake's Load Balancer API fails while the Service is created, then the answer to the
/// create is lost: the Service converges with exactly one Load Balancer.
#[tokio::test]
async fn outage_during_reconcile_converges_without_a_duplicate() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    server_nodes(&env, &["lb-n1"], None, &[]).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    h.inject_fault(hcloud_fake::FaultRule::error(None, "/v1/load_balancers/**", 500, "server_error").times(0));
    create(&api, &lb_service("outage", &[], &[80])).await;
    let e = wait_for_event(&env.client, "Service", "outage", "SyncLoadBalancerFailed", REACT).await.expect("failed");
    assert_eq!(e.type_, "Warning");
    assert!(h.snapshot().load_balancers.is_empty());
    // Recovery, but the create's answer is lost on the way back (the create happened).
    h.clear_faults();
    h.inject_fault(hcloud_fake::FaultRule::html(Some("POST"), "/v1/load_balancers", 502).applied().times(1));
    let svc = ensured(&api, "outage").await;
    wait_lb(&h, &svc, "LB", |l| l.targets.len() == 1).await;
    assert_eq!(h.snapshot().load_balancers.len(), 1, "no duplicate");
    assert_eq!(h.request_count("POST /v1/load_balancers"), 1, "created once; found by its label after the lost answer");
}

/// Mixed TCP/UDP ports on one Service (GA since Kubernetes 1.26): a Warning naming the UDP
/// port, the TCP port still served.
#[tokio::test]
async fn udp_ports_are_reported_and_tcp_ports_served() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    let mut svc = lb_service("dns", &[], &[53]);
    let mut ports = svc.spec.as_mut().unwrap().ports.take().unwrap();
    ports[0].name = Some("tcp".into());
    let mut udp = ports[0].clone();
    udp.name = Some("udp".into());
    udp.protocol = Some("UDP".into());
    ports.push(udp);
    svc.spec.as_mut().unwrap().ports = Some(ports);
    let stored = create(&api, &svc).await;
    let protocols: Vec<_> =
        stored.spec.unwrap().ports.unwrap().into_iter().map(|p| p.protocol.unwrap_or_default()).collect();
    assert_eq!(protocols, ["TCP", "UDP"], "the API server keeps both ports of a mixed-protocol Service");
    let e =
        wait_for_event(&env.client, "Service", "dns", "UnsupportedProtocolConfigured", REACT).await.expect("warning");
    assert_eq!(e.type_, "Warning");
    assert!(e.message.contains("53/UDP"), "{}", e.message);
    let svc = ensured(&api, "dns").await;
    let lb = wait_lb(&h, &svc, "LB", |_| true).await;
    assert_eq!(lb.services.iter().map(|s| s.listen_port).collect::<Vec<_>>(), vec![53]);
    assert!(lb.services.iter().all(|s| s.protocol == "tcp"), "{:?}", lb.services);
}

/// PROXY protocol: every LB service sends it, and the status says `ipMode: Proxy` (kept by the
/// API server since 1.30), so kube-proxy sends in-cluster traffic through the Load Balancer.
#[tokio::test]
async fn proxy_protocol_and_ip_mode() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let _ccm = env.ccm(&[LOCATION], &[]).await;
    create(&api, &lb_service("proxy", &[("load-balancer.hetzner.cloud/uses-proxyprotocol", "true")], &[80])).await;
    let svc = ensured(&api, "proxy").await;
    let lb = wait_lb(&h, &svc, "LB", |_| true).await;
    assert!(lb.services.iter().all(|s| s.proxyprotocol));
    let modes: Vec<Option<String>> = ingress(&svc).into_iter().map(|(_, m)| m).collect();
    assert_eq!(modes.len(), 2);
    assert!(modes.iter().all(|m| m.as_deref() == Some("Proxy")), "{modes:?}");
}

/// `--load-balancer-class`: only Services of that class are served; class-less Services and
/// Services of another class are left to other controllers.
#[tokio::test]
async fn load_balancer_class_selects_the_services() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let _ccm = env.ccm(&[LOCATION], &["--load-balancer-class=example.com/hcloud"]).await;
    let classed = |name: &str, class: &str| {
        let mut svc = lb_service(name, &[], &[80]);
        svc.spec.as_mut().unwrap().load_balancer_class = Some(class.into());
        svc
    };
    let first = create(&api, &classed("classed", "example.com/hcloud")).await;
    assert_eq!(first.spec.and_then(|s| s.load_balancer_class).as_deref(), Some("example.com/hcloud"));
    create(&api, &lb_service("plain", &[], &[80])).await;
    create(&api, &classed("foreign", "example.com/metallb")).await;
    // Created after the other two: once it is served, they were looked at (one worker, FIFO).
    create(&api, &classed("classed-2", "example.com/hcloud")).await;
    ensured(&api, "classed").await;
    ensured(&api, "classed-2").await;
    for name in ["plain", "foreign"] {
        let other = api.get(name).await.expect(name);
        assert!(ingress(&other).is_empty() && !has_finalizer(&other), "{name} is left to others");
    }
    assert_eq!(h.snapshot().load_balancers.len(), 2);
}

/// `HCLOUD_LOAD_BALANCERS_ENABLED=false`: the service controller does not run; Services of type
/// LoadBalancer are left alone (the official CCM's coarse switch for MetalLB and the like).
#[tokio::test]
async fn load_balancers_disabled_leaves_services_alone() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let ccm = env.ccm(&[LOCATION, ("HCLOUD_LOAD_BALANCERS_ENABLED", "false")], &[]).await;
    assert!(
        ccm.logs().contains("service-lb-controller not started: the cloud provider does not offer load balancers"),
        "{}",
        ccm.logs()
    );
    let svc = create(&api, &lb_service("off", &[], &[80])).await;
    assert!(!has_finalizer(&svc));
    assert!(!ccm.logs().contains("is set but has no effect"), "no variable is reported as ignored: {}", ccm.logs());
    assert_eq!(h.request_count("GET /v1/load_balancers"), 0);
}
