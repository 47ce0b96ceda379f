//! Credential rotation through the provider as the program wires it (`Config::from_env` →
//! `HcloudCloud::connect` → `take_credential_rotation`), against the fake's token policy and
//! Robot credentials, with the files in a Secret volume swapped the way the kubelet does.
//! Each poll is driven by the test (`poll_once`), so nothing waits on the 5 s interval.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cloud_provider::{Cloud, InstancesV2};
use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::robot::{RobotCredentials, SeedRobotServer};
use hcloud_fake::{FakeConfig, FakeServer, SeedProject, TokenPolicy, token_fingerprint};
use hcloud_provider::rotation::{Credential, Outcome};
use hcloud_provider::{ClientHooks, Config, HcloudCloud, HcloudMetrics};
use k8s_openapi::api::core::v1::{Node, NodeSpec};
use prometheus_client::registry::Registry;
use test_harness::SecretVolume;

const OLD: &str = "oldtoken0000000000000000000000000000000000000000000000000000000a";
const NEW: &str = "newtoken0000000000000000000000000000000000000000000000000000000b";
const BAD: &str = "badtoken0000000000000000000000000000000000000000000000000000000c";
const OTHER: &str = "othertok0000000000000000000000000000000000000000000000000000000d";

struct Fx {
    fake: FakeServer,
    cloud: HcloudCloud,
    volume: SecretVolume,
    metrics: HcloudMetrics,
}

/// A fake accepting `accepted`, a Secret volume with `files`, and the provider connected with
/// `env` (plus the fake's endpoints) and `gate`.
async fn fx(accepted: &[&str], files: &[(&str, &str)], env: &[(&str, &str)], gate: Option<Arc<AtomicBool>>) -> Fx {
    let fake = FakeServer::start(FakeConfig { log_requests: false, ..FakeConfig::default() }).await.expect("fake");
    fx_on(fake, accepted, files, env, gate).await
}

/// [`fx`] on a fake seeded beforehand.
async fn fx_on(
    fake: FakeServer,
    accepted: &[&str],
    files: &[(&str, &str)],
    env: &[(&str, &str)],
    gate: Option<Arc<AtomicBool>>,
) -> Fx {
    fake.handle().set_token_policy(TokenPolicy::allow(accepted.iter().copied()));
    let volume = SecretVolume::new(files).expect("volume");
    let mut vars: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    for (key, var) in
        [("token", "HCLOUD_TOKEN_FILE"), ("robot-user", "ROBOT_USER_FILE"), ("robot-password", "ROBOT_PASSWORD_FILE")]
    {
        if files.iter().any(|(k, _)| *k == key) {
            vars.insert(var.into(), volume.path(key).to_string_lossy().into_owned());
        }
    }
    vars.insert("HCLOUD_ENDPOINT".into(), fake.base_url());
    vars.insert("ROBOT_ENDPOINT".into(), fake.robot_url());
    let config = Config::from_env(|k| vars.get(k).cloned(), Vec::new()).expect("valid config");
    let metrics = HcloudMetrics::default();
    let gate = gate.map(|open| -> hcloud_api::RequestGate {
        Arc::new(move || if open.load(Ordering::SeqCst) { Ok(()) } else { Err("standing by".into()) })
    });
    let hooks = ClientHooks { metrics: Some(metrics.clone()), gate, write_gate: None };
    let cloud = HcloudCloud::connect(&config, hooks).await.expect("connects");
    Fx { fake, cloud, volume, metrics }
}

impl Fx {
    /// A server seeded now and its Node looked up through the provider (as the node
    /// controller does): the server's id.
    async fn node_seen(&self, name: &str) -> u64 {
        let id = self.fake.handle().seed_server(&SeedServer::new(name)).expect("server");
        let node = Node {
            metadata: kube_meta(name),
            spec: Some(NodeSpec { provider_id: Some(format!("hcloud://{id}")), ..NodeSpec::default() }),
            ..Node::default()
        };
        let instances = self.cloud.instances_v2().expect("instances");
        instances.instance_metadata(&node).await.expect("the Node's server").expect("metadata");
        id
    }

    /// `(endpoint, status)` of the fake's requests with `token`.
    fn requests_with(&self, token: &str) -> Vec<(String, u16)> {
        self.fake.handle().request_log_for_token(token).into_iter().map(|r| (r.endpoint, r.status)).collect()
    }

