//! The node IPAM controller against a real kube-apiserver when things go wrong: ranges that
//! overlap, a write whose answer is lost, a failed lookup of the prefix check.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cloud_provider::{CloudError, InstanceMetadata};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use test_harness::{ControlPlane, events_for, unique_name, wait_for_event, wait_until};

use super::controller_tests::{Prefixes, WAIT, net, pod_cidrs_of, register, start, start_via};
use super::*;
use crate::ipam::allocator::node_pod_cidrs;
use crate::testing::{Fake, FakeCloud};

/// A cloud whose instance metadata `answer` gives, by node name.
fn cloud_with(answer: impl Fn(&str) -> Result<Vec<IpNet>, CloudError> + Send + Sync + 'static) -> FakeCloud {
    FakeCloud::from(Fake {
        enable_instances_v2: true,
        override_instance_metadata: Some(Box::new(move |node: &Node| {
            let name = node.metadata.name.clone().unwrap_or_default();
            let node_prefixes = answer(&name)?;
            Ok(Some(InstanceMetadata { provider_id: format!("fake://{name}"), node_prefixes, ..Default::default() }))
        })),
        ..Fake::default()
    })
}

/// Ranges set elsewhere that overlap (two Nodes, one with a range of an older, shorter mask)
/// or lie over the service range get a Warning naming the other Node or the service range;
/// when one of two Nodes sharing a range is gone, the range stays taken.
#[tokio::test]
async fn overlapping_ranges_are_reported_and_stay_taken() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("ipam-overlap");
    let [x, y, s, w, v] = ["x", "y", "s", "w", "v"].map(|n| unique_name(&format!("ipam-overlap-{n}")));
    register(&client, &x, &group, &["10.92.0.0/24"]).await;
    register(&client, &y, &group, &["10.92.0.0/23"]).await;
    register(&client, &s, &group, &["10.92.3.0/24"]).await;
    // Four /24 ranges; the last is the service range.
    let config = NodeIpamConfig {
        cluster_ranges: vec![ClusterRange { cidr: net("10.92.0.0/22"), node_mask: 24 }],
        node_prefix_ipv6_mask: None,
        service_cidrs: vec![net("10.92.3.0/24")],
        workers: 1,
    };
    let running = start(&client, &group, cloud_with(|_| Ok(vec![])), &config).await;
    let event = wait_for_event(&client, "Node", &x, "PodCIDROverlap", WAIT).await.expect("warning on x");
    assert!(event.message.contains(&y) && event.message.contains("10.92.0.0/23"), "{event:?}");
    let event = wait_for_event(&client, "Node", &y, "PodCIDROverlap", WAIT).await.expect("warning on y");
    assert!(event.message.contains(&x) && event.message.contains("10.92.0.0/24"), "{event:?}");
    let event = wait_for_event(&client, "Node", &s, "PodCIDROverlap", WAIT).await.expect("warning on s");
    assert!(event.message.contains("service range 10.92.3.0/24"), "{event:?}");
    // x is gone; y still holds 10.92.0.0/23, so the next node gets the one free range.
    nodes.delete(&x, &DeleteParams::default()).await.expect("delete x");
    wait_until(WAIT, "x is gone", async || nodes.get_opt(&x).await.is_ok_and(|n| n.is_none())).await.expect("gone");
    register(&client, &w, &group, &[]).await;
    assert_eq!(pod_cidrs_of(&nodes, &w).await, ["10.92.2.0/24"]);
    register(&client, &v, &group, &[]).await;
    let event = wait_for_event(&client, "Node", &v, CIDR_NOT_AVAILABLE, WAIT).await.expect("nothing left");
    assert!(event.message.contains("10.92.0.0/22"), "{event:?}");
    assert!(node_pod_cidrs(&nodes.get(&v).await.expect("v")).is_empty());
    running.stop().await;
    for n in [&x, &y, &s, &w, &v] {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
}

