//! Names, addresses and configuration files of a node lab, computed before anything is created
//! (pure: the tests below check them without root).

use std::net::Ipv4Addr;
use std::path::PathBuf;

use ipnet::Ipv4Net;

/// The sandbox image every node has imported (containerd's pinned sandbox image).
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10.2";
/// The workload image every node has imported: answers any HTTP request on :8080 with the
/// name of the pod (`POD_NAME`, else the hostname). Use `imagePullPolicy: Never`.
pub const ECHO_IMAGE: &str = "hcloud-ccm.test/echo:1";

/// The cluster's DNS domain when the lab runs a cluster DNS.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// The pod range of the whole lab (kube-proxy's `clusterCIDR`); node `i` gets `10.244.<i+1>.0/24`.
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";

/// How many Load Balancer addresses a lab puts on its bridge ([`LabPlan::load_balancer_ips`]).
pub const LOAD_BALANCER_ADDRESSES: u8 = 50;

/// An image archive (OCI, as `ctr images import` reads it) every node of a lab imports, and the
/// reference it holds (checked after the import; pods use it with `imagePullPolicy` `Never` or
/// `IfNotPresent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabImage {
    /// The archive.
    pub archive: PathBuf,
    /// The image's full reference, e.g. `registry.k8s.io/e2e-test-images/agnhost:2.66.1`.
    pub reference: String,
}

/// Everything a lab is named and addressed by. `tag` keeps two labs (two suites side by side)
/// apart: it is in every interface, namespace, cgroup and directory name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabPlan {
    /// Short unique tag (6 hex digits).
    pub tag: String,
    /// The bridge in the host namespace that joins the nodes.
    pub bridge: String,
    /// The bridge's network; the host end is `.1`, node `i` is `.(11+i)` (its private address:
    /// kubelet's `--node-ip`, the server's IP in a Hetzner network).
    pub subnet: Ipv4Net,
    /// A second network on the same bridge for what is public on Hetzner: node `i`'s public
    /// IPv4 is `.(11+i)`, the Load Balancers' addresses are `.101` to `.150` (on the bridge, in
    /// the host namespace, where the fake's data plane listens). It lies outside the /16 of the
    /// private addresses, as a Hetzner public address lies outside a cluster's private network.
    pub public_subnet: Ipv4Net,
    /// State that must be on a short path (sockets): `/run/hccm-<tag>`.
    pub run_dir: PathBuf,
    /// Roots of containerd and kubelet: `/var/lib/hccm-<tag>`.
    pub data_dir: PathBuf,
    /// The nodes, in order.
    pub nodes: Vec<NodePlan>,
}

/// One node of a [`LabPlan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// The Node's name (`--hostname-override`).
    pub name: String,
    /// Its network namespace (`/run/netns/<netns>`).
    pub netns: String,
    /// The host end of its veth pair (on the bridge); the node end is `eth0`.
    pub veth: String,
    /// Its address on the bridge: kubelet's `--node-ip`, the fake server's IP.
    pub ip: Ipv4Addr,
    /// Its second address, in the lab's public subnet: the fake server's public IPv4 when the
    /// server is in a network (the private one is then [`Self::ip`]).
    pub public_ip: Ipv4Addr,
    /// The pods' range on this node (the CNI bridge's host-local range).
    pub pod_cidr: Ipv4Net,
    /// Its cgroup root in every cgroup v1 hierarchy (kubelet's `cgroupRoot`).
    pub cgroup: String,
    /// `/run/hccm-<tag>/<name>`: containerd's state and socket, runc's root.
    pub run_dir: PathBuf,
    /// `/var/lib/hccm-<tag>/<name>`: containerd's and kubelet's roots, configuration.
    pub data_dir: PathBuf,
}

impl NodePlan {
    /// containerd's socket.
    pub fn containerd_socket(&self) -> PathBuf {
        self.run_dir.join("containerd.sock")
    }
}

