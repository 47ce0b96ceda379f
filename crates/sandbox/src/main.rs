//! The local sandbox: the whole system on this machine until Ctrl-C.
//!
//! ```text
//!  kube-apiserver + etcd, KCM, scheduler ◄── hcloud-ccm (child process, RBAC-limited)
//!          ▲      (test-harness)                  │
//!          │ real kubelets in network             ▼
//!          │ namespaces (test_harness::    Hetzner fake (in process, loopback): servers with
//!          │ real_node) register Nodes     the nodes' addresses, network, Load Balancers
//!          │                               whose 127.x addresses forward to the nodes
//!       sandbox ── seeds, demo Deployment + LoadBalancer Service, curls it
//!          │
//!          └─ prints the kubeconfig and kubectl usage, streams node and Service changes
//!             (with the Load Balancer the fake holds for each Service) and CCM logs
//! ```
//!
//! Real nodes need root and cgroup v1; elsewhere (or with `--simulated-nodes`) kubelet-like
//! Node objects stand in for them, and the sandbox says why.
//!
//! Run: `cargo run -p sandbox` (builds `hcloud-ccm` too if needed; the first run also builds
//! the control plane and the node components, ~30 minutes with progress).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Parser;
use futures::StreamExt;
use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::{DataPlaneConfig, FakeConfig, FakeServer};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use test_harness::real_node::{NodeLab, check_host, echo_deployment};
use test_harness::{ChildProcess, ControlPlane, NodeBuilder};

/// Start a local hcloud-ccm sandbox and keep it running until Ctrl-C.
#[derive(Debug, Parser)]
#[command(name = "sandbox", about)]
struct Args {
    /// How many servers (and Nodes) to create.
    #[arg(long, default_value_t = 3)]
    servers: usize,
    /// Address for the Hetzner fake (loopback only).
    #[arg(long, default_value = "127.0.0.1:0")]
    fake_listen: std::net::SocketAddr,
    /// The hcloud-ccm binary (default: next to this one, built with cargo if missing).
    #[arg(long)]
    hcloud_ccm: Option<PathBuf>,
    /// Exit once every node is initialized and the demo Service has its Load Balancer (for
    /// smoke tests) instead of waiting for Ctrl-C.
    #[arg(long)]
    exit_when_ready: bool,
    /// Do not create the demo LoadBalancer Service `default/demo`.
    #[arg(long)]
    no_service: bool,
    /// Register kubelet-like Node objects instead of running real kubelets (the default where
    /// the machine allows: root, cgroup v1, `ip`, `nsenter`, `nft`, `runc`).
    #[arg(long)]
    simulated_nodes: bool,
}

/// The control plane, alone (simulated Nodes) or with real nodes around it.
enum Cluster {
    Simulated(Box<ControlPlane>),
    Real(Box<NodeLab>),
}

impl Cluster {
    fn control_plane(&self) -> &ControlPlane {
        match self {
            Cluster::Simulated(cp) => cp,
            Cluster::Real(lab) => lab.control_plane(),
        }
    }
}

/// The demo Service's name (namespace `default`).
const DEMO_SERVICE: &str = "demo";

/// (server type, location) of the sandbox's servers, cycled.
const SHAPES: [(&str, &str); 3] = [("cpx22", "fsn1"), ("cax11", "nbg1"), ("ccx13", "hel1")];

fn ccm_binary(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p);
    }
    let exe = std::env::current_exe().context("cannot locate the sandbox binary")?;
    let candidate = exe.with_file_name("hcloud-ccm");
    if !candidate.exists() {
        println!("building hcloud-ccm (cargo build -p hcloud-ccm)…");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "-p", "hcloud-ccm", "--bin", "hcloud-ccm"]);
        if exe.parent().and_then(Path::file_name).is_some_and(|d| d == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().context("cannot run cargo to build hcloud-ccm")?;
        if !status.success() || !candidate.exists() {
            bail!("could not build hcloud-ccm; build it with `cargo build -p hcloud-ccm` or pass --hcloud-ccm PATH");
        }
    }
    Ok(candidate)
}

