//! End to end with real Nodes: two kubelets (each with its own containerd and kube-proxy, in a
//! network namespace of its own, `--cloud-provider=external`), kube-controller-manager and
//! kube-scheduler, the `hcloud-ccm` binary, and the Hetzner fake whose servers carry the nodes'
//! addresses ([`test_harness::real_node`]), including two Services on one shared Load Balancer.
//! Needs root and cgroup v1, as CI has.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::lb::lb_of;
use common::{TOKEN, addresses, label, spawn_hcloud_ccm, tainted};
use hcloud_fake::control::SeedServer;
use hcloud_fake::wire::LoadBalancer;
use hcloud_fake::{DataPlaneConfig, FakeConfig, FakeServer};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use test_harness::real_node::{NodeLab, echo_deployment};
use test_harness::{ChildProcess, events_for, load_balancer_service, wait_for, wait_until};

/// Real kubelets register, pull nothing and start pods in seconds, but a cold node is slower.
const SLOW: Duration = Duration::from_secs(120);

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

/// The health the fake's Load Balancer reports per target server (first service).
fn health_by_server(lb: &LoadBalancer) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = lb
        .targets
        .iter()
        .filter_map(|t| {
            let id = t.server.as_ref()?.id;
            let status = t.health_status.as_ref()?.first()?.status.clone();
            Some((id, status))
        })
        .collect();
    out.sort();
    out
}

/// `GET /` through the Load Balancer: the name of the pod that answered.
async fn get(ip: &str, port: u16) -> Result<String, String> {
    let url = format!("http://{ip}:{port}/");
    let client = reqwest::Client::builder().timeout(Duration::from_secs(3)).build().map_err(|e| e.to_string())?;
    let response = client.get(&url).send().await.map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url}: {}", response.status()));
    }
    response.text().await.map(|t| t.trim().to_owned()).map_err(|e| e.to_string())
}

/// The pods of `app` by node.
async fn pods_by_node(pods: &Api<Pod>, app: &str) -> Vec<(String, String)> {
    let list = pods.list(&ListParams::default().labels(&format!("app={app}"))).await.expect("pods");
    list.items.iter().filter_map(|p| Some((p.spec.as_ref()?.node_name.clone()?, p.metadata.name.clone()?))).collect()
}

/// `hcloud-ccm` against the lab's API server (the CCM's RBAC-restricted identity) and the fake.
async fn start_ccm(lab: &NodeLab, fake: &FakeServer, env: &[(&str, &str)]) -> ChildProcess {
    let kubeconfig = lab.control_plane().ccm_kubeconfig();
    let ccm = spawn_hcloud_ccm(&fake.base_url(), TOKEN, kubeconfig, env, &["--leader-elect=false"], "hcloud-ccm");
    ccm.wait_for_log("hcloud-ccm started", Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("hcloud-ccm did not start: {e}\n{}", ccm.logs()));
    ccm
}

