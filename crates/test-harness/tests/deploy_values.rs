//! What the chart renders for the values an operator switching from the official chart brings:
//! the official chart's own values files verbatim, `tpl` where the official chart has it, the
//! probe following `--secure-port` / `--bind-address`, `Recreate` while leader election is off,
//! a PodDisruptionBudget and anti-affinity above one replica, the static manifests' selector and
//! image, and RBAC that is a part of the official ClusterRole. The variants are
//! `deploy/render.py`'s (rendered by Helm itself, see `deploy.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};

use crate::deploy::{Variant, render_py, rendered, workload_env};

fn objects<'a>(variants: &'a [Variant], variant: &str) -> Result<Vec<&'a Value>> {
    let (_, objects) = variants.iter().find(|(v, _)| v == variant).with_context(|| format!("variant {variant}"))?;
    Ok(objects.iter().map(|(_, o)| o).collect())
}

fn of_kind<'a>(variants: &'a [Variant], variant: &str, kind: &str) -> Result<Vec<&'a Value>> {
    Ok(objects(variants, variant)?.into_iter().filter(|o| o["kind"] == kind).collect())
}

fn workload<'a>(variants: &'a [Variant], variant: &str) -> Result<&'a Value> {
    objects(variants, variant)?
        .into_iter()
        .find(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet")
        .with_context(|| format!("{variant}: no workload"))
}

fn container(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]["containers"][0]
}

