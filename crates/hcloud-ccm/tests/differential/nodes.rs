//! Nodes: initialization (providerID, labels, addresses, taints) with and without
//! `HCLOUD_NETWORK`, in each address family, with the zone label on and off; the lifecycle (a
//! deleted server's Node is deleted, a powered-off server's Node tainted).

use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::wire::ServerStatus;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use test_harness::{NodeBuilder, Ready, UNINITIALIZED_TAINT_KEY, set_ready};

use super::{Steps, differential};
use crate::oracle::subject::{CHART_ARGS, Config, Subject};
use crate::oracle::world::World;

const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";

fn initialized(n: &Node) -> bool {
    let spec = n.spec.clone().unwrap_or_default();
    spec.provider_id.is_some() && !spec.taints.unwrap_or_default().iter().any(|t| t.key == UNINITIALIZED_TAINT_KEY)
}

/// Waits until every Node is initialized.
async fn all_initialized(world: &World, subject: Subject, ccm: &test_harness::ChildProcess, count: usize) {
    world
        .settle(subject, ccm, &format!("{count} Nodes initialized"), async || {
            let nodes = world.nodes.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
            nodes.len() == count && nodes.iter().all(initialized)
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_without_a_network() {
    differential("nodes_without_a_network", async |subject| {
        let world = World::fresh().await;
        let h = world.h();
        h.seed_server(&SeedServer::new("n-1").server_type("cpx22").location("nbg1")).expect("server");
        let n2 = h.seed_server(&SeedServer::new("n-2").server_type("cx23").location("fsn1")).expect("server");
        let n3 = h.seed_server(&SeedServer::new("n-3").server_type("cax11").location("hel1")).expect("server");
        let ccm = world.start(subject, &Config::default().args(CHART_ARGS));
        for name in ["n-1", "n-2", "n-3"] {
            NodeBuilder::new(name).kubelet_hostname_address(true).register(&world.client).await.expect("node");
        }
        let mut steps: Steps = Vec::new();
        all_initialized(&world, subject, &ccm, 3).await;
        steps.push(("initialized".into(), world.snapshot(&[]).await));

        // The kubelet of a deleted server stops reporting: its Node turns Unknown.
        h.delete_server(n3).expect("delete server");
        set_ready(&world.client, "n-3", Ready::Unknown).await.expect("NotReady");
        world
            .settle(subject, &ccm, "the deleted server's Node is deleted", async || {
                world.nodes.get_opt("n-3").await.is_ok_and(|n| n.is_none())
            })
            .await;
        steps.push(("server deleted".into(), world.snapshot(&[]).await));

        h.set_server_status(n2, ServerStatus::Off).expect("power off");
        set_ready(&world.client, "n-2", Ready::Unknown).await.expect("NotReady");
        world
            .settle(subject, &ccm, "the powered-off server's Node is tainted", async || {
                world.nodes.get_opt("n-2").await.ok().flatten().is_some_and(|n| {
                    n.spec.and_then(|s| s.taints).unwrap_or_default().iter().any(|t| t.key == SHUTDOWN_TAINT)
                })
            })
            .await;
        steps.push(("server powered off".into(), world.snapshot(&[]).await));

        h.set_server_status(n2, ServerStatus::Running).expect("power on");
        set_ready(&world.client, "n-2", Ready::True).await.expect("Ready");
        world
            .settle(subject, &ccm, "the powered-on server's Node loses the taint", async || {
                world.nodes.get_opt("n-2").await.ok().flatten().is_some_and(|n| {
                    !n.spec.and_then(|s| s.taints).unwrap_or_default().iter().any(|t| t.key == SHUTDOWN_TAINT)
                })
            })
            .await;
        steps.push(("server powered on".into(), world.snapshot(&[]).await));
        drop(ccm);
        steps
    })
    .await;
}

/// Three servers in network `k8s` (one also with a provided node IP), Nodes initialized with
/// `env`.
async fn network_run(subject: Subject, env: &[(&str, &str)]) -> Steps {
    let world = World::fresh().await;
    let h = world.h();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).expect("net");
    h.seed_server(&SeedServer::new("m-1").server_type("cpx22").location("nbg1").network_ip(net, "10.0.0.11"))
        .expect("server");
    h.seed_server(&SeedServer::new("m-2").location("fsn1").network_ip(net, "10.0.0.12")).expect("server");
    h.seed_server(&SeedServer::new("m-3").location("hel1").network_ip(net, "10.0.0.13")).expect("server");
    let mut all_env = vec![("HCLOUD_NETWORK", "k8s")];
    all_env.extend_from_slice(env);
    let ccm = world.start(subject, &Config::default().env(&all_env).args(CHART_ARGS));
    NodeBuilder::new("m-1").kubelet_hostname_address(true).register(&world.client).await.expect("node");
    NodeBuilder::new("m-2").provided_node_ip("10.0.0.12").register(&world.client).await.expect("node");
    NodeBuilder::new("m-3").kubelet_hostname_address(true).register(&world.client).await.expect("node");
    all_initialized(&world, subject, &ccm, 3).await;
    let steps = vec![("initialized".to_owned(), world.snapshot(&[]).await)];
    drop(ccm);
    steps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_in_a_network_ipv4() {
    differential("nodes_in_a_network_ipv4", async |subject| network_run(subject, &[]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_in_a_network_ipv6() {
    differential("nodes_in_a_network_ipv6", async |subject| {
        network_run(subject, &[("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv6")]).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_in_a_network_dualstack_without_zone_label() {
    differential("nodes_in_a_network_dualstack_without_zone_label", async |subject| {
        network_run(
            subject,
            &[("HCLOUD_INSTANCES_ADDRESS_FAMILY", "dualstack"), ("HCLOUD_INSTANCES_ZONE_LABEL_ENABLED", "false")],
        )
        .await
    })
    .await;
}
