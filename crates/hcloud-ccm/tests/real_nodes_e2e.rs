//! End to end with real Nodes: two kubelets (each with its own containerd and kube-proxy, in a
//! network namespace of its own, `--cloud-provider=external`), kube-controller-manager and
//! kube-scheduler, the `hcloud-ccm` binary, and the Hetzner fake whose servers carry the nodes'
//! addresses ([`test_harness::real_node`]). Needs root and cgroup v1, as CI has.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{TOKEN, addresses, label, tainted};
use hcloud_fake::control::SeedServer;
use hcloud_fake::{FakeConfig, FakeServer};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use test_harness::real_node::{ECHO_IMAGE, NodeLab};
use test_harness::{ChildProcess, wait_for};

/// Real kubelets register, pull nothing and start pods in seconds, but a cold node is slower.
const SLOW: Duration = Duration::from_secs(120);

fn echo_deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "automountServiceAccountToken": false,
                    "enableServiceLinks": false,
                    "terminationGracePeriodSeconds": 1,
                    // One pod per node.
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": name}},
                    }],
                    "containers": [{
                        "name": "echo",
                        "image": ECHO_IMAGE,
                        "imagePullPolicy": "Never",
                        "ports": [{"containerPort": 8080}],
                        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
                    }],
                },
            },
        },
    }))
    .expect("deployment")
}

/// The nodes the app's ready pods run on.
async fn ready_pod_nodes(pods: &Api<Pod>, app: &str) -> BTreeSet<String> {
    let list = pods.list(&ListParams::default().labels(&format!("app={app}"))).await.expect("pods");
    list.items
        .iter()
        .filter(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect()
}

/// `hcloud-ccm` against the lab's API server (the CCM's RBAC-restricted identity) and the fake.
async fn start_ccm(lab: &NodeLab, fake: &FakeServer, env: &[(&str, &str)]) -> ChildProcess {
    let kubeconfig = format!("--kubeconfig={}", lab.control_plane().ccm_kubeconfig().display());
    let args = [
        "--cloud-provider=hcloud",
        "--allow-untagged-cloud",
        "--leader-elect=false",
        kubeconfig.as_str(),
        "--node-monitor-period=1s",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        "--v=2",
    ];
    let endpoint = fake.base_url();
    let mut all_env = vec![
        ("HCLOUD_TOKEN", TOKEN),
        ("HCLOUD_ENDPOINT", endpoint.as_str()),
        ("RUST_LOG", ""),
        ("HCLOUD_METRICS_ADDRESS", "127.0.0.1:0"),
    ];
    all_env.extend_from_slice(env);
    let ccm =
        ChildProcess::spawn(std::path::Path::new(env!("CARGO_BIN_EXE_hcloud-ccm")), &args, &all_env, "hcloud-ccm")
            .expect("hcloud-ccm spawns");
    ccm.wait_for_log("hcloud-ccm started", Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("hcloud-ccm did not start: {e}\n{}", ccm.logs()));
    ccm
}

#[tokio::test]
async fn kubelet_registered_nodes_are_initialized_and_run_pods() {
    let lab = NodeLab::start(&["kn-a", "kn-b"]).await.unwrap_or_else(|e| panic!("{e}"));
    let client = lab.control_plane().admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let h = fake.handle();
    let mut servers = Vec::new();
    for name in lab.node_names() {
        let ip = lab.node_ip(name).expect("ip").to_string();
        let mut seed = SeedServer::new(name).server_type("cx33").location("nbg1");
        seed.public_ipv4 = Some(ip);
        servers.push(h.seed_server(&seed).expect("server"));
    }
    let ccm = start_ccm(&lab, &fake, &[]).await;

    // The kubelets registered with the uninitialized taint; hcloud-ccm initializes them.
    for (name, server) in lab.node_names().into_iter().zip(&servers) {
        let node = wait_for(&nodes, name, SLOW, "initialized by hcloud-ccm", |n: Option<&Node>| {
            n.is_some_and(|n| !tainted(n) && n.spec.as_ref().and_then(|s| s.provider_id.as_deref()).is_some())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", lab.node_logs(name, 40)))
        .expect("node");
        let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.clone());
        assert_eq!(provider_id.as_deref(), Some(format!("hcloud://{server}").as_str()));
        assert_eq!(label(&node, "node.kubernetes.io/instance-type"), Some("cx33"));
        assert_eq!(label(&node, "topology.kubernetes.io/region"), Some("nbg1"));
        assert_eq!(label(&node, "topology.kubernetes.io/zone"), Some("nbg1-dc3"));
        let ip = lab.node_ip(name).expect("ip").to_string();
        let got = addresses(&node);
        assert!(got.contains(&("ExternalIP".to_owned(), ip)), "{name}: {got:?}");
        assert!(got.contains(&("Hostname".to_owned(), name.to_owned())), "{name}: {got:?}");
    }

    // A Deployment's pods run on both Nodes.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    deployments.create(&PostParams::default(), &echo_deployment("echo", 2)).await.expect("deployment");
    let all: BTreeSet<String> = lab.node_names().into_iter().map(str::to_owned).collect();
    let spread = test_harness::wait_until(SLOW, "a ready echo pod on each node", async || {
        ready_pod_nodes(&pods, "echo").await == all
    })
    .await;
    if let Err(e) = spread {
        panic!(
            "{e}: ready on {:?}\n{}\n{}",
            ready_pod_nodes(&pods, "echo").await,
            lab.node_logs("kn-a", 40),
            lab.node_logs("kn-b", 40)
        );
    }

    drop(ccm);
    lab.shutdown().await.unwrap_or_else(|leftovers| panic!("the lab left things behind: {leftovers}"));
}
