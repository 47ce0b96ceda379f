//! Real Kubernetes Nodes on this machine: per Node a kubelet, a containerd and a kube-proxy in a
//! network namespace of its own, the namespaces joined by a bridge in the host namespace; plus
//! the kube-controller-manager and kube-scheduler that Deployments, Services' EndpointSlices and
//! scheduling need, and a control plane whose API server listens on the bridge.
//!
//! # How a lab comes up ([`NodeLab::start`])
//!
//! 1. The binaries and images come from `scripts/provision-node` (built once, cached).
//! 2. [`plan::LabPlan`] names and addresses everything from a random tag (pure).
//! 3. The teardown script is written and a lifeline process that runs it on exit is started
//!    *before* anything is created ([`host`]); a lab left by a killed test is swept first.
//! 4. Host: bridge, namespaces, veths, routes, cgroup roots.
//! 5. kube-apiserver (on the bridge address, with a static token per node identity
//!    `system:node:<name>`), kube-controller-manager, kube-scheduler.
//! 6. Per node ([`daemons`]): containerd (own root, state, socket, runc root), the images
//!    imported, kubelet (`--cloud-provider=external`, so it registers with the `uninitialized`
//!    taint and waits for a cloud-controller-manager), kube-proxy (nftables).
//!
//! The cloud-controller-manager under test runs in the host namespace and reaches the API
//! server at [`NodeLab::control_plane`]'s URL; the fake Hetzner API's servers get the nodes'
//! addresses ([`NodeLab::node_ip`]) so a server and its Node match.
//!
//! Requirements: root, cgroup v1 (this machine), `ip`, `nsenter`, `nft`, `runc`. Missing ones
//! fail the lab with the reason; nothing is skipped.

mod daemons;
mod host;
pub mod plan;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;

use crate::control_plane::{ControlPlane, ControlPlaneOptions, StaticUser};
use crate::error::HarnessError;
use crate::process::ChildProcess;
use crate::provision::provisioned_path;
use daemons::{NodeDaemons, NodeSetup};
use plan::LabPlan;
pub use plan::{CLUSTER_DOMAIN, ECHO_IMAGE, LabImage, PAUSE_IMAGE};

/// A Deployment of [`ECHO_IMAGE`] labelled `app=<name>` (pods answer on 8080 with their name),
/// spread one pod per node, optionally pinned to `node`; no service account token, no pull.
pub fn echo_deployment(name: &str, replicas: i32, node: Option<&str>) -> Result<Deployment, HarnessError> {
    let node_selector = node.map(|n| serde_json::json!({"kubernetes.io/hostname": n}));
    let spec = serde_json::json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "automountServiceAccountToken": false,
                "nodeSelector": node_selector,
                "enableServiceLinks": false,
                "terminationGracePeriodSeconds": 1,
                "topologySpreadConstraints": [{
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": name}},
                }],
                "containers": [{
                    "name": "echo",
                    "image": ECHO_IMAGE,
                    "imagePullPolicy": "Never",
                    "ports": [{"containerPort": 8080}],
                    "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
                }],
            },
        },
    });
    let spec = serde_json::from_value(spec)
        .map_err(|e| HarnessError::NodeLab { step: "writing the echo Deployment".to_owned(), detail: e.to_string() })?;
    Ok(Deployment {
        metadata: kube::api::ObjectMeta { name: Some(name.to_owned()), ..Default::default() },
        spec,
        ..Default::default()
    })
}

/// The directory `scripts/provision-node` fills (binaries, `runtime/`), provisioned on first use.
pub fn node_assets() -> Result<PathBuf, HarnessError> {
    static DIR: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/provision-node");
    DIR.get_or_init(|| provisioned_path(&script, "HCLOUD_CCM_NODE_ASSETS").map_err(|e| e.to_string()))
        .clone()
        .map_err(|detail| HarnessError::Command { command: script.display().to_string(), detail })
}

/// What a lab has besides its nodes ([`NodeLab::start_with`]).
#[derive(Debug, Clone, Default)]
pub struct LabOptions {
    /// Images every node imports besides pause and echo.
    pub images: Vec<LabImage>,
    /// The `coredns` binary of a cluster DNS, if the lab runs one.
    pub coredns: Option<PathBuf>,
}

/// A running lab: control plane, controllers, nodes. Dropping it (or the test process ending)
/// stops everything and removes what it created on the host.
#[derive(Debug)]
pub struct NodeLab {
    plan: LabPlan,
    assets: PathBuf,
    // Field order is drop order: nodes, then controllers, then the API server, then the
    // lifeline (whose SIGTERM runs the teardown once more).
    nodes: Vec<Option<NodeDaemons>>,
    controllers: Vec<ChildProcess>,
    control_plane: ControlPlane,
    /// Held for its drop: its SIGTERM runs the teardown once more.
    _lifeline: ChildProcess,
}

