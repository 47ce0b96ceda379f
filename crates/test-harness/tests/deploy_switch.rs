//! The switch from the official CCM's install to hcloud-ccm's, each documented path
//! (docs/migration.md, "How to switch") against a real kube-apiserver, with the official chart
//! and static manifests of the release source (`../shared/oracle`, unpacked at test time):
//!
//! 1. a Helm release `hccm` of the official chart is taken over in place with `helm upgrade` of
//!    this chart (the same objects, UIDs kept, the Deployment's immutable selector unchanged),
//!    rolled back with `helm rollback` and forward again, then uninstalled without leftovers;
//! 2. the official static manifest `ccm.yaml` is replaced in place with `kubectl apply` of
//!    `deploy/hcloud-ccm.yaml`, and back;
//! 3. an install from the official static manifest is adopted by a Helm release `hccm` of this
//!    chart after the documented `kubectl annotate` / `kubectl label` of its objects.
//!
//! Helm is Helm v4 itself (helm-python-sdk, `deploy/render.py helm ...`), kubectl the control
//! plane's. The control plane is this test's own (the objects carry the CCM's real names, which
//! the shared control plane's RBAC uses), started and stopped here. No Pod runs (there is no
//! kubelet): what is checked is what the API server stores.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::Api;
use kube::api::DeleteParams;
use serde_json::{Value, json};
use test_harness::oracle::OfficialRelease;
use test_harness::{ControlPlane, rbac};

use crate::deploy::{render_py, repo_root};

const NS: &str = "kube-system";
const NAME: &str = "hcloud-cloud-controller-manager";
const BINDING: &str = "system:hcloud-cloud-controller-manager:restricted";
const OUR_IMAGE: &str = "registry.example.com/hcloud-ccm";
const OFFICIAL_IMAGE: &str = "docker.io/hetznercloud/hcloud-cloud-controller-manager:v1.35.0";

