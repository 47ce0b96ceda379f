//! End to end: the token in `HCLOUD_TOKEN_FILE` rotates without a restart. The file is a key
//! of a Secret volume, updated the way the kubelet updates one (the `..data` symlink swapped
//! to a new directory); the fake accepts only the tokens the test allows.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::lb::{create, ensured, fresh_namespace, lb_of, lb_service};
use common::{Env, REACT, free_port, tainted};
use hcloud_fake::control::SeedServer;
use hcloud_fake::{FakeConfig, SeedProject, TokenPolicy, token_fingerprint};
use k8s_openapi::api::core::v1::Node;
use test_harness::{ChildProcess, NodeBuilder, Ready, SecretVolume, set_ready, wait_for, wait_for_event, wait_until};

const OLD: &str = "rotation-old-0000000000000000000000000000000000000000000000000001";
const NEW: &str = "rotation-new-0000000000000000000000000000000000000000000000000002";
const BAD: &str = "rotation-bad-0000000000000000000000000000000000000000000000000003";
const OTHER: &str = "rotation-oth-0000000000000000000000000000000000000000000000000004";

fn initialized(n: Option<&Node>) -> bool {
    n.is_some_and(|n| !tainted(n) && n.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_some())
}

/// The CCM with its token from `volume`'s key `token` (no `HCLOUD_TOKEN`) and its metrics on
/// the returned address.
async fn ccm_with_token_file(env: &Env, volume: &SecretVolume) -> (ChildProcess, String) {
    ccm_with_token_file_and(env, volume, &[]).await
}

/// [`ccm_with_token_file`] with more environment.
async fn ccm_with_token_file_and(env: &Env, volume: &SecretVolume, more: &[(&str, &str)]) -> (ChildProcess, String) {
    let metrics = format!("127.0.0.1:{}", free_port());
    let file = volume.path("token").to_string_lossy().into_owned();
    let mut vars =
        vec![("HCLOUD_TOKEN", ""), ("HCLOUD_TOKEN_FILE", file.as_str()), ("HCLOUD_METRICS_ADDRESS", &metrics)];
    vars.extend_from_slice(more);
    let ccm = env.ccm(&vars, &[]).await;
    (ccm, format!("http://{metrics}/metrics"))
}

/// `hcloud_ccm_credential_rotations_total{credential="hcloud_token",result=<result>}`, if
/// the series exists.
async fn rotations(metrics: &str, result: &str) -> Option<f64> {
    let text = reqwest::get(metrics).await.ok()?.text().await.ok()?;
    let series = format!(r#"hcloud_ccm_credential_rotations_total{{credential="hcloud_token",result="{result}"}} "#);
    text.lines().find_map(|l| l.strip_prefix(series.as_str())).and_then(|v| v.trim().parse().ok())
}

/// Registers a Node for a server seeded now and waits until the CCM initialized it.
async fn node_initialized(env: &Env, name: &str) {
    env.fake.handle().seed_server(&SeedServer::new(name)).expect("server");
    NodeBuilder::new(name).register(&env.client).await.expect("node registers");
    wait_for(&env.nodes, name, REACT, &format!("{name} initialized"), initialized).await.expect("initialized");
}

#[tokio::test]
async fn a_token_rotated_in_the_mounted_secret_is_used_without_a_restart_or_a_failed_request() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    h.set_token_policy(TokenPolicy::allow([OLD]));
    let mut volume = SecretVolume::new(&[("token", &format!("{OLD}\n"))]).expect("volume");
    let (ccm, metrics) = ccm_with_token_file(&env, &volume).await;
    node_initialized(&env, "rot-a").await;

    // The operator creates the new token, updates the Secret, and revokes the old token once
    // the CCM uses the new one.
    h.set_token_policy(TokenPolicy::allow([OLD, NEW]));
    volume.update(&[("token", &format!("{NEW}\n"))]).expect("the kubelet's symlink swap");
    wait_until(REACT, "the CCM checked and took the new token", async || {
        rotations(&metrics, "accepted").await == Some(1.0)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- logs ---\n{}", ccm.logs()));
    h.set_token_policy(TokenPolicy::allow([NEW]));
    // The fake (in this process, same clock) stamps a request when it arrives, before it checks
    // the token: one stamped later met the revocation.
    let revoked_ms = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis())
        .expect("milliseconds fit");

    // A Node whose server appears only now: initializing it needs the API.
    node_initialized(&env, "rot-b").await;

    let log = h.request_log();
    let failed: Vec<_> = log.iter().filter(|r| r.status >= 400).collect();
    assert!(failed.is_empty(), "no failed request at all: {failed:#?}");
    let (old_fp, new_fp) = (token_fingerprint(OLD), token_fingerprint(NEW));
    let first_new = log.iter().position(|r| r.token_fingerprint.as_deref() == Some(&new_fp)).expect("new token used");
    assert_eq!(
        log[first_new].endpoint, "GET /v1/servers/{id}",
        "the new token was checked first: it sees rot-a's server"
    );
    assert!(log[..first_new].iter().all(|r| r.token_fingerprint.as_deref() == Some(&old_fp)), "before: the old one");
    let after: Vec<_> = log.iter().filter(|r| r.unix_ms > revoked_ms).collect();
    assert!(after.iter().any(|r| r.endpoint.starts_with("GET /v1/servers")), "rot-b was looked up: {after:#?}");
    assert!(
        after.iter().all(|r| r.token_fingerprint.as_deref() == Some(&new_fp)),
        "every request after the switch carries the new token: {after:#?}"
    );
    assert!(ccm.is_running(), "no restart");
    let logs = ccm.logs();
    assert_eq!(logs.matches("hcloud-ccm started").count(), 1, "{logs}");
    assert!(logs.contains("new token accepted") && logs.contains(&new_fp), "{logs}");
    assert!(!logs.contains(OLD) && !logs.contains(NEW), "a token in the logs: {logs}");
}

#[tokio::test]
async fn a_token_the_api_refuses_is_not_used_and_the_old_one_goes_on() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    h.set_token_policy(TokenPolicy::allow([OLD]));
    let mut volume = SecretVolume::new(&[("token", OLD)]).expect("volume");
    let (ccm, metrics) = ccm_with_token_file(&env, &volume).await;

    volume.update(&[("token", BAD)]).expect("the kubelet's symlink swap");
    wait_until(REACT, "the CCM refused the bad token", async || rotations(&metrics, "rejected").await == Some(1.0))
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- logs ---\n{}", ccm.logs()));
    node_initialized(&env, "rot-c").await;

    let bad: Vec<_> = h.request_log_for_token(BAD).into_iter().map(|r| (r.endpoint, r.status)).collect();
    assert_eq!(bad, vec![("GET /v1/locations".to_owned(), 401)], "checked once, never used");
    let old_fp = token_fingerprint(OLD);
    let others: Vec<_> = h
        .request_log()
        .into_iter()
        .filter(|r| r.token_fingerprint.as_deref() != Some(&token_fingerprint(BAD)))
        .collect();
    assert!(others.iter().any(|r| r.endpoint.starts_with("GET /v1/servers")), "rot-c was looked up: {others:#?}");
    assert!(
        others.iter().all(|r| r.status == 200 && r.token_fingerprint.as_deref() == Some(&old_fp)),
        "everything else with the old token, successfully: {others:#?}"
    );
    assert_eq!(rotations(&metrics, "accepted").await, None);
    let logs = ccm.logs();
    assert!(logs.contains("the API refused the new token") && logs.contains(&token_fingerprint(BAD)), "{logs}");
    assert!(!logs.contains(BAD), "the token in the logs: {logs}");
    assert!(ccm.is_running());
}