impl LabPlan {
    /// A plan for `names` under `tag`; the subnet is `10.<200+a>.<b>.0/24` from the tag and the
    /// public subnet `10.<100+a>.<b>.0/24`, so two labs differ unless their tags collide in 16
    /// bits (the lab checks the host's addresses).
    pub fn new(tag: &str, names: &[&str]) -> Result<LabPlan, String> {
        if tag.len() != 6 || !tag.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("tag '{tag}' is not 6 hex digits"));
        }
        if names.is_empty() || names.len() > 200 {
            return Err(format!("a lab has 1 to 200 nodes, not {}", names.len()));
        }
        let bits = u32::from_str_radix(tag, 16).map_err(|e| e.to_string())?;
        let a = 200 + (bits >> 8 & 0x1f) as u8; // 200..=231
        let b = (bits & 0xff) as u8;
        let subnet = Ipv4Net::new(Ipv4Addr::new(10, a, b, 0), 24).map_err(|e| e.to_string())?;
        let public_subnet = Ipv4Net::new(Ipv4Addr::new(10, a - 100, b, 0), 24).map_err(|e| e.to_string())?;
        let run_dir = PathBuf::from(format!("/run/hccm-{tag}"));
        let data_dir = PathBuf::from(format!("/var/lib/hccm-{tag}"));
        let nodes = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let index = u8::try_from(i).map_err(|e| e.to_string())?;
                let pod_cidr = Ipv4Net::new(Ipv4Addr::new(10, 244, index + 1, 0), 24).map_err(|e| e.to_string())?;
                Ok(NodePlan {
                    name: (*name).to_owned(),
                    netns: format!("hccm-{tag}-{i}"),
                    veth: format!("hv{tag}{i}"),
                    ip: Ipv4Addr::new(10, a, b, 11 + index),
                    public_ip: Ipv4Addr::new(10, a - 100, b, 11 + index),
                    pod_cidr,
                    cgroup: format!("hccm-{tag}-{i}"),
                    run_dir: run_dir.join(format!("n{i}")),
                    data_dir: data_dir.join(format!("n{i}")),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(LabPlan { tag: tag.to_owned(), bridge: format!("hb{tag}"), subnet, public_subnet, run_dir, data_dir, nodes })
    }

    /// The host end of the bridge: kube-apiserver's address.
    pub fn host_ip(&self) -> Ipv4Addr {
        let [a, b, c, _] = self.subnet.network().octets();
        Ipv4Addr::new(a, b, c, 1)
    }

    /// The host end of the bridge in the public subnet.
    pub fn host_public_ip(&self) -> Ipv4Addr {
        let [a, b, c, _] = self.public_subnet.network().octets();
        Ipv4Addr::new(a, b, c, 1)
    }

    /// The addresses the lab puts on its bridge for the fake's Load Balancers (`.101` onwards
    /// of the public subnet): reachable from the host, from every node and from every pod.
    pub fn load_balancer_ips(&self) -> Vec<Ipv4Addr> {
        let [a, b, c, _] = self.public_subnet.network().octets();
        (0..LOAD_BALANCER_ADDRESSES).map(|i| Ipv4Addr::new(a, b, c, 101 + i)).collect()
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&NodePlan> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// containerd's configuration (version 3) for one node: its own root, state, socket and runc
/// root; cgroupfs (no systemd here); `oom_score_adj` never below containerd's own (these
/// machines withhold `CAP_SYS_RESOURCE`, so runc could not lower it); CNI from the lab's plugins and this node's conflist; the
/// pinned sandbox image, imported beforehand (nothing is pulled).
pub fn containerd_config(node: &NodePlan, cni_bin: &str, pause_image: &str) -> String {
    let data = node.data_dir.display();
    let run = node.run_dir.display();
    format!(
        r#"version = 3
root = "{data}/containerd"
state = "{run}/containerd"

[grpc]
  address = "{socket}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{pause_image}"

[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # No CAP_SYS_RESOURCE on these machines: runc cannot lower a container's oom_score_adj
  # (kubelet asks -998 for sandboxes), so clamp it to containerd's own.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      SystemdCgroup = false
      Root = "{run}/runc"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{data}/cni"
"#,
        socket = node.containerd_socket().display(),
    )
}

/// The CNI configuration of one node: a bridge `cni0` in the node's namespace with this node's
/// pod range (host-local, state under the node's directory) and portmap. No masquerade by the
/// plugin (it would hide a pod's address from pods on other nodes): [`masquerade_rules`] does
/// it for what leaves the cluster's pod range only.
pub fn cni_conflist(node: &NodePlan) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "hccm",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.pod_cidr.to_string()}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": node.data_dir.join("ipam").display().to_string(),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
    .to_string()
}

/// The nftables rules of a node's namespace: traffic from the lab's pods to anything outside
/// the pod range ([`CLUSTER_CIDR`]) leaves with the node's address (the host has no routes to
/// the pods); pod-to-pod traffic keeps its addresses, as a cluster's network does.
pub fn masquerade_rules() -> String {
    format!(
        "table ip hccm-masquerade {{\n  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    \
         ip saddr {CLUSTER_CIDR} ip daddr != {CLUSTER_CIDR} masquerade\n  }}\n}}\n"
    )
}

/// kubelet's configuration for one node: cgroup v1 allowed (`failCgroupV1: false`, needed from
/// 1.35 on these machines), cgroupfs under the node's own cgroup root, its own containerd, its
/// node address; eviction and image GC thresholds that a busy shared disk does not trip; the
/// read-only port off; authentication and authorization open (the port is reachable only inside
/// the lab's namespaces).
pub fn kubelet_config(node: &NodePlan, cluster_dns: Option<Ipv4Addr>) -> String {
    let dns =
        cluster_dns.map(|ip| format!("clusterDNS: [\"{ip}\"]\nclusterDomain: {CLUSTER_DOMAIN}\n")).unwrap_or_default();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup}
failSwapOn: false
containerRuntimeEndpoint: unix://{socket}
address: {ip}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
podLogsDir: {data}/pod-logs
maxPods: 30
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
protectKernelDefaults: false
serializeImagePulls: false
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
{dns}"#,
        cgroup = node.cgroup,
        socket = node.containerd_socket().display(),
        ip = node.ip,
        data = node.data_dir.display(),
    )
}

