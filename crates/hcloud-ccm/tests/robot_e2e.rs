//! End to end with Robot (dedicated) servers: real kube-apiserver + etcd, the fake's cloud and
//! Robot parts, and the `hcloud-ccm` binary with `ROBOT_ENABLED=true`.

use crate::common;

use common::{Env, REACT, addresses, label, pairs, server_ipv4, tainted};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::SeedServer;
use hcloud_fake::faults::FaultRule;
use hcloud_fake::robot::SeedRobotServer;
use k8s_openapi::api::core::v1::Node;
use test_harness::{NodeBuilder, Ready, set_ready, wait_for, wait_for_event, wait_until};

fn initialized(n: Option<&Node>) -> bool {
    n.is_some_and(|n| !tainted(n) && n.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_some())
}

fn provider_id(n: &Node) -> Option<&str> {
    n.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

/// The CCM's Robot environment against this fake, plus `extra`.
fn robot_env<'a>(robot_url: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("ROBOT_ENABLED", "true"),
        ("ROBOT_USER", "robot"),
        ("ROBOT_PASSWORD", "robot-password"),
        ("ROBOT_ENDPOINT", robot_url),
    ];
    env.extend_from_slice(extra);
    env
}

#[tokio::test]
async fn a_mixed_cluster_is_initialized_with_the_right_labels_and_addresses() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let cloud = h.seed_server(&SeedServer::new("cloud-1").server_type("cpx22").location("nbg1")).expect("server");
    let bm1 = h.seed_robot_server(&SeedRobotServer::new("bm-1").product("AX41-NVMe").dc("FSN1-DC14")).expect("bm-1");
    let bm2 = h.seed_robot_server(&SeedRobotServer::new("bm-2").product("Server Auction").dc("HEL1-DC2")).expect("bm");
    let robot_url = env.fake.robot_url();
    let _ccm = env.ccm(&robot_env(&robot_url, &[]), &[]).await;

    NodeBuilder::new("cloud-1").register(&env.client).await.expect("node");
    // The kubelet of bm-1 reports its vSwitch IP as InternalIP (--node-ip).
    NodeBuilder::new("bm-1")
        .provided_node_ip("10.200.0.5")
        .address("InternalIP", "10.200.0.5")
        .register(&env.client)
        .await
        .expect("node");
    // bm-2 was joined by the Syself CCM: legacy providerID.
    NodeBuilder::new("bm-2").provider_id(format!("hcloud://bm-{bm2}")).register(&env.client).await.expect("node");
    for name in ["cloud-1", "bm-1", "bm-2"] {
        wait_for(&env.nodes, name, REACT, "initialized", initialized).await.expect("initialized");
    }

    let n = env.nodes.get("cloud-1").await.expect("node");
    assert_eq!(provider_id(&n), Some(format!("hcloud://{cloud}").as_str()));
    assert_eq!(label(&n, "instance.hetzner.cloud/provided-by"), Some("cloud"));
    assert_eq!(label(&n, "node.kubernetes.io/instance-type"), Some("cpx22"));
    assert_eq!(addresses(&n), pairs(&[("Hostname", "cloud-1"), ("ExternalIP", &server_ipv4(&env.fake, cloud))]));

    let n = env.nodes.get("bm-1").await.expect("node");
    assert_eq!(provider_id(&n), Some(format!("hrobot://{bm1}").as_str()));
    assert_eq!(label(&n, "instance.hetzner.cloud/provided-by"), Some("robot"));
    assert_eq!(label(&n, "node.kubernetes.io/instance-type"), Some("AX41-NVMe"));
    assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some("fsn1-dc14"));
    assert_eq!(label(&n, "topology.kubernetes.io/region"), Some("fsn1"));
    let ip = h.robot_server(bm1).and_then(|s| s.ipv4).expect("ipv4").to_string();
    assert_eq!(
        addresses(&n),
        pairs(&[("InternalIP", "10.200.0.5"), ("Hostname", "bm-1"), ("ExternalIP", &ip)]),
        "the kubelet's InternalIP is forwarded (and leads, as the provided node IP)"
    );

    let n = env.nodes.get("bm-2").await.expect("node");
    assert_eq!(provider_id(&n), Some(format!("hcloud://bm-{bm2}").as_str()), "a legacy providerID is kept");
    assert_eq!(label(&n, "instance.hetzner.cloud/provided-by"), Some("robot"));
    assert_eq!(label(&n, "node.kubernetes.io/instance-type"), Some("Server-Auction"));
    assert_eq!(label(&n, "topology.kubernetes.io/zone"), Some("hel1-dc2"));

    assert_eq!(
        h.request_count("GET /robot/server"),
        1,
        "one Robot list for every Robot lookup: {:?}",
        h.request_counts()
    );
    assert_eq!(h.request_count("GET /robot/server/{id}"), 0);
}

