//! End to end: real kube-apiserver + etcd, the Hetzner fake, and the `hcloud-ccm` binary.
//! Node initialization and node lifecycle as a kubelet with `--cloud-provider=external` and
//! a Hetzner project would see them.

use crate::common;

use std::time::Duration;

use common::{Env, REACT, addresses, has_taint, label, metrics_address, pairs, scrape, server_ipv4, tainted};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::faults::FaultRule;
use hcloud_fake::wire::ServerStatus;
use k8s_openapi::api::core::v1::Node;
use test_harness::{NodeBuilder, Ready, set_ready, wait_for, wait_for_event, wait_until};

fn initialized(n: Option<&Node>) -> bool {
    n.is_some_and(|n| !tainted(n) && n.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_some())
}

#[tokio::test]
async fn node_for_an_existing_server_is_initialized_with_labels_addresses_and_event() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).expect("net");
    let id = h
        .seed_server(&SeedServer::new("node-a").server_type("cpx22").location("nbg1").network_ip(net, "10.0.0.7"))
        .expect("server");
    let ccm = env.ccm(&[("HCLOUD_NETWORK", "k8s")], &[]).await;

    NodeBuilder::new("node-a").kubelet_hostname_address(true).register(&env.client).await.expect("node registers");
    let node = wait_for(&env.nodes, "node-a", REACT, "node-a initialized", initialized)
        .await
        .expect("initialized")
        .expect("node exists");

    assert_eq!(node.spec.as_ref().and_then(|s| s.provider_id.as_deref()), Some(format!("hcloud://{id}").as_str()));
    assert_eq!(label(&node, "node.kubernetes.io/instance-type"), Some("cpx22"));
    assert_eq!(label(&node, "beta.kubernetes.io/instance-type"), Some("cpx22"));
    assert_eq!(label(&node, "topology.kubernetes.io/region"), Some("nbg1"));
    assert_eq!(label(&node, "failure-domain.beta.kubernetes.io/region"), Some("nbg1"));
    assert_eq!(label(&node, "topology.kubernetes.io/zone"), Some("nbg1-dc3"));
    assert_eq!(label(&node, "failure-domain.beta.kubernetes.io/zone"), Some("nbg1-dc3"));
    assert_eq!(label(&node, "instance.hetzner.cloud/provided-by"), Some("cloud"));
    let ipv4 = server_ipv4(&env.fake, id);
    assert_eq!(addresses(&node), pairs(&[("Hostname", "node-a"), ("ExternalIP", &ipv4), ("InternalIP", "10.0.0.7")]));
    let event = wait_for_event(&env.client, "Node", "node-a", "Synced", REACT).await.expect("Synced event");
    assert_eq!(event.type_, "Normal");
    assert_eq!(event.message, "Node synced successfully");
    // One server list served the initialization (plus the start-up checks).
    assert!(h.request_count("GET /v1/servers") <= 1, "{:?}", h.request_counts());

    // SIGTERM drains the controllers and exits cleanly.
    let status = ccm.stop().await.expect("stops");
    assert_eq!(status.code(), Some(0), "{}", ccm.logs());
    let logs = ccm.logs();
    assert!(logs.contains("received SIGTERM") && logs.contains("stopped"), "{logs}");
}

#[tokio::test]
async fn provided_node_ip_leads_the_addresses_when_it_matches() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).expect("net");
    let id = h.seed_server(&SeedServer::new("node-ip").network_ip(net, "10.0.0.9")).expect("server");
    let _ccm = env.ccm(&[("HCLOUD_NETWORK", "k8s")], &[]).await;

    NodeBuilder::new("node-ip").provided_node_ip("10.0.0.9").register(&env.client).await.expect("node");
    let node = wait_for(&env.nodes, "node-ip", REACT, "node-ip initialized", initialized)
        .await
        .expect("initialized")
        .expect("exists");
    let ipv4 = server_ipv4(&env.fake, id);
    assert_eq!(addresses(&node), pairs(&[("InternalIP", "10.0.0.9"), ("Hostname", "node-ip"), ("ExternalIP", &ipv4)]));
}

