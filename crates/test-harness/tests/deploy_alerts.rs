//! The chart's alerts and dashboard: the PrometheusRule as the chart renders it passes
//! `promtool check rules`, every alert's unit tests (`deploy/monitoring/alerts-test.yaml`) pass
//! `promtool test rules`, every alert is tested firing, carries a severity and the annotations
//! kube-prometheus's alerts carry, and has a runbook section in `docs/alerts.md`; the dashboard
//! is Grafana JSON whose every panel queries the datasource variable.
//!
//! promtool is Prometheus's own, built by `scripts/provision-promtool` from the Go module proxy
//! and cached; the test FAILS, never skips, when it cannot be provisioned.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::deploy::{render_py, rendered, repo_root};

fn promtool() -> PathBuf {
    let script = repo_root().join("scripts/provision-promtool");
    test_harness::provisioned_path(&script, "PROMTOOL")
        .unwrap_or_else(|e| panic!("{e}. The alert tests need promtool and do not skip without it."))
}

/// The PrometheusRule the `monitoring` variant renders.
fn prometheus_rule() -> Result<Value> {
    let variants = rendered()?;
    let (_, objects) = variants.iter().find(|(v, _)| v == "monitoring").context("the monitoring variant")?;
    objects.iter().map(|(_, o)| o).find(|o| o["kind"] == "PrometheusRule").cloned().context("no PrometheusRule")
}

fn run(command: &mut Command) -> Result<String> {
    let out = command.output().with_context(|| format!("running {command:?}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    ensure!(out.status.success(), "{command:?} failed:\n{text}");
    Ok(text)
}

#[test]
fn the_rendered_alerts_pass_promtool_check_and_their_unit_tests() -> Result<()> {
    let rule = prometheus_rule()?;
    let dir = tempfile::tempdir()?;
    // The PrometheusRule's spec is a Prometheus rule file (JSON is YAML).
    std::fs::write(dir.path().join("rules.yaml"), serde_json::to_string_pretty(&rule["spec"])?)?;
    let tests = dir.path().join("alerts-test.yaml");
    std::fs::copy(repo_root().join("deploy/monitoring/alerts-test.yaml"), &tests)?;
    let promtool = promtool();
    let checked = run(Command::new(&promtool).args(["check", "rules"]).arg(dir.path().join("rules.yaml")))?;
    ensure!(checked.contains("SUCCESS: 10 rules found"), "promtool check rules: {checked}");
    run(Command::new(&promtool).args(["test", "rules"]).arg(&tests))?;
    Ok(())
}

#[test]
fn every_alert_is_tested_firing_and_has_a_severity_annotations_and_a_runbook() -> Result<()> {
    let rule = prometheus_rule()?;
    let out = render_py(&[
        std::ffi::OsStr::new("objects"),
        repo_root().join("deploy/monitoring/alerts-test.yaml").as_os_str(),
    ]);
    ensure!(out.status.success(), "render.py objects: {}", String::from_utf8_lossy(&out.stderr));
    let tests: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    let fired: BTreeSet<&str> = tests[0]["tests"]
        .as_array()
        .context("tests")?
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().into_iter().flatten())
        .filter(|a| a["exp_alerts"].as_array().is_some_and(|e| !e.is_empty()))
        .filter_map(|a| a["alertname"].as_str())
        .collect();
    let runbooks = std::fs::read_to_string(repo_root().join("docs/alerts.md"))?;
    let mut alerts = Vec::new();
    for group in rule["spec"]["groups"].as_array().context("groups")? {
        for r in group["rules"].as_array().context("rules")? {
            let name = r["alert"].as_str().context("only alerting rules")?;
            alerts.push(name);
            assert!(fired.contains(name), "{name}: no unit test sees it fire");
            assert!(
                ["warning", "critical"].contains(&r["labels"]["severity"].as_str().unwrap_or("")),
                "{name}: severity"
            );
            for key in ["summary", "description", "runbook_url"] {
                assert!(r["annotations"][key].as_str().is_some_and(|s| !s.is_empty()), "{name}: no {key}");
            }
            let anchor = name.to_lowercase();
            assert!(r["annotations"]["runbook_url"].as_str().unwrap().ends_with(&format!("docs/alerts.md#{anchor}")));
            assert!(runbooks.contains(&format!("\n## {name}\n")), "docs/alerts.md has no section {name}");
            // The selector is in every metric selector of the expression.
            assert!(
                r["expr"]
                    .as_str()
                    .unwrap()
                    .contains(r#"namespace="kube-system",container="hcloud-cloud-controller-manager""#)
            );
        }
    }
    // What the issue asks for: rate-limit headroom, API errors, reconcile failures, no leader,
    // refused credential rotation, unhealthy targets, Nodes waiting for initialization.
    for needed in [
        "HcloudCcmApiRateLimitLow",
        "HcloudCcmApiErrors",
        "HcloudCcmReconcileFailures",
        "HcloudCcmNoLeader",
        "HcloudCcmCredentialRotationRefused",
        "HcloudCcmLoadBalancerTargetsUnhealthy",
        "HcloudCcmNodesUninitialized",
    ] {
        assert!(alerts.contains(&needed), "no alert {needed}: {alerts:?}");
    }
    Ok(())
}

#[test]
fn the_dashboard_is_grafana_json_on_the_datasource_variable() -> Result<()> {
    let variants = rendered()?;
    let (_, objects) = variants.iter().find(|(v, _)| v == "monitoring").context("the monitoring variant")?;
    let map = objects.iter().map(|(_, o)| o).find(|o| o["kind"] == "ConfigMap").context("the dashboard ConfigMap")?;
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1", "the sidecar's label");
    let dashboard: Value = serde_json::from_str(map["data"]["hcloud-ccm.json"].as_str().context("the JSON")?)?;
    assert_eq!(dashboard["uid"], "hcloud-ccm");
    let panels = dashboard["panels"].as_array().context("panels")?;
    ensure!(panels.len() >= 10, "{} panels", panels.len());
    let mut ids = BTreeSet::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_i64().context("panel id")?), "duplicate panel id {}", p["id"]);
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        for t in p["targets"].as_array().context("targets")? {
            let expr = t["expr"].as_str().context("expr")?;
            assert!(expr.contains(r#"namespace="$namespace", container="hcloud-cloud-controller-manager""#), "{expr}");
        }
    }
    Ok(())
}