fn args(workload: &Value) -> Vec<&str> {
    container(workload)["args"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

fn ports(workload: &Value) -> Vec<(String, i64)> {
    container(workload)["ports"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| (p["name"].as_str().unwrap_or("").to_owned(), p["containerPort"].as_i64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_probe_and_the_ports_follow_the_serving_flags() -> Result<()> {
    let variants = rendered()?;
    let probe = |variant: &str| -> Result<Value> {
        Ok(container(workload(&variants, variant)?)["livenessProbe"]["httpGet"].clone())
    };
    assert_eq!(probe("default")?, json!({"path": "/healthz", "port": 10258, "scheme": "HTTPS"}));
    assert_eq!(probe("probe-secure-port")?, json!({"path": "/healthz", "port": 10300, "scheme": "HTTPS"}));
    assert_eq!(
        ports(workload(&variants, "probe-secure-port")?),
        [("https".to_owned(), 10300), ("metrics".to_owned(), 8233)]
    );
    // --secure-port=0: the metrics listener's /healthz on the port of HCLOUD_METRICS_ADDRESS.
    assert_eq!(probe("probe-metrics-listener")?, json!({"path": "/healthz", "port": 9100, "scheme": "HTTP"}));
    assert_eq!(ports(workload(&variants, "probe-metrics-listener")?), [("metrics".to_owned(), 9100)]);
    // A loopback bind address is reached from the host network (routes run with hostNetwork).
    let loopback = workload(&variants, "probe-loopback")?;
    assert_eq!(
        probe("probe-loopback")?,
        json!({"path": "/healthz", "port": 10258, "scheme": "HTTPS", "host": "127.0.0.1"})
    );
    assert_eq!(loopback["spec"]["template"]["spec"]["hostNetwork"], true);
    // No probe asked for, none rendered.
    assert!(container(workload(&variants, "extras")?).get("livenessProbe").is_none());
    Ok(())
}

#[test]
fn recreate_whenever_leader_election_is_off_and_ha_gets_a_budget_and_anti_affinity() -> Result<()> {
    let variants = rendered()?;
    let selector = |variant: &str| -> Result<Value> {
        Ok(workload(&variants, variant)?["spec"]["selector"]["matchLabels"].clone())
    };

    for variant in ["default", "networks", "extras", "static hcloud-ccm.yaml", "official values.yaml"] {
        let w = workload(&variants, variant)?;
        assert!(args(w).contains(&"--leader-elect=false"), "{variant}: {:?}", args(w));
        assert_eq!(w["spec"]["strategy"]["type"], "Recreate", "{variant}");
        assert_eq!(w["spec"]["strategy"], json!({"type": "Recreate"}), "{variant}");
        assert!(of_kind(&variants, variant, "PodDisruptionBudget")?.is_empty(), "{variant}");
        assert!(w["spec"]["template"]["spec"].get("affinity").is_none(), "{variant}");
    }
    // One replica with leader election asked for: the rolling update is kept.
    let rolling = workload(&variants, "leader-elect-rolling")?;
    assert_eq!(rolling["spec"]["strategy"], json!({"type": "RollingUpdate"}));
    assert!(args(rolling).contains(&"--leader-elect=true") && !args(rolling).contains(&"--leader-elect=false"));

    // Two replicas: leader election (no flag: upstream's default), the API server's default
    // strategy, a budget of one and a preferred spread over nodes, all on the selector labels.
    let ha = workload(&variants, "ha")?;
    assert!(!args(ha).iter().any(|a| a.starts_with("--leader-elect")), "{:?}", args(ha));
    assert!(ha["spec"].get("strategy").is_none());
    let budgets = of_kind(&variants, "ha", "PodDisruptionBudget")?;
    ensure!(budgets.len() == 1, "one PodDisruptionBudget: {budgets:?}");
    assert_eq!(budgets[0]["spec"], json!({"minAvailable": 1, "selector": {"matchLabels": selector("ha")?}}));
    let term = json!({"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector("ha")?}});
    assert_eq!(
        ha["spec"]["template"]["spec"]["affinity"],
        json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]}})
    );
    let hard = workload(&variants, "ha-hard-anti-affinity")?;
    assert_eq!(
        hard["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
        json!([{"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector("ha-hard-anti-affinity")?}}])
    );
    assert_eq!(of_kind(&variants, "ha-hard-anti-affinity", "PodDisruptionBudget")?[0]["spec"]["minAvailable"], 2);
    // An affinity of one's own replaces the default one.
    let own = workload(&variants, "ha-own-affinity")?;
    assert!(own["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].is_array());
    assert_eq!(own["spec"]["strategy"]["type"], "RollingUpdate");
    // A DaemonSet runs with leader election and has no Deployment strategy or budget.
    let daemonset = workload(&variants, "daemonset")?;
    assert!(!args(daemonset).iter().any(|a| a.starts_with("--leader-elect")));
    assert!(of_kind(&variants, "daemonset", "PodDisruptionBudget")?.is_empty());
    Ok(())
}

#[test]
fn official_values_files_render_unchanged_and_tpl_works_where_the_official_chart_has_it() -> Result<()> {
    let variants = rendered()?;
    // The official values.yaml, verbatim but the image: its tag template "v{{ $.Chart.Version }}",
    // its selector labels (through tpl, calling the official chart's name helper), its env.
    let official = workload(&variants, "official values.yaml")?;
    assert_eq!(container(official)["image"], "registry.example.com/hcloud-ccm:v0.1.0");
    assert_eq!(
        official["spec"]["selector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "hcloud-cloud-controller-manager", "app.kubernetes.io/instance": "hccm"})
    );
    let env = workload_env(&variants, "official values.yaml")?;
    assert_eq!(env["HCLOUD_TOKEN"]["valueFrom"]["secretKeyRef"], json!({"name": "hcloud", "key": "token"}));
    // Its full DaemonSet example: every key lands where the official chart puts it.
    let ds = workload(&variants, "official full.daemonset-values.yaml")?;
    assert_eq!(ds["kind"], "DaemonSet");
    assert_eq!(ds["spec"]["template"]["metadata"]["labels"]["pod-label"], "pod-label");
    assert_eq!(ds["spec"]["template"]["metadata"]["annotations"]["pod-annotation"], "pod-annotation");
    assert_eq!(ds["spec"]["template"]["spec"]["nodeSelector"], json!({"foo": "bar"}));
    assert_eq!(ds["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"], "hcloud-token");
    assert!(
        ds["spec"]["template"]["spec"]["tolerations"].as_array().unwrap().iter().any(|t| t["key"] == "example-key")
    );
    let accounts = of_kind(&variants, "official full.daemonset-values.yaml", "ServiceAccount")?;
    assert_eq!(accounts[0]["metadata"]["annotations"]["service-account-annotation"], "service-account-annotation");

    // tpl: image.tag, env, networking.network.
    let tpl = workload(&variants, "tpl")?;
    assert_eq!(container(tpl)["image"], "registry.example.com/hcloud-ccm:v0.1.0");
    let env = workload_env(&variants, "tpl")?;
    assert_eq!(env["HCLOUD_LOAD_BALANCERS_LOCATION"]["value"], "kube-system-fsn1");
    assert_eq!(env["HCLOUD_NETWORK"]["valueFrom"]["secretKeyRef"]["name"], "hccm-hcloud");

    // The PodMonitor keeps the official keys: labels (a Prometheus selects by them),
    // annotations and the spec through tpl (annotations as given, as there).
    let monitors = of_kind(&variants, "podmonitor", "PodMonitor")?;
    ensure!(monitors.len() == 1, "one PodMonitor");
    assert_eq!(monitors[0]["metadata"]["labels"]["release"], "kube-prometheus-stack");
    assert_eq!(monitors[0]["metadata"]["annotations"]["example.com/owner"], "platform");
    assert_eq!(monitors[0]["spec"]["podMetricsEndpoints"], json!([{"port": "metrics", "interval": "30s"}]));
    assert_eq!(
        monitors[0]["spec"]["selector"]["matchLabels"],
        workload(&variants, "podmonitor")?["spec"]["selector"]["matchLabels"]
    );
    Ok(())
}

#[test]
fn static_manifests_keep_the_official_selector_and_name_no_pullable_image() -> Result<()> {
    let variants = rendered()?;
    for name in ["static hcloud-ccm.yaml", "static hcloud-ccm-networks.yaml"] {
        let w = workload(&variants, name)?;
        // The official deploy/ccm.yaml's selector: `kubectl apply` over it keeps the Deployment.
        assert_eq!(w["spec"]["selector"]["matchLabels"], json!({"app": "hcloud-cloud-controller-manager"}), "{name}");
        assert_eq!(
            w["spec"]["template"]["metadata"]["labels"],
            json!({"app": "hcloud-cloud-controller-manager"}),
            "{name}"
        );
        // No image is published: a reserved domain that never resolves, never docker.io.
        assert_eq!(container(w)["image"], "registry.invalid/hcloud-ccm:v0.1.0", "{name}");
        let bindings: Vec<&Value> = of_kind(&variants, name, "ClusterRoleBinding")?;
        assert!(bindings.iter().any(|b| b["metadata"]["name"] == "system:hcloud-cloud-controller-manager:restricted"));
    }
    Ok(())
}

/// (apiGroup, resource, verb) granted by a list of RBAC rules, `*` included.
fn grants(rules: &Value, group: &str, resource: &str, verb: &str) -> bool {
    let has = |list: &Value, item: &str| list.as_array().is_some_and(|l| l.iter().any(|x| x == item || x == "*"));
    rules.as_array().is_some_and(|rules| {
        rules.iter().any(|r| has(&r["apiGroups"], group) && has(&r["resources"], resource) && has(&r["verbs"], verb))
    })
}

#[test]
fn every_permission_of_the_shipped_role_is_one_the_official_role_grants() -> Result<()> {
    let release = test_harness::oracle::OfficialRelease::unpack()?;
    let out = render_py(&[std::ffi::OsStr::new("objects"), release.static_manifest("ccm.yaml").as_os_str()]);
    ensure!(out.status.success(), "render.py objects: {}", String::from_utf8_lossy(&out.stderr));
    let official: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    let official_role = official.iter().find(|o| o["kind"] == "ClusterRole").context("the official ClusterRole")?;
    let ours: Value = serde_json::to_value(test_harness::rbac::ccm_policy_rules()?)?;
    let mut checked = 0;
    for rule in ours.as_array().context("rules")? {
        for group in rule["apiGroups"].as_array().context("apiGroups")? {
            for resource in rule["resources"].as_array().context("resources")? {
                for verb in rule["verbs"].as_array().context("verbs")? {
                    let (g, r, v) = (group.as_str().unwrap(), resource.as_str().unwrap(), verb.as_str().unwrap());
                    assert!(grants(&official_role["rules"], g, r, v), "the official ClusterRole lacks {v} {r} ({g:?})");
                    checked += 1;
                }
            }
        }
    }
    // The check itself can fail: `get` on Services, which hcloud-ccm no longer needs, is not
    // granted by the official role.
    assert!(!grants(&official_role["rules"], "", "services", "get"));
    ensure!(checked >= 14, "only {checked} permissions compared");
    Ok(())
}
