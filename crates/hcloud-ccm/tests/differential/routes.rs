//! Routes with the official chart's networking arguments (`--allocate-node-cidrs=true
//! --cluster-cidr=10.244.0.0/16`, routes reconciled on Node events): the network's routes as
//! Nodes join and leave.

use kube::api::ListParams;
use test_harness::wait_until;

use super::{Steps, differential};
use crate::oracle::cluster;
use crate::oracle::subject::{CHART_ARGS, CHART_NETWORKING_ARGS, Config};
use crate::oracle::world::World;

/// The routes of network `k8s` in the fake.
fn routes(world: &World) -> Vec<String> {
    let mut r: Vec<String> = world
        .h()
        .snapshot()
        .networks
        .iter()
        .filter(|n| n.name == "k8s")
        .flat_map(|n| n.routes.iter().map(|r| r.destination.clone()))
        .collect();
    r.sort();
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_as_nodes_join_and_leave() {
    differential("routes_as_nodes_join_and_leave", async |subject| {
        let world = World::fresh().await;
        cluster::seed(&world).await;
        let config = Config::default().env(&[("HCLOUD_NETWORK", "k8s")]).args(CHART_ARGS).args(CHART_NETWORKING_ARGS);
        let ccm = world.start(subject, &config);
        let mut steps: Steps = Vec::new();
        let want = |n: &[u32]| n.iter().map(|i| format!("10.244.{i}.0/24")).collect::<Vec<_>>();
        world.settle(subject, &ccm, "a route per Node", async || routes(&world) == want(&[1, 2, 3])).await;
        steps.push(("three Nodes".into(), world.snapshot(&[]).await));

        cluster::register(&world, 4).await;
        world.settle(subject, &ccm, "node-4's route", async || routes(&world) == want(&[1, 2, 3, 4])).await;
        steps.push(("a Node joins".into(), world.snapshot(&[]).await));

        world.nodes.delete("node-1", &Default::default()).await.expect("delete node");
        wait_until(std::time::Duration::from_secs(30), "node-1 is gone", async || {
            world.nodes.list(&ListParams::default()).await.is_ok_and(|l| l.items.len() == 3)
        })
        .await
        .expect("node deleted");
        world.settle(subject, &ccm, "node-1's route is gone", async || routes(&world) == want(&[2, 3, 4])).await;
        steps.push(("a Node leaves".into(), world.snapshot(&[]).await));
        drop(ccm);
        steps
    })
    .await;
}
