//! The processes of a lab: per node containerd, kubelet and kube-proxy (each started with
//! `nsenter --net` into the node's namespace), and the cluster's kube-controller-manager and
//! kube-scheduler (host namespace, admin identity).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::host;
use super::plan::{self, ECHO_IMAGE, LabImage, NodePlan, PAUSE_IMAGE};
use crate::control_plane::ControlPlane;
use crate::error::HarnessError;
use crate::process::ChildProcess;

/// How long containerd may take to open its socket.
const CONTAINERD_READY: Duration = Duration::from_secs(30);

/// What every node of a lab shares.
pub(super) struct NodeSetup<'a> {
    /// kube-proxy's identity.
    pub admin_kubeconfig: &'a Path,
    /// Where kube-proxy serves NodePorts (the lab's subnets).
    pub node_port_cidrs: &'a [ipnet::Ipv4Net],
    /// Images imported besides pause and echo.
    pub images: &'a [LabImage],
    /// The cluster DNS server's address, if the lab runs one.
    pub cluster_dns: Option<std::net::Ipv4Addr>,
}

/// One node's daemons. Dropping them stops the processes; [`Self::stop`] / [`Self::kill`] also
/// kill the node's pods and unmount their mounts.
#[derive(Debug)]
pub(super) struct NodeDaemons {
    node: NodePlan,
    kube_proxy: ChildProcess,
    kubelet: ChildProcess,
    containerd: ChildProcess,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let what = what.into();
    move |e| HarnessError::io(what, e)
}

fn in_netns(node: &NodePlan, binary: &Path, args: &[String], name: &str) -> Result<ChildProcess, HarnessError> {
    let net = format!("--net=/run/netns/{}", node.netns);
    let binary = binary.display().to_string();
    let mut all: Vec<&str> = vec![net.as_str(), "--", binary.as_str()];
    all.extend(args.iter().map(String::as_str));
    ChildProcess::spawn(Path::new("nsenter"), &all, &[], &format!("{name}-{}", node.name))
}

