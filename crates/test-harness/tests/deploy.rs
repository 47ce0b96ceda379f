//! The deploy artefacts (`deploy/`): the Helm chart, the static manifests rendered from it and
//! the development environment's Terraform.
//!
//! Helm itself renders and lints the chart, offline, through PyPI's `helm-python-sdk` (Helm v4
//! in `libhelm_c.so`) driven by `deploy/render.py`; the interpreter comes from the virtualenv
//! `scripts/provision-python-deploy` creates (and caches in `~/.cache/hcloud-ccm`). If it is
//! missing these tests run the script; if it cannot be provisioned they FAIL, never skip.
//!
//! - [`chart_lints_renders_and_static_manifests_are_current`]: `helm lint --strict` and a render
//!   of every values variant pass, bad values are refused with a message naming the key, and
//!   `deploy/hcloud-ccm.yaml` / `-networks.yaml` equal the chart's render byte for byte; the
//!   chart's version and appVersion are the crate version (Cargo.toml), and the chart packaged
//!   with `helm package` renders both static manifests byte for byte too.
//! - [`every_rendered_manifest_passes_server_side_dry_run`]: every object of every variant and
//!   of both static manifests is sent to the real kube-apiserver as a server-side apply with
//!   `dryRun=All` (what `kubectl apply --dry-run=server` does) and must be accepted, and the
//!   answer must still hold every field we sent (the API server prunes fields its schema does
//!   not know, so a misspelt key would otherwise pass). prometheus-operator's CRDs (PodMonitor,
//!   ServiceMonitor, PrometheusRule, `deploy_crds.rs`) are installed first, so every kind is
//!   served and a misspelt field of those is caught too.
//! - [`robot_enabled_sets_robot_enabled_and_optional_credentials`]: `robot.enabled` is what sets
//!   `ROBOT_ENABLED` (false in the static manifests), and the Robot credentials come from the
//!   `hcloud` Secret's optional keys `robot-user` / `robot-password` in every render.
//! - [`shipped_rbac_is_what_the_control_plane_grants`]: the chart's ClusterRole, ClusterRoleBindings
//!   and RoleBinding are the ones [`test_harness::rbac`] applies (and every e2e test runs the CCM
//!   with).
//! - [`dev_environment_terraform_parses`]: `deploy/dev/*.tf` parses with python-hcl2, holds the
//!   tutorial's pieces with its problems fixed, and passes `terraform fmt -check` when
//!   terraform is on PATH.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, discovery};
use serde_json::Value;
use test_harness::{ControlPlane, rbac};

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The virtualenv's interpreter (cached, or built by the provisioning script).
pub(crate) fn python() -> PathBuf {
    let script = repo_root().join("scripts/provision-python-deploy");
    test_harness::provisioned_path(&script, "DEPLOY_PYTHON")
        .unwrap_or_else(|e| panic!("{e}. These tests need helm-python-sdk and do not skip without it."))
}

/// Runs `deploy/render.py` with `args`.
pub(crate) fn render_py<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let script = repo_root().join("deploy/render.py");
    let shown: Vec<String> = args.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect();
    Command::new(python())
        .arg(&script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} {shown:?}: {e}", script.display()))
}

/// Runs a `render.py` checking command and asserts it reported no failure and at least
/// `min_passed` passed checks.
fn assert_checks<S: AsRef<std::ffi::OsStr>>(args: &[S], min_passed: usize) {
    let command = args.first().map(|a| a.as_ref().to_string_lossy().into_owned()).unwrap_or_default();
    let out = render_py(args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("render.py {command} printed no RESULT line\n{stdout}\n{stderr}"));
    let field = |name: &str| -> usize {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
    };
    assert_eq!(field("failed"), 0, "render.py {command} reported failures:\n{stdout}\n{stderr}");
    assert!(field("passed") >= min_passed, "render.py {command} ran too few checks: {line}");
    assert!(out.status.success(), "render.py {command} exited with {}\n{stderr}", out.status);
}

#[test]
fn chart_lints_renders_and_static_manifests_are_current() {
    // 17 own variants and the official chart's 2 values files × (lint + render), 10 refused
    // values (the placeholder image, unknown keys, rolling updates and replicas without leader
    // election, ...), 2 static manifests, versions and the packaged chart (6).
    let official = test_harness::oracle::OfficialRelease::unpack().expect("the official release's chart");
    assert_checks(&[std::ffi::OsStr::new("check"), official.chart().as_os_str()], 56);
}

#[test]
fn dev_environment_terraform_parses() {
    // 6 files parse, 5 resource types, network/subnet/servers/Cilium/Secret shapes, 5 k3s flags.
    assert_checks(&["hcl"], 24);
}

/// A values variant (or static manifest) and its objects: (template, object).
pub(crate) type Variant = (String, Vec<(String, Value)>);

