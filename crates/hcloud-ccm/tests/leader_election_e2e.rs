//! End to end: two `hcloud-ccm` replicas with leader election against the real kube-apiserver
//! and the Hetzner fake. Each replica uses its own Hetzner token, so the fake's request log
//! tells whose request it was.

use crate::common;

use std::time::Duration;

use common::{Env, REACT, tainted};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::SeedServer;
use k8s_openapi::api::core::v1::Node;
use test_harness::{ChildProcess, NodeBuilder, Ready, set_ready, unique_name, wait_for, wait_until};

const TOKEN_A: &str = "replicaa00000000000000000000000000000000000000000000000000000000";
const TOKEN_B: &str = "replicab00000000000000000000000000000000000000000000000000000000";

const ACQUIRED: &str = "successfully acquired lease";
const WAITING: &str = "attempting to acquire leader lease";

fn initialized(n: Option<&Node>) -> bool {
    n.is_some_and(|n| !tainted(n) && n.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_some())
}

/// Starts replica A (which must acquire) and replica B (which must stand by) on `lease`.
async fn leader_and_standby(
    env: &Env,
    lease: &str,
    a_kubeconfig: &std::path::Path,
    a_env: &[(&str, &str)],
) -> (ChildProcess, ChildProcess) {
    let a = env.spawn_replica_with("replica-a", TOKEN_A, a_kubeconfig, lease, a_env);
    a.wait_for_log(ACQUIRED, REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", a.logs()));
    let b = env.spawn_replica("replica-b", TOKEN_B, env.cp.ccm_kubeconfig(), lease);
    b.wait_for_log(WAITING, REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", b.logs()));
    (a, b)
}

/// `METHOD /path` of every request sent with `token`.
fn requests_of(env: &Env, token: &str) -> Vec<String> {
    env.fake.handle().request_log_for_token(token).iter().map(|r| format!("{} {}", r.method, r.path)).collect()
}

#[tokio::test]
async fn one_replica_leads_the_standby_stays_off_hetzner_and_sigterm_hands_over_at_once() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    h.seed_server(&SeedServer::new("le-before")).expect("server");
    h.seed_server(&SeedServer::new("le-after")).expect("server");
    let lease = unique_name("ccm-le");
    let (a, b) = leader_and_standby(&env, &lease, env.cp.ccm_kubeconfig(), &[]).await;

    NodeBuilder::new("le-before").register(&env.client).await.expect("node");
    wait_for(&env.nodes, "le-before", REACT, "initialized by the leader", initialized).await.expect("initialized");
    // The standby only ran its start-up check (the token, GET /locations); it sends nothing
    // while it stands by, and started no controller.
    assert_eq!(requests_of(&env, TOKEN_B), vec!["GET /v1/locations"], "standby's requests");
    assert!(!b.logs().contains("hcloud-ccm started"), "the standby runs no controller:\n{}", b.logs());
    assert!(requests_of(&env, TOKEN_A).iter().any(|r| r.starts_with("GET /v1/servers")), "the leader did the work");

    // SIGTERM: the leader stops its controllers, releases the lease, exits 0; the standby
    // takes over without waiting for the lease to expire.
    let status = a.stop().await.expect("stops");
    assert_eq!(status.code(), Some(0), "{}", a.logs());
    assert!(a.logs().contains("leader lease released"), "{}", a.logs());
    b.wait_for_log(ACQUIRED, REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", b.logs()));
    // The controllers start right after the lease is acquired, logged a moment later.
    b.wait_for_log("hcloud-ccm started", REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", b.logs()));

    // A node registered after the handover is initialized by the new leader.
    let before = requests_of(&env, TOKEN_A).len();
    NodeBuilder::new("le-after").register(&env.client).await.expect("node");
    wait_for(&env.nodes, "le-after", REACT, "initialized by the new leader", initialized).await.expect("initialized");
    assert_eq!(requests_of(&env, TOKEN_A).len(), before, "the old leader sent nothing after it stopped");
    assert!(requests_of(&env, TOKEN_B).len() > 1, "the new leader did the work");
    let status = b.stop().await.expect("stops");
    assert_eq!(status.code(), Some(0), "{}", b.logs());
}

#[tokio::test]
async fn after_sigkill_the_standby_takes_over_once_the_lease_expires() {
    let env = Env::start(FakeConfig::default()).await;
    env.fake.handle().seed_server(&SeedServer::new("le-killed")).expect("server");
    let lease = unique_name("ccm-le");
    let (a, b) = leader_and_standby(&env, &lease, env.cp.ccm_kubeconfig(), &[]).await;

    a.signal("KILL").expect("kill");
    a.wait_exit(REACT).await.expect("killed");
    // No release: the standby waits out the lease it last saw renewed, then leads.
    b.wait_for_log(ACQUIRED, REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", b.logs()));
    NodeBuilder::new("le-killed").register(&env.client).await.expect("node");
    wait_for(&env.nodes, "le-killed", REACT, "initialized by the new leader", initialized).await.expect("initialized");
}

#[tokio::test]
async fn a_partitioned_leader_stops_before_its_lease_expires_and_sends_nothing_after_the_takeover() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    h.seed_server(&SeedServer::new("le-watched")).expect("server");
    h.seed_server(&SeedServer::new("le-late")).expect("server");
    let lease = unique_name("ccm-le");
    // Replica A reaches the API server only through a proxy the test can cut.
    let proxy = env.cp.apiserver_proxy().expect("proxy");
    let via_proxy = env.cp.kubeconfig_via(env.cp.ccm_kubeconfig(), &proxy).expect("kubeconfig");
    // With one-second cache ages, a NotReady node keeps the leader's lifecycle checks talking to
    // Hetzner every second (--node-monitor-period=1s): it keeps trying until it stops.
    let short_cache = [("HCLOUD_SERVER_CACHE_MAX_AGE", "1s"), ("HCLOUD_SERVER_CACHE_LIFECYCLE_MAX_AGE", "1s")];
    let (a, b) = leader_and_standby(&env, &lease, &via_proxy, &short_cache).await;

    NodeBuilder::new("le-watched").register(&env.client).await.expect("node");
    wait_for(&env.nodes, "le-watched", REACT, "initialized", initialized).await.expect("initialized");
    set_ready(&env.client, "le-watched", Ready::False).await.expect("not ready");
    let sent_by_a = || h.request_log_for_token(TOKEN_A).len();
    let before = sent_by_a();
    wait_until(REACT, "the leader's lifecycle checks reach Hetzner", async || sent_by_a() >= before + 2)
        .await
        .expect("lifecycle traffic");

    let cut_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as i64;
    proxy.cut();
    let status = a.wait_exit(REACT).await.expect("the partitioned leader exits");
    assert_ne!(status.code(), Some(0), "fail-stop exits non-zero:\n{}", a.logs());
    assert!(a.logs().contains("leaderelection lost"), "{}", a.logs());
    b.wait_for_log(ACQUIRED, REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", b.logs()));

    // The new leader works (a node registered after the takeover is initialized) ...
    NodeBuilder::new("le-late").register(&env.client).await.expect("node");
    wait_for(&env.nodes, "le-late", REACT, "initialized by the new leader", initialized).await.expect("initialized");
    // ... and every request of the old leader reached Hetzner before the new leader's first,
    // although it kept working while it was cut off from the API server.
    let old = h.request_log_for_token(TOKEN_A);
    assert!(old.iter().any(|r| r.unix_ms > cut_at), "the old leader kept checking nodes while partitioned");
    let old_last = old.iter().map(|r| r.unix_ms).max().expect("old leader requests");
    let new_first = h
        .request_log_for_token(TOKEN_B)
        .iter()
        .filter(|r| r.path != "/v1/locations")
        .map(|r| r.unix_ms)
        .min()
        .expect("new leader requests");
    assert!(old_last < new_first, "the old leader's last request ({old_last}) came after the takeover ({new_first})");
    wait_until(Duration::from_secs(5), "nothing more from the old leader", async || !a.is_running())
        .await
        .expect("gone");
    b.stop().await.expect("stops");
}
