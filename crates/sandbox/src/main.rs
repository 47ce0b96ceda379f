//! The local sandbox: the whole system on this machine until Ctrl-C.
//!
//! ```text
//!  kube-apiserver + etcd (test-harness, loopback) ◄── hcloud-ccm (child process, RBAC-limited)
//!          ▲                                              │
//!          │ kubelet-like Node registrations,             ▼
//!          │ a LoadBalancer Service               Hetzner fake (in process, loopback):
//!       sandbox ─────────── seeds ──────────────►   servers, network, Load Balancers
//!          │
//!          └─ prints the kubeconfig and kubectl usage, streams node and Service changes
//!             (with the Load Balancer the fake holds for each Service) and CCM logs
//! ```
//!
//! Run: `cargo run -p sandbox` (builds `hcloud-ccm` too if needed; the first run also builds
//! the control plane, ~5 minutes with progress).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Parser;
use futures::StreamExt;
use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::{FakeConfig, FakeServer};
use k8s_openapi::api::core::v1::{Node, Service, ServicePort, ServiceSpec};
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
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

fn all_initialized(names: &[String], last: &BTreeMap<String, String>) -> bool {
    names.iter().all(|n| last.get(n).is_some_and(|l| l.starts_with("initialized")))
}

/// The demo Service: type LoadBalancer, port 80.
fn demo_service() -> Service {
    let mut svc = Service::default();
    svc.metadata.name = Some(DEMO_SERVICE.to_owned());
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".to_owned()),
        selector: Some(BTreeMap::from([("app".to_owned(), DEMO_SERVICE.to_owned())])),
        ports: Some(vec![ServicePort { name: Some("http".to_owned()), port: 80, ..Default::default() }]),
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

    println!("starting kube-apiserver + etcd (the first run builds them from their Go modules: about 6 minutes)…");
    let cp = ControlPlane::start().await.context("cannot start the control plane")?;
    let client = cp.admin_client().await?;
    let server = client.apiserver_version().await.context("cannot read the API server's /version")?;
    println!(
        "kube-apiserver {} (Kubernetes {}.{}) at {}",
        server.git_version,
        server.major,
        server.minor,
        cp.server_url()
    );

    let fake = FakeServer::bind(args.fake_listen, FakeConfig::default()).await?;
    let h = fake.handle();
    let net = h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central"))?;
    let names: Vec<String> = (1..=args.servers).map(|i| format!("node-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let (server_type, location) = SHAPES[i % SHAPES.len()];
        h.seed_server(&SeedServer::new(name).server_type(server_type).location(location).network(net))?;
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
         \nA LoadBalancer Service of your own gets its Load Balancer in the fake:\
         \n  {kubectl} create service loadbalancer web --tcp=80:8080\
         \n  {kubectl} get service web -o wide -w\n\
         \nStreaming node and Service changes and hcloud-ccm logs; Ctrl-C stops everything.\n",
        fake.control_url(),
        fake.control_url(),
        ccm.log_path().display()
    );

    for name in &names {
        NodeBuilder::new(name.as_str()).kubelet_hostname_address(true).register(&client).await?;
    }
    if !args.no_service {
        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        services.create(&PostParams::default(), &demo_service()).await.context("cannot create the demo Service")?;
        println!("[sandbox] created LoadBalancer Service default/{DEMO_SERVICE} (port 80)");
    }
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
                if args.exit_when_ready && demo_served && all_initialized(&names, &last) {
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
                    if args.exit_when_ready && demo_served && all_initialized(&names, &last) {
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
    drop(cp);
    println!("stopped");
    Ok(())
}
