//! End to end: hcloud-ccm's HTTP endpoints — the secure port (self-signed certificate,
//! delegated authentication and authorization against the real kube-apiserver) and the
//! official CCM's plain metrics listener (`HCLOUD_METRICS_ADDRESS`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use common::{Env, REACT, free_port};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::SeedServer;
use test_harness::{ChildProcess, NodeBuilder, unique_name, wait_for, wait_until};

struct Endpoints {
    plain: String,
    secure: String,
    https: reqwest::Client,
}

impl Endpoints {
    fn new() -> Self {
        // The certificate is self-signed and generated at start: this test does not check it
        // (controller-serving's tests do), only what the endpoints answer.
        let https = reqwest::Client::builder().tls_danger_accept_invalid_certs(true).build().expect("client");
        Endpoints {
            plain: format!("http://127.0.0.1:{}", free_port()),
            secure: format!("https://127.0.0.1:{}", free_port()),
            https,
        }
    }

    fn spawn(&self, env: &Env, token: &str, lease: &str) -> ChildProcess {
        let port = self.secure.rsplit(':').next().expect("port");
        let secure_port = format!("--secure-port={port}");
        let lease = format!("--leader-elect-resource-name={lease}");
        let metrics = self.plain.trim_start_matches("http://").to_owned();
        env.spawn_with(
            token,
            env.cp.ccm_kubeconfig(),
            &[("HCLOUD_METRICS_ADDRESS", &metrics)],
            &[
                "--leader-elect=true",
                "--leader-elect-lease-duration=4s",
                "--leader-elect-renew-deadline=3s",
                "--leader-elect-retry-period=1s",
                &lease,
                &secure_port,
            ],
            "hcloud-ccm",
        )
    }

    async fn get(&self, url: String, token: Option<&str>) -> (u16, String) {
        let client = if url.starts_with("https") { self.https.clone() } else { reqwest::Client::new() };
        let mut req = client.get(&url);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = resp.status().as_u16();
        (status, resp.text().await.expect("body"))
    }
}

/// The value of the first sample line starting with `series` (name and labels).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find(|l| l.starts_with(series)).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn health_and_metrics_answer_on_both_listeners_with_delegated_auth_on_the_secure_port() {
    let env = Env::start(FakeConfig::default()).await;
    env.fake.handle().seed_server(&SeedServer::new("srv-node")).expect("server");
    let endpoints = Endpoints::new();
    let lease = unique_name("ccm-serving");
    let ccm = endpoints.spawn(&env, common::TOKEN, &lease);
    ccm.wait_for_log("hcloud-ccm started", REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));
    NodeBuilder::new("srv-node").register(&env.client).await.expect("node");
    wait_for(&env.nodes, "srv-node", REACT, "initialized", |n| n.is_some_and(|n| !common::tainted(n)))
        .await
        .expect("initialized");

    for base in [&endpoints.plain, &endpoints.secure] {
        // Probes need no credentials on either listener.
        for probe in ["/healthz", "/readyz", "/livez"] {
            assert_eq!(endpoints.get(format!("{base}{probe}"), None).await, (200, "ok".to_owned()), "{base}{probe}");
        }
        let (status, verbose) = endpoints.get(format!("{base}/healthz?verbose"), None).await;
        assert_eq!(status, 200, "{verbose}");
        for check in ["[+]leaderElection ok", "[+]cloud-node-controller ok", "[+]cloud-node-lifecycle-controller ok"] {
            assert!(verbose.contains(check), "{check} missing from {base}/healthz?verbose:\n{verbose}");
        }
        let (_, ready) = endpoints.get(format!("{base}/readyz?verbose"), None).await;
        assert!(ready.contains("[+]informer-sync ok"), "{ready}");
    }

    // /metrics: open on the plain listener, delegated authn/authz on the secure port.
    let (status, plain) = endpoints.get(format!("{}/metrics", endpoints.plain), None).await;
    assert_eq!(status, 200);
    let (status, body) = endpoints.get(format!("{}/metrics", endpoints.secure), None).await;
    assert_eq!(status, 403, "no token: the anonymous user, whom RBAC does not allow: {body}");
    assert!(body.contains("User \"system:anonymous\" cannot get path \"/metrics\""), "{body}");
    let (status, body) = endpoints.get(format!("{}/metrics", endpoints.secure), Some("bogus-token")).await;
    assert_eq!(status, 401, "a rejected token: {body}");
    let (status, body) = endpoints.get(format!("{}/metrics", endpoints.secure), Some(env.cp.restricted_token())).await;
    assert_eq!(status, 403, "a user without rights: {body}");
    let (status, secure) = endpoints.get(format!("{}/metrics", endpoints.secure), Some(env.cp.admin_token())).await;
    assert_eq!(status, 200, "system:masters: {secure}");
    for metrics in [&plain, &secure] {
        assert!(sample(metrics, "workqueue_adds_total{name=\"cloud-node-controller\"}").is_some_and(|v| v >= 1.0));
        assert_eq!(sample(metrics, &format!("leader_election_master_status{{name=\"{lease}\"}}")), Some(1.0));
        assert_eq!(
            sample(metrics, "running_managed_controllers{manager=\"hcloud-ccm\",name=\"cloud-node-controller\"}"),
            Some(1.0)
        );
        assert!(sample(metrics, "rest_client_requests_total{code=\"200\",method=\"GET\"").is_some(), "{metrics}");
    }

    let status = ccm.stop().await.expect("stops");
    assert_eq!(status.code(), Some(0), "{}", ccm.logs());
    assert!(
        reqwest::get(format!("{}/healthz", endpoints.plain)).await.is_err(),
        "the listener closed with the process"
    );
}

#[tokio::test]
async fn a_standby_is_healthy_and_ready_and_reports_that_it_does_not_lead() {
    let env = Env::start(FakeConfig::default()).await;
    let lease = unique_name("ccm-serving");
    let (leader, standby) = (Endpoints::new(), Endpoints::new());
    let a = leader.spawn(&env, common::TOKEN, &lease);
    a.wait_for_log("hcloud-ccm started", REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", a.logs()));
    let b = standby.spawn(&env, "standby000000000000000000000000000000000000000000000000000000000", &lease);
    b.wait_for_log("attempting to acquire leader lease", REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", b.logs()));
    wait_until(REACT, "the standby's informer synced", async || {
        standby.get(format!("{}/readyz", standby.plain), None).await.0 == 200
    })
    .await
    .expect("ready");
    assert_eq!(standby.get(format!("{}/healthz", standby.plain), None).await, (200, "ok".to_owned()));
    let (_, metrics) = standby.get(format!("{}/metrics", standby.plain), None).await;
    assert_eq!(sample(&metrics, &format!("leader_election_master_status{{name=\"{lease}\"}}")), Some(0.0), "{metrics}");
    assert!(!metrics.contains("running_managed_controllers{"), "a standby runs no controller:\n{metrics}");
}
