//! hcloud-ccm under exactly the official CCM's ClusterRole: an operator who keeps the official
//! manifest and swaps only the image gets no `403`.
//!
//! The rules are those of the official release's `deploy/ccm.yaml` (read from the release
//! source at test time, converted by kubectl); the identity is a ServiceAccount of its own with
//! a token the API server issued, bound to a ClusterRole with those rules and to nothing else
//! (no `system:auth-delegator`, no `extension-apiserver-authentication-reader`). hcloud-ccm runs
//! every controller with the official chart's flags and leader election: Nodes initialized and
//! routed, a Load Balancer Service ensured (finalizer, status) and deleted, a Node whose server
//! is gone deleted, the secure port's start-up lookup of the cluster's client CA. The API
//! server's audit log then holds every request of that identity: none was refused, and each kind
//! of write those controllers make is among them (so "no 403" was not reached by doing nothing).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use common::lb::{FINALIZER, create, ensured, fresh_namespace, lb_of, lb_service};
use common::{Env, REACT, TOKEN, free_port};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::{SeedNetwork, SeedServer};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use serde_json::Value;
use test_harness::oracle::OfficialRelease;
use test_harness::{NodeBuilder, Ready, set_ready, unique_name, wait_for, wait_until};

/// The official static manifest's ClusterRole rules, through `kubectl create --dry-run=client`.
async fn official_rules(env: &Env) -> Vec<PolicyRule> {
    let release = OfficialRelease::unpack().expect("the official release source");
    let out = tokio::process::Command::new(env.cp.kubectl_path())
        .arg("--kubeconfig")
        .arg(env.cp.admin_kubeconfig())
        .args(["create", "--dry-run=client", "-o", "json", "-f"])
        .arg(release.static_manifest("ccm.yaml"))
        .output()
        .await
        .expect("kubectl runs");
    assert!(out.status.success(), "kubectl: {}", String::from_utf8_lossy(&out.stderr));
    // One JSON object per document.
    let objects: Vec<Value> =
        serde_json::Deserializer::from_slice(&out.stdout).into_iter().collect::<Result<_, _>>().expect("JSON");
    let role = objects.iter().find(|o| o["kind"] == "ClusterRole").expect("ClusterRole");
    serde_json::from_value(role["rules"].clone()).expect("rules")
}

/// A ServiceAccount bound to a ClusterRole with `rules` only: its kubeconfig and user name.
async fn identity_with(env: &Env, rules: Vec<PolicyRule>) -> (std::path::PathBuf, String) {
    let name = unique_name("official-role");
    let (kubeconfig, user) = env.cp.service_account_kubeconfig("kube-system", &name).await.expect("ServiceAccount");
    let role = ClusterRole {
        metadata: ObjectMeta { name: Some(name.clone()), ..ObjectMeta::default() },
        rules: Some(rules),
        ..ClusterRole::default()
    };
    Api::<ClusterRole>::all(env.client.clone()).create(&PostParams::default(), &role).await.expect("ClusterRole");
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta { name: Some(name.clone()), ..ObjectMeta::default() },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.clone(),
            namespace: Some("kube-system".into()),
            ..Subject::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(env.client.clone()).create(&PostParams::default(), &binding).await.expect("binding");
    (kubeconfig, user)
}