/// The answer to a node's pod CIDR write is lost after the API server stored it (the
/// connection ends when the answer comes), while the controller's watch lags behind: the
/// range stays the node's, so a node waiting for one does not get it, and once the node is
/// gone the range is free again.
#[tokio::test]
async fn a_lost_answer_keeps_the_range_for_the_node() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("ipam-lost");
    let (a, b) = (unique_name("ipam-lost-a"), unique_name("ipam-lost-b"));
    let informer_proxy = Arc::new(cp.apiserver_proxy().expect("proxy"));
    let write_proxy = Arc::new(cp.apiserver_proxy().expect("proxy"));
    let informer_client = cp.client_via(cp.admin_kubeconfig(), &informer_proxy).await.expect("client");
    let write_client = cp.client_via(cp.admin_kubeconfig(), &write_proxy).await.expect("client");
    let prefixes: Prefixes = Default::default();
    prefixes.lock().unwrap().insert(a.clone(), vec![net("2001:db8:a1::/64")]);
    // a's first lookup comes right before its write: from then on the watch stalls (the write
    // is not seen), the write's answer is lost, and b's server has a prefix. a's later lookups
    // fail, so only what the controller keeps for a holds its range.
    let lookups_of_a = Arc::new(AtomicUsize::new(0));
    let cloud = {
        let (a, b, prefixes) = (a.clone(), b.clone(), prefixes.clone());
        let (informer_proxy, write_proxy) = (informer_proxy.clone(), write_proxy.clone());
        cloud_with(move |name| {
            if name == a && lookups_of_a.fetch_add(1, Ordering::SeqCst) == 0 {
                informer_proxy.blackhole();
                write_proxy.lose_answers();
                prefixes.lock().unwrap().insert(b.clone(), vec![net("2001:db8:b1::/64")]);
            } else if name == a {
                return Err(CloudError::transient("InstanceLookupFailed", "the cloud API does not answer", None));
            }
            Ok(prefixes.lock().unwrap().get(name).cloned().unwrap_or_default())
        })
    };
    // One IPv4 range only.
    let config = NodeIpamConfig {
        cluster_ranges: vec![ClusterRange { cidr: net("10.93.0.0/24"), node_mask: 24 }],
        node_prefix_ipv6_mask: Some(80),
        service_cidrs: vec![],
        workers: 2,
    };
    let running = start_via(&client, &informer_client, &write_client, &group, cloud, &config).await;
    register(&client, &b, &group, &[]).await;
    wait_for_event(&client, "Node", &b, NO_IPV6_PREFIX, WAIT).await.expect("b waits for a prefix");
    // A live connection for the write to go out on (a new one would end in its handshake).
    Api::<Node>::all(write_client.clone()).get(&b).await.expect("the write client's connection");
    register(&client, &a, &group, &[]).await;
    let got_a = pod_cidrs_of(&nodes, &a).await;
    assert_eq!(got_a, ["10.93.0.0/24", "2001:db8:a1:0:1::/80"], "the API server stored a's write");
    let event = wait_for_event(&client, "Node", &a, CIDR_ASSIGNMENT_FAILED, WAIT).await.expect("the answer was lost");
    assert!(event.message.contains("10.93.0.0/24"), "{event:?}");
    assert!(event.message.contains("(attempts: 3)"), "upstream's cidrUpdateRetries: {event:?}");
    assert!(event.message.contains("the ranges stay the node's and the same write is sent again"), "{event:?}");
    write_proxy.restore();
    // b now has a prefix and writes go through: it must not get a's range.
    let b_decided = wait_until(WAIT, "b gets pod CIDRs or CIDRNotAvailable", async || {
        let has = nodes.get(&b).await.is_ok_and(|n| !node_pod_cidrs(&n).is_empty());
        has || events_for(&client, "Node", &b).await.is_ok_and(|e| e.iter().any(|e| e.reason == CIDR_NOT_AVAILABLE))
    })
    .await;
    b_decided.expect("b is decided");
    let got_b = node_pod_cidrs(&nodes.get(&b).await.expect("b")).to_vec();
    assert!(got_b.is_empty(), "b got {got_b:?} while a holds {got_a:?}");
    // The watch catches up; a is gone: its range is b's.
    informer_proxy.restore();
    nodes.delete(&a, &DeleteParams::default()).await.expect("delete a");
    assert_eq!(pod_cidrs_of(&nodes, &b).await, ["10.93.0.0/24", "2001:db8:b1:0:1::/80"]);
    running.stop().await;
    for n in [&a, &b] {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
}

/// The prefix check's lookup fails twice (the cloud API does not answer): it is retried with
/// backoff and the range that left its prefix is reported, not left until the next resync.
#[tokio::test]
async fn a_failed_prefix_check_is_retried() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("ipam-check");
    let moved = unique_name("ipam-check-moved");
    register(&client, &moved, &group, &["2001:db8:ddd:0:1::/80"]).await;
    let failures = Arc::new(AtomicUsize::new(0));
    let cloud = cloud_with(move |_| {
        if failures.fetch_add(1, Ordering::SeqCst) < 2 {
            return Err(CloudError::transient("InstanceLookupFailed", "the cloud API does not answer", None));
        }
        Ok(vec![net("2001:db8:eee::/64")])
    });
    let config =
        NodeIpamConfig { cluster_ranges: vec![], node_prefix_ipv6_mask: Some(80), service_cidrs: vec![], workers: 1 };
    let running = start(&client, &group, cloud, &config).await;
    let event = wait_for_event(&client, "Node", &moved, PREFIX_CHANGED, WAIT).await.expect("reported");
    assert!(event.message.contains("2001:db8:ddd:0:1::/80"), "{event:?}");
    let event = wait_for_event(&client, "Node", &moved, "InstanceLookupFailed", WAIT).await.expect("failure shown");
    assert!(
        event.message.contains("could not check that pod CIDR 2001:db8:ddd:0:1::/80 of node")
            && event.message.contains("the cloud API does not answer"),
        "{event:?}"
    );
    running.stop().await;
    let _ = nodes.delete(&moved, &DeleteParams::default()).await;
}