#[tokio::test]
async fn provided_node_ip_not_matching_keeps_the_taint_and_warns() {
    let env = Env::start(FakeConfig::default()).await;
    env.fake.handle().seed_server(&SeedServer::new("node-bad-ip")).expect("server");
    let ccm = env.ccm(&[], &[]).await;

    NodeBuilder::new("node-bad-ip").provided_node_ip("192.0.2.55").register(&env.client).await.expect("node");
    let event =
        wait_for_event(&env.client, "Node", "node-bad-ip", "InvalidProvidedNodeIP", REACT).await.expect("warning");
    assert_eq!(event.type_, "Warning");
    assert!(event.message.contains("192.0.2.55"), "{}", event.message);
    let node = env.nodes.get("node-bad-ip").await.expect("node");
    assert!(tainted(&node), "must stay tainted");
    assert!(node.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_none(), "no providerID written");
    assert!(ccm.is_running(), "no crash");
}

#[tokio::test]
async fn address_family_ipv6_and_dualstack() {
    for (family, expect_v4, expect_v6) in [("ipv6", false, true), ("dualstack", true, true)] {
        let env = Env::start(FakeConfig::default()).await;
        let id = env.fake.handle().seed_server(&SeedServer::new("node-v6")).expect("server");
        let server = env.fake.handle().server(id).expect("server");
        let v6_net = server.public_net.ipv6.as_ref().expect("ipv6").ip.clone();
        let ccm = env.ccm(&[("HCLOUD_INSTANCES_ADDRESS_FAMILY", family)], &[]).await;
        NodeBuilder::new("node-v6").register(&env.client).await.expect("node");
        let node = wait_for(&env.nodes, "node-v6", REACT, "node-v6 initialized", initialized)
            .await
            .expect("initialized")
            .expect("exists");
        let mut expected = vec![("Hostname", "node-v6".to_owned())];
        if expect_v4 {
            expected.push(("ExternalIP", server_ipv4(&env.fake, id)));
        }
        let actual = addresses(&node);
        if expect_v6 {
            // The official CCM's choice: the first address (<net>::1) of the server's /64.
            let v6 = actual.iter().find(|(t, a)| t == "ExternalIP" && a.contains(':')).expect("an IPv6 ExternalIP");
            let (prefix, len) = v6_net.split_once('/').expect("a CIDR");
            assert_eq!(len, "64", "{v6_net}");
            let prefix: std::net::Ipv6Addr = prefix.parse().expect("IPv6 network");
            let addr: std::net::Ipv6Addr = v6.1.parse().expect("an IPv6 address");
            assert_eq!(addr.segments()[..4], prefix.segments()[..4], "{addr} inside {v6_net}");
            assert_eq!(addr.segments()[4..], [0, 0, 0, 1], "{addr} is <net>::1");
            expected.push(("ExternalIP", addr.to_string()));
        }
        let expected: Vec<(String, String)> = expected.into_iter().map(|(t, a)| (t.to_owned(), a)).collect();
        assert_eq!(actual, expected, "family {family}");
        drop(ccm);
    }
}

#[tokio::test]
async fn node_without_a_server_stays_tainted_then_initializes_when_the_server_appears() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let _ccm = env.ccm(&[("HCLOUD_SERVER_CACHE_MAX_AGE", "2s")], &[]).await;

    NodeBuilder::new("node-late").register(&env.client).await.expect("node");
    let warning = wait_for_event(&env.client, "Node", "node-late", "ServerNotFound", REACT).await.expect("warning");
    assert_eq!(warning.type_, "Warning");
    assert!(warning.message.contains("no server named \"node-late\""), "{}", warning.message);
    assert!(tainted(&env.nodes.get("node-late").await.expect("node")));

    let id = h.seed_server(&SeedServer::new("node-late")).expect("server appears");
    let node = wait_for(&env.nodes, "node-late", REACT, "node-late initialized after its server appeared", initialized)
        .await
        .expect("initialized")
        .expect("exists");
    assert_eq!(node.spec.as_ref().and_then(|s| s.provider_id.as_deref()), Some(format!("hcloud://{id}").as_str()));
    // Retries of the missing server did not re-list on every attempt.
    let lists = h.request_count("GET /v1/servers");
    assert!(lists < 15, "server lists while the server was missing: {lists}");
}

