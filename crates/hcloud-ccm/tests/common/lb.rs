//! Set-up for Load Balancer end-to-end tests: a namespace per test, LoadBalancer Services,
//! Nodes backed by servers of the fake, and waits on the fake's Load Balancers.

use std::time::Duration;

use hcloud_fake::FakeHandle;
use hcloud_fake::control::SeedServer;
use hcloud_fake::wire::LoadBalancer;
use k8s_openapi::api::core::v1::{Namespace, Node, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use test_harness::{NodeBuilder, unique_name, wait_until};

use super::{Env, REACT};

/// The Service-UID label of the official CCM.
pub const UID_LABEL: &str = "hcloud-ccm/service-uid";

/// The cleanup finalizer of the service controller.
pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// Removes LoadBalancer Services left by earlier tests of this binary (their CCM is gone, so
/// their finalizers are stripped by hand), then creates a fresh namespace.
pub async fn fresh_namespace(env: &Env) -> (String, Api<Service>) {
    let all: Api<Service> = Api::all(env.client.clone());
    for svc in all.list(&ListParams::default()).await.expect("list services").items {
        let (Some(ns), Some(name)) = (svc.metadata.namespace.clone(), svc.metadata.name.clone()) else { continue };
        if ns == "default" && name == "kubernetes" {
            continue;
        }
        let api: Api<Service> = Api::namespaced(env.client.clone(), &ns);
        let strip = serde_json::json!({"metadata": {"finalizers": null}});
        let _ = api.patch(&name, &PatchParams::default(), &Patch::Merge(&strip)).await;
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
    wait_until(Duration::from_secs(30), "Services of earlier tests are gone", async || {
        all.list(&ListParams::default()).await.map(|l| l.items.len() <= 1).unwrap_or(false)
    })
    .await
    .expect("clean services");
    let ns = unique_name("lb");
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(ns.clone());
    namespaces.create(&PostParams::default(), &n).await.expect("namespace");
    (ns.clone(), Api::namespaced(env.client.clone(), &ns))
}

/// A `type: LoadBalancer` Service with `annotations` and TCP `ports`.
pub fn lb_service(name: &str, annotations: &[(&str, &str)], ports: &[i32]) -> Service {
    test_harness::load_balancer_service(name, annotations, ports)
}

/// Creates the Service.
pub async fn create(api: &Api<Service>, svc: &Service) -> Service {
    api.create(&PostParams::default(), svc).await.expect("create service")
}

/// Merge-patches the Service `name` (as an admin) and returns it as stored.
pub async fn patch(api: &Api<Service>, name: &str, patch: serde_json::Value) -> Service {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch service")
}

/// Sets (or, with `null`, removes) annotations of the Service `name`.
pub async fn annotate(api: &Api<Service>, name: &str, annotations: serde_json::Value) -> Service {
    patch(api, name, serde_json::json!({"metadata": {"annotations": annotations}})).await
}

/// Waits until the Service has an ingress and returns it.
pub async fn ensured(api: &Api<Service>, name: &str) -> Service {
    test_harness::wait_for(api, name, REACT, "the Service has a load balancer ingress", |s| {
        s.is_some_and(|s| !ingress(s).is_empty())
    })
    .await
    .expect("ingress")
    .expect("service")
}

/// Seeds a server per name (in `network` if given) and registers an initialized Node for it
/// (providerID set, no uninitialized taint). Returns (server id, node name).
pub async fn server_nodes(
    env: &Env,
    names: &[&str],
    network: Option<u64>,
    labels: &[(&str, &str)],
) -> Vec<(u64, String)> {
    let h = env.fake.handle();
    let mut out = Vec::new();
    for name in names {
        let mut seed = SeedServer::new(name);
        if let Some(net) = network {
            seed = seed.network(net);
        }
        let id = h.seed_server(&seed).expect("server");
        let mut b = NodeBuilder::new(*name).provider_id(format!("hcloud://{id}")).without_uninitialized_taint();
        for (k, v) in labels {
            b = b.label(*k, *v);
        }
        b.register(&env.client).await.expect("node registers");
        out.push((id, (*name).to_owned()));
    }
    out
}

/// The fake's Load Balancer labelled for `svc`, if any.
pub fn lb_of(h: &FakeHandle, svc: &Service) -> Option<LoadBalancer> {
    let uid = svc.metadata.uid.as_deref()?;
    h.snapshot().load_balancers.into_iter().find(|l| l.labels.get(UID_LABEL).map(String::as_str) == Some(uid))
}

/// Waits until the fake's Load Balancer of `svc` satisfies `ok`; returns it.
pub async fn wait_lb(h: &FakeHandle, svc: &Service, what: &str, ok: impl Fn(&LoadBalancer) -> bool) -> LoadBalancer {
    let mut last = None;
    let found = test_harness::wait_for_value(REACT, what, async || {
        let lb = lb_of(h, svc);
        let hit = lb.clone().filter(|l| ok(l));
        last = lb;
        hit
    })
    .await;
    match found {
        Ok(lb) => lb,
        Err(e) => panic!("{e}\nlast Load Balancer: {last:#?}"),
    }
}

/// The Service's status ingress as (ip or hostname, ipMode).
pub fn ingress(svc: &Service) -> Vec<(String, Option<String>)> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|i| (i.ip.or(i.hostname).unwrap_or_default(), i.ip_mode))
        .collect()
}