/// A one-line summary of what the CCM did to a node.
fn summary(node: &Node) -> String {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let spec = node.spec.clone().unwrap_or_default();
    let taints: Vec<String> = spec.taints.unwrap_or_default().into_iter().map(|t| t.key).collect();
    let addresses: Vec<String> = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|a| format!("{}={}", a.type_, a.address))
        .collect();
    let state = if taints.iter().any(|t| t == "node.cloudprovider.kubernetes.io/uninitialized") {
        "waiting for hcloud-ccm"
    } else {
        "initialized"
    };
    format!(
        "{state}; providerID={} type={} region={} zone={} addresses=[{}] taints=[{}]",
        spec.provider_id.unwrap_or_else(|| "-".into()),
        labels.get("node.kubernetes.io/instance-type").map_or("-", String::as_str),
        labels.get("topology.kubernetes.io/region").map_or("-", String::as_str),
        labels.get("topology.kubernetes.io/zone").map_or("-", String::as_str),
        addresses.join(" "),
        taints.join(" ")
    )
}

/// How long the demo waits for the real nodes' kubelets to report Ready.
const NODES_READY: Duration = Duration::from_secs(300);

/// Whether a Node named after each of `names` exists and reports `Ready=True`.
async fn all_ready(nodes: &Api<Node>, names: &[String]) -> bool {
    let Ok(list) = nodes.list(&Default::default()).await else { return false };
    names.iter().all(|name| {
        list.items.iter().any(|n| {
            n.metadata.name.as_deref() == Some(name.as_str())
                && n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
    })
}

fn all_initialized(names: &[String], last: &BTreeMap<String, String>) -> bool {
    names.iter().all(|n| last.get(n).is_some_and(|l| l.starts_with("initialized")))
}

/// The demo Service: type LoadBalancer, port 80 (to the echo pods' 8080 with real nodes).
fn demo_service(real: bool) -> Service {
    let mut svc = Service::default();
    svc.metadata.name = Some(DEMO_SERVICE.to_owned());
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".to_owned()),
        selector: Some(BTreeMap::from([("app".to_owned(), DEMO_SERVICE.to_owned())])),
        ports: Some(vec![ServicePort {
            name: Some("http".to_owned()),
            port: 80,
            target_port: real.then_some(IntOrString::Int(8080)),
            ..Default::default()
        }]),
        ..Default::default()
    });
    svc
}

/// A one-line summary of a LoadBalancer Service and the Load Balancer the fake holds for it.
fn service_summary(svc: &Service, fake: &hcloud_fake::FakeHandle) -> String {
    let ingress: Vec<String> = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| i.ip.or(i.hostname))
        .collect();
    let uid = svc.metadata.uid.clone().unwrap_or_default();
    let lb = fake
        .snapshot()
        .load_balancers
        .into_iter()
        .find(|l| l.labels.get("hcloud-ccm/service-uid") == Some(&uid))
        .map(|l| {
            let ports: Vec<String> =
                l.services.iter().map(|s| format!("{}→{}", s.listen_port, s.destination_port)).collect();
            format!(
                "Load Balancer {} ({}) in the fake: ports [{}], {} targets",
                l.name,
                l.load_balancer_type.name,
                ports.join(" "),
                l.targets.len()
            )
        })
        .unwrap_or_else(|| "no Load Balancer in the fake yet".to_owned());
    if ingress.is_empty() {
        format!("waiting for hcloud-ccm; {lb}")
    } else {
        format!("served at [{}]; {lb}", ingress.join(" "))
    }
}

/// The first ingress IP of a Service.
fn ingress_ip(svc: &Service) -> Option<String> {
    svc.status.as_ref()?.load_balancer.as_ref()?.ingress.as_ref()?.first()?.ip.clone()
}