#[tokio::test]
async fn a_removed_robot_server_gets_its_not_ready_node_deleted_and_ready_ones_kept() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let gone = h.seed_robot_server(&SeedRobotServer::new("bm-gone")).expect("server");
    let ready_gone = h.seed_robot_server(&SeedRobotServer::new("bm-ready-gone")).expect("server");
    let robot_url = env.fake.robot_url();
    let _ccm = env.ccm(&robot_env(&robot_url, &[("ROBOT_CACHE_TIMEOUT", "2s")]), &[]).await;
    for name in ["bm-gone", "bm-ready-gone"] {
        NodeBuilder::new(name).register(&env.client).await.expect("node");
        wait_for(&env.nodes, name, REACT, "initialized", initialized).await.expect("initialized");
    }
    h.delete_robot_server(gone).expect("delete");
    h.delete_robot_server(ready_gone).expect("delete");
    set_ready(&env.client, "bm-gone", Ready::False).await.expect("not ready");
    wait_for(&env.nodes, "bm-gone", REACT, "bm-gone deleted", |n| n.is_none()).await.expect("deleted");
    let event = wait_for_event(&env.client, "Node", "bm-gone", "DeletingNode", REACT).await.expect("event");
    assert!(event.message.contains("does not exist in the cloud provider"), "{}", event.message);
    assert!(h.request_count("GET /robot/server/{id}") >= 1, "the absence was confirmed by a direct lookup");
    assert!(env.nodes.get_opt("bm-ready-gone").await.expect("get").is_some(), "a Ready node is never deleted");
}

#[tokio::test]
async fn a_robot_rate_limit_deletes_nothing_and_recovers_after_the_wait() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let gone = h.seed_robot_server(&SeedRobotServer::new("bm-limited")).expect("server");
    let robot_url = env.fake.robot_url();
    let ccm = env
        .ccm(&robot_env(&robot_url, &[("ROBOT_CACHE_TIMEOUT", "1s"), ("ROBOT_RATE_LIMIT_WAIT_TIME", "5s")]), &[])
        .await;
    NodeBuilder::new("bm-limited").register(&env.client).await.expect("node");
    wait_for(&env.nodes, "bm-limited", REACT, "initialized", initialized).await.expect("initialized");

    // The account's budget is used up; the server is even gone, and the node NotReady: only a
    // wrong reading of the rate-limit answer could delete the node now.
    let seen = h.request_log().len();
    h.inject_robot_fault(FaultRule::error(None, "/**", 403, "RATE_LIMIT_EXCEEDED").times(0));
    h.delete_robot_server(gone).expect("delete");
    h.seed_robot_server(&SeedRobotServer::new("bm-new")).expect("server");
    set_ready(&env.client, "bm-limited", Ready::False).await.expect("not ready");
    NodeBuilder::new("bm-new").register(&env.client).await.expect("node");
    let lifecycle_failures = || ccm.logs().matches("error checking if node exists").count();
    wait_until(REACT, "the lifecycle checked the NotReady node three times under the rate limit", async || {
        lifecycle_failures() >= 3
    })
    .await
    .expect("rate limit observed");
    assert!(env.nodes.get_opt("bm-limited").await.expect("get").is_some(), "a rate limit must not delete nodes");
    assert!(tainted(&env.nodes.get("bm-new").await.expect("get")), "not initialized under the rate limit");
    let limited: Vec<_> = h.request_log()[seen..].iter().filter(|r| r.path.starts_with("/robot")).cloned().collect();
    assert!(!limited.is_empty(), "the rate limit was met");
    // The circuit: after the first 403, nothing for 5 s.
    let first = limited[0].unix_ms;
    assert!(
        limited.iter().all(|r| r.unix_ms == first || r.unix_ms >= first + 5000),
        "Robot requests during the wait: {:?}",
        limited.iter().map(|r| r.unix_ms - first).collect::<Vec<_>>()
    );

    // Recovery: the budget is back; after the wait the new node initializes, and the node of
    // the server that is really gone is deleted.
    h.clear_robot_faults();
    wait_for(&env.nodes, "bm-new", REACT, "bm-new initialized after the wait", initialized).await.expect("recovered");
    wait_for(&env.nodes, "bm-limited", REACT, "bm-limited deleted after recovery", |n| n.is_none())
        .await
        .expect("deleted");
    assert!(ccm.is_running());
}