/// Whether the Service carries the cleanup finalizer.
pub fn has_finalizer(svc: &Service) -> bool {
    svc.metadata.finalizers.as_ref().is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// The sorted server ids of the Load Balancer's server targets.
pub fn target_servers(lb: &LoadBalancer) -> Vec<u64> {
    let mut ids: Vec<u64> = lb.targets.iter().filter_map(|t| t.server.as_ref().map(|s| s.id)).collect();
    ids.sort_unstable();
    ids
}

/// (listen port, destination port) of every LB service, sorted.
pub fn lb_ports(lb: &LoadBalancer) -> Vec<(u16, u16)> {
    let mut p: Vec<(u16, u16)> = lb.services.iter().map(|s| (s.listen_port, s.destination_port)).collect();
    p.sort_unstable();
    p
}

/// (port, nodePort) of every Service port, sorted.
pub fn node_ports(svc: &Service) -> Vec<(u16, u16)> {
    let mut p: Vec<(u16, u16)> = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.port as u16, p.node_port.unwrap_or_default() as u16))
        .collect();
    p.sort_unstable();
    p
}

/// Deletes a Node (its server stays).
pub async fn delete_node(env: &Env, name: &str) {
    let nodes: Api<Node> = Api::all(env.client.clone());
    nodes.delete(name, &DeleteParams::default()).await.expect("delete node");
}

/// How many times the Service's Load Balancer was ensured (the aggregated events' count).
pub async fn ensured_count(env: &Env, name: &str) -> i32 {
    test_harness::events_for(&env.client, "Service", name)
        .await
        .map(|events| events.iter().filter(|e| e.reason == "EnsuredLoadBalancer").map(|e| e.count).sum())
        .unwrap_or(0)
}

/// Touches the Service (an unrelated annotation), waits until it was ensured again, and
/// returns the Hetzner requests that sync sent.
pub async fn requests_of_an_unchanged_sync(env: &Env, api: &Api<Service>, name: &str) -> Vec<String> {
    let h = env.fake.handle();
    wait_until(REACT, "the Service was ensured", async || ensured_count(env, name).await >= 1).await.expect("ensured");
    let before = ensured_count(env, name).await;
    let requests = h.request_log().len();
    let body = serde_json::json!({"metadata": {"annotations": {"example.com/touched": unique_name("t")}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&body)).await.expect("patch service");
    wait_until(REACT, "the Service is ensured again", async || ensured_count(env, name).await > before)
        .await
        .expect("synced again");
    h.request_log().into_iter().skip(requests).map(|r| r.endpoint).collect()
}