#[tokio::test]
async fn lifecycle_deletes_shuts_down_and_never_touches_ready_nodes() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let gone = h.seed_server(&SeedServer::new("node-gone")).expect("server");
    let ready_gone = h.seed_server(&SeedServer::new("node-ready-gone")).expect("server");
    let off = h.seed_server(&SeedServer::new("node-off")).expect("server");
    let _ccm =
        env.ccm(&[("HCLOUD_SERVER_CACHE_LIFECYCLE_MAX_AGE", "2s"), ("HCLOUD_SERVER_CACHE_MAX_AGE", "1s")], &[]).await;
    for name in ["node-gone", "node-ready-gone", "node-off"] {
        NodeBuilder::new(name).register(&env.client).await.expect("node");
        wait_for(&env.nodes, name, REACT, "initialized", initialized).await.expect("initialized");
    }

    // Server deleted + node NotReady => node deleted, with an event.
    h.delete_server(gone).expect("delete");
    h.delete_server(ready_gone).expect("delete");
    set_ready(&env.client, "node-gone", Ready::False).await.expect("not ready");
    wait_for(&env.nodes, "node-gone", REACT, "node-gone deleted", |n| n.is_none()).await.expect("deleted");
    let event = wait_for_event(&env.client, "Node", "node-gone", "DeletingNode", REACT).await.expect("event");
    assert!(event.message.contains("does not exist in the cloud provider"), "{}", event.message);

    // Server off + NotReady => shutdown taint; Ready again => taint removed.
    h.set_server_status(off, ServerStatus::Off).expect("off");
    set_ready(&env.client, "node-off", Ready::Unknown).await.expect("unknown");
    wait_for(&env.nodes, "node-off", REACT, "shutdown taint added", |n| {
        n.is_some_and(|n| has_taint(n, "node.cloudprovider.kubernetes.io/shutdown"))
    })
    .await
    .expect("tainted");
    set_ready(&env.client, "node-off", Ready::True).await.expect("ready");
    wait_for(&env.nodes, "node-off", REACT, "shutdown taint removed", |n| {
        n.is_some_and(|n| !has_taint(n, "node.cloudprovider.kubernetes.io/shutdown"))
    })
    .await
    .expect("untainted");

    // The Ready node's server was deleted together with node-gone's; since then the monitor
    // deleted node-gone and added and removed a taint, so it saw node-ready-gone many times.
    let still = env.nodes.get_opt("node-ready-gone").await.expect("get");
    assert!(still.is_some(), "a Ready node must never be deleted");
}