/// `render.py helm <args>` (blocking): the release summary after `OK`, or the error.
fn helm(args: &[&str]) -> Result<Value> {
    let mut all = vec!["helm"];
    all.extend_from_slice(args);
    let out = render_py(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    match last.strip_prefix("OK ") {
        Some(json) if out.status.success() => Ok(serde_json::from_str(json)?),
        _ => bail!("helm {args:?}: {last}\n{}", String::from_utf8_lossy(&out.stderr)),
    }
}

async fn helm_async(args: Vec<String>) -> Result<Value> {
    tokio::task::spawn_blocking(move || helm(&args.iter().map(String::as_str).collect::<Vec<_>>())).await?
}

async fn kubectl(cp: &ControlPlane, args: &[&str]) -> Result<String> {
    let out = tokio::process::Command::new(cp.kubectl_path())
        .arg("--kubeconfig")
        .arg(cp.admin_kubeconfig())
        .args(args)
        .output()
        .await
        .context("running kubectl")?;
    ensure!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The UIDs of the four objects both installs share, by kind.
#[derive(Debug, PartialEq, Eq)]
struct Uids {
    deployment: Option<String>,
    service_account: Option<String>,
    role: Option<String>,
    binding: Option<String>,
}

struct Cluster {
    deployments: Api<Deployment>,
    accounts: Api<ServiceAccount>,
    roles: Api<ClusterRole>,
    bindings: Api<ClusterRoleBinding>,
    role_bindings: Api<RoleBinding>,
}

impl Cluster {
    fn new(client: &kube::Client) -> Cluster {
        Cluster {
            deployments: Api::namespaced(client.clone(), NS),
            accounts: Api::namespaced(client.clone(), NS),
            roles: Api::all(client.clone()),
            bindings: Api::all(client.clone()),
            role_bindings: Api::namespaced(client.clone(), NS),
        }
    }

    async fn uids(&self) -> Result<Uids> {
        Ok(Uids {
            deployment: self.deployments.get_opt(NAME).await?.and_then(|o| o.metadata.uid),
            service_account: self.accounts.get_opt(NAME).await?.and_then(|o| o.metadata.uid),
            role: self.roles.get_opt(rbac::CCM_CLUSTER_ROLE).await?.and_then(|o| o.metadata.uid),
            binding: self.bindings.get_opt(BINDING).await?.and_then(|o| o.metadata.uid),
        })
    }

    /// The Deployment as JSON.
    async fn deployment(&self) -> Result<Value> {
        Ok(serde_json::to_value(self.deployments.get(NAME).await?)?)
    }

    /// Asserts the install is hcloud-ccm's: image, Recreate without a rollingUpdate, the shipped
    /// rules, the secure port's bindings, `selector` unchanged.
    async fn assert_ours(&self, selector: &Value, image: &str) -> Result<()> {
        let d = self.deployment().await?;
        let container = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], image);
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}), "Recreate, the defaulted rollingUpdate removed");
        assert_eq!(&d["spec"]["selector"]["matchLabels"], selector, "the selector is the one installed first");
        let role = self.roles.get(rbac::CCM_CLUSTER_ROLE).await?;
        assert_eq!(role.rules, Some(rbac::ccm_policy_rules()?), "the shipped rules");
        let binding = self.bindings.get(BINDING).await?;
        assert_eq!(binding.subjects, rbac::ccm_cluster_role_binding().subjects);
        // One binding of the role, the official one's: nothing of the old install left beside it.
        let of_role: Vec<String> = self
            .bindings
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|b| b.role_ref.name == rbac::CCM_CLUSTER_ROLE)
            .filter_map(|b| b.metadata.name)
            .collect();
        assert_eq!(of_role, [BINDING], "the bindings of {}", rbac::CCM_CLUSTER_ROLE);
        ensure!(self.bindings.get_opt(rbac::CCM_AUTH_DELEGATOR_BINDING).await?.is_some(), "auth-delegator binding");
        ensure!(
            self.role_bindings.get_opt(rbac::CCM_AUTHENTICATION_READER_BINDING).await?.is_some(),
            "authentication-reader binding"
        );
        Ok(())
    }

    /// Asserts the install is the official one again (image, RollingUpdate).
    async fn assert_official(&self, selector: &Value) -> Result<()> {
        let d = self.deployment().await?;
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], OFFICIAL_IMAGE);
        assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(&d["spec"]["selector"]["matchLabels"], selector);
        Ok(())
    }

    /// Deletes whatever either install left (the test's clean-up between paths).
    async fn clear(&self) -> Result<()> {
        let dp = DeleteParams::default();
        let _ = self.deployments.delete(NAME, &dp).await;
        let _ = self.accounts.delete(NAME, &dp).await;
        let _ = self.roles.delete(rbac::CCM_CLUSTER_ROLE, &dp).await;
        for name in [BINDING, rbac::CCM_CLUSTER_ROLE, rbac::CCM_AUTH_DELEGATOR_BINDING] {
            let _ = self.bindings.delete(name, &dp).await;
        }
        let _ = self.role_bindings.delete(rbac::CCM_AUTHENTICATION_READER_BINDING, &dp).await;
        test_harness::wait_until(test_harness::DEFAULT_TIMEOUT, "both installs' objects are gone", async || {
            self.uids()
                .await
                .is_ok_and(|u| u == Uids { deployment: None, service_account: None, role: None, binding: None })
        })
        .await?;
        Ok(())
    }
}

/// `deploy/<name>` with its image set to [`OUR_IMAGE`] (what docs/quickstart.md's `sed` does).
fn our_static_manifest(dir: &Path, name: &str) -> Result<PathBuf> {
    let text = std::fs::read_to_string(repo_root().join("deploy").join(name))?;
    let replaced = text.replace("registry.invalid/hcloud-ccm:", &format!("{OUR_IMAGE}:"));
    ensure!(replaced != text, "deploy/{name} names no registry.invalid image");
    let path = dir.join(name);
    std::fs::write(&path, replaced)?;
    Ok(path)
}

/// What every path needs: the control plane, the official release and the charts.
struct Paths {
    cp: ControlPlane,
    cluster: Cluster,
    release: OfficialRelease,
    kubeconfig: String,
    official_chart: String,
    our_chart: String,
    our_image: String,
}

/// The values an operator brought to the official chart, and the same for this one (plus the
/// image).
fn user_values() -> (Value, Value) {
    let values = json!({"networking": {"enabled": true}, "env": {"HCLOUD_LOAD_BALANCERS_LOCATION": {"value": "fsn1"}}});
    let mut ours = values.clone();
    ours["image"] = json!({"repository": OUR_IMAGE});
    (values, ours)
}

fn helm_selector() -> Value {
    json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/instance": "hccm"})
}

