//! The Robot webservice client against the fake's `/robot` part.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use hcloud_api::SecretString;
use hcloud_api::robot::{RobotClient, RobotError, RobotErrorCode};
use hcloud_fake::robot::{RobotServerPatch, SeedRobotServer};
use hcloud_fake::{FakeConfig, FakeServer, FaultRule};

fn client(fake: &FakeServer, password: &str) -> RobotClient {
    RobotClient::new(&fake.robot_url(), "robot", SecretString::from(password.to_owned())).expect("client")
}

#[tokio::test]
async fn lists_gets_and_reads_reset_state() {
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let h = fake.handle();
    let a = h.seed_robot_server(&SeedRobotServer::new("bm-a").product("Server Auction").dc("FSN1-DC14")).expect("a");
    let b = h.seed_robot_server(&SeedRobotServer::new("bm-b")).expect("b");
    h.update_robot_server(b, &RobotServerPatch { operating_status: Some("shut off".into()), ..Default::default() })
        .expect("patch");
    let c = client(&fake, "robot-password");

    let servers = c.servers().await.expect("list");
    assert_eq!(servers.iter().map(|s| s.server_number).collect::<Vec<_>>(), vec![a, b]);
    assert_eq!(servers[0].product, "Server Auction");
    assert_eq!(servers[0].dc, "FSN1-DC14");
    assert_eq!(servers[0].server_ip, h.robot_server(a).and_then(|s| s.ipv4));
    assert_eq!(c.server(a).await.expect("get").map(|s| s.server_name), Some("bm-a".into()));
    assert_eq!(c.server(424_242).await.expect("absent"), None, "SERVER_NOT_FOUND is None");
    assert!(c.reset(b).await.expect("reset").is_shut_off());
    assert!(!c.reset(a).await.expect("reset").is_shut_off());
    let e = c.reset(424_242).await.expect_err("no such server");
    assert!(e.is_server_not_found(), "{e}");
}

#[tokio::test]
async fn errors_map_to_codes_and_never_show_the_password() {
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let h = fake.handle();
    h.seed_robot_server(&SeedRobotServer::new("bm-a")).expect("a");
    let wrong = client(&fake, "wrong-secret-pw");
    let e = wrong.servers().await.expect_err("unauthorized");
    assert_eq!(e.code(), Some(&RobotErrorCode::Unauthorized));
    assert!(!e.is_rate_limit() && !e.is_transient());
    assert!(!format!("{e} {e:?} {wrong:?}").contains("wrong-secret-pw"));

    let c = client(&fake, "robot-password");
    h.inject_robot_fault(FaultRule::error(Some("GET"), "/server", 403, "RATE_LIMIT_EXCEEDED"));
    let e = c.servers().await.expect_err("rate limited");
    assert!(e.is_rate_limit() && e.is_transient(), "{e}");
    assert!(matches!(&e, RobotError::Api { status: 403, .. }));
    assert!(e.to_string().contains("RATE_LIMIT_EXCEEDED"), "{e}");

    h.inject_robot_fault(FaultRule::html(Some("GET"), "/server", 502));
    let e = c.servers().await.expect_err("proxy page");
    assert!(e.is_transient() && e.code() == Some(&RobotErrorCode::Other(String::new())), "{e}");
    assert_eq!(c.servers().await.expect("recovers").len(), 1);
}

#[tokio::test]
async fn a_refusing_gate_sends_nothing() {
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let c = client(&fake, "robot-password").with_gate(std::sync::Arc::new(|| Err("not the leader".to_owned())));
    let e = c.servers().await.expect_err("refused");
    assert!(matches!(&e, RobotError::NotSent(m) if m.contains("not the leader")), "{e}");
    assert!(e.is_transient() && !e.is_rate_limit());
    assert_eq!(fake.handle().request_counts().total, 0);
}

#[tokio::test]
async fn every_exchange_is_observed_with_its_template_and_status() {
    use std::sync::{Arc, Mutex};
    let fake = FakeServer::start(FakeConfig::default()).await.expect("fake");
    let h = fake.handle();
    let a = h.seed_robot_server(&SeedRobotServer::new("bm-a")).expect("a");
    type Seen = Vec<(String, &'static str, Option<u16>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let sink = seen.clone();
    let observer = move |e: &hcloud_api::RequestEvent<'_>| {
        sink.lock().unwrap().push((e.method_label(), e.endpoint, e.status));
    };
    let c = client(&fake, "robot-password").with_observer(Arc::new(observer));
    c.servers().await.expect("list");
    c.server(a).await.expect("get");
    c.reset(424_242).await.expect_err("no such server");
    client(&fake, "robot-password")
        .with_gate(Arc::new(|| Err("fenced".to_owned())))
        .with_observer(Arc::new(|_: &hcloud_api::RequestEvent<'_>| panic!("a refused request is not observed")))
        .servers()
        .await
        .expect_err("refused");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            ("get".to_owned(), "/server", Some(200)),
            ("get".to_owned(), "/server/{number}", Some(200)),
            ("get".to_owned(), "/reset/{number}", Some(404)),
        ]
    );
}