impl NodeLab {
    /// Start a lab with one node per name (see the module docs). Takes about 20 s warm.
    pub async fn start(names: &[&str]) -> Result<NodeLab, HarnessError> {
        Self::start_with(names, &LabOptions::default()).await
    }

    /// [`Self::start`], with the options' images imported into every node and, with
    /// [`LabOptions::coredns`], a cluster DNS: CoreDNS on the bridge's host address, port 53,
    /// answering for `cluster.local` from the API, which every kubelet gives its pods as their
    /// nameserver.
    pub async fn start_with(names: &[&str], options: &LabOptions) -> Result<NodeLab, HarnessError> {
        let assets = tokio::task::spawn_blocking(node_assets)
            .await
            .map_err(|e| HarnessError::NodeLab { step: "provisioning".to_owned(), detail: e.to_string() })??;
        check_host().await?;
        host::sweep_stale_labs();
        let mut free = None;
        for _ in 0..20 {
            let tag = format!("{:06x}", fastrand::u32(..0x00ff_ffff));
            let plan = LabPlan::new(&tag, names)
                .map_err(|detail| HarnessError::NodeLab { step: "planning".to_owned(), detail })?;
            if !host::subnet_in_use(&plan).await? {
                free = Some(plan);
                break;
            }
        }
        let plan = free.ok_or_else(|| HarnessError::NodeLab {
            step: "planning".to_owned(),
            detail: "20 random /24s between 10.200.0.0 and 10.231.255.0 were all in use on this host".to_owned(),
        })?;
        let lifeline = arm_teardown(&plan).await?;
        host::create_network(&plan).await?;
        host::create_cgroups(&plan)?;

        let users = plan
            .nodes
            .iter()
            .map(|n| StaticUser { name: format!("system:node:{}", n.name), groups: vec!["system:nodes".to_owned()] })
            .collect();
        let control_plane =
            ControlPlane::start_with(ControlPlaneOptions { address: Some(plan.host_ip()), users }).await?;
        let mut controllers = daemons::start_controllers(&assets, &control_plane)?;
        if let Some(coredns) = &options.coredns {
            let admin = control_plane.admin_kubeconfig().display().to_string();
            let corefile = plan.run_dir.join("Corefile");
            std::fs::write(&corefile, plan::corefile(plan.host_ip(), &admin))
                .map_err(|e| HarnessError::io("writing the Corefile", e))?;
            let conf = corefile.display().to_string();
            controllers.push(ChildProcess::spawn(coredns, &["-conf", &conf], &[], "coredns")?);
        }
        let mut lab = NodeLab { plan, assets, nodes: Vec::new(), controllers, control_plane, _lifeline: lifeline };
        let plans = lab.plan.nodes.clone();
        let cidrs = [lab.plan.subnet, lab.plan.public_subnet];
        let setup = NodeSetup {
            admin_kubeconfig: lab.control_plane.admin_kubeconfig(),
            node_port_cidrs: &cidrs,
            images: &options.images,
            cluster_dns: options.coredns.is_some().then(|| lab.plan.host_ip()),
        };
        for node in &plans {
            let kubeconfig = lab.node_kubeconfig(&node.name)?;
            let daemons = NodeDaemons::start(&lab.assets, node, &kubeconfig, &setup).await?;
            lab.nodes.push(Some(daemons));
        }
        Ok(lab)
    }

    /// The control plane (its API server listens on the bridge: [`Self::host_ip`]).
    pub fn control_plane(&self) -> &ControlPlane {
        &self.control_plane
    }

    /// The host end of the bridge: the address nodes reach the host at.
    pub fn host_ip(&self) -> Ipv4Addr {
        self.plan.host_ip()
    }

    /// The address of node `name` (its `--node-ip`; give it to the fake server of this node).
    pub fn node_ip(&self, name: &str) -> Option<Ipv4Addr> {
        self.plan.node(name).map(|n| n.ip)
    }

    /// The public address of node `name` (in [`Self::public_subnet`]; give it to the fake
    /// server of this node as its public IPv4 when the server is in a network and
    /// [`Self::node_ip`] is its private IP). kube-proxy serves NodePorts on both.
    pub fn node_public_ip(&self, name: &str) -> Option<Ipv4Addr> {
        self.plan.node(name).map(|n| n.public_ip)
    }

    /// The pod range of node `name` (its CNI bridge's range).
    pub fn node_pod_cidr(&self, name: &str) -> Option<ipnet::Ipv4Net> {
        self.plan.node(name).map(|n| n.pod_cidr)
    }