impl Paths {
    async fn helm(&self, action: &str, rest: &[&str]) -> Result<Value> {
        let mut args = vec![action.to_owned(), self.kubeconfig.clone(), "hccm".to_owned()];
        args.extend(rest.iter().map(|s| (*s).to_owned()));
        helm_async(args).await
    }

    /// 1a. A release of the official chart applied client-side (as Helm 3 installs, and
    ///     helm-controller's Helm does), taken over by `helm upgrade hccm` of this chart with
    ///     the same values and the image; `helm rollback hccm 1`, forward again, uninstalled.
    async fn helm_release_applied_client_side(&self) -> Result<()> {
        let (values, ours) = user_values();
        let installed =
            self.helm("install", &[&self.official_chart, &values.to_string(), "--server-side=false"]).await?;
        assert_eq!(installed["chart"], "hcloud-cloud-controller-manager-1.35.0", "{installed}");
        let before = self.cluster.uids().await?;
        ensure!(before.deployment.is_some() && before.binding.is_some(), "the official release installed: {before:?}");
        self.cluster.assert_official(&helm_selector()).await?;
        let upgraded = self.helm("upgrade", &[&self.our_chart, &ours.to_string()]).await?;
        assert_eq!(
            (upgraded["revision"].clone(), upgraded["status"].clone()),
            (json!(2), json!("deployed")),
            "{upgraded}"
        );
        assert_eq!(upgraded["chart"], "hcloud-ccm-0.1.0");
        assert_eq!(self.cluster.uids().await?, before, "the same objects, changed in place");
        self.cluster.assert_ours(&helm_selector(), &self.our_image).await?;
        let d = self.cluster.deployment().await?;
        let env = d["spec"]["template"]["spec"]["containers"][0]["env"].as_array().context("env")?;
        assert!(env.iter().any(|e| e["name"] == "HCLOUD_LOAD_BALANCERS_LOCATION" && e["value"] == "fsn1"), "{env:?}");
        assert!(env.iter().any(|e| e["name"] == "HCLOUD_NETWORK"), "{env:?}");
        // Back: the official install, without the secure port's bindings.
        self.helm("rollback", &["1"]).await?;
        self.cluster.assert_official(&helm_selector()).await?;
        assert_eq!(self.cluster.uids().await?, before);
        ensure!(
            self.cluster.bindings.get_opt(rbac::CCM_AUTH_DELEGATOR_BINDING).await?.is_none(),
            "rollback removed it"
        );
        // Forward again; `helm uninstall` leaves nothing.
        self.helm("upgrade", &[&self.our_chart, &ours.to_string()]).await?;
        self.cluster.assert_ours(&helm_selector(), &self.our_image).await?;
        self.helm("uninstall", &[]).await?;
        self.cluster.clear().await?;
        ensure!(self.cluster.role_bindings.get_opt(rbac::CCM_AUTHENTICATION_READER_BINDING).await?.is_none());
        Ok(())
    }

    /// 1b. A release of the official chart applied server-side (Helm 4's default): its
    ///     upgrade keeps applying server-side, which cannot drop the `rollingUpdate` the API
    ///     server defaulted, so Recreate is refused; the documented `--server-side=false` takes
    ///     it over, and later upgrades may apply either way.
    async fn helm_release_applied_server_side(&self) -> Result<()> {
        let (values, ours) = user_values();
        self.helm("install", &[&self.official_chart, &values.to_string(), "--server-side=true"]).await?;
        let before = self.cluster.uids().await?;
        let refused = self.helm("upgrade", &[&self.our_chart, &ours.to_string()]).await;
        let message = format!("{:#}", refused.err().context("a server-side upgrade to Recreate is refused")?);
        ensure!(message.contains("may not be specified when strategy `type` is 'Recreate'"), "{message}");
        self.cluster.assert_official(&helm_selector()).await?;
        let upgraded = self.helm("upgrade", &[&self.our_chart, &ours.to_string(), "--server-side=false"]).await?;
        assert_eq!(upgraded["status"], "deployed", "{upgraded}");
        assert_eq!(self.cluster.uids().await?, before, "the same objects, changed in place");
        self.cluster.assert_ours(&helm_selector(), &self.our_image).await?;
        let mut later = ours.clone();
        later["env"]["HCLOUD_LOAD_BALANCERS_TYPE"] = json!({"value": "lb21"});
        self.helm("upgrade", &[&self.our_chart, &later.to_string(), "--server-side=true"]).await?;
        self.cluster.assert_ours(&helm_selector(), &self.our_image).await?;
        self.helm("uninstall", &[]).await?;
        self.cluster.clear().await
    }

