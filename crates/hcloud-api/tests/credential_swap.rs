//! Replacing the credentials of a running client: the Cloud API token (`set_token`,
//! `with_token`) and the Robot basic-auth pair (`set_credentials`, `with_credentials`),
//! against the fake's token policy and Robot credentials.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use std::sync::Arc;

use common::{Env, TOKEN};
use hcloud_api::robot::{RobotClient, RobotError};
use hcloud_api::{SecretString, token_fingerprint};
use hcloud_fake::robot::RobotCredentials;
use hcloud_fake::{FakeConfig, TokenPolicy};

const NEW: &str = "hcloud-test-token-new-1f2e3d4c5b6a7988";

#[tokio::test]
async fn a_new_token_is_sent_by_every_clone_from_the_next_request_on() {
    let env = Env::start(FakeConfig::default().with_token_policy(TokenPolicy::allow([TOKEN, NEW]))).await;
    let clone = env.client.clone();
    env.client.locations().list_all().await.expect("old token accepted");
    assert_eq!(env.client.token_fingerprint(), token_fingerprint(TOKEN));

    env.client.set_token(SecretString::from(NEW)).expect("a well-formed token");
    env.h.set_token_policy(TokenPolicy::allow([NEW]));
    clone.locations().list_all().await.expect("the clone sends the new token");
    env.client.servers().list_all(&Default::default()).await.expect("so does the original");
    assert_eq!(clone.token_fingerprint(), token_fingerprint(NEW));
    let log = env.h.request_log();
    let fingerprints: Vec<_> = log.iter().map(|r| (r.endpoint.as_str(), r.token_fingerprint.clone())).collect();
    assert_eq!(
        fingerprints,
        vec![
            ("GET /v1/locations", Some(token_fingerprint(TOKEN))),
            ("GET /v1/locations", Some(token_fingerprint(NEW))),
            ("GET /v1/servers", Some(token_fingerprint(NEW))),
        ]
    );
    assert!(log.iter().all(|r| r.status == 200), "{log:?}");
}

#[tokio::test]
async fn a_malformed_token_is_refused_and_the_old_one_kept() {
    let env = Env::start(FakeConfig::default()).await;
    for bad in ["", "two words", "line\nbreak"] {
        let e = env.client.set_token(SecretString::from(bad)).expect_err("malformed");
        assert!(e.to_string().contains("whitespace"), "{e}");
        assert!(env.client.with_token(SecretString::from(bad)).is_err());
    }
    assert_eq!(env.client.token_fingerprint(), token_fingerprint(TOKEN));
}

#[tokio::test]
async fn a_token_is_tried_past_the_gate_without_touching_the_client() {
    let gate: hcloud_api::RequestGate = Arc::new(|| Err("standing by".to_owned()));
    let env =
        Env::with(FakeConfig::default().with_token_policy(TokenPolicy::allow([TOKEN, NEW])), |b| b.gate(gate)).await;
    let e = env.client.locations().list_all().await.expect_err("the gate holds the client back");
    assert!(matches!(e, hcloud_api::Error::NotSent { .. }), "{e:?}");

    let trial = env.client.with_token(SecretString::from(NEW)).expect("well-formed");
    trial.locations().list_all().await.expect("the trial passes no gate and the fake takes the new token");
    let bad = env.client.with_token(SecretString::from("not-a-valid-token")).expect("well-formed");
    let e = bad.locations().list_all().await.expect_err("the fake refuses it");
    assert_eq!(e.api().map(|a| a.status), Some(401), "{e:?}");
    assert_eq!(env.client.token_fingerprint(), token_fingerprint(TOKEN), "the client keeps its token");
    let seen: Vec<_> = env.rec.take().into_iter().map(|(_, _, endpoint, status, _)| (endpoint, status)).collect();
    assert_eq!(
        seen,
        vec![("/locations".to_owned(), Some(200)), ("/locations".to_owned(), Some(401))],
        "the trials are observed (counted in the metrics) like any request"
    );
}

#[tokio::test]
async fn the_observer_tells_a_tried_token_from_the_token_in_use() {
    let env = Env::start(FakeConfig::default().with_token_policy(TokenPolicy::allow([TOKEN]))).await;
    env.client.locations().list_all().await.expect("the token in use");
    let trial = env.client.with_token(SecretString::from(NEW)).expect("well-formed");
    trial.locations().list_all().await.expect_err("the fake does not know the new token yet");
    env.h.set_token_policy(TokenPolicy::allow([NEW]));
    env.client.locations().list_all().await.expect_err("the token in use was revoked");
    trial.locations().list_all().await.expect("the new token is valid now");
    assert_eq!(
        *env.rec.trials.lock().unwrap(),
        vec![(Some(200), false), (Some(401), true), (Some(401), false), (Some(200), true)],
        "a 401 of a trial says nothing about the token in use"
    );
}

#[tokio::test]
async fn new_robot_credentials_are_sent_by_every_clone_and_tried_past_the_gate() {
    let env = Env::start(FakeConfig::default()).await;
    let gate: hcloud_api::RequestGate = Arc::new(|| Err("standing by".to_owned()));
    let client =
        RobotClient::new(&env.fake.robot_url(), "robot", SecretString::from("robot-password")).expect("client");
    let gated = client.clone().with_gate(gate);
    let clone = client.clone();
    env.h.set_robot_credentials(RobotCredentials { user: "robot2".into(), password: "new-password".into() });
    let e = client.servers().await.expect_err("old credentials refused");
    assert!(matches!(e, RobotError::Api { status: 401, .. }), "{e:?}");

    let trial = gated.with_credentials("robot2", SecretString::from("new-password"));
    assert_eq!(trial.servers().await.expect("the trial passes no gate"), Vec::new());
    assert!(matches!(gated.servers().await, Err(RobotError::NotSent(_))), "the gated client is still gated");
    client.set_credentials("robot2", SecretString::from("new-password"));
    assert_eq!(clone.user(), "robot2");
    assert_eq!(clone.servers().await.expect("the clone sends the new pair"), Vec::new());
    assert!(!format!("{clone:?}").contains("new-password"));
}