impl NodeDaemons {
    /// Write the node's configuration, start containerd, import the images (pause, echo and
    /// the setup's), start kubelet (with the node's own identity) and kube-proxy (admin
    /// identity).
    pub(super) async fn start(
        assets: &Path,
        node: &NodePlan,
        kubelet_kubeconfig: &Path,
        setup: &NodeSetup<'_>,
    ) -> Result<NodeDaemons, HarnessError> {
        let extra = setup.images;
        let runtime = assets.join("runtime");
        for dir in [node.data_dir.join("cni"), node.run_dir.clone()] {
            std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        let write = |name: &str, contents: String| -> Result<PathBuf, HarnessError> {
            let path = node.data_dir.join(name);
            std::fs::write(&path, contents).map_err(io(format!("writing {}", path.display())))?;
            Ok(path)
        };
        let cni_bin = runtime.join("cni").display().to_string();
        let containerd_config = write("containerd.toml", plan::containerd_config(node, &cni_bin, PAUSE_IMAGE))?;
        write("cni/10-hccm.conflist", plan::cni_conflist(node))?;
        let kubelet_config = write("kubelet.yaml", plan::kubelet_config(node, setup.cluster_dns))?;
        let admin = setup.admin_kubeconfig.display().to_string();
        let proxy_config = write("kube-proxy.yaml", plan::kube_proxy_config(node, &admin, setup.node_port_cidrs))?;

        // containerd finds its shim on PATH.
        let containerd = in_netns(
            node,
            Path::new("env"),
            &[
                format!("PATH={}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", runtime.display()),
                runtime.join("containerd").display().to_string(),
                format!("--config={}", containerd_config.display()),
            ],
            "containerd",
        )?;
        let socket = node.containerd_socket();
        let ready = crate::wait::wait_until(CONTAINERD_READY, "containerd's socket", async || socket.exists()).await;
        if let Err(e) = ready {
            return Err(HarnessError::NodeLab {
                step: format!("starting containerd on {}", node.name),
                detail: format!("{e}\n{}", containerd.logs()),
            });
        }
        let ctr = runtime.join("ctr").display().to_string();
        let address = socket.display().to_string();
        let images = ["pause.tar", "echo.tar"].map(|image| runtime.join("images").join(image));
        let archives = images.iter().cloned().chain(extra.iter().map(|i| i.archive.clone()));
        for archive in archives {
            let archive = archive.display().to_string();
            host::run(
                &ctr,
                &["--address", &address, "-n", "k8s.io", "images", "import", "--platform", "linux/amd64", &archive],
            )
            .await?;
        }
        let listed = host::run(&ctr, &["--address", &address, "-n", "k8s.io", "images", "list", "-q"]).await?;
        let references = [PAUSE_IMAGE, ECHO_IMAGE].into_iter().chain(extra.iter().map(|i| i.reference.as_str()));
        for reference in references {
            if !listed.lines().any(|l| l.trim() == reference) {
                return Err(HarnessError::NodeLab {
                    step: format!("importing images on {}", node.name),
                    detail: format!("{reference} is not among the imported images:\n{listed}"),
                });
            }
        }

        let kubelet = in_netns(
            node,
            &assets.join("kubelet"),
            &[
                format!("--config={}", kubelet_config.display()),
                format!("--kubeconfig={}", kubelet_kubeconfig.display()),
                format!("--root-dir={}", node.data_dir.join("kubelet").display()),
                format!("--cert-dir={}", node.data_dir.join("pki").display()),
                format!("--hostname-override={}", node.name),
                format!("--node-ip={}", node.ip),
                "--cloud-provider=external".to_owned(),
                "--v=1".to_owned(),
            ],
            "kubelet",
        )?;
        let kube_proxy = in_netns(
            node,
            &assets.join("kube-proxy"),
            &[format!("--config={}", proxy_config.display())],
            "kube-proxy",
        )?;
        Ok(NodeDaemons { node: node.clone(), kube_proxy, kubelet, containerd })
    }

    /// The last `lines` of each daemon's log.
    pub(super) fn logs(&self, lines: usize) -> String {
        [&self.kubelet, &self.containerd, &self.kube_proxy]
            .iter()
            .map(|p| format!("----- {} -----\n{}", p.name(), crate::lifeline::tail(&p.logs(), lines)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The daemons' processes (kubelet, containerd, kube-proxy), for their whole logs.
    pub(super) fn processes(&self) -> [&ChildProcess; 3] {
        [&self.kubelet, &self.containerd, &self.kube_proxy]
    }

    /// Stop the daemons, then kill the pods and shims and unmount (async caller).
    pub(super) async fn stop(self) {
        if let Err(e) = tokio::task::spawn_blocking(move || self.kill()).await {
            tracing::warn!("stopping a node's daemons panicked: {e}");
        }
    }

    /// [`Self::stop`], blocking.
    pub(super) fn kill(self) {
        let NodeDaemons { node, kube_proxy, kubelet, containerd } = self;
        drop(kubelet);
        drop(kube_proxy);
        drop(containerd);
        let base = node.run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let lab = node.run_dir.parent().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned());
        let Some(lab) = lab else { return };
        let pattern = format!("{lab}/{base}/");
        let script = host::kill_script(&pattern, &node.cgroup, &pattern);
        let out = std::process::Command::new("bash").args(["-c", &script]).stdin(std::process::Stdio::null()).output();
        if let Err(e) = out {
            tracing::warn!(node = %node.name, "could not kill the node's pods: {e}");
        }
    }
}

/// kube-controller-manager (Deployments, ReplicaSets, EndpointSlices, ServiceAccounts, the
/// garbage collector; no cloud controllers: `--cloud-provider=external`) and kube-scheduler,
/// both with the admin identity and no serving port.
pub(super) fn start_controllers(
    assets: &Path,
    control_plane: &ControlPlane,
) -> Result<Vec<ChildProcess>, HarnessError> {
    let kubeconfig = format!("--kubeconfig={}", control_plane.admin_kubeconfig().display());
    let kcm = ChildProcess::spawn(
        &assets.join("kube-controller-manager"),
        &[&kubeconfig, "--leader-elect=false", "--cloud-provider=external", "--secure-port=0", "--controllers=*"],
        &[],
        "kube-controller-manager",
    )?;
    let scheduler = ChildProcess::spawn(
        &assets.join("kube-scheduler"),
        &[&kubeconfig, "--leader-elect=false", "--secure-port=0"],
        &[],
        "kube-scheduler",
    )?;
    Ok(vec![kcm, scheduler])
}