#[tokio::test]
async fn a_node_turning_not_ready_is_rechecked_at_once_with_one_request() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let gone = h.seed_server(&SeedServer::new("node-recheck-gone")).expect("server");
    let off = h.seed_server(&SeedServer::new("node-recheck-off")).expect("server");
    // A project of three list pages: rechecking two servers one by one is cheaper than a list.
    h.seed_servers(&hcloud_fake::control::SeedServerBatch::new("other", 120)).expect("servers");
    // Cached server data may be an hour old for lifecycle checks: only the recheck on the
    // NotReady transition can notice the changes below. Two nodes checked at once (1.37's flag).
    let metrics = metrics_address();
    let env_vars = [("HCLOUD_SERVER_CACHE_LIFECYCLE_MAX_AGE", "1h"), ("HCLOUD_METRICS_ADDRESS", metrics.as_str())];
    let _ccm = env.ccm(&env_vars, &["--concurrent-node-lifecycle-syncs=2"]).await;
    for name in ["node-recheck-gone", "node-recheck-off"] {
        NodeBuilder::new(name).register(&env.client).await.expect("node");
        wait_for(&env.nodes, name, REACT, "initialized", initialized).await.expect("initialized");
    }
    // A turn needs a Ready past the controller saw: wait for a pass that started after both
    // nodes were Ready and initialized (the second pass counted from now).
    let passes = "cloud_node_lifecycle_controller_monitor_nodes_duration_seconds_count";
    let before = scrape(&metrics, passes).await.unwrap_or(0.0);
    wait_until(REACT, "a lifecycle pass that saw both nodes Ready", async || {
        scrape(&metrics, passes).await.is_some_and(|v| v >= before + 2.0)
    })
    .await
    .expect("seen Ready");
    let seen = h.request_log().len();

    h.delete_server(gone).expect("delete");
    h.set_server_status(off, ServerStatus::Off).expect("off");
    set_ready(&env.client, "node-recheck-gone", Ready::False).await.expect("not ready");
    set_ready(&env.client, "node-recheck-off", Ready::Unknown).await.expect("unknown");
    wait_for(&env.nodes, "node-recheck-gone", REACT, "deleted", |n| n.is_none()).await.expect("deleted");
    wait_for(&env.nodes, "node-recheck-off", REACT, "shutdown taint", |n| {
        n.is_some_and(|n| has_taint(n, "node.cloudprovider.kubernetes.io/shutdown"))
    })
    .await
    .expect("tainted");
    let requests: Vec<String> = h.request_log()[seen..].iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    let expected = [format!("GET /v1/servers/{gone}"), format!("GET /v1/servers/{off}")];
    let mut sorted = requests.clone();
    sorted.sort();
    assert_eq!(sorted, expected, "one direct lookup per NotReady transition, nothing else");

    // Upstream's 1.37 node-lifecycle metrics: the "gone" answer, the shutdown check, the passes.
    let calls = |operation: &str, result: &str| {
        format!(
            r#"cloud_node_lifecycle_controller_cloud_provider_calls_total{{operation="{operation}",result="{result}"}}"#
        )
    };
    // A pass's duration is observed once it ended, a moment after its last write: poll.
    for (operation, result) in [("instance_exists", "instance_not_found"), ("instance_shutdown", "success")] {
        let series = calls(operation, result);
        wait_until(REACT, &series, async || scrape(&metrics, &series).await.is_some_and(|v| v >= 1.0))
            .await
            .expect("counted");
    }
    wait_until(REACT, passes, async || scrape(&metrics, passes).await.is_some_and(|v| v >= 1.0)).await.expect("timed");
}

