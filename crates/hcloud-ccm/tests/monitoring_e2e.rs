//! Every metric the chart's alerting rules and Grafana dashboard use is one hcloud-ccm serves:
//! the names are read from `deploy/chart/hcloud-ccm/files/prometheus-rules.yaml` and
//! `files/dashboards/hcloud-ccm.json` (every metric selector there has a `{...}`), and looked up
//! in a live `/metrics` scrape of the binary after it initialized a Node, routed it and gave a
//! Service a Load Balancer with leader election on, and took a rotated token from its file. Each
//! must have samples (a family without any is not even declared).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::collections::BTreeSet;

use common::lb::{create, ensured, fresh_namespace, lb_service};
use common::{Env, REACT, metrics_address};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::{SeedNetwork, SeedServer};
use test_harness::{NodeBuilder, SecretVolume, unique_name, wait_for, wait_until};

fn repo_file(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The names directly followed by `{` (a metric selector), minus Prometheus's own `up`.
fn selected_metrics(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut names = BTreeSet::new();
    for (i, b) in bytes.iter().enumerate() {
        if *b != b'{' {
            continue;
        }
        let start = bytes[..i]
            .iter()
            .rposition(|c| !(c.is_ascii_alphanumeric() || *c == b'_' || *c == b':'))
            .map_or(0, |p| p + 1);
        let name = &text[start..i];
        if !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) && name != "up" {
            names.insert(name.to_owned());
        }
    }
    names
}

#[test]
fn metric_selectors_are_found_in_rule_and_dashboard_text() {
    let names = selected_metrics(
        r#"max by (x) (a_total{b="{c}"}) / rate(d_bucket{__SELECTOR__}[5m]) "{{code}}" ${ds} up{j="1"}"#,
    );
    assert_eq!(names, BTreeSet::from(["a_total".to_owned(), "d_bucket".to_owned()]));
}

#[tokio::test]
async fn every_metric_of_the_alerts_and_the_dashboard_is_served() {
    let rules = repo_file("deploy/chart/hcloud-ccm/files/prometheus-rules.yaml");
    let dashboard = repo_file("deploy/chart/hcloud-ccm/files/dashboards/hcloud-ccm.json");
    let used: BTreeSet<String> = selected_metrics(&rules).into_iter().chain(selected_metrics(&dashboard)).collect();
    assert!(used.len() >= 12, "{used:?}");

    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).expect("net");
    h.seed_server(&SeedServer::new("mon-node").network_ip(net, "10.0.0.5")).expect("server");
    let metrics = metrics_address();
    let mut volume = SecretVolume::new(&[("token", common::TOKEN)]).expect("volume");
    let token_file = volume.path("token").to_string_lossy().into_owned();
    let lease = format!("--leader-elect-resource-name={}", unique_name("monitoring"));
    let args = [
        "--leader-elect=true",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
        lease.as_str(),
        "--allocate-node-cidrs=true",
        "--cluster-cidr=10.244.0.0/16",
    ];
    let env_vars = [
        ("HCLOUD_TOKEN", ""),
        ("HCLOUD_TOKEN_FILE", token_file.as_str()),
        ("HCLOUD_NETWORK", "k8s"),
        ("HCLOUD_METRICS_ADDRESS", metrics.as_str()),
        ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
        ("HCLOUD_LOAD_BALANCERS_TYPE", "lb11"),
    ];
    let ccm = env.spawn_with(common::TOKEN, env.cp.ccm_kubeconfig(), &env_vars, &args, "hcloud-ccm-monitoring");
    ccm.wait_for_log("hcloud-ccm started", REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));
    NodeBuilder::new("mon-node").pod_cidrs(["10.244.1.0/24"]).register(&env.client).await.expect("node");
    wait_for(&env.nodes, "mon-node", REACT, "initialized", |n| n.is_some_and(|n| !common::tainted(n)))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));
    let (_ns, services) = fresh_namespace(&env).await;
    create(&services, &lb_service("mon-svc", &[], &[80])).await;
    ensured(&services, "mon-svc").await;
    wait_until(REACT, "the route exists", async || h.network(net).is_some_and(|n| n.routes.len() == 1))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));

    // A rotated token, checked and taken into use.
    let rotated = "e2etoken11111111111111111111111111111111111111111111111111111111";
    volume.update(&[("token", rotated)]).expect("the kubelet's symlink swap");
    let url = format!("http://{metrics}/metrics");
    wait_until(REACT, "the rotation is counted", async || {
        common::scrape(
            &metrics,
            r#"hcloud_ccm_credential_rotations_total{credential="hcloud_token",result="accepted"}"#,
        )
        .await
        .is_some()
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}
{}",
            ccm.logs()
        )
    });

    let text = reqwest::get(&url).await.expect("scrape").text().await.expect("body");
    let sampled: BTreeSet<&str> =
        text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split(['{', ' ']).next()).collect();
    let mut missing = Vec::new();
    for name in &used {
        if !sampled.contains(name.as_str()) {
            missing.push(name.clone());
        }
    }
    assert!(missing.is_empty(), "used by the alerts or the dashboard, not served: {missing:?}\n--- scrape ---\n{text}");
    assert!(ccm.is_running(), "{}", ccm.logs());
}