#[tokio::test]
async fn a_name_of_both_a_cloud_and_a_robot_server_raises_an_event_and_no_guess() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    h.seed_server(&SeedServer::new("twin")).expect("server");
    h.seed_robot_server(&SeedRobotServer::new("twin")).expect("server");
    let robot_url = env.fake.robot_url();
    let ccm = env.ccm(&robot_env(&robot_url, &[]), &[]).await;
    NodeBuilder::new("twin").register(&env.client).await.expect("node");
    let event = wait_for_event(&env.client, "Node", "twin", "InstanceLookupFailed", REACT).await.expect("event");
    assert_eq!(event.type_, "Warning");
    assert!(event.message.contains("both cloud server"), "{}", event.message);
    let node = env.nodes.get("twin").await.expect("node");
    assert!(tainted(&node) && provider_id(&node).is_none(), "no guess");
    assert!(ccm.is_running());
    // The running CCM keeps retrying the twin's lookup; stop it so every request counted below
    // would be the misconfigured one's.
    ccm.stop().await.expect("stops");

    // Robot with routes, and half the credentials: reported together before anything starts.
    let before = h.request_counts().total;
    let bad = env.spawn_ccm(&[("ROBOT_ENABLED", "true"), ("ROBOT_USER", "robot"), ("HCLOUD_NETWORK", "k8s")], &[]);
    let status = bad.wait_exit(std::time::Duration::from_secs(30)).await.expect("exits");
    assert_eq!(status.code(), Some(1));
    let logs = bad.logs();
    for needle in ["ROBOT_USER is set but ROBOT_PASSWORD is not", "using routes with Robot is not supported"] {
        assert!(logs.contains(needle), "missing {needle:?}:\n{logs}");
    }
    assert_eq!(h.request_counts().total, before, "nothing may start on bad configuration");
}

/// `TestServiceLoadBalancersRobot` with a mixed cluster: cloud Nodes are server targets, Robot
/// Nodes IP targets (their public IPs from the Robot list); a Robot Node without a public IP
/// gets `ServerNotFound`; a deleted Robot Node's IP target goes.
#[tokio::test]
async fn a_load_balancer_targets_cloud_and_robot_nodes() {
    use common::lb::{fresh_namespace, lb_service, server_nodes, target_servers, wait_lb};
    use kube::api::{DeleteParams, PostParams};

    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, api) = fresh_namespace(&env).await;
    let cloud = server_nodes(&env, &["lb-cloud"], None, &[]).await;
    let mut robot_ips = Vec::new();
    for name in ["bm-lb-1", "bm-lb-2"] {
        let n = h.seed_robot_server(&SeedRobotServer::new(name)).expect("robot server");
        robot_ips.push(h.robot_server(n).and_then(|s| s.ipv4).expect("ipv4").to_string());
        NodeBuilder::new(name)
            .provider_id(format!("hrobot://{n}"))
            .without_uninitialized_taint()
            .register(&env.client)
            .await
            .expect("node");
    }
    let no_ip = h
        .seed_robot_server(&SeedRobotServer { no_ipv4: true, ..SeedRobotServer::new("bm-lb-noip") })
        .expect("robot server");
    NodeBuilder::new("bm-lb-noip")
        .provider_id(format!("hrobot://{no_ip}"))
        .without_uninitialized_taint()
        .register(&env.client)
        .await
        .expect("node");
    let robot_url = env.fake.robot_url();
    let _ccm = env.ccm(&robot_env(&robot_url, &[("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")]), &[]).await;

    let svc = api.create(&PostParams::default(), &lb_service("mixed", &[], &[80])).await.expect("service");
    let ip_targets = |lb: &hcloud_fake::wire::LoadBalancer| {
        let mut ips: Vec<String> = lb.targets.iter().filter_map(|t| t.ip.as_ref().map(|i| i.ip.clone())).collect();
        ips.sort();
        ips
    };
    let mut expected = robot_ips.clone();
    expected.sort();
    let lb = wait_lb(&h, &svc, "LB with the cloud and both Robot targets", |l| l.targets.len() == 3).await;
    assert_eq!(target_servers(&lb), vec![cloud[0].0]);
    assert_eq!(ip_targets(&lb), expected);
    let event = wait_for_event(&env.client, "Node", "bm-lb-noip", "ServerNotFound", REACT).await.expect("event");
    assert_eq!(event.type_, "Warning");
    assert!(event.message.contains("no public IPv4"), "{}", event.message);

    // The Node of bm-lb-2 goes: its IP target goes with it.
    env.nodes.delete("bm-lb-2", &DeleteParams::default()).await.expect("delete node");
    let lb = wait_lb(&h, &svc, "the deleted Robot Node's target removed", |l| l.targets.len() == 2).await;
    assert_eq!(ip_targets(&lb), vec![robot_ips[0].clone()]);
    assert_eq!(target_servers(&lb), vec![cloud[0].0]);
}

