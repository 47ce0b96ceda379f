//! The lab both suites run in: three real nodes named as the official suite expects
//! (`<ENV_NAME>-control`, `<ENV_NAME>-worker-0`, `-1`), the fake with its data plane answering on
//! the lab's Load Balancer addresses (on the lab's bridge: pods, nodes and the host reach them),
//! one Hetzner network named `<ENV_NAME>` holding the nodes' private addresses, a cluster DNS
//! (CoreDNS; the upstream tests reach Services by name), and one CCM (hcloud-ccm or the
//! official v1.35.0) with the route controller on.

use std::path::PathBuf;
use std::time::Duration;

use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::{DataPlaneConfig, FakeConfig, FakeServer};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use test_harness::ChildProcess;
use test_harness::real_node::{LabImage, LabOptions, NodeLab};

use super::keep::{self, Recorder};
use crate::common::TOKEN;

/// `ENV_NAME` of the official suite: the servers' and the network's names derive from it.
pub const ENV_NAME: &str = "hccm-e2e";
/// The location of every server and, by default, of the Load Balancers (the official suite
/// asks for `nbg1` by annotation; the upstream tests have none).
pub const LOCATION: &str = "nbg1";

/// Which cloud-controller-manager the suites judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ccm {
    /// This project's.
    HcloudCcm,
    /// Hetzner's official v1.35.0 (`scripts/provision-oracles`).
    Official,
}

impl Ccm {
    pub fn name(self) -> &'static str {
        match self {
            Ccm::HcloudCcm => "hcloud-ccm",
            Ccm::Official => "official CCM v1.35.0",
        }
    }
}

/// The provisioned suites (`scripts/provision-e2e`).
pub struct Suites {
    /// `e2e.test`, `ginkgo`, `images/`.
    pub upstream: PathBuf,
    /// `hcloud-ccm-e2e.test`.
    pub official: PathBuf,
}

impl Suites {
    pub fn provision() -> Suites {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/provision-e2e");
        let dir = test_harness::provisioned_path(&script, "HCLOUD_CCM_E2E").unwrap_or_else(|e| panic!("{e}"));
        Suites { upstream: dir.join("upstream"), official: dir.join("official") }
    }

    /// The images the suites' pods use, imported into every node.
    pub fn images(&self) -> Vec<LabImage> {
        let references = std::fs::read_to_string(self.upstream.join("images/REFERENCES")).expect("images/REFERENCES");
        references
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(file, reference)| LabImage {
                archive: self.upstream.join("images").join(format!("{file}.tar")),
                reference: reference.to_owned(),
            })
            .collect()
    }
}

/// A running lab with one CCM.
pub struct SuitesLab {
    pub which: Ccm,
    pub ccm: ChildProcess,
    pub fake: FakeServer,
    pub lab: NodeLab,
    /// The cluster's Events, Node changes and the machine's load, for [`keep::keep`].
    pub recorder: Recorder,
}

/// How long the nodes may take to register and be initialized.
const NODES_READY: Duration = Duration::from_secs(240);

