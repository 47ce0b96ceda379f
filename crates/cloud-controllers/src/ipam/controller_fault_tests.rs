//! The node IPAM controller against a real kube-apiserver when things go wrong: a failed
//! lookup of the prefix check.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cloud_provider::{CloudError, InstanceMetadata};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use test_harness::{ControlPlane, unique_name, wait_for_event};

use super::controller_tests::{WAIT, net, register, start};
use super::*;
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