#[tokio::test]
async fn hcloud_ccm_needs_no_more_than_the_official_cluster_role() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let rules = official_rules(&env).await;
    let (kubeconfig, user) = identity_with(&env, rules).await;
    // The binding takes effect when the API server's RBAC cache has it.
    let nodes_as_ccm: Api<k8s_openapi::api::core::v1::Node> =
        Api::all(test_harness::client_from_kubeconfig(&kubeconfig).await.expect("client"));
    wait_until(REACT, "the official role is in effect", async || nodes_as_ccm.list(&Default::default()).await.is_ok())
        .await
        .expect("bound");

    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).expect("net");
    let kept = h.seed_server(&SeedServer::new("role-node-a").network_ip(net, "10.0.0.5")).expect("server");
    let gone = h.seed_server(&SeedServer::new("role-node-b").network_ip(net, "10.0.0.6")).expect("server");
    let lease = format!("--leader-elect-resource-name={}", unique_name("official-role"));
    let secure_port = format!("--secure-port={}", free_port());
    let args = [
        "--leader-elect=true",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
        lease.as_str(),
        secure_port.as_str(),
        "--allocate-node-cidrs=true",
        "--cluster-cidr=10.244.0.0/16",
        "--route-reconciliation-period=30s",
        "--webhook-secure-port=0",
        "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
    ];
    let env_vars = [
        ("HCLOUD_NETWORK", "k8s"),
        ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
        ("HCLOUD_LOAD_BALANCERS_TYPE", "lb11"),
        ("HCLOUD_SERVER_CACHE_LIFECYCLE_MAX_AGE", "2s"),
    ];
    let ccm = env.spawn_with(TOKEN, &kubeconfig, &env_vars, &args, "hcloud-ccm-official-role");
    ccm.wait_for_log("hcloud-ccm started", REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));

    // Nodes: initialized and routed; one whose server is gone is deleted.
    for (name, cidr) in [("role-node-a", "10.244.1.0/24"), ("role-node-b", "10.244.2.0/24")] {
        NodeBuilder::new(name).pod_cidrs([cidr]).register(&env.client).await.expect("node");
    }
    for name in ["role-node-a", "role-node-b"] {
        wait_for(&env.nodes, name, REACT, "initialized", |n| n.is_some_and(|n| !common::tainted(n)))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));
    }
    wait_until(REACT, "both routes exist", async || h.network(net).map(|n| n.routes.len() == 2).unwrap_or(false))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));
    h.delete_server(gone).expect("delete server");
    set_ready(&env.client, "role-node-b", Ready::False).await.expect("not ready");
    wait_for(&env.nodes, "role-node-b", REACT, "role-node-b deleted", |n| n.is_none())
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));

    // A Load Balancer Service: finalizer, Load Balancer, status; then deleted.
    let (_ns, services) = fresh_namespace(&env).await;
    create(&services, &lb_service("role-svc", &[], &[80])).await;
    let svc = ensured(&services, "role-svc").await;
    assert!(svc.metadata.finalizers.as_ref().is_some_and(|f| f.iter().any(|f| f == FINALIZER)));
    assert!(lb_of(&h, &svc).is_some());
    services.delete("role-svc", &DeleteParams::default()).await.expect("delete service");
    wait_for(&services, "role-svc", REACT, "the Service is gone (finalizer removed)", |s| s.is_none())
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));
    assert!(lb_of(&h, &svc).is_none(), "its Load Balancer was deleted");
    let _ = kept;

    // What the API server saw of this identity: every request allowed, and the writes made.
    // A watch is logged when it ends: stop the CCM first.
    assert!(ccm.is_running(), "{}", ccm.logs());
    ccm.stop().await.expect("hcloud-ccm stops");
    wait_until(REACT, "its watches are in the audit log", async || {
        env.cp.audit_events_of(&user).is_ok_and(|events| events.iter().any(|e| e.verb == "watch"))
    })
    .await
    .expect("watches logged");
    let events = env.cp.audit_events_of(&user).expect("audit log");
    let refused: Vec<String> =
        events.iter().filter(|e| e.code == 401 || e.code == 403).map(ToString::to_string).collect();
    assert!(
        refused.is_empty(),
        "refused under the official ClusterRole:\n{}\n--- logs ---\n{}",
        refused.join("\n"),
        ccm.logs()
    );
    for (verb, resource) in [
        ("patch", "nodes"),
        ("patch", "nodes/status"),
        ("delete", "nodes"),
        ("patch", "services/status"),
        ("create", "events"),
        ("create", "leases"),
        ("update", "leases"),
        ("get", "configmaps"),
        ("list", "services"),
        ("watch", "nodes"),
    ] {
        assert!(
            // Authorized (a 404 is answered after authorization: the test cluster publishes no
            // extension-apiserver-authentication ConfigMap).
            events
                .iter()
                .any(|e| e.verb == verb && e.resource == resource && ((200..300).contains(&e.code) || e.code == 404)),
            "no allowed {verb} {resource} in the audit log: the scenario did not exercise it\n{}",
            events.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
        );
    }
}
