//! The churn: Nodes joining and leaving like kubelets and servers do, Services created,
//! changed and deleted. Every operation updates the expected state before it acts, so the
//! monitor never mistakes the churn's own deletions for the CCM's.

use std::collections::BTreeMap;

use hcloud_fake::FakeHandle;
use hcloud_fake::control::SeedServer;
use k8s_openapi::api::core::v1::{Node, Service, ServicePort};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use test_harness::{NodeBuilder, Ready, load_balancer_service, set_ready};

use super::Shared;
use super::world::{ANN_ALGORITHM, ANN_HC_INTERVAL, LiveNode, LiveService};

const PORTS: [i32; 4] = [80, 443, 8080, 8443];
const ALGORITHMS: [Option<&str>; 3] = [None, Some("round_robin"), Some("least_connections")];
const INTERVALS: [Option<u64>; 4] = [None, Some(5), Some(10), Some(30)];

pub struct Churn {
    nodes: Api<Node>,
    svcs: Api<Service>,
    client: Client,
    h: FakeHandle,
    net: u64,
    world: Shared,
    rng: fastrand::Rng,
    next_node: usize,
    next_service: usize,
    target_nodes: usize,
    target_services: usize,
}

/// Node `seq`'s pod CIDR: a /24 of 10.240.0.0/12.
fn pod_cidr(seq: usize) -> String {
    format!("10.{}.{}.0/24", 240 + seq / 256, seq % 256)
}

fn spec_ports(ports: &[i32]) -> Vec<ServicePort> {
    load_balancer_service("", &[], ports).spec.and_then(|s| s.ports).unwrap_or_default()
}

/// Weight of growing (shrinking) towards `target`.
fn weight(len: usize, target: usize, grow: bool) -> u32 {
    let (low, high) = (target * 7 / 10, target * 13 / 10);
    match (grow, len) {
        (true, l) if l < low => 4,
        (true, l) if l >= high => 0,
        (false, l) if l <= low.max(1) => 0,
        (false, l) if l > high => 4,
        _ => 1,
    }
}

impl Churn {
    pub fn new(
        client: Client,
        h: FakeHandle,
        net: u64,
        world: Shared,
        seed: u64,
        target_nodes: usize,
        target_services: usize,
    ) -> Churn {
        Churn {
            nodes: Api::all(client.clone()),
            svcs: Api::namespaced(client.clone(), "default"),
            client,
            h,
            net,
            world,
            rng: fastrand::Rng::with_seed(seed),
            next_node: 0,
            next_service: 0,
            target_nodes,
            target_services,
        }
    }

    /// One operation, chosen at random, weighted towards the target sizes.
    pub async fn step(&mut self) {
        let (n, s) = {
            let w = self.world.lock().unwrap();
            (w.nodes.len(), w.services.len())
        };
        let grow_n = weight(n, self.target_nodes, true);
        let shrink_n = weight(n, self.target_nodes, false);
        let grow_s = weight(s, self.target_services, true);
        let shrink_s = weight(s, self.target_services, false);
        let change = u32::from(s > 0) * 2;
        let choices = [grow_n * 2, shrink_n, shrink_n, grow_s * 2, change, change, shrink_s * 2];
        let total: u32 = choices.iter().sum();
        let mut pick = self.rng.u32(0..total.max(1));
        let mut op = 0;
        for (i, c) in choices.iter().enumerate() {
            if pick < *c {
                op = i;
                break;
            }
            pick -= c;
        }
        match op {
            0 => self.join_node().await,
            1 => self.node_server_gone().await,
            2 => self.drain_node().await,
            3 => self.create_service().await,
            4 => self.change_ports().await,
            5 => self.change_annotations().await,
            _ => self.delete_service().await,
        }
    }

    fn pick<T: Clone>(&mut self, map: &BTreeMap<String, T>) -> Option<(String, T)> {
        if map.is_empty() {
            return None;
        }
        let i = self.rng.usize(0..map.len());
        map.iter().nth(i).map(|(k, v)| (k.clone(), v.clone()))
    }

    /// A server is created in the network, then its kubelet registers the Node.
    pub async fn join_node(&mut self) {
        let seq = self.next_node;
        self.next_node += 1;
        let name = format!("node-{seq:04}");
        let server = self.h.seed_server(&SeedServer::new(&name).network(self.net)).expect("seed server");
        let cidr = pod_cidr(seq);
        {
            let mut w = self.world.lock().unwrap();
            w.nodes.insert(name.clone(), LiveNode { server, pod_cidr: cidr.clone() });
            w.count("node joined");
        }
        NodeBuilder::new(&name)
            .kubelet_hostname_address(true)
            .pod_cidrs([cidr])
            .ready(Ready::True)
            .register(&self.client)
            .await
            .expect("register node");
    }