    /// The lab's second subnet on the bridge, for what is public on Hetzner (see
    /// [`plan::LabPlan::public_subnet`]).
    pub fn public_subnet(&self) -> ipnet::Ipv4Net {
        self.plan.public_subnet
    }

    /// Addresses on the lab's bridge for the fake's Load Balancers
    /// (`DataPlaneConfig::local_addresses`): unlike loopback addresses, pods and nodes reach
    /// them, and connections from them to the nodes come from outside the nodes' /16.
    pub fn load_balancer_ips(&self) -> Vec<Ipv4Addr> {
        self.plan.load_balancer_ips()
    }

    /// Writes each node's pod range into its Node's `spec.podCIDR(s)` once the kubelet has
    /// registered it (the lab's CNI ranges are fixed, so no allocator may choose others), as
    /// kube-controller-manager's node IPAM would; waits up to `within` for the Nodes.
    pub async fn assign_pod_cidrs(&self, within: std::time::Duration) -> Result<(), HarnessError> {
        use k8s_openapi::api::core::v1::Node;
        use kube::api::{Api, Patch, PatchParams};
        let client = self.control_plane.admin_client().await?;
        let nodes: Api<Node> = Api::all(client);
        for node in &self.plan.nodes {
            let what = format!("Node {} registered", node.name);
            crate::wait::wait_until(within, &what, async || nodes.get_opt(&node.name).await.ok().flatten().is_some())
                .await
                .map_err(|e| HarnessError::NodeLab {
                    step: "assigning pod ranges".to_owned(),
                    detail: e.to_string(),
                })?;
            let cidr = node.pod_cidr.to_string();
            let patch = serde_json::json!({"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}});
            nodes.patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|e| {
                HarnessError::NodeLab { step: format!("setting the pod range of {}", node.name), detail: e.to_string() }
            })?;
        }
        Ok(())
    }

    /// The network namespace of node `name` (`/run/netns/<it>`).
    pub fn node_netns(&self, name: &str) -> Option<&str> {
        self.plan.node(name).map(|n| n.netns.as_str())
    }

    /// The bridge's network (node addresses are in it).
    pub fn subnet(&self) -> ipnet::Ipv4Net {
        self.plan.subnet
    }

    /// The names of the lab's nodes, in order.
    pub fn node_names(&self) -> Vec<&str> {
        self.plan.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    /// Stop node `name`'s kubelet, kube-proxy and containerd, and kill its pods (its namespace
    /// and addresses stay), as when a server is switched off.
    pub async fn stop_node(&mut self, name: &str) -> Result<(), HarnessError> {
        let index = self.index_of(name)?;
        if let Some(daemons) = self.nodes.get_mut(index).and_then(Option::take) {
            daemons.stop().await;
        }
        Ok(())
    }

    /// The logs of node `name`'s daemons (kubelet, containerd, kube-proxy), last `lines` each.
    pub fn node_logs(&self, name: &str, lines: usize) -> String {
        match self.index_of(name).ok().and_then(|i| self.nodes.get(i)).and_then(Option::as_ref) {
            Some(daemons) => daemons.logs(lines),
            None => format!("node {name} is not running"),
        }
    }

    /// Copies the whole log of every daemon of the lab into `dir` (created if missing), one
    /// file each, named after the process: each running node's kubelet, containerd and
    /// kube-proxy (`kubelet-<node>.log`, ...), kube-controller-manager, kube-scheduler, CoreDNS,
    /// kube-apiserver and etcd. For a look after a failure: the lab's own copies go with it.
    /// Returns the files written.
    pub fn save_logs(&self, dir: &Path) -> Result<Vec<PathBuf>, HarnessError> {
        std::fs::create_dir_all(dir).map_err(|e| HarnessError::io(format!("creating {}", dir.display()), e))?;
        let mut written = Vec::new();
        let mut copy = |name: &str, from: Option<&Path>, text: Option<String>| -> Result<(), HarnessError> {
            let to = dir.join(format!("{}.log", log_file_stem(name)));
            match (from, text) {
                (Some(from), _) => std::fs::copy(from, &to).map(drop),
                (None, text) => std::fs::write(&to, text.unwrap_or_default()),
            }
            .map_err(|e| HarnessError::io(format!("writing {}", to.display()), e))?;
            written.push(to);
            Ok(())
        };
        let processes = self.nodes.iter().flatten().flat_map(NodeDaemons::processes).chain(&self.controllers);
        for process in processes {
            copy(process.name(), Some(process.log_path()), None)?;
        }
        copy("kube-apiserver", None, Some(self.control_plane.apiserver_logs()))?;
        copy("etcd", None, Some(self.control_plane.etcd_logs()))?;
        Ok(written)
    }

    /// Stop everything and remove what the lab created (what `Drop` does), then check that
    /// nothing is left: no process, mount, namespace, interface, cgroup or directory of the lab.
    /// The error lists what is.
    pub async fn shutdown(self) -> Result<(), String> {
        let plan = self.plan.clone();
        tokio::task::spawn_blocking(move || drop(self)).await.map_err(|e| format!("the teardown panicked: {e}"))?;
        let left = host::leftovers(&plan).await;
        if left.is_empty() { Ok(()) } else { Err(left.join("; ")) }
    }

    fn index_of(&self, name: &str) -> Result<usize, HarnessError> {
        self.plan.nodes.iter().position(|n| n.name == name).ok_or_else(|| HarnessError::NodeLab {
            step: "finding a node".to_owned(),
            detail: format!("the lab has no node {name} (it has {:?})", self.node_names()),
        })
    }

    fn node_kubeconfig(&self, name: &str) -> Result<PathBuf, HarnessError> {
        let user = format!("system:node:{name}");
        self.control_plane.user_kubeconfig(&user).map(Path::to_owned).ok_or_else(|| HarnessError::NodeLab {
            step: "writing kubeconfigs".to_owned(),
            detail: format!("the control plane has no kubeconfig for {user}"),
        })
    }
}

/// A process's label as a file name: letters, digits, `-`, `_` and `.` kept, anything else `_`.
fn log_file_stem(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

impl Drop for NodeLab {
    fn drop(&mut self) {
        for daemons in self.nodes.iter_mut().filter_map(Option::take) {
            daemons.kill();
        }
        self.controllers.clear();
        host::run_teardown_blocking(&self.plan.run_dir.join("teardown.sh"));
    }
}

/// Whether this machine can run a lab: root, the tools, cgroup v1. The error says what is
/// missing ([`NodeLab::start`] checks the same first; the sandbox uses it to choose).
pub async fn check_host() -> Result<(), HarnessError> {
    let uid = host::run("id", &["-u"]).await?;
    if uid.trim() != "0" {
        return Err(HarnessError::NodeLab {
            step: "checking the host".to_owned(),
            detail: format!(
                "real nodes need root (network namespaces, cgroups, mounts); this test runs as uid {}",
                uid.trim()
            ),
        });
    }
    for tool in ["ip", "nsenter", "nft", "runc", "sysctl", "pgrep"] {
        if host::run("sh", &["-c", &format!("command -v {tool}")]).await.is_err() {
            return Err(HarnessError::NodeLab {
                step: "checking the host".to_owned(),
                detail: format!("`{tool}` is not installed (scripts/provision-node installs it)"),
            });
        }
    }
    host::cgroup_v1_hierarchies().map(|_| ())
}

/// Write the teardown script and the owner file, and start the lifeline that runs the script
/// when the test process ends (SIGTERM from its supervisor).
async fn arm_teardown(plan: &LabPlan) -> Result<ChildProcess, HarnessError> {
    let io = |what: &str| {
        let what = what.to_owned();
        move |e| HarnessError::io(what, e)
    };
    std::fs::create_dir_all(&plan.run_dir).map_err(io("creating the lab's run directory"))?;
    let sysctls = host::read_sysctls().await?;
    let script = plan.run_dir.join("teardown.sh");
    std::fs::write(&script, host::teardown_script(plan, &sysctls)).map_err(io("writing the teardown script"))?;
    std::fs::write(plan.run_dir.join("owner"), std::process::id().to_string()).map_err(io("writing the owner file"))?;
    let body = format!("trap 'bash {} ; kill $! ; exit 0' TERM; sleep infinity & wait", script.display());
    ChildProcess::spawn(Path::new("bash"), &["-c", &body], &[], &format!("lab-{}-lifeline", plan.tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_echo_deployment_is_a_valid_spec_pinned_where_asked() {
        let d = echo_deployment("web", 2, Some("kn-b")).unwrap();
        let spec = d.spec;
        assert_eq!(spec.replicas, Some(2));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.node_selector.unwrap().get("kubernetes.io/hostname").map(String::as_str), Some("kn-b"));
        assert_eq!(pod.containers[0].image.as_deref(), Some(ECHO_IMAGE));
        assert!(echo_deployment("web", 1, None).unwrap().spec.template.spec.unwrap().node_selector.is_none());
    }

    #[test]
    fn a_log_file_is_named_after_its_process() {
        assert_eq!(log_file_stem("kubelet-hccm-e2e-worker-0"), "kubelet-hccm-e2e-worker-0");
        assert_eq!(log_file_stem("lab 1/a:b"), "lab_1_a_b");
    }
}
