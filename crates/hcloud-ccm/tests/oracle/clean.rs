//! Cleaning a control plane between runs: every Node and every LoadBalancer Service of an
//! earlier run goes (finalizers stripped: their CCM is gone), and with
//! [`remove_earlier_turns`] every Event too. Used by the differential suite's `World`, the
//! end-to-end tests' `Env` (both take turns on the test binary's pool of control planes) and
//! the benchmarks.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use test_harness::wait_until;

/// Deletes every Node and every LoadBalancer Service (their finalizers stripped first) and
/// waits until they are gone; panics after 30 s.
pub async fn remove_nodes_and_load_balancer_services(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    for n in nodes.list(&ListParams::default()).await.expect("list nodes").items {
        let _ = nodes.delete(&n.metadata.name.unwrap_or_default(), &DeleteParams::default()).await;
    }
    let all: Api<Service> = Api::all(client.clone());
    for svc in all.list(&ListParams::default()).await.expect("list services").items {
        let (Some(ns), Some(name)) = (svc.metadata.namespace.clone(), svc.metadata.name.clone()) else { continue };
        if !is_load_balancer(&svc) {
            continue;
        }
        let api: Api<Service> = Api::namespaced(client.clone(), &ns);
        let strip = serde_json::json!({"metadata": {"finalizers": null}});
        let _ = api.patch(&name, &PatchParams::default(), &Patch::Merge(&strip)).await;
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
    wait_until(Duration::from_secs(30), "Nodes and LoadBalancer Services of earlier runs are gone", async || {
        let no_nodes = nodes.list(&ListParams::default()).await.is_ok_and(|l| l.items.is_empty());
        let no_lbs = all.list(&ListParams::default()).await.is_ok_and(|l| !l.items.iter().any(is_load_balancer));
        no_nodes && no_lbs
    })
    .await
    .expect("a clean cluster");
}

fn is_load_balancer(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

/// [`remove_nodes_and_load_balancer_services`], and every Event of an earlier turn deleted:
/// tests that look for a Node's or a Service's Warnings would otherwise find those of an earlier
/// test's object of the same name on this control plane.
pub async fn remove_earlier_turns(client: &kube::Client) {
    remove_nodes_and_load_balancer_services(client).await;
    let all: Api<Event> = Api::all(client.clone());
    let namespaces: BTreeSet<String> = all
        .list_metadata(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter_map(|e| e.metadata.namespace)
        .collect();
    for ns in &namespaces {
        let events: Api<Event> = Api::namespaced(client.clone(), ns);
        events.delete_collection(&DeleteParams::default(), &ListParams::default()).await.expect("delete events");
    }
    wait_until(Duration::from_secs(30), "Events of earlier turns are gone", async || {
        all.list_metadata(&ListParams::default()).await.is_ok_and(|l| l.items.is_empty())
    })
    .await
    .expect("no events left");
}