/// Every variant's objects, as `render.py json` prints them, the official chart's values files
/// (`official values.yaml`, `official full.daemonset-values.yaml`) among them.
pub(crate) fn rendered() -> Result<Vec<Variant>> {
    let official = test_harness::oracle::OfficialRelease::unpack()?;
    let out = render_py(&[std::ffi::OsStr::new("json"), official.chart().as_os_str()]);
    ensure!(out.status.success(), "render.py json failed: {}", String::from_utf8_lossy(&out.stderr));
    let variants: Vec<Value> = serde_json::from_slice(&out.stdout).context("render.py json output")?;
    variants
        .into_iter()
        .map(|v| {
            let name = v["variant"].as_str().context("variant name")?.to_owned();
            let objects = v["objects"]
                .as_array()
                .context("objects")?
                .iter()
                .map(|o| Ok((o["template"].as_str().context("template")?.to_owned(), o["object"].clone())))
                .collect::<Result<Vec<_>>>()?;
            Ok((name, objects))
        })
        .collect()
}

/// The first path in `sent` whose value is missing or different in `answer` (objects may have
/// more fields in the answer: defaults; lists must have the same length).
fn missing_field(sent: &Value, answer: &Value, path: &str) -> Option<String> {
    match (sent, answer) {
        (Value::Object(s), Value::Object(a)) => s.iter().find_map(|(k, v)| match a.get(k) {
            Some(av) => missing_field(v, av, &format!("{path}.{k}")),
            None if v.is_null() || v.as_object().is_some_and(|o| o.is_empty()) => None,
            None => Some(format!("{path}.{k} (sent {v}, absent in the answer)")),
        }),
        (Value::Array(s), Value::Array(a)) if s.len() == a.len() => {
            s.iter().zip(a).enumerate().find_map(|(i, (sv, av))| missing_field(sv, av, &format!("{path}[{i}]")))
        }
        (s, a) if s == a => None,
        // Quantities and ports may come back in another JSON type with the same text.
        (s, a) if value_text(s) == value_text(a) => None,
        (s, a) => Some(format!("{path} (sent {s}, answer {a})")),
    }
}

fn value_text(v: &Value) -> String {
    v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rendered_manifest_passes_server_side_dry_run() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let client = control_plane.admin_client().await?;
    crate::deploy_crds::install_monitoring_crds(control_plane, &client).await?;
    let variants = tokio::task::spawn_blocking(rendered).await??;
    ensure!(variants.len() >= 21, "expected 19 variants and 2 static manifests, got {}", variants.len());
    let apply = PatchParams::apply("hcloud-ccm-deploy-test").force().dry_run();
    let (mut accepted, mut unserved, mut rejected) = (0, Vec::new(), Vec::new());
    for (variant, objects) in &variants {
        for (template, object) in objects {
            let mut object: DynamicObject = serde_json::from_value(object.clone())
                .with_context(|| format!("{variant} {template}: not a Kubernetes object"))?;
            let types = object.types.clone().context("apiVersion/kind")?;
            let gvk = GroupVersionKind::try_from(&types)?;
            let what = format!("{variant}: {} {:?} ({template})", types.kind, object.metadata.name);
            let (resource, caps) = match discovery::pinned_kind(&client, &gvk).await {
                Ok(found) => found,
                Err(e) => {
                    unserved.push(format!("{what}: {e}"));
                    continue;
                }
            };
            let name = object.metadata.name.clone().context("metadata.name")?;
            let api: Api<DynamicObject> = match caps.scope {
                discovery::Scope::Namespaced => {
                    let ns = object.metadata.namespace.get_or_insert_with(|| "kube-system".to_owned()).clone();
                    Api::namespaced_with(client.clone(), &ns, &resource)
                }
                discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
            };
            let sent = serde_json::to_value(&object)?;
            match api.patch(&name, &apply, &Patch::Apply(&object)).await {
                Ok(answer) => {
                    let answer = serde_json::to_value(&answer)?;
                    for part in ["spec", "rules", "roleRef", "subjects", "metadata"] {
                        if let (Some(s), Some(a)) = (sent.get(part), answer.get(part))
                            && let Some(missing) = missing_field(s, a, part)
                        {
                            rejected.push(format!("{what}: the API server dropped or changed {missing}"));
                        }
                    }
                    accepted += 1;
                }
                Err(e) => rejected.push(format!("{what}: {e}")),
            }
        }
    }
    println!("accepted {accepted} objects");
    ensure!(rejected.is_empty(), "rejected by the API server:\n{}", rejected.join("\n"));
    ensure!(unserved.is_empty(), "kinds not served by the API server: {unserved:#?}");
    ensure!(
        ["PodMonitor", "ServiceMonitor", "PrometheusRule"]
            .iter()
            .all(|kind| variants.iter().flat_map(|(_, objects)| objects).any(|(_, o)| o["kind"] == *kind)),
        "no variant rendered one of the monitoring kinds"
    );
    ensure!(accepted >= 100, "only {accepted} objects were dry-run");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shipped_rbac_is_what_the_control_plane_grants() -> Result<()> {
    let variants = tokio::task::spawn_blocking(rendered).await??;
    let (_, objects) = variants.iter().find(|(v, _)| v == "static hcloud-ccm.yaml").context("static manifest")?;
    let of_kind =
        |kind: &str| -> Vec<&Value> { objects.iter().map(|(_, o)| o).filter(|o| o["kind"] == kind).collect() };

    let roles = of_kind("ClusterRole");
    ensure!(roles.len() == 1, "one ClusterRole, got {}", roles.len());
    let role: ClusterRole = serde_json::from_value(roles[0].clone())?;
    assert_eq!(role.metadata.name.as_deref(), Some(rbac::CCM_CLUSTER_ROLE));
    assert_eq!(role.rules, Some(rbac::ccm_policy_rules()?), "the static manifest's rules are the harness's");

    let mut bindings: Vec<ClusterRoleBinding> = of_kind("ClusterRoleBinding")
        .into_iter()
        .map(|b| serde_json::from_value(b.clone()))
        .collect::<Result<_, _>>()?;
    bindings.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut expected = [rbac::ccm_auth_delegator_binding(), rbac::ccm_cluster_role_binding()];
    expected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    ensure!(bindings.len() == 2, "two ClusterRoleBindings, got {bindings:?}");
    for (shipped, harness) in bindings.iter().zip(&expected) {
        assert_eq!(shipped.metadata.name, harness.metadata.name);
        assert_eq!(shipped.role_ref, harness.role_ref);
        assert_eq!(shipped.subjects, harness.subjects);
    }

    // The secure port's lookup of kube-system/extension-apiserver-authentication.
    let role_bindings: Vec<RoleBinding> =
        of_kind("RoleBinding").into_iter().map(|b| serde_json::from_value(b.clone())).collect::<Result<_, _>>()?;
    ensure!(role_bindings.len() == 1, "one RoleBinding, got {role_bindings:?}");
    let (shipped, harness) = (&role_bindings[0], rbac::ccm_authentication_reader_binding());
    assert_eq!(shipped.metadata.name, harness.metadata.name);
    assert_eq!(shipped.metadata.namespace, harness.metadata.namespace);
    assert_eq!(shipped.role_ref, harness.role_ref);
    assert_eq!(shipped.subjects, harness.subjects);

    let accounts = of_kind("ServiceAccount");
    ensure!(accounts.len() == 1, "one ServiceAccount");
    assert_eq!(accounts[0]["metadata"]["name"], rbac::CCM_SERVICE_ACCOUNT);
    assert_eq!(accounts[0]["metadata"]["namespace"], rbac::CCM_NAMESPACE);

    let workloads = of_kind("Deployment");
    ensure!(workloads.len() == 1, "one Deployment");
    let pod = &workloads[0]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], rbac::CCM_SERVICE_ACCOUNT);
    if pod["containers"][0]["args"].as_array().is_none_or(|a| !a.iter().any(|x| x == "--leader-elect=false")) {
        bail!("a single Deployment replica runs without leader election: {}", pod["containers"][0]["args"]);
    }
    Ok(())
}