/// `use-private-ip` with Robot Nodes in a vSwitch: the Node's InternalIP is the IP target; a
/// Robot Node without one keeps its public IP and the Service gets `InternalIPNotConfigured`;
/// cloud Nodes stay server targets with `use_private_ip`.
#[tokio::test]
async fn robot_targets_use_the_internal_ip_with_use_private_ip() {
    use common::lb::{fresh_namespace, lb_service, server_nodes, target_servers, wait_lb};
    use hcloud_fake::control::SeedNetwork;
    use kube::api::PostParams;

    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).expect("net");
    let (_ns, api) = fresh_namespace(&env).await;
    let cloud = server_nodes(&env, &["lbp-cloud"], Some(net), &[]).await;
    let with_ip = h.seed_robot_server(&SeedRobotServer::new("bm-vswitch")).expect("robot server");
    NodeBuilder::new("bm-vswitch")
        .provider_id(format!("hrobot://{with_ip}"))
        .address("InternalIP", "10.1.0.5")
        .without_uninitialized_taint()
        .register(&env.client)
        .await
        .expect("node");
    let without = h.seed_robot_server(&SeedRobotServer::new("bm-public")).expect("robot server");
    let public_ip = h.robot_server(without).and_then(|s| s.ipv4).expect("ipv4").to_string();
    NodeBuilder::new("bm-public")
        .provider_id(format!("hrobot://{without}"))
        .without_uninitialized_taint()
        .register(&env.client)
        .await
        .expect("node");
    let robot_url = env.fake.robot_url();
    let _ccm = env
        .ccm(
            &robot_env(
                &robot_url,
                &[
                    ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
                    ("HCLOUD_NETWORK", "k8s"),
                    ("HCLOUD_NETWORK_ROUTES_ENABLED", "false"),
                ],
            ),
            &[],
        )
        .await;
    let svc = lb_service("vswitch", &[("load-balancer.hetzner.cloud/use-private-ip", "true")], &[80]);
    let svc = api.create(&PostParams::default(), &svc).await.expect("service");
    let lb = wait_lb(&h, &svc, "LB with the cloud and both Robot targets", |l| l.targets.len() == 3).await;
    assert_eq!(target_servers(&lb), vec![cloud[0].0]);
    assert!(lb.targets.iter().filter(|t| t.server.is_some()).all(|t| t.use_private_ip == Some(true)));
    let mut ips: Vec<String> = lb.targets.iter().filter_map(|t| t.ip.as_ref().map(|i| i.ip.clone())).collect();
    ips.sort();
    let mut expected = vec!["10.1.0.5".to_owned(), public_ip];
    expected.sort();
    assert_eq!(ips, expected);
    let event =
        wait_for_event(&env.client, "Service", "vswitch", "InternalIPNotConfigured", REACT).await.expect("event");
    assert_eq!(event.type_, "Warning");
    assert!(event.message.contains("bm-public"), "{}", event.message);
}
