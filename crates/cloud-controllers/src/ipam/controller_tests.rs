//! The node IPAM controller as it runs, against a real kube-apiserver (`test-harness`), seen
//! through a label-selected informer so it only touches this test's nodes.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_provider::InstanceMetadata;
use controller_runtime::{ControllerIo, Informer, RuntimeMetrics};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use kube::runtime::watcher;
use test_harness::{ControlPlane, NodeBuilder, unique_name, wait_for, wait_for_event};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::ipam::allocator::node_pod_cidrs;
use crate::testing::{Fake, FakeCloud};

pub(super) const WAIT: Duration = Duration::from_secs(30);

/// Each test node's instance prefixes, by node name (what the provider reports).
pub(super) type Prefixes = Arc<Mutex<BTreeMap<String, Vec<IpNet>>>>;

pub(super) fn cloud(prefixes: &Prefixes) -> FakeCloud {
    let by_name = prefixes.clone();
    FakeCloud::from(Fake {
        enable_instances_v2: true,
        override_instance_metadata: Some(Box::new(move |node: &Node| {
            let name = node.metadata.name.clone().unwrap_or_default();
            Ok(Some(InstanceMetadata {
                provider_id: format!("fake://{name}"),
                node_prefixes: by_name.lock().unwrap().get(&name).cloned().unwrap_or_default(),
                ..Default::default()
            }))
        })),
        ..Fake::default()
    })
}

pub(super) struct Running {
    token: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    pub(super) async fn stop(self) {
        self.token.cancel();
        self.task.await.expect("the controller stops without a panic");
    }
}

pub(super) async fn start(client: &kube::Client, group: &str, cloud: FakeCloud, config: &NodeIpamConfig) -> Running {
    start_via(client, client, client, group, cloud, config).await
}

/// [`start`] with the informer's watch and the pod CIDR writes on clients of their own (e.g.
/// through a [`test_harness::TcpProxy`]); events and everything else use `client`.
pub(super) async fn start_via(
    client: &kube::Client,
    informer_client: &kube::Client,
    write_client: &kube::Client,
    group: &str,
    cloud: FakeCloud,
    config: &NodeIpamConfig,
) -> Running {
    let token = CancellationToken::new();
    let nodes: Api<Node> = Api::all(informer_client.clone());
    let mut informer = Informer::new(nodes, watcher::Config::default().labels(&format!("ipam-test={group}")));
    let io = ControllerIo {
        client: client.clone(),
        field_manager: "ipam-test".to_owned(),
        metrics: RuntimeMetrics::default(),
    };
    let mut controller =
        NodeIpamController::new(cloud.into(), &mut informer, io, config, token.clone()).expect("config");
    Arc::get_mut(&mut controller.reconciler).expect("not shared before it runs").api = Api::all(write_client.clone());
    tokio::spawn(informer.run(token.clone()));
    Running { token: token.clone(), task: tokio::spawn(controller.run()) }
}

pub(super) async fn register(client: &kube::Client, name: &str, group: &str, pod_cidrs: &[&str]) {
    let mut b = NodeBuilder::new(name).label("ipam-test", group);
    if !pod_cidrs.is_empty() {
        b = b.pod_cidrs(pod_cidrs.iter().copied());
    }
    b.register(client).await.expect("node registers");
}

pub(super) async fn pod_cidrs_of(nodes: &Api<Node>, name: &str) -> Vec<String> {
    let has = |n: Option<&Node>| n.is_some_and(|n| !node_pod_cidrs(n).is_empty());
    let node = wait_for(nodes, name, WAIT, "pod CIDRs on the node", has).await.expect("assigned");
    node.map(|n| node_pod_cidrs(&n).to_vec()).unwrap_or_default()
}

pub(super) fn net(s: &str) -> IpNet {
    s.parse().expect("cidr")
}

