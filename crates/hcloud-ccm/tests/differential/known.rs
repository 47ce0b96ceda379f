//! Where hcloud-ccm does differently on purpose: each step shows one row of
//! `docs/migration.md`'s table, so the table is checked against both CCMs.
//!
//! - a Service whose `name` annotation names another Service's Load Balancer;
//! - a Service whose managed certificate's domains change;
//! - a Node relabelled so that it starts matching a Service's `node-selector`;
//! - a Node whose pod CIDR lies outside `--cluster-cidr`.

use hcloud_fake::control::SeedServer;
use kube::api::{Patch, PatchParams};
use test_harness::NodeBuilder;

use super::{Steps, differential};
use crate::oracle::cluster::{self, Case};
use crate::oracle::subject::{CHART_ARGS, CHART_NETWORKING_ARGS, Config};
use crate::oracle::world::World;

/// How many times the Service `name` was ensured (its `EnsuredLoadBalancer` events' count) plus
/// how many warnings it got: grows with every sync, successful or not.
async fn syncs(world: &World, name: &str) -> i32 {
    test_harness::events_for(&world.client, "Service", name)
        .await
        .map(|events| {
            events
                .iter()
                .filter(|e| e.namespace == world.namespace)
                .filter(|e| e.reason == "EnsuredLoadBalancer" || e.type_ == "Warning")
                .map(|e| e.count)
                .sum()
        })
        .unwrap_or(0)
}

/// The routes of network `k8s`.
fn routes(world: &World) -> Vec<String> {
    let networks = world.h().snapshot().networks;
    networks.iter().filter(|n| n.name == "k8s").flat_map(|n| n.routes.iter().map(|r| r.destination.clone())).collect()
}

/// Whether exactly one managed certificate exists and a Load Balancer uses it (no issuance or
/// switch pending).
fn one_certificate_in_use(world: &World) -> bool {
    let state = world.h().snapshot();
    let managed: Vec<u64> = state.certificates.iter().filter(|c| c.kind == "managed").map(|c| c.id).collect();
    let used: Vec<u64> = state
        .load_balancers
        .iter()
        .flat_map(|lb| lb.services.iter().filter_map(|s| s.http.as_ref()).flat_map(|h| h.certificates.clone()))
        .collect();
    managed.len() == 1 && used.contains(&managed[0])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_the_two_differ_on_purpose() {
    differential("where_the_two_differ_on_purpose", async |subject| {
        let world = World::fresh().await;
        cluster::seed(&world).await;
        let config = Config::default().env(&[("HCLOUD_NETWORK", "k8s")]).args(CHART_ARGS).args(CHART_NETWORKING_ARGS);
        let ccm = world.start(subject, &config);
        let at = |name, annotations: &[(&'static str, &'static str)]| {
            let mut all = vec![("location", "fsn1")];
            all.extend_from_slice(annotations);
            Case { name, annotations: all, ports: vec![80], role: None, add_port: false }
        };
        let mut cases = vec![
            at("owner", &[("name", "shared-lb")]),
            at(
                "managed",
                &[
                    ("protocol", "https"),
                    ("certificate-type", "managed"),
                    ("http-managed-certificate-domains", "old.example.com"),
                ],
            ),
            Case { role: Some("web"), ..at("selected", &[("node-selector", "role=web")]) },
        ];
        cluster::create(&world, &cases).await;
        let mut steps: Steps = Vec::new();
        world
            .settle(subject, &ccm, "every Service has its Load Balancer and every Node its route", async || {
                cluster::converged(&world, &cases).await && routes(&world).len() == 3
            })
            .await;
        steps.push(("created".into(), world.snapshot(&[]).await));

        // Another Service names the owner's Load Balancer.
        let intruder = at("intruder", &[("name", "shared-lb")]);
        cluster::create(&world, std::slice::from_ref(&intruder)).await;
        world.settle(subject, &ccm, "the intruder was synced", async || syncs(&world, "intruder").await > 0).await;
        steps.push(("a second Service names the first one's Load Balancer".into(), world.snapshot(&[]).await));
        world.services.delete("intruder", &Default::default()).await.expect("delete intruder");

        // The managed certificate's domains change.
        let before = syncs(&world, "managed").await;
        let patch = serde_json::json!({"metadata": {"annotations": {
            "load-balancer.hetzner.cloud/http-managed-certificate-domains": "new.example.com"}}});
        world.services.patch("managed", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch");
        world
            .settle(subject, &ccm, "the new domains were synced, one certificate left in use", async || {
                syncs(&world, "managed").await > before && one_certificate_in_use(&world)
            })
            .await;
        steps.push(("the managed certificate's domains change".into(), world.snapshot(&[]).await));

        // node-3 starts matching the node selector: a label only, nothing else changes.
        let patch = serde_json::json!({"metadata": {"labels": {"role": "web"}}});
        world.nodes.patch("node-3", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("label node-3");
        cases[2].role = Some("web");
        world.settle(subject, &ccm, "the relabelled Node was seen", async || true).await;
        steps.push(("a Node starts matching a node selector".into(), world.snapshot(&[]).await));

        // A Node whose pod CIDR is outside --cluster-cidr (10.244.0.0/16).
        let net = world.h().snapshot().networks.iter().find(|n| n.name == "k8s").map(|n| n.id).expect("network");
        world.h().seed_server(&SeedServer::new("outside").network_ip(net, "10.0.0.30")).expect("server");
        NodeBuilder::new("outside")
            .kubelet_hostname_address(true)
            .pod_cidrs(["10.99.0.0/24"])
            .register(&world.client)
            .await
            .expect("node");
        world
            .settle(subject, &ccm, "the Node outside the cluster CIDR got a route or a warning", async || {
                let node = world.nodes.get_opt("outside").await.ok().flatten();
                let warned = test_harness::events_for(&world.client, "Node", "outside")
                    .await
                    .is_ok_and(|e| e.iter().any(|e| e.type_ == "Warning" && e.reason == "ClusterCIDRMisconfigured"));
                node.is_some_and(|n| cluster::initialized(&n)) && (warned || routes(&world).len() == 4)
            })
            .await;
        steps.push(("a Node's pod CIDR lies outside --cluster-cidr".into(), world.snapshot(&[]).await));
        drop(ccm);
        steps
    })
    .await;
}