#[tokio::test]
async fn hetzner_outage_deletes_nothing_and_recovers() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    h.seed_server(&SeedServer::new("node-outage")).expect("server");
    let ccm =
        env.ccm(&[("HCLOUD_SERVER_CACHE_LIFECYCLE_MAX_AGE", "1s"), ("HCLOUD_SERVER_CACHE_MAX_AGE", "1s")], &[]).await;
    NodeBuilder::new("node-outage").register(&env.client).await.expect("node");
    wait_for(&env.nodes, "node-outage", REACT, "initialized", initialized).await.expect("initialized");

    // The API answers 429 three times, then 500 to everything; the node goes NotReady meanwhile.
    let before = h.request_counts().total;
    let seen = h.request_log().len();
    h.inject_fault(FaultRule::error(None, "/v1/**", 429, "rate_limit_exceeded").times(3));
    h.inject_fault(FaultRule::error(None, "/v1/**", 500, "server_error").times(100_000));
    set_ready(&env.client, "node-outage", Ready::False).await.expect("not ready");
    // A server the CCM's cache cannot know yet: its node can only be initialized through the API.
    h.seed_server(&SeedServer::new("node-during-outage")).expect("server");
    NodeBuilder::new("node-during-outage").register(&env.client).await.expect("node");
    let answered = |status: u16| h.request_log()[seen..].iter().any(|r| r.status == status);
    let lifecycle_failures = || ccm.logs().matches("error checking if node exists").count();
    test_harness::wait_until(
        REACT,
        "the CCM met 429s and 500s, and the lifecycle checked the NotReady node three times during the outage",
        async || answered(429) && answered(500) && lifecycle_failures() >= 3,
    )
    .await
    .expect("outage observed");
    assert!(env.nodes.get_opt("node-outage").await.expect("get").is_some(), "outage must not delete nodes");
    assert!(ccm.is_running(), "no crash during the outage:\n{}", ccm.logs());
    assert!(tainted(&env.nodes.get("node-during-outage").await.expect("get")), "not initialized during the outage");
    // The inventory's cooldown keeps an outage from turning into a request storm: count what
    // was sent during it (three lifecycle passes at --node-monitor-period=1s, the new node's
    // retries, the address refresh).
    let during = h.request_counts().total - before;
    eprintln!("requests during the outage: {during}");

    // Recovery: faults cleared, the new node initializes, the NotReady node is kept.
    h.clear_faults();
    wait_for(&env.nodes, "node-during-outage", Duration::from_secs(90), "initialized after the outage", |n| {
        n.is_some_and(|n| !tainted(n))
    })
    .await
    .expect("recovered");
    assert!(env.nodes.get_opt("node-outage").await.expect("get").is_some());
    assert!(ccm.is_running());
    assert!(during < 30, "requests during the outage: {during}");
}

#[tokio::test]
async fn invalid_token_exits_with_a_clear_message() {
    let env =
        Env::start(FakeConfig::default().with_token_policy(hcloud_fake::TokenPolicy::deny([common::TOKEN]))).await;
    let ccm = env.spawn_ccm(&[], &[]);
    let status = ccm.wait_exit(Duration::from_secs(30)).await.expect("exits");
    assert_eq!(status.code(), Some(1), "{}", ccm.logs());
    let logs = ccm.logs();
    assert!(logs.contains("HCLOUD_TOKEN was rejected"), "{logs}");
    assert!(!logs.contains(common::TOKEN), "the token must never be logged");
}

#[tokio::test]
async fn bad_configuration_is_reported_all_at_once_before_anything_starts() {
    let env = Env::start(FakeConfig::default()).await;
    let ccm = env.spawn_ccm(
        &[("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv5"), ("HCLOUD_SERVER_CACHE_MAX_AGE", "soon")],
        &["--concurrent-node-syncs=0", "--controllers=*,nodes"],
    );
    let status = ccm.wait_exit(Duration::from_secs(30)).await.expect("exits");
    assert_eq!(status.code(), Some(1));
    let logs = ccm.logs();
    for needle in [
        "invalid configuration",
        "HCLOUD_INSTANCES_ADDRESS_FAMILY: \"ipv5\" is invalid; accepted: ipv4, ipv6, dualstack",
        "HCLOUD_SERVER_CACHE_MAX_AGE: \"soon\" is not a duration",
        "concurrent-node-syncs must be a positive number",
        "unknown controller(s) nodes",
    ] {
        assert!(logs.contains(needle), "missing {needle:?}:\n{logs}");
    }
    assert_eq!(env.fake.handle().request_counts().total, 0, "nothing may start on bad configuration");

    let ccm = env.spawn_ccm(&[], &["--no-such-flag"]);
    let status = ccm.wait_exit(Duration::from_secs(30)).await.expect("exits");
    assert_ne!(status.code(), Some(0));
    assert!(ccm.logs().contains("--no-such-flag"), "{}", ccm.logs());
}