/// `GET /` over HTTP/1.0 (what `curl http://ip:port/` does): the body, trimmed.
async fn http_get(ip: &str, port: u16) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect((ip, port)).await?;
        stream.write_all(format!("GET / HTTP/1.0\r\nHost: {ip}\r\n\r\n").as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        anyhow::Ok(String::from_utf8_lossy(&response).into_owned())
    };
    let response = tokio::time::timeout(Duration::from_secs(3), exchange).await.context("no answer in 3 s")??;
    let (head, body) = response.split_once("\r\n\r\n").context("not an HTTP response")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!("answered {}", head.lines().next().unwrap_or_default());
    }
    Ok(body.trim().to_owned())
}

/// A random second octet for the Load Balancers' loopback range (16..=249, clear of 127.0.x).
fn fastrand_octet() -> u8 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    16 + u8::try_from((nanos ^ std::process::id()) % 234).unwrap_or(0)
}

/// A free TCP port on loopback.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The token hcloud-ccm sends to the fake (which accepts any): 64 characters like a real one,
/// so the CCM's token-length warning does not greet a newcomer.
const SANDBOX_TOKEN: &str = "sandbox000000000000000000000000000000000000000000000000000000000";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    const { assert!(SANDBOX_TOKEN.len() == 64) };
    let args = Args::parse();
    if !args.fake_listen.ip().is_loopback() {
        bail!("--fake-listen must be a loopback address, got {}", args.fake_listen);
    }
    let ccm_bin = ccm_binary(args.hcloud_ccm.clone())?;

    let names: Vec<String> = (1..=args.servers).map(|i| format!("node-{i}")).collect();
    let real = if args.simulated_nodes {
        false
    } else {
        match check_host().await {
            Ok(()) => true,
            Err(e) => {
                println!("[sandbox] real nodes are not possible here ({e}); registering simulated Nodes instead");
                false
            }
        }
    };
    println!("starting kube-apiserver + etcd (the first run builds them from their Go modules: about 6 minutes)…");
    let cluster = if real {
        println!(
            "starting {} real nodes: kubelet, containerd and kube-proxy each, with kube-controller-manager and \
             kube-scheduler (the first run builds them: about 20 minutes; --simulated-nodes skips them)…",
            names.len()
        );
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        Cluster::Real(Box::new(NodeLab::start(&refs).await.context("cannot start the real nodes")?))
    } else {
        Cluster::Simulated(Box::new(ControlPlane::start().await.context("cannot start the control plane")?))
    };
    let cp = cluster.control_plane();
    let client = cp.admin_client().await?;
    let server = client.apiserver_version().await.context("cannot read the API server's /version")?;
    println!(
        "kube-apiserver {} (Kubernetes {}.{}) at {}",
        server.git_version,
        server.major,
        server.minor,
        cp.server_url()
    );

    // Load Balancers answer on a loopback address of 127.<random>.0.0/16 and forward to the
    // nodes' private IPs (with real nodes, those are the kubelets' addresses).
    let data_plane = DataPlaneConfig::parse(&format!("127.{}.0.0/16", fastrand_octet()))?;
    let fake =
        FakeServer::bind(args.fake_listen, FakeConfig::default().with_load_balancer_data_plane(data_plane)).await?;
    let h = fake.handle();
    let subnet = match &cluster {
        Cluster::Real(lab) => lab.subnet().to_string(),
        Cluster::Simulated(_) => "10.0.0.0/24".to_owned(),
    };
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet(&subnet, "eu-central"))?;
    for (i, name) in names.iter().enumerate() {
        let (server_type, location) = SHAPES[i % SHAPES.len()];
        let seed = SeedServer::new(name).server_type(server_type).location(location);
        let seed = match &cluster {
            Cluster::Real(lab) => {
                let ip = lab.node_ip(name).context("the lab has no such node")?.to_string();
                seed.network_ip(net, &ip)
            }
            Cluster::Simulated(_) => seed.network(net),
        };
        h.seed_server(&seed)?;
    }

    let kubeconfig = format!("--kubeconfig={}", cp.ccm_kubeconfig().display());
    let endpoint = fake.base_url();
    // hcloud-ccm's listeners stay on loopback: the secure port and the plain metrics listener.
    let (secure_port, metrics_port) = (free_port()?, free_port()?);
    let secure_port_arg = format!("--secure-port={secure_port}");
    let metrics_address = format!("127.0.0.1:{metrics_port}");
    let ccm = ChildProcess::spawn(
        &ccm_bin,
        &[
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            &secure_port_arg,
            &kubeconfig,
        ],
        &[
            ("HCLOUD_TOKEN", SANDBOX_TOKEN),
            ("HCLOUD_ENDPOINT", &endpoint),
            ("HCLOUD_NETWORK", "k8s"),
            ("HCLOUD_METRICS_ADDRESS", &metrics_address),
            ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
            ("HCLOUD_LOAD_BALANCERS_TYPE", "lb11"),
            ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "true"),
        ],
        "hcloud-ccm",
    )?;
    ccm.wait_for_log("hcloud-ccm started", Duration::from_secs(60))
        .await
        .with_context(|| format!("hcloud-ccm did not start:\n{}", ccm.logs()))?;

    let admin = cp.admin_kubeconfig().display().to_string();
    let kubectl = cp.kubectl_path().display().to_string();
    println!(
        "\nhcloud-ccm sandbox is up.\n\
         \n  kubeconfig (admin):  {admin}\n\
         \n  export KUBECONFIG={admin}\
         \n  {kubectl} get nodes -o wide\
         \n  {kubectl} describe node node-1\
         \n  {kubectl} get events -A\n\
         \n  Hetzner fake API:    {endpoint}   (any bearer token)\
         \n  its state:           curl -s {}/state\
         \n  delete a server:     curl -s -X DELETE {}/servers/<id>   (then mark its Node NotReady to see it deleted)\
         \n  hcloud-ccm logs:     {}\
         \n  its metrics:         curl -s http://{metrics_address}/metrics\
         \n  its health:          curl -sk https://127.0.0.1:{secure_port}/healthz?verbose\n\
         \nThe demo Service's Load Balancer answers at its EXTERNAL-IP (with real nodes, a pod answers):\
         \n  {kubectl} get service demo\
         \n  curl http://<EXTERNAL-IP>/\n\
         \nA LoadBalancer Service of your own gets its Load Balancer in the fake:\
         \n  {kubectl} create service loadbalancer web --tcp=80:8080\
         \n  {kubectl} get service web -o wide -w\n\
         \nStreaming node and Service changes and hcloud-ccm logs; Ctrl-C stops everything.\n",
        fake.control_url(),
        fake.control_url(),
        ccm.log_path().display()
    );

    if !real {
        for name in &names {
            NodeBuilder::new(name.as_str()).kubelet_hostname_address(true).register(&client).await?;
        }
    }
    if !args.no_service {
        if real {
            // A Service synced while no Node is Ready gets upstream's "There are no available
            // nodes for LoadBalancer" Warning: the demo waits for the kubelets first (on a busy
            // machine they take longer than the sandbox's start-up).
            println!("[sandbox] waiting for the kubelets' Nodes to be Ready before creating the demo Service…");
            let nodes: Api<Node> = Api::all(client.clone());
            test_harness::wait_until(NODES_READY, "every real node's Node is Ready", async || {
                all_ready(&nodes, &names).await
            })
            .await
            .context("the real nodes did not become Ready")?;
            let replicas = i32::try_from(names.len()).unwrap_or(i32::MAX);
            let deployment = echo_deployment(DEMO_SERVICE, replicas, None)?;
            let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
            deployments
                .create(&PostParams::default(), &deployment)
                .await
                .context("cannot create the demo Deployment")?;
            println!("[sandbox] created Deployment default/{DEMO_SERVICE} ({replicas} pods answering with their name)");
        }
        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        services.create(&PostParams::default(), &demo_service(real)).await.context("cannot create the demo Service")?;
        println!("[sandbox] created LoadBalancer Service default/{DEMO_SERVICE} (port 80)");
    }
    // With real nodes the demo is done when a request through the Load Balancer reaches a pod.
    let mut demo_answered = !real || args.no_service;
    let mut demo_served = args.no_service;

    // Stream node changes.
    let nodes: Api<Node> = Api::all(client.clone());
    let mut changes = watcher(nodes, watcher::Config::default()).default_backoff().applied_objects().boxed();
    let all_services: Api<Service> = Api::all(client.clone());
    let mut service_changes =
        watcher(all_services, watcher::Config::default()).default_backoff().applied_objects().boxed();
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let mut last_service: BTreeMap<String, String> = BTreeMap::new();
    let mut seen_services: BTreeMap<String, Service> = BTreeMap::new();
    let mut log_offset = 0usize;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tick.tick() => {
                let logs = std::fs::read_to_string(ccm.log_path()).unwrap_or_default();
                if logs.len() > log_offset {
                    for line in logs[log_offset..].lines() {
                        println!("[hcloud-ccm] {line}");
                    }
                    log_offset = logs.len();
                }
                if !ccm.is_running() {
                    bail!("hcloud-ccm exited; its log is above");
                }
                // Services and their Load Balancers (targets change without the Service changing).
                for (key, svc) in &seen_services {
                    let line = service_summary(svc, &h);
                    if last_service.get(key) != Some(&line) {
                        println!("[service {key}] {line}");
                        last_service.insert(key.clone(), line.clone());
                    }
                    if *key == format!("default/{DEMO_SERVICE}") && line.starts_with("served") && line.contains(&format!("{} targets", names.len())) {
                        demo_served = true;
                    }
                }
                if demo_served && !demo_answered
                    && let Some(ip) = seen_services.get(&format!("default/{DEMO_SERVICE}")).and_then(ingress_ip)
                    && let Ok(pod) = http_get(&ip, 80).await
                {
                    println!("[sandbox] curl http://{ip}/ → answered by pod {pod}");
                    demo_answered = true;
                }
                if args.exit_when_ready && demo_served && demo_answered && all_initialized(&names, &last) {
                    println!("all {} nodes initialized", names.len());
                    break;
                }
            }
            change = changes.next() => match change {
                Some(Ok(node)) => {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    let line = summary(&node);
                    if last.get(&name) != Some(&line) {
                        println!("[node {name}] {line}");
                        last.insert(name, line);
                    }
                    if args.exit_when_ready && demo_served && demo_answered && all_initialized(&names, &last) {
                        println!("all {} nodes initialized", names.len());
                        break;
                    }
                }
                Some(Err(e)) => println!("[sandbox] watch error: {e}"),
                None => break,
            },
            change = service_changes.next() => match change {
                Some(Ok(svc)) => {
                    if svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer") {
                        let key = format!(
                            "{}/{}",
                            svc.metadata.namespace.clone().unwrap_or_default(),
                            svc.metadata.name.clone().unwrap_or_default()
                        );
                        seen_services.insert(key, svc);
                    }
                }
                Some(Err(e)) => println!("[sandbox] watch error: {e}"),
                None => break,
            },
        }
    }
    println!("stopping…");
    ccm.stop().await?;
    fake.shutdown().await;
    if let Cluster::Real(lab) = cluster {
        lab.shutdown().await.map_err(|left| anyhow::anyhow!("the real nodes left things behind: {left}"))?;
    }
    println!("stopped");
    Ok(())
}