/// Dual-stack from the cloud allocator, end to end: IPv4 from the cluster CIDR first, IPv6
/// from each node's own prefix; a node without an IPv6 prefix gets a Warning and nothing; a
/// deleted node's IPv4 range goes to the next node; after a restart nothing held is handed
/// out again.
#[tokio::test]
async fn dual_stack_ranges_come_from_the_cluster_cidr_and_each_instance() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("ipam");
    let [a, b, c, d, no_v6] = ["a", "b", "c", "d", "no-v6"].map(|n| unique_name(&format!("ipam-{n}")));
    let prefixes: Prefixes = Default::default();
    for (name, prefix) in [(&a, "2001:db8:a::/64"), (&b, "2001:db8:b::/64"), (&c, "2001:db8:c::/64")] {
        prefixes.lock().unwrap().insert(name.clone(), vec![net("192.0.2.10/32"), net(prefix)]);
    }
    prefixes.lock().unwrap().insert(d.clone(), vec![net("2001:db8:d::/64")]);
    // Two IPv4 ranges only, so a third node needs a released one.
    let config = NodeIpamConfig {
        cluster_ranges: vec![ClusterRange { cidr: net("10.99.0.0/23"), node_mask: 24 }],
        node_prefix_ipv6_mask: Some(80),
        service_cidrs: vec![],
        workers: 2,
    };
    let fake = cloud(&prefixes);
    let running = start(&client, &group, fake.clone(), &config).await;
    register(&client, &a, &group, &[]).await;
    let got_a = pod_cidrs_of(&nodes, &a).await;
    register(&client, &b, &group, &[]).await;
    let got_b = pod_cidrs_of(&nodes, &b).await;
    assert_eq!(got_a, ["10.99.0.0/24", "2001:db8:a:0:1::/80"]);
    assert_eq!(got_b, ["10.99.1.0/24", "2001:db8:b:0:1::/80"]);

    register(&client, &no_v6, &group, &[]).await;
    let event = wait_for_event(&client, "Node", &no_v6, NO_IPV6_PREFIX, WAIT).await.expect("warning");
    assert!(
        event.message.contains(&format!("no IPv6 prefix of /80 or shorter for the instance of node {no_v6}")),
        "{event:?}"
    );
    let node = nodes.get(&no_v6).await.expect("node");
    assert!(node_pod_cidrs(&node).is_empty(), "no IPv4-only range either: {node:?}");

    // The cluster CIDR is full: c waits with a Warning, and gets a's range once a is gone.
    register(&client, &c, &group, &[]).await;
    let event = wait_for_event(&client, "Node", &c, CIDR_NOT_AVAILABLE, WAIT).await.expect("exhausted");
    assert!(event.message.contains("no remaining CIDRs in cluster CIDR 10.99.0.0/23"), "{event:?}");
    nodes.delete(&a, &DeleteParams::default()).await.expect("delete a");
    assert_eq!(pod_cidrs_of(&nodes, &c).await, ["10.99.0.0/24", "2001:db8:c:0:1::/80"]);

    // A restart rebuilds from the Nodes: with b and c holding both ranges, d waits.
    running.stop().await;
    let running = start(&client, &group, fake.clone(), &config).await;
    register(&client, &d, &group, &[]).await;
    wait_for_event(&client, "Node", &d, CIDR_NOT_AVAILABLE, WAIT).await.expect("nothing handed out twice");
    assert!(node_pod_cidrs(&nodes.get(&d).await.expect("d")).is_empty());
    running.stop().await;
    for n in [&a, &b, &c, &d, &no_v6] {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
}

/// Ranges set by someone else are left alone; one outside the cluster CIDR gets a Warning;
/// an IPv6 range that left its instance's prefix gets a Warning naming both.
#[tokio::test]
async fn ranges_set_elsewhere_are_left_alone_and_checked() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("ipam-foreign");
    let (outside, moved) = (unique_name("ipam-outside"), unique_name("ipam-moved"));
    let prefixes: Prefixes = Default::default();
    prefixes.lock().unwrap().insert(moved.clone(), vec![net("2001:db8:eee::/64")]);
    prefixes.lock().unwrap().insert(outside.clone(), vec![net("2001:db8:1::/64")]);
    register(&client, &outside, &group, &["10.1.0.0/24", "2001:db8:1:0:1::/80"]).await;
    register(&client, &moved, &group, &["10.98.0.0/24", "2001:db8:ddd:0:1::/80"]).await;
    let config = NodeIpamConfig {
        cluster_ranges: vec![ClusterRange { cidr: net("10.98.0.0/16"), node_mask: 24 }],
        node_prefix_ipv6_mask: Some(80),
        service_cidrs: vec![],
        workers: 1,
    };
    let running = start(&client, &group, cloud(&prefixes), &config).await;
    let event = wait_for_event(&client, "Node", &outside, POD_CIDR_NOT_MANAGED, WAIT).await.expect("warning");
    assert!(
        event.message.contains("\"10.1.0.0/24\"") && event.message.contains("outside cluster CIDR 10.98.0.0/16"),
        "{event:?}"
    );
    let event = wait_for_event(&client, "Node", &moved, PREFIX_CHANGED, WAIT).await.expect("warning");
    assert!(
        event.message.contains("2001:db8:ddd:0:1::/80") && event.message.contains("2001:db8:eee::/64"),
        "{event:?}"
    );
    running.stop().await;
    // Nothing was changed.
    assert_eq!(node_pod_cidrs(&nodes.get(&outside).await.unwrap()), ["10.1.0.0/24", "2001:db8:1:0:1::/80"]);
    for n in [&outside, &moved] {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
}

/// Only the changes the allocator reads enqueue a node: a status heartbeat does not.
#[test]
fn heartbeats_are_not_looked_at_but_what_the_allocator_reads_is() {
    use k8s_openapi::api::core::v1::{NodeAddress, NodeCondition, NodeSpec, NodeStatus};
    let mut old = Node::default();
    old.metadata.resource_version = Some("1".to_owned());
    old.spec = Some(NodeSpec::default());
    assert!(needs_a_look(None, &old), "a new node");
    assert!(needs_a_look(Some(&old), &old), "a resync");
    let mut heartbeat = old.clone();
    heartbeat.metadata.resource_version = Some("2".to_owned());
    heartbeat.status = Some(NodeStatus { conditions: Some(vec![NodeCondition::default()]), ..Default::default() });
    assert!(!needs_a_look(Some(&old), &heartbeat));
    let mut cidrs = heartbeat.clone();
    cidrs.spec.as_mut().unwrap().pod_cidrs = Some(vec!["10.0.0.0/24".to_owned()]);
    assert!(needs_a_look(Some(&heartbeat), &cidrs));
    let mut pid = heartbeat.clone();
    pid.spec.as_mut().unwrap().provider_id = Some("fake://1".to_owned());
    assert!(needs_a_look(Some(&heartbeat), &pid));
    let mut addressed = heartbeat.clone();
    addressed.status.as_mut().unwrap().addresses = Some(vec![NodeAddress::default()]);
    assert!(needs_a_look(Some(&heartbeat), &addressed));
    let mut recreated = heartbeat.clone();
    recreated.metadata.uid = Some("other".to_owned());
    assert!(needs_a_look(Some(&heartbeat), &recreated));
}