#[tokio::test]
async fn kubelet_registered_nodes_are_initialized_and_run_pods() {
    let mut lab = NodeLab::start(&["kn-a", "kn-b"]).await.unwrap_or_else(|e| panic!("{e}"));
    let client = lab.control_plane().admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    // Load Balancers answer on loopback addresses of a /16 picked at random (two suites side by
    // side use different ones).
    let range = format!("127.{}.0.0/16", fastrand::u8(16..250));
    let data_plane = DataPlaneConfig::parse(&range).expect("data plane");
    let fake = FakeServer::start(FakeConfig::default().with_load_balancer_data_plane(data_plane)).await.expect("fake");
    let h = fake.handle();
    let mut servers = Vec::new();
    for name in lab.node_names() {
        let ip = lab.node_ip(name).expect("ip").to_string();
        let mut seed = SeedServer::new(name).server_type("cx33").location("nbg1");
        seed.public_ipv4 = Some(ip);
        servers.push(h.seed_server(&seed).expect("server"));
    }
    // A short cache age: the unhealthy-target pass looks at the Load Balancers every 2 s.
    let env = [("HCLOUD_LOAD_BALANCERS_LOCATION", "nbg1"), ("HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE", "2s")];
    let ccm = start_ccm(&lab, &fake, &env).await;

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
    deployments
        .create(&PostParams::default(), &echo_deployment("echo", 2, None).expect("spec"))
        .await
        .expect("deployment");
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

    // A LoadBalancer Service: a Load Balancer whose address reaches the pods.
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let mut svc = load_balancer_service("echo", &[], &[80]);
    if let Some(spec) = svc.spec.as_mut()
        && let Some(ports) = spec.ports.as_mut()
    {
        ports[0].target_port = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080));
    }
    services.create(&PostParams::default(), &svc).await.expect("service");
    let svc = wait_for(&services, "echo", SLOW, "a Load Balancer address", |s: Option<&Service>| {
        s.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.as_ref()?.first()?.ip.clone()).is_some()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()))
    .expect("service");
    let ip =
        svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()?.ingress.as_ref()?.first()?.ip.clone()).expect("ip");
    let lb = lb_of(&h, &svc).expect("the Service's Load Balancer");
    assert_eq!(lb.public_net.ipv4.ip.as_deref(), Some(ip.as_str()), "the status shows the address that answers");
    let echo_pods: BTreeSet<String> = pods_by_node(&pods, "echo").await.into_iter().map(|(_, p)| p).collect();
    let mut answered = BTreeSet::new();
    let reached = wait_until(SLOW, "answers from both echo pods through the Load Balancer", async || {
        if let Ok(pod) = get(&ip, 80).await {
            answered.insert(pod);
        }
        answered == echo_pods
    })
    .await;
    reached.unwrap_or_else(|e| panic!("{e}: answered {answered:?} of {echo_pods:?}\n{:?}", h.data_plane()));

    // externalTrafficPolicy: Local with kube-proxy's health check: only the node with a ready
    // pod is healthy, and traffic follows the pod when it moves.
    deployments
        .create(&PostParams::default(), &echo_deployment("local", 1, Some("kn-a")).expect("spec"))
        .await
        .expect("deployment");
    // hcloud-ccm's own Warning about unhealthy targets, against a real failing check (kube-proxy's
    // healthCheckNodePort answers 503 on the node without the pod).
    let annotations = [
        ("load-balancer.hetzner.cloud/health-check-local-endpoints", "true"),
        ("load-balancer.hetzner.cloud/unhealthy-target-warning-after", "1s"),
    ];
    let mut local = load_balancer_service("local", &annotations, &[81]);
    if let Some(spec) = local.spec.as_mut() {
        spec.external_traffic_policy = Some("Local".to_owned());
        if let Some(ports) = spec.ports.as_mut() {
            ports[0].target_port = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080));
        }
    }
    services.create(&PostParams::default(), &local).await.expect("service");
    let local = wait_for(&services, "local", SLOW, "a Load Balancer address", |s: Option<&Service>| {
        s.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.as_ref()?.first()?.ip.clone()).is_some()
    })
    .await
    .expect("local")
    .expect("local");
    let local_ip = local
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref()?.ingress.as_ref()?.first()?.ip.clone())
        .expect("ip");
    for (node, server, other) in [("kn-a", servers[0], servers[1]), ("kn-b", servers[1], servers[0])] {
        if node == "kn-b" {
            let moved = serde_json::json!({"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": "kn-b"}}}}});
            deployments.patch("local", &PatchParams::default(), &Patch::Merge(&moved)).await.expect("move");
        }
        let want = vec![(server, "healthy".to_owned()), (other, "unhealthy".to_owned())];
        let mut want_sorted = want.clone();
        want_sorted.sort();
        let mut seen = Vec::new();
        let healthy = wait_until(SLOW, "only the node with the pod is healthy", async || {
            seen = lb_of(&h, &local).map(|lb| health_by_server(&lb)).unwrap_or_default();
            seen == want_sorted
        })
        .await;
        healthy.unwrap_or_else(|e| panic!("{node}: {e}: health {seen:?}\n{:?}", h.data_plane()));
        if node == "kn-a" {
            // (kn-a may have been warned about too, while its pod was not ready yet.)
            let about_kn_b = format!("Hetzner reports target server {other} (Node kn-b) of Load Balancer");
            let mut seen_events = Vec::new();
            let warned = wait_until(SLOW, "an UnhealthyLoadBalancerTarget Warning about kn-b", async || {
                seen_events = events_for(&client, "Service", "local").await.unwrap_or_default();
                seen_events.iter().any(|e| {
                    e.type_ == "Warning"
                        && e.reason == "UnhealthyLoadBalancerTarget"
                        && e.message.contains(&about_kn_b)
                        && e.message.contains("unhealthy on port 81")
                })
            })
            .await;
            warned.unwrap_or_else(|e| panic!("{e}: {seen_events:#?}\n{}", ccm.logs()));
        }
        let owner = pods_by_node(&pods, "local").await;
        let on_node: Vec<&String> = owner.iter().filter(|(n, _)| n == node).map(|(_, p)| p).collect();
        assert_eq!(on_node.len(), 1, "one pod on {node}: {owner:?}");
        for _ in 0..6 {
            let pod = get(&local_ip, 81).await.unwrap_or_else(|e| panic!("{node}: {e}"));
            assert_eq!(&pod, on_node[0], "traffic goes only to the node with the pod");
        }
    }

    // Two Services on one shared Load Balancer (sharing-key): one address, each port reaches
    // its own Service's pods (echo's on 84, local's, now on kn-b, on 85).
    let mut shared_ips = Vec::new();
    for (name, app, port) in [("share-echo", "echo", 84), ("share-local", "local", 85)] {
        let mut svc = load_balancer_service(name, &[("load-balancer.hetzner.cloud/sharing-key", "pair")], &[port]);
        if let Some(spec) = svc.spec.as_mut() {
            spec.selector = Some([("app".to_owned(), app.to_owned())].into());
            if let Some(ports) = spec.ports.as_mut() {
                ports[0].target_port = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080));
            }
        }
        services.create(&PostParams::default(), &svc).await.expect("service");
        let svc = wait_for(&services, name, SLOW, "a Load Balancer address", |s: Option<&Service>| {
            s.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.as_ref()?.first()?.ip.clone()).is_some()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()))
        .expect("service");
        let ip = svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()?.ingress.as_ref()?.first()?.ip.clone());
        shared_ips.push(ip.expect("ip"));
    }
    assert_eq!(shared_ips[0], shared_ips[1], "one address for both Services");
    let shared_ip = &shared_ips[0];
    let local_pod: Vec<String> = pods_by_node(&pods, "local").await.into_iter().map(|(_, p)| p).collect();
    let mut by_port: Vec<(u16, BTreeSet<String>)> = Vec::new();
    let reached = wait_until(SLOW, "both ports of the shared address answer from their own pods", async || {
        by_port.clear();
        for port in [84, 85] {
            let mut seen = BTreeSet::new();
            for _ in 0..4 {
                if let Ok(pod) = get(shared_ip, port).await {
                    seen.insert(pod);
                }
            }
            by_port.push((port, seen));
        }
        by_port[0].1 == echo_pods && by_port[1].1.iter().eq(local_pod.iter())
    })
    .await;
    reached
        .unwrap_or_else(|e| panic!("{e}: {by_port:?} (echo {echo_pods:?}, local {local_pod:?})\n{:?}", h.data_plane()));
    for name in ["share-echo", "share-local"] {
        services.delete(name, &DeleteParams::default()).await.expect("delete service");
    }

    // A server deleted after its kubelet stopped: its Node goes away.
    lab.stop_node("kn-b").await.expect("stop kn-b");
    h.delete_server(servers[1]).expect("delete server");
    wait_for(&nodes, "kn-b", SLOW, "Node kn-b deleted", |n: Option<&Node>| n.is_none())
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));
    services.delete("echo", &DeleteParams::default()).await.expect("delete service");
    services.delete("local", &DeleteParams::default()).await.expect("delete service");
    wait_until(SLOW, "every Load Balancer deleted", async || h.snapshot().load_balancers.is_empty())
        .await
        .expect("deleted");

    drop(ccm);
    lab.shutdown().await.unwrap_or_else(|leftovers| panic!("the lab left things behind: {leftovers}"));
}