    /// The server is deleted; its kubelet stops posting status (`Ready=Unknown`): the CCM must
    /// delete the Node.
    async fn node_server_gone(&mut self) {
        let nodes = self.world.lock().unwrap().nodes.clone();
        let Some((name, node)) = self.pick(&nodes) else { return };
        {
            let mut w = self.world.lock().unwrap();
            w.nodes.remove(&name);
            w.nodes_server_gone.insert(name.clone(), node.server);
            w.count("node left (server deleted)");
        }
        self.h.delete_server(node.server).expect("delete server");
        if let Err(e) = set_ready(&self.client, &name, Ready::Unknown).await {
            // The CCM may have deleted it already.
            println!("  (Ready=Unknown on {name}: {e})");
        }
    }

    /// The Node is deleted (a drain), then its server.
    async fn drain_node(&mut self) {
        let nodes = self.world.lock().unwrap().nodes.clone();
        let Some((name, node)) = self.pick(&nodes) else { return };
        {
            let mut w = self.world.lock().unwrap();
            w.nodes.remove(&name);
            w.nodes_drained.insert(name.clone());
            w.count("node drained and deleted");
        }
        self.nodes.delete(&name, &DeleteParams::default()).await.expect("delete node");
        self.h.delete_server(node.server).expect("delete server");
    }

    fn random_ports(&mut self) -> Vec<i32> {
        let mut ports: Vec<i32> = PORTS.iter().copied().filter(|_| self.rng.bool()).collect();
        if ports.is_empty() {
            ports.push(PORTS[self.rng.usize(0..PORTS.len())]);
        }
        ports
    }

    pub async fn create_service(&mut self) {
        let seq = self.next_service;
        self.next_service += 1;
        let name = format!("svc-{seq:04}");
        let ports = self.random_ports();
        let algorithm = ALGORITHMS[self.rng.usize(0..ALGORITHMS.len())];
        let interval = INTERVALS[self.rng.usize(0..INTERVALS.len())];
        let interval_s = interval.map(|i| format!("{i}s"));
        let mut ann: Vec<(&str, &str)> = Vec::new();
        if let Some(a) = algorithm {
            ann.push((ANN_ALGORITHM, a));
        }
        if let Some(i) = &interval_s {
            ann.push((ANN_HC_INTERVAL, i));
        }
        let svc = load_balancer_service(&name, &ann, &ports);
        let created = self.svcs.create(&PostParams::default(), &svc).await.expect("create service");
        let uid = created.metadata.uid.expect("uid");
        let mut w = self.world.lock().unwrap();
        w.services
            .insert(name, LiveService { uid, ports, algorithm: algorithm.map(str::to_owned), hc_interval: interval });
        w.count("service created");
    }

    async fn change_ports(&mut self) {
        let services = self.world.lock().unwrap().services.clone();
        let Some((name, live)) = self.pick(&services) else { return };
        let mut ports = self.random_ports();
        if ports == live.ports {
            ports = if ports.len() > 1 {
                ports[..1].to_vec()
            } else {
                PORTS.iter().copied().filter(|p| !ports.contains(p)).take(2).collect()
            };
        }
        // Replace the whole list (a merge patch replaces lists); node ports of kept ports are
        // kept by the API server only if given, so carry them over.
        let current = self.svcs.get(&name).await.expect("get service");
        let old = current.spec.and_then(|s| s.ports).unwrap_or_default();
        let new: Vec<ServicePort> = spec_ports(&ports)
            .into_iter()
            .map(|mut p| {
                p.node_port = old.iter().find(|o| o.port == p.port).and_then(|o| o.node_port);
                p
            })
            .collect();
        let patch = serde_json::json!({"spec": {"ports": new}});
        self.svcs.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch ports");
        let mut w = self.world.lock().unwrap();
        if let Some(s) = w.services.get_mut(&name) {
            s.ports = ports;
        }
        w.count("service ports changed");
    }

    async fn change_annotations(&mut self) {
        let services = self.world.lock().unwrap().services.clone();
        let Some((name, _)) = self.pick(&services) else { return };
        let algorithm = ALGORITHMS[self.rng.usize(0..ALGORITHMS.len())];
        let interval = INTERVALS[self.rng.usize(0..INTERVALS.len())];
        let patch = serde_json::json!({"metadata": {"annotations": {
            ANN_ALGORITHM: algorithm,
            ANN_HC_INTERVAL: interval.map(|i| format!("{i}s")),
        }}});
        self.svcs.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch annotations");
        let mut w = self.world.lock().unwrap();
        if let Some(s) = w.services.get_mut(&name) {
            s.algorithm = algorithm.map(str::to_owned);
            s.hc_interval = interval;
        }
        w.count("service annotations changed");
    }

    async fn delete_service(&mut self) {
        let services = self.world.lock().unwrap().services.clone();
        let Some((name, live)) = self.pick(&services) else { return };
        {
            let mut w = self.world.lock().unwrap();
            w.services.remove(&name);
            w.deleted_uids.insert(live.uid.clone());
            w.count("service deleted");
        }
        self.svcs.delete(&name, &DeleteParams::default()).await.expect("delete service");
    }
}
