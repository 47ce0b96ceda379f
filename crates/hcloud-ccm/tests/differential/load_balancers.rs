//! Load Balancers: one Service per annotation family of the official CCM, then a Node added, a
//! Node removed, a port added and the Services deleted; and the `HCLOUD_LOAD_BALANCERS_*`
//! defaults with a Service that overrides each.

use test_harness::wait_until;

use super::{Steps, differential};
use crate::oracle::cluster::{self, Case, FIXED_PRIVATE_IP};
use crate::oracle::subject::{CHART_ARGS, Config};
use crate::oracle::world::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancers_per_annotation_family() {
    differential("load_balancers_per_annotation_family", async |subject| {
        let world = World::fresh().await;
        cluster::seed(&world).await;
        let mut cases = cluster::annotation_families();
        let keep = [FIXED_PRIVATE_IP];
        let ccm = world.start(subject, &Config::default().env(&[("HCLOUD_NETWORK", "k8s")]).args(CHART_ARGS));
        cluster::create(&world, &cases).await;
        let mut steps: Steps = Vec::new();
        world
            .settle(subject, &ccm, "every Service has its Load Balancer", async || {
                cluster::converged(&world, &cases).await
            })
            .await;
        steps.push(("created".into(), world.snapshot(&keep).await));

        cluster::register(&world, 4).await;
        world.settle(subject, &ccm, "node-4 is a target", async || cluster::converged(&world, &cases).await).await;
        steps.push(("node added".into(), world.snapshot(&keep).await));

        world.nodes.delete("node-1", &Default::default()).await.expect("delete node");
        wait_until(std::time::Duration::from_secs(30), "node-1 is gone", async || {
            world.nodes.get_opt("node-1").await.is_ok_and(|n| n.is_none())
        })
        .await
        .expect("node deleted");
        world.settle(subject, &ccm, "node-1 is no target", async || cluster::converged(&world, &cases).await).await;
        steps.push(("node removed".into(), world.snapshot(&keep).await));

        cluster::add_port(&world, &mut cases).await;
        world.settle(subject, &ccm, "port 8443 is served", async || cluster::converged(&world, &cases).await).await;
        steps.push(("port added".into(), world.snapshot(&keep).await));

        cluster::delete_all(&world, subject, &ccm, &cases).await;
        steps.push(("deleted".into(), world.snapshot(&keep).await));
        drop(ccm);
        steps
    })
    .await;
}

/// Every `HCLOUD_LOAD_BALANCERS_*` default set; one Service takes them, one overrides each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancers_with_every_environment_default() {
    differential("load_balancers_with_every_environment_default", async |subject| {
        let world = World::fresh().await;
        cluster::seed(&world).await;
        let cases = vec![
            Case { name: "defaults", annotations: vec![], ports: vec![80], role: None, add_port: false },
            Case {
                name: "overrides",
                annotations: vec![
                    ("location", "fsn1"),
                    ("type", "lb11"),
                    ("algorithm-type", "round_robin"),
                    ("use-private-ip", "false"),
                    ("disable-private-ingress", "false"),
                    ("ipv6-disabled", "false"),
                    ("uses-proxyprotocol", "false"),
                    ("health-check-interval", "15s"),
                    ("health-check-timeout", "10s"),
                    ("health-check-retries", "3"),
                    ("private-subnet-ip-range", "10.0.0.0/24"),
                ],
                ports: vec![80],
                role: None,
                add_port: false,
            },
        ];
        let env = [
            ("HCLOUD_NETWORK", "k8s"),
            ("HCLOUD_LOAD_BALANCERS_LOCATION", "nbg1"),
            ("HCLOUD_LOAD_BALANCERS_TYPE", "lb21"),
            ("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "least_connections"),
            ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "true"),
            ("HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS", "true"),
            ("HCLOUD_LOAD_BALANCERS_DISABLE_IPV6", "true"),
            ("HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL", "true"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "7s"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", "4s"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "4"),
            ("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", "10.0.1.0/24"),
        ];
        let ccm = world.start(subject, &Config::default().env(&env).args(CHART_ARGS));
        cluster::create(&world, &cases).await;
        let mut steps: Steps = Vec::new();
        world
            .settle(subject, &ccm, "both Services have their Load Balancer", async || {
                cluster::converged(&world, &cases).await
            })
            .await;
        steps.push(("created".into(), world.snapshot(&[]).await));
        cluster::delete_all(&world, subject, &ccm, &cases).await;
        steps.push(("deleted".into(), world.snapshot(&[]).await));
        drop(ccm);
        steps
    })
    .await;
}