/// Issue 38, finding 2: another project's token is valid (`GET /locations` passes), but every
/// server of this cluster is a real 404 for it. Rotated to it, the CCM would delete the next
/// NotReady Node as "gone" and create Load Balancers in the other project. It is refused: the
/// new token must see a server a Node of this cluster names.
#[tokio::test]
async fn a_token_of_another_project_is_refused_with_a_warning_and_the_old_one_kept() {
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    h.set_token_policy(TokenPolicy::allow([OLD]));
    let other = h.add_project(&SeedProject::new("other", [OTHER])).expect("a second project");
    other.seed_server(&SeedServer::new("someone-elses")).expect("the other project has servers of its own");
    let mut volume = SecretVolume::new(&[("token", OLD)]).expect("volume");
    let ages = [
        ("HCLOUD_SERVER_CACHE_LIFECYCLE_MAX_AGE", "2s"),
        ("HCLOUD_SERVER_CACHE_MAX_AGE", "1s"),
        ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
    ];
    let (ccm, metrics) = ccm_with_token_file_and(&env, &volume, &ages).await;
    node_initialized(&env, "rot-d").await;
    // NotReady: the lifecycle asks about its server every few seconds; with a token that
    // cannot see it, that answer is a real 404 and the Node would be deleted.
    set_ready(&env.client, "rot-d", Ready::False).await.expect("not ready");

    volume.update(&[("token", OTHER)]).expect("the kubelet's symlink swap");
    wait_until(REACT, "the CCM checked the other project's token", async || {
        rotations(&metrics, "accepted").await.is_some() || rotations(&metrics, "rejected").await.is_some()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- logs ---\n{}", ccm.logs()));
    assert_eq!(rotations(&metrics, "rejected").await, Some(1.0), "refused\n--- logs ---\n{}", ccm.logs());
    assert_eq!(rotations(&metrics, "accepted").await, None);
    let event = wait_for_event(&env.client, "Node", "rot-d", "TokenFromOtherProject", REACT).await.expect("warning");
    assert_eq!(event.type_, "Warning");
    assert!(event.message.contains(&token_fingerprint(OTHER)) && !event.message.contains(OTHER), "{event}");

    // The lifecycle goes on with the old token: three more checks of the NotReady Node, and it
    // is still there.
    let old_fp = token_fingerprint(OLD);
    let lookups =
        || h.request_log_for(&old_fp).into_iter().filter(|r| r.endpoint.starts_with("GET /v1/servers")).count();
    let before = lookups();
    wait_until(REACT, "three lifecycle checks after the refusal", async || lookups() >= before + 3)
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- logs ---\n{}", ccm.logs()));
    assert!(env.nodes.get_opt("rot-d").await.expect("get").is_some(), "no Node deleted");

    // A Load Balancer goes to this cluster's project, none to the other.
    let (_ns, services) = fresh_namespace(&env).await;
    let svc = create(&services, &lb_service("web", &[], &[80])).await;
    ensured(&services, "web").await;
    assert!(lb_of(&h, &svc).is_some(), "in the project of the token in use");
    assert!(other.snapshot().load_balancers.is_empty(), "nothing created in the other project");

    let with_other: Vec<_> = h.request_log_for_token(OTHER).into_iter().map(|r| (r.endpoint, r.status)).collect();
    assert_eq!(with_other, vec![("GET /v1/servers/{id}".to_owned(), 404)], "one check, never used");
    assert_eq!(ccm.logs().matches("hcloud-ccm started").count(), 1);
    let logs = ccm.logs();
    assert!(logs.contains("another Hetzner Cloud project") && !logs.contains(OTHER), "{logs}");
}