impl SuitesLab {
    pub async fn start(suites: &Suites, which: Ccm) -> SuitesLab {
        let names = [format!("{ENV_NAME}-control"), format!("{ENV_NAME}-worker-0"), format!("{ENV_NAME}-worker-1")];
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let options = LabOptions { images: suites.images(), coredns: Some(suites.upstream.join("coredns")) };
        let lab = NodeLab::start_with(&refs, &options).await.unwrap_or_else(|e| panic!("{e}"));
        let recorder = Recorder::start(lab.control_plane().admin_client().await.expect("client"));
        let data_plane = DataPlaneConfig::local_addresses(lab.load_balancer_ips()).expect("the lab's addresses");
        let fake =
            FakeServer::start(FakeConfig::default().with_load_balancer_data_plane(data_plane)).await.expect("fake");
        let h = fake.handle();
        // The network: the lab's private subnet for the servers, 10.0.0.0/24 for Load Balancers
        // that ask for it (the official suite's private-network test).
        let network = SeedNetwork::new(ENV_NAME, "10.0.0.0/8")
            .subnet(&lab.subnet().to_string(), "eu-central")
            .subnet("10.0.0.0/24", "eu-central");
        let net = h.seed_network(&network).expect("network");
        for name in lab.node_names() {
            let private = lab.node_ip(name).expect("ip").to_string();
            let mut seed = SeedServer::new(name).server_type("cx33").location(LOCATION).network_ip(net, &private);
            seed.public_ipv4 = Some(lab.node_public_ip(name).expect("public ip").to_string());
            h.seed_server(&seed).expect("server");
        }
        lab.assign_pod_cidrs(NODES_READY).await.unwrap_or_else(|e| panic!("{e}"));
        let ccm = spawn(which, &lab, &fake);
        let nodes: Api<Node> = Api::all(lab.control_plane().admin_client().await.expect("client"));
        let initialized = test_harness::wait_until(NODES_READY, "every Node initialized and Ready", async || {
            let list = nodes.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
            list.len() == refs.len() && list.iter().all(|n| initialized(n) && ready(n))
        })
        .await;
        let lab = SuitesLab { which, ccm, fake, lab, recorder };
        if let Err(e) = initialized {
            let logs: Vec<String> = refs.iter().map(|n| lab.lab.node_logs(n, 30)).collect();
            let kept = lab.keep(&[]);
            panic!("{e}\n{}\n{}\n(all logs: {})", lab.ccm.logs(), logs.join("\n"), kept.display());
        }
        lab
    }

    /// Keeps every log of the lab and `texts` (file name, contents) under the target dir
    /// ([`keep::keep`]) and returns the directory.
    pub fn keep(&self, texts: &[(&str, &str)]) -> PathBuf {
        let run = match self.which {
            Ccm::HcloudCcm => "hcloud-ccm",
            Ccm::Official => "official-ccm",
        };
        keep::keep(self, run, texts)
    }

    /// Stops the CCM and the fake, then the lab, and checks that the lab left nothing behind.
    pub async fn shutdown(self) {
        let SuitesLab { ccm, fake, lab, recorder, .. } = self;
        drop(recorder);
        drop(ccm);
        fake.shutdown().await;
        lab.shutdown().await.unwrap_or_else(|left| panic!("the lab left things behind: {left}"));
    }
}

fn initialized(node: &Node) -> bool {
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized"));
    !tainted && node.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_some()
}

fn ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The CCM with the chart's settings for a cluster in a network: routes for the pod ranges
/// (`--allocate-node-cidrs --cluster-cidr`), Load Balancers in `nbg1` by default.
fn spawn(which: Ccm, lab: &NodeLab, fake: &FakeServer) -> ChildProcess {
    let cp = lab.control_plane();
    let metrics = format!("127.0.0.1:{}", crate::common::free_port());
    let env = [
        ("HCLOUD_TOKEN", TOKEN),
        ("HCLOUD_ENDPOINT", &fake.base_url()),
        ("HCLOUD_NETWORK", ENV_NAME),
        ("HCLOUD_LOAD_BALANCERS_LOCATION", LOCATION),
        ("HCLOUD_METRICS_ADDRESS", &metrics),
    ];
    let args = [
        "--cloud-provider=hcloud",
        "--allow-untagged-cloud",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        "--allocate-node-cidrs=true",
        "--cluster-cidr=10.244.0.0/16",
        "--configure-cloud-routes=true",
    ];
    match which {
        Ccm::HcloudCcm => {
            let kubeconfig = format!("--kubeconfig={}", cp.ccm_kubeconfig().display());
            let mut all: Vec<&str> = args.to_vec();
            all.push(&kubeconfig);
            let mut env = env.to_vec();
            env.push(("RUST_LOG", ""));
            ChildProcess::spawn(std::path::Path::new(env!("CARGO_BIN_EXE_hcloud-ccm")), &all, &env, "hcloud-ccm")
                .expect("hcloud-ccm spawns")
        }
        Ccm::Official => {
            let kubeconfig = format!("--kubeconfig={}", cp.admin_kubeconfig().display());
            let port = format!("--secure-port={}", crate::common::free_port());
            let mut all: Vec<&str> = args.iter().copied().filter(|a| !a.starts_with("--secure-port")).collect();
            all.extend([kubeconfig.as_str(), port.as_str()]);
            test_harness::oracle::OfficialCcm::spawn(&all, &env, "official-ccm").unwrap_or_else(|e| panic!("{e}"))
        }
    }
}