    /// The lines of `hcloud_ccm_credential_rotations_total`, sorted.
    fn rotation_metric(&self) -> Vec<String> {
        let mut registry = Registry::default();
        self.metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("hcloud_ccm_credential_rotations_total{"))
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    }
}

#[tokio::test]
async fn a_new_token_in_the_file_is_checked_once_and_used_by_the_running_client() {
    let mut fx = fx(&[OLD], &[("token", OLD)], &[], None).await;
    let mut rotation = fx.cloud.take_credential_rotation().expect("HCLOUD_TOKEN_FILE is watched");
    assert!(fx.cloud.take_credential_rotation().is_none(), "taken once");
    assert_eq!(rotation.poll_once().await, vec![], "nothing changed");
    fx.node_seen("node-a").await;

    fx.fake.handle().set_token_policy(TokenPolicy::allow([OLD, NEW]));
    fx.volume.update(&[("token", &format!("{NEW}\n"))]).expect("swap");
    assert_eq!(rotation.poll_once().await, vec![(Credential::HcloudToken, Outcome::Accepted)]);
    assert_eq!(rotation.poll_once().await, vec![], "in use: not checked again");
    fx.fake.handle().set_token_policy(TokenPolicy::allow([NEW]));
    fx.cloud.client().servers().list_all(&Default::default()).await.expect("the running client sends the new token");

    assert_eq!(fx.cloud.client().token_fingerprint(), token_fingerprint(NEW));
    assert_eq!(
        fx.requests_with(OLD),
        vec![("GET /v1/locations".to_owned(), 200), ("GET /v1/servers".to_owned(), 200)],
        "the start-up check, the Node's lookup"
    );
    assert_eq!(
        fx.requests_with(NEW),
        vec![("GET /v1/servers/{id}".to_owned(), 200), ("GET /v1/servers".to_owned(), 200)],
        "one check (it sees the Node's server), then the client's requests"
    );
    assert_eq!(
        fx.rotation_metric(),
        vec![r#"hcloud_ccm_credential_rotations_total{credential="hcloud_token",result="accepted"} 1"#]
    );
}

#[tokio::test]
async fn a_token_the_api_refuses_is_not_used_and_not_asked_about_at_every_poll() {
    let mut fx = fx(&[OLD], &[("token", OLD)], &[], None).await;
    let mut rotation = fx.cloud.take_credential_rotation().expect("watched");
    fx.volume.update(&[("token", BAD)]).expect("swap");
    assert_eq!(rotation.poll_once().await, vec![(Credential::HcloudToken, Outcome::Rejected)]);
    assert_eq!(rotation.poll_once().await, vec![], "not checked again until the file changes or 5 min pass");
    fx.cloud.client().servers().list_all(&Default::default()).await.expect("the old token is still in use");
    assert_eq!(fx.cloud.client().token_fingerprint(), token_fingerprint(OLD));
    assert_eq!(fx.requests_with(BAD), vec![("GET /v1/locations".to_owned(), 401)], "one check");
    assert_eq!(
        fx.rotation_metric(),
        vec![r#"hcloud_ccm_credential_rotations_total{credential="hcloud_token",result="rejected"} 1"#]
    );

    // The file gets fixed: the next token is checked at once (against the server of a Node).
    fx.node_seen("node-a").await;
    fx.fake.handle().set_token_policy(TokenPolicy::allow([OLD, NEW]));
    fx.volume.update(&[("token", NEW)]).expect("swap");
    assert_eq!(rotation.poll_once().await, vec![(Credential::HcloudToken, Outcome::Accepted)]);
}

#[tokio::test]
async fn the_file_without_a_token_keeps_the_one_in_use_and_is_reported_once() {
    let mut fx = fx(&[OLD], &[("token", OLD)], &[], None).await;
    let mut rotation = fx.cloud.take_credential_rotation().expect("watched");
    fx.volume.update(&[("token", "")]).expect("swap");
    assert_eq!(rotation.poll_once().await, vec![(Credential::HcloudToken, Outcome::Invalid)]);
    assert_eq!(rotation.poll_once().await, vec![], "reported once");
    fx.volume.update(&[("other-key", "x")]).expect("the key left the Secret");
    assert_eq!(rotation.poll_once().await, vec![(Credential::HcloudToken, Outcome::Unreadable)]);
    fx.cloud.client().servers().list_all(&Default::default()).await.expect("the old token is still in use");
    assert_eq!(fx.fake.handle().request_log().len(), 2, "nothing was sent for the broken file");
}

#[tokio::test]
async fn a_standby_checks_and_takes_a_new_token_past_the_fence() {
    let open = Arc::new(AtomicBool::new(true));
    let mut fx = fx(&[OLD, NEW], &[("token", OLD)], &[], Some(open.clone())).await;
    let mut rotation = fx.cloud.take_credential_rotation().expect("watched");
    fx.node_seen("node-a").await;
    open.store(false, Ordering::SeqCst); // leader election began: this replica stands by
    fx.volume.update(&[("token", NEW)]).expect("swap");
    assert_eq!(rotation.poll_once().await, vec![(Credential::HcloudToken, Outcome::Accepted)]);
    assert!(
        fx.cloud.client().servers().list_all(&Default::default()).await.is_err(),
        "the controllers' requests stay fenced"
    );
    open.store(true, Ordering::SeqCst); // leading: the new token from the first request on
    fx.fake.handle().set_token_policy(TokenPolicy::allow([NEW]));
    fx.cloud.client().servers().list_all(&Default::default()).await.expect("the new token");
}

#[tokio::test]
async fn a_token_from_the_variable_is_not_watched() {
    let fx = fx(&[OLD], &[], &[("HCLOUD_TOKEN", OLD)], None).await;
    assert!(fx.cloud.take_credential_rotation().is_none());
}

/// The Node of the Robot server `bm-a` (the name must match the server's).
fn robot_node(number: u64) -> Node {
    Node {
        metadata: kube_meta("bm-a"),
        spec: Some(NodeSpec { provider_id: Some(format!("hrobot://{number}")), ..NodeSpec::default() }),
        ..Node::default()
    }
}

fn kube_meta(name: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta { name: Some(name.to_owned()), ..Default::default() }
}

const ROBOT_ENV: &[(&str, &str)] = &[("HCLOUD_TOKEN", OLD), ("ROBOT_ENABLED", "true")];

#[tokio::test]
async fn new_robot_credentials_are_checked_with_one_request_and_used_by_the_robot_lookups() {
    let files = [("robot-user", "robot"), ("robot-password", "robot-password")];
    let mut fx = fx(&[OLD], &files, ROBOT_ENV, None).await;
    let number = fx.fake.handle().seed_robot_server(&SeedRobotServer::new("bm-a")).expect("robot server");
    let mut rotation = fx.cloud.take_credential_rotation().expect("the Robot files are watched");
    let instances = fx.cloud.instances_v2().expect("instances");
    assert!(!instances.instance_shutdown(&robot_node(number)).await.expect("old pair works"));

    // The password is changed in Robot: the old one is refused from now on.
    let h = fx.fake.handle();
    h.set_robot_credentials(RobotCredentials { user: "robot".into(), password: "rotated-pw".into() });
    fx.volume.update(&[("robot-user", "robot"), ("robot-password", "rotated-pw\n")]).expect("swap");
    let before = h.request_log().len();
    assert_eq!(rotation.poll_once().await, vec![(Credential::Robot, Outcome::Accepted)]);
    let check: Vec<_> = h.request_log()[before..].iter().map(|r| (r.endpoint.clone(), r.status)).collect();
    assert_eq!(check, vec![("GET /robot/server".to_owned(), 200)], "one request checks the pair");
    assert!(!instances.instance_shutdown(&robot_node(number)).await.expect("the new pair is in use"));
    assert_eq!(rotation.poll_once().await, vec![]);
    assert_eq!(
        fx.rotation_metric(),
        vec![r#"hcloud_ccm_credential_rotations_total{credential="robot",result="accepted"} 1"#]
    );
}

#[tokio::test]
async fn refused_robot_credentials_are_not_used() {
    let files = [("robot-password", "robot-password")];
    let env = [("HCLOUD_TOKEN", OLD), ("ROBOT_ENABLED", "true"), ("ROBOT_USER", "robot")];
    let mut fx = fx(&[OLD], &files, &env, None).await;
    let number = fx.fake.handle().seed_robot_server(&SeedRobotServer::new("bm-a")).expect("robot server");
    let mut rotation = fx.cloud.take_credential_rotation().expect("the password file is watched");
    fx.volume.update(&[("robot-password", "mistyped")]).expect("swap");
    assert_eq!(rotation.poll_once().await, vec![(Credential::Robot, Outcome::Rejected)]);
    assert_eq!(rotation.poll_once().await, vec![], "not asked again at every poll");
    let instances = fx.cloud.instances_v2().expect("instances");
    assert!(!instances.instance_shutdown(&robot_node(number)).await.expect("the old pair is still in use"));
    let robot: Vec<_> =
        fx.fake.handle().request_log().into_iter().filter(|r| r.path.starts_with("/robot")).map(|r| r.status).collect();
    assert_eq!(robot, vec![401, 200, 200], "the check, then the lookup (list, reset) with the old pair");
    assert_eq!(
        fx.rotation_metric(),
        vec![r#"hcloud_ccm_credential_rotations_total{credential="robot",result="rejected"} 1"#]
    );
}

/// Issue 38, finding 2: a valid token of another project (its own servers, a network of the
/// same name) cannot see the server a Node of this cluster names: refused, never used.
#[tokio::test]
async fn a_token_of_another_project_is_refused_when_it_cannot_see_a_nodes_server() {
    let mut fx = fx(&[OLD], &[("token", OLD)], &[], None).await;
    let mut rotation = fx.cloud.take_credential_rotation().expect("watched");
    let other = fx.fake.handle().add_project(&SeedProject::new("other", [OTHER])).expect("project");
    other.seed_server(&SeedServer::new("node-a")).expect("a server of the same name over there");
    fx.node_seen("node-a").await;
    fx.volume.update(&[("token", OTHER)]).expect("swap");
    assert_eq!(rotation.poll_once().await, vec![(Credential::HcloudToken, Outcome::Rejected)]);
    assert_eq!(rotation.poll_once().await, vec![], "not asked again at every poll");
    assert_eq!(fx.cloud.client().token_fingerprint(), token_fingerprint(OLD), "the token in use stays");
    assert_eq!(fx.requests_with(OTHER), vec![("GET /v1/servers/{id}".to_owned(), 404)], "one check");
    assert_eq!(
        fx.rotation_metric(),
        vec![r#"hcloud_ccm_credential_rotations_total{credential="hcloud_token",result="rejected"} 1"#]
    );
}

/// With `HCLOUD_NETWORK`, the network is the proof: another project's network of the same
/// name does not pass.
#[tokio::test]
async fn a_token_of_another_project_is_refused_when_it_cannot_see_the_network() {
    let fake_network =
        |h: &hcloud_fake::FakeHandle| h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8")).expect("network");
    let fake = FakeServer::start(FakeConfig { log_requests: false, ..FakeConfig::default() }).await.expect("fake");
    let h = fake.handle();
    let network = fake_network(&h);
    let other = h.add_project(&SeedProject::new("other", [OTHER])).expect("project");
    fake_network(&other);
    let mut fx = fx_on(fake, &[OLD], &[("token", OLD)], &[("HCLOUD_NETWORK", "k8s")], None).await;
    let mut rotation = fx.cloud.take_credential_rotation().expect("watched");
    fx.volume.update(&[("token", OTHER)]).expect("swap");
    assert_eq!(rotation.poll_once().await, vec![(Credential::HcloudToken, Outcome::Rejected)]);
    assert_eq!(fx.cloud.client().token_fingerprint(), token_fingerprint(OLD));
    assert_eq!(fx.requests_with(OTHER), vec![("GET /v1/networks/{id}".to_owned(), 404)]);
    let old: Vec<_> = fx.requests_with(OLD).into_iter().filter(|(e, _)| e == "GET /v1/networks/{id}").collect();
    assert_eq!(old, vec![("GET /v1/networks/{id}".to_owned(), 200)], "the token in use still sees network {network}");
}

/// Without `HCLOUD_NETWORK` and before the token in use found any Node's server, a valid token
/// cannot be proven to be of this project: not taken yet, checked again later.
#[tokio::test]
async fn a_valid_token_is_not_taken_before_its_project_is_proven() {
    let mut fx = fx(&[OLD, NEW], &[("token", OLD)], &[], None).await;
    let mut rotation = fx.cloud.take_credential_rotation().expect("watched");
    fx.volume.update(&[("token", NEW)]).expect("swap");
    assert_eq!(rotation.poll_once().await, vec![(Credential::HcloudToken, Outcome::CheckFailed)]);
    assert_eq!(fx.cloud.client().token_fingerprint(), token_fingerprint(OLD));
    assert_eq!(fx.requests_with(NEW), vec![("GET /v1/locations".to_owned(), 200)], "valid, nothing more known");
}

/// Issue 38, finding 7: the operator writes the new token to the Secret before creating it in
/// the Console (refused: checked again in 5 minutes), then creates it and revokes the old one.
/// The first 401 of the token in use has the refused token checked again at once, not minutes
/// later while every request fails.
#[tokio::test]
async fn a_401_of_the_token_in_use_has_a_refused_token_checked_again_at_once() {
    let mut fx = fx(&[OLD], &[("token", OLD)], &[], None).await;
    let rotation = fx.cloud.take_credential_rotation().expect("watched");
    fx.node_seen("node-a").await;
    fx.volume.update(&[("token", NEW)]).expect("swap");
    let task = tokio::spawn(rotation.run());
    let rejected = r#"hcloud_ccm_credential_rotations_total{credential="hcloud_token",result="rejected"} 1"#;
    let accepted = r#"hcloud_ccm_credential_rotations_total{credential="hcloud_token",result="accepted"} 1"#;
    test_harness::wait_until(Duration::from_secs(20), "the not yet created token refused", async || {
        fx.rotation_metric().iter().any(|l| l == rejected)
    })
    .await
    .expect("refused at a poll");

    fx.fake.handle().set_token_policy(TokenPolicy::allow([NEW]));
    let e = fx.cloud.client().servers().list_all(&Default::default()).await.expect_err("the token in use is revoked");
    assert_eq!(e.api().map(|a| a.status), Some(401), "{e}");
    test_harness::wait_until(Duration::from_secs(20), "the refused token checked again and taken", async || {
        fx.rotation_metric().iter().any(|l| l == accepted)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", fx.rotation_metric()));
    assert_eq!(fx.cloud.client().token_fingerprint(), token_fingerprint(NEW));
    let checks: Vec<_> = fx.requests_with(NEW);
    assert_eq!(
        checks,
        vec![("GET /v1/servers/{id}".to_owned(), 401), ("GET /v1/servers/{id}".to_owned(), 200)],
        "refused once, then checked again once"
    );
    task.abort();
}

/// The same for Robot: the password written to the Secret before it was changed in Robot is
/// refused; once Robot refuses the pair in use (the change is made), it is checked again at once.
#[tokio::test]
async fn a_401_of_the_robot_pair_in_use_has_a_refused_pair_checked_again_at_once() {
    let files = [("robot-password", "robot-password")];
    let env = [("HCLOUD_TOKEN", OLD), ("ROBOT_ENABLED", "true"), ("ROBOT_USER", "robot")];
    let mut fx = fx(&[OLD], &files, &env, None).await;
    let number = fx.fake.handle().seed_robot_server(&SeedRobotServer::new("bm-a")).expect("robot server");
    let rotation = fx.cloud.take_credential_rotation().expect("the password file is watched");
    fx.volume.update(&[("robot-password", "rotated-pw")]).expect("swap");
    let task = tokio::spawn(rotation.run());
    let line =
        |result: &str| format!(r#"hcloud_ccm_credential_rotations_total{{credential="robot",result="{result}"}} 1"#);
    test_harness::wait_until(Duration::from_secs(20), "the pair not yet changed in Robot refused", async || {
        fx.rotation_metric().contains(&line("rejected"))
    })
    .await
    .expect("refused at a poll");

    let h = fx.fake.handle();
    h.set_robot_credentials(RobotCredentials { user: "robot".into(), password: "rotated-pw".into() });
    let instances = fx.cloud.instances_v2().expect("instances");
    instances.instance_shutdown(&robot_node(number)).await.expect_err("Robot refuses the pair in use");
    test_harness::wait_until(Duration::from_secs(20), "the refused pair checked again and taken", async || {
        fx.rotation_metric().contains(&line("accepted"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", fx.rotation_metric()));
    assert!(!instances.instance_shutdown(&robot_node(number)).await.expect("the new pair is in use"));
    task.abort();
}