    /// 2. The official static manifest, replaced in place by `kubectl apply -f
    ///    deploy/hcloud-ccm.yaml` (client-side, kubectl's default), and back.
    async fn static_manifests_in_place(&self) -> Result<()> {
        let selector = json!({"app": NAME});
        let official = self.release.static_manifest("ccm.yaml").display().to_string();
        let ours = our_static_manifest(self.cp.dir(), "hcloud-ccm.yaml")?.display().to_string();
        kubectl(&self.cp, &["apply", "-f", &official]).await?;
        let before = self.cluster.uids().await?;
        self.cluster.assert_official(&selector).await?;
        kubectl(&self.cp, &["apply", "-f", &ours]).await?;
        assert_eq!(self.cluster.uids().await?, before, "the same objects, changed in place");
        self.cluster.assert_ours(&selector, &self.our_image).await?;
        kubectl(&self.cp, &["apply", "-f", &official]).await?;
        self.cluster.assert_official(&selector).await?;
        assert_eq!(self.cluster.uids().await?, before);
        self.cluster.clear().await
    }

    /// 3. The official static install, adopted by a Helm release `hccm` of this chart: its four
    ///    objects annotated and labelled for Helm, then `helm install --server-side=false` with
    ///    the static manifest's selector.
    async fn static_install_adopted_by_helm(&self) -> Result<()> {
        let official = self.release.static_manifest("ccm.yaml").display().to_string();
        kubectl(&self.cp, &["apply", "-f", &official]).await?;
        let before = self.cluster.uids().await?;
        for object in [
            "-n=kube-system serviceaccount/hcloud-cloud-controller-manager",
            "-n=kube-system deployment/hcloud-cloud-controller-manager",
            "clusterrole/system:hcloud-cloud-controller-manager",
            "clusterrolebinding/system:hcloud-cloud-controller-manager:restricted",
        ] {
            let target: Vec<&str> = object.split(' ').collect();
            let mut annotate = vec!["annotate", "--overwrite"];
            annotate.extend(&target);
            annotate.extend(["meta.helm.sh/release-name=hccm", "meta.helm.sh/release-namespace=kube-system"]);
            kubectl(&self.cp, &annotate).await?;
            let mut label = vec!["label", "--overwrite"];
            label.extend(&target);
            label.push("app.kubernetes.io/managed-by=Helm");
            kubectl(&self.cp, &label).await?;
        }
        let adopt = json!({
            "image": {"repository": OUR_IMAGE},
            "selectorLabels": {"app.kubernetes.io/name": null, "app.kubernetes.io/instance": null, "app": NAME},
        });
        let adopted = self.helm("install", &[&self.our_chart, &adopt.to_string(), "--server-side=false"]).await?;
        assert_eq!(adopted["status"], "deployed", "{adopted}");
        assert_eq!(self.cluster.uids().await?, before, "adopted in place");
        self.cluster.assert_ours(&json!({"app": NAME}), &self.our_image).await?;
        self.helm("uninstall", &[]).await?;
        self.cluster.clear().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_paths_from_the_official_install() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.admin_client().await?;
    let cluster = Cluster::new(&client);
    // The control plane granted the CCM identity under the same names; an operator's cluster
    // has only the official install.
    cluster.clear().await?;
    let paths = Paths {
        kubeconfig: cp.admin_kubeconfig().display().to_string(),
        cp,
        cluster,
        release: OfficialRelease::unpack()?,
        official_chart: String::new(),
        our_chart: repo_root().join("deploy/chart/hcloud-ccm").display().to_string(),
        our_image: format!("{OUR_IMAGE}:v0.1.0"),
    };
    let paths = Paths { official_chart: paths.release.chart().display().to_string(), ..paths };
    paths.helm_release_applied_client_side().await.context("1a: a Helm release applied client-side")?;
    paths.helm_release_applied_server_side().await.context("1b: a Helm release applied server-side")?;
    paths.static_manifests_in_place().await.context("2: the static manifests in place")?;
    paths.static_install_adopted_by_helm().await.context("3: the static install adopted by Helm")?;
    Ok(())
}