/// CoreDNS's configuration for the lab's cluster DNS: on `address` port 53 only, answering
/// for the cluster's Services and Pods (the `kubernetes` plugin, reading the API with
/// `kubeconfig`) and nothing else (the lab has no upstream resolver to forward to).
pub fn corefile(address: Ipv4Addr, kubeconfig: &str) -> String {
    format!(
        r#".:53 {{
    bind {address}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
}}
"#
    )
}

/// kube-proxy's configuration for one node: nftables, the lab's pod range, conntrack left alone
/// (its limits are host-wide), health and metrics on the node's own address, NodePorts on its
/// private and its public address (`node_port_cidrs`: the lab's two subnets), as a Hetzner
/// Load Balancer reaches a node on either.
pub fn kube_proxy_config(node: &NodePlan, kubeconfig: &str, node_port_cidrs: &[Ipv4Net]) -> String {
    let cidrs: Vec<String> = node_port_cidrs.iter().map(|c| format!("\"{c}\"")).collect();
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
hostnameOverride: {name}
bindAddress: {ip}
healthzBindAddress: {ip}:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: {CLUSTER_CIDR}
nodePortAddresses: [{cidrs}]
mode: nftables
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"#,
        name = node.name,
        ip = node.ip,
        cidrs = cidrs.join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_names_everything_after_its_tag_and_numbers_the_nodes() {
        let plan = LabPlan::new("0a1b2c", &["kn-a", "kn-b"]).unwrap();
        assert_eq!(plan.bridge, "hb0a1b2c");
        assert!(plan.bridge.len() <= 15, "Linux interface names have at most 15 characters");
        assert_eq!(plan.subnet.to_string(), "10.227.44.0/24");
        assert_eq!(plan.host_ip(), Ipv4Addr::new(10, 227, 44, 1));
        let b = plan.node("kn-b").unwrap();
        assert_eq!(b.ip, Ipv4Addr::new(10, 227, 44, 12));
        assert_eq!(b.public_ip, Ipv4Addr::new(10, 127, 44, 12));
        assert_eq!(plan.public_subnet.to_string(), "10.127.44.0/24");
        assert_eq!(plan.host_public_ip(), Ipv4Addr::new(10, 127, 44, 1));
        let lbs = plan.load_balancer_ips();
        assert_eq!(
            (lbs.len(), lbs[0], lbs[49]),
            (50, Ipv4Addr::new(10, 127, 44, 101), Ipv4Addr::new(10, 127, 44, 150))
        );
        // The public subnet is outside the private addresses' /16 (what the upstream e2e suite
        // takes for the cluster's own network when it checks that a client's address is kept).
        assert!(!Ipv4Net::new(Ipv4Addr::new(10, 227, 0, 0), 16).unwrap().contains(&b.public_ip));
        assert_eq!(b.pod_cidr.to_string(), "10.244.2.0/24");
        assert_eq!(b.netns, "hccm-0a1b2c-1");
        assert_eq!(b.veth, "hv0a1b2c1");
        assert_eq!(b.containerd_socket(), PathBuf::from("/run/hccm-0a1b2c/n1/containerd.sock"));
        assert_eq!(b.data_dir, PathBuf::from("/var/lib/hccm-0a1b2c/n1"));
    }

    #[test]
    fn bad_tags_and_sizes_are_refused() {
        assert!(LabPlan::new("xyz", &["a"]).is_err());
        assert!(LabPlan::new("0a1b2c", &[]).is_err());
    }

    #[test]
    fn configs_point_each_node_at_its_own_paths() {
        let plan = LabPlan::new("00ff00", &["kn-a"]).unwrap();
        let node = &plan.nodes[0];
        let containerd = containerd_config(node, "/cache/cni", "registry.k8s.io/pause:3.10.2");
        assert!(containerd.contains(r#"address = "/run/hccm-00ff00/n0/containerd.sock""#), "{containerd}");
        assert!(containerd.contains(r#"Root = "/run/hccm-00ff00/n0/runc""#), "{containerd}");
        let kubelet = kubelet_config(node, None);
        assert!(kubelet.contains("failCgroupV1: false\n"), "{kubelet}");
        assert!(!kubelet.contains("clusterDNS"), "{kubelet}");
        let with_dns = kubelet_config(node, Some(plan.host_ip()));
        assert!(with_dns.ends_with("clusterDNS: [\"10.231.0.1\"]\nclusterDomain: cluster.local\n"), "{with_dns}");
        let corefile = corefile(plan.host_ip(), "/x/admin.kubeconfig");
        assert!(
            corefile.contains("    bind 10.231.0.1\n") && corefile.contains("kubeconfig /x/admin.kubeconfig\n"),
            "{corefile}"
        );
        assert!(kubelet.contains("cgroupRoot: /hccm-00ff00-0\n"), "{kubelet}");
        let cni: serde_json::Value = serde_json::from_str(&cni_conflist(node)).unwrap();
        assert_eq!(cni["plugins"][0]["ipam"]["ranges"][0][0]["subnet"], "10.244.1.0/24");
        assert_eq!(cni["plugins"][0]["ipMasq"], false);
        assert!(masquerade_rules().contains("ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 masquerade\n"));
        let proxy = kube_proxy_config(node, "/x/kube-proxy.kubeconfig", &[plan.subnet, plan.public_subnet]);
        assert!(proxy.contains("hostnameOverride: kn-a\n"), "{proxy}");
        assert!(proxy.contains("nodePortAddresses: [\"10.231.0.0/24\", \"10.131.0.0/24\"]\n"), "{proxy}");
    }
}