/// The container's env of a variant's workload: name -> entry.
pub(crate) fn workload_env<'a>(
    variants: &'a [Variant],
    variant: &str,
) -> Result<std::collections::BTreeMap<&'a str, &'a Value>> {
    let (_, objects) = variants.iter().find(|(v, _)| v == variant).with_context(|| format!("variant {variant}"))?;
    let workload = objects
        .iter()
        .map(|(_, o)| o)
        .find(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet")
        .with_context(|| format!("{variant}: no workload"))?;
    let env = workload["spec"]["template"]["spec"]["containers"][0]["env"].as_array().context("env list")?;
    env.iter().map(|e| Ok((e["name"].as_str().context("env name")?, e))).collect()
}

#[test]
fn robot_enabled_sets_robot_enabled_and_optional_credentials() -> Result<()> {
    let variants = rendered()?;
    for (variant, want) in [
        ("default", "false"),
        ("static hcloud-ccm.yaml", "false"),
        ("static hcloud-ccm-networks.yaml", "false"),
        ("robot", "true"),
        ("robot-private-network", "true"),
    ] {
        let env = workload_env(&variants, variant)?;
        assert_eq!(env.get("ROBOT_ENABLED").map(|e| &e["value"]), Some(&Value::from(want)), "{variant}");
        for (var, key) in [("ROBOT_USER", "robot-user"), ("ROBOT_PASSWORD", "robot-password")] {
            let secret = &env.get(var).with_context(|| format!("{variant}: no {var}"))?["valueFrom"]["secretKeyRef"];
            assert_eq!(secret["name"], "hcloud", "{variant} {var}");
            assert_eq!(secret["key"], key, "{variant} {var}");
            assert_eq!(secret["optional"], true, "{variant} {var}: the Robot keys are optional");
        }
    }
    // Robot without routes: HCLOUD_NETWORK by hand, routes off, no hostNetwork/--allocate-node-cidrs.
    let env = workload_env(&variants, "robot-private-network")?;
    assert_eq!(env["HCLOUD_NETWORK_ROUTES_ENABLED"]["value"], "false");
    assert!(env.contains_key("HCLOUD_NETWORK"));
    Ok(())
}
