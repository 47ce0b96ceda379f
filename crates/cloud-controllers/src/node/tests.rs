//! Ports of upstream's `controllers/node/node_controller_test.go` (k8s.io/cloud-provider).
//!
//! Upstream runs `syncNode` against a fake clientset and reads the node back. Our controller
//! splits that into the pure `plan_sync` and the API writes, so the node upstream reads back
//! is, in our terms ([`sync_node_outcome`]), the node after the exact patches the controller
//! sends are applied as the API server applies them (JSON merge patch):
//! `ReconcileLabels(l)` ⇒ `labels_patch(l)`; `Skip` ⇒ unchanged;
//! `Initialize { plan, .. }` ⇒ `plan.status_patch()` then `plan.spec_patch(rv)`; an error ⇒
//! unchanged.
//!
//! `TestNodeAddressesChangeDetected` and the address/taint helper tests are ported in
//! `cloud-provider`.

use std::sync::Arc;

use cloud_provider::AddressType::{ExternalIp, Hostname, InternalIp};
use cloud_provider::well_known::{
    LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_REGION, LABEL_REGION_BETA, LABEL_ZONE, LABEL_ZONE_BETA,
};
use cloud_provider::{Cloud, InstanceMetadata, NodeAddress, Zone};
use k8s_openapi::api::core::v1::Node;
use pretty_assertions::assert_eq;

use super::metadata::{MetadataError, get_instance_metadata, get_instance_node_addresses};
use super::plan::{labels_patch, plan_label_reconcile};
use super::{SyncPlan, plan_status_updates, plan_sync};
use crate::testing::{Fake, FakeCloud, FakeError, PROVIDED_IP, addr, assert_node_eq, map, node as node_named};
use controller_runtime::merge_patch::apply_merge_patch_to;

/// A `node0` created 2012-01-01, as in every upstream table.
fn node0() -> crate::testing::NodeBuilder {
    node_named("node0").created_2012()
}

/// `[Hostname node0.cloud.internal, InternalIP 10.0.0.1, ExternalIP 132.143.154.163]`.
fn cloud_addresses() -> Vec<NodeAddress> {
    vec![addr(Hostname, "node0.cloud.internal"), addr(InternalIp, "10.0.0.1"), addr(ExternalIp, "132.143.154.163")]
}

/// `[InternalIP 10.0.0.1, ExternalIP 132.143.154.163]` (no hostname).
fn cloud_addresses_without_hostname() -> Vec<NodeAddress> {
    vec![addr(InternalIp, "10.0.0.1"), addr(ExternalIp, "132.143.154.163")]
}

fn zone_us_west() -> Zone {
    Zone { failure_domain: "us-west-1a".to_owned(), region: "us-west".to_owned() }
}

/// The node upstream's `syncNode` leaves behind (see the module docs), and whether it failed.
async fn sync_node_outcome<C: Cloud>(cloud: &C, node: &Node) -> (Node, Result<(), String>) {
    match plan_sync(cloud, node).await {
        Ok(SyncPlan::ReconcileLabels(labels)) => {
            let n = if labels.is_empty() { node.clone() } else { patched(node, &labels_patch(&labels)) };
            (n, Ok(()))
        }
        Ok(SyncPlan::Skip) => (node.clone(), Ok(())),
        Ok(SyncPlan::Initialize { plan, .. }) => {
            let mut n = node.clone();
            if let Some(status) = plan.status_patch() {
                n = patched(&n, &status);
            }
            let spec = plan.spec_patch(n.metadata.resource_version.as_deref());
            (patched(&n, &spec), Ok(()))
        }
        Err(e) => (node.clone(), Err(e.to_string())),
    }
}

fn patched(node: &Node, patch: &serde_json::Value) -> Node {
    apply_merge_patch_to(node, patch).expect("patch applies to a node")
}

struct SyncCase {
    name: &'static str,
    cloud: Fake,
    existing: Node,
    updated: Node,
    expected_err: bool,
}

/// Go `Test_syncNode`.
#[tokio::test]
async fn test_sync_node() {
    let cases = vec![
        SyncCase {
            name: "node initialized with hostname",
            cloud: Fake {
                instance_types: map([("node0", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().cloud_taint().address(Hostname, "nodeoverriden").build(),
            updated: node0()
                .provider_id("fake://12345")
                .address(Hostname, "node0.cloud.internal")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "node initialized with hostname and cloud provider missing hostname",
            cloud: Fake {
                instance_types: map([("node0", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                addresses: cloud_addresses_without_hostname(),
                ..Fake::default()
            },
            existing: node0().cloud_taint().address(Hostname, "nodeoverriden").build(),
            updated: node0()
                .provider_id("fake://12345")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .address(Hostname, "nodeoverriden")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "node initialized with provider ID",
            cloud: Fake {
                instance_types: map([("node0", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().cloud_taint().build(),
            updated: node0()
                .provider_id("fake://12345")
                .address(Hostname, "node0.cloud.internal")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "node ignored",
            cloud: Fake {
                instance_types: map([("node0", "t1.micro"), ("fake://12345", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().build(),
            updated: node0().build(),
            expected_err: false,
        },
        SyncCase {
            name: "zone/region topology labels added",
            cloud: Fake {
                instance_types: map([("node0", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                addresses: cloud_addresses(),
                provider: "aws".to_owned(),
                zone: zone_us_west(),
                ..Fake::default()
            },
            existing: node0().labels([]).ready("Unknown").cloud_taint().build(),
            updated: node0()
                .labels([
                    ("failure-domain.beta.kubernetes.io/region", "us-west"),
                    ("failure-domain.beta.kubernetes.io/zone", "us-west-1a"),
                    ("topology.kubernetes.io/region", "us-west"),
                    ("topology.kubernetes.io/zone", "us-west-1a"),
                ])
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .provider_id("aws://12345")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "node addresses",
            cloud: Fake {
                ext_id: map([("node0", "12345")]),
                addresses: cloud_addresses(),
                exists_by_provider_id: true,
                ..Fake::default()
            },
            existing: node0().labels([]).coverage_taint().cloud_taint().ready("Unknown").build(),
            updated: node0()
                .provider_id("fake://12345")
                .coverage_taint()
                .address(Hostname, "node0.cloud.internal")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .ready("Unknown")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "nil instanceMetadata provided by InstanceV2",
            cloud: Fake {
                enable_instances_v2: true,
                override_instance_metadata: Some(Box::new(|_| Ok(None))),
                ..Fake::default()
            },
            existing: node0()
                .annotation(PROVIDED_IP, "10.0.0.1")
                .coverage_taint()
                .cloud_taint()
                .provider_id("node0.aws.12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            updated: node0()
                .annotation(PROVIDED_IP, "10.0.0.1")
                .coverage_taint()
                .cloud_taint()
                .provider_id("node0.aws.12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "provided node IP address",
            cloud: Fake {
                addresses: cloud_addresses_without_hostname(),
                exists_by_provider_id: true,
                ..Fake::default()
            },
            existing: node0()
                .annotation(PROVIDED_IP, "10.0.0.1")
                .coverage_taint()
                .cloud_taint()
                .provider_id("node0.aws.12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            updated: node0()
                .annotation(PROVIDED_IP, "10.0.0.1")
                .coverage_taint()
                .provider_id("node0.aws.12345")
                .ready("Unknown")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "provided node IP address is not valid",
            cloud: Fake {
                addresses: cloud_addresses_without_hostname(),
                exists_by_provider_id: true,
                ..Fake::default()
            },
            existing: node0()
                .annotation(PROVIDED_IP, "invalid-ip")
                .coverage_taint()
                .cloud_taint()
                .provider_id("node0.aws.12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            updated: node0()
                .annotation(PROVIDED_IP, "invalid-ip")
                .coverage_taint()
                .cloud_taint()
                .provider_id("node0.aws.12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            expected_err: true,
        },
        SyncCase {
            name: "provided node IP address is not present",
            cloud: Fake {
                addresses: cloud_addresses_without_hostname(),
                exists_by_provider_id: true,
                ..Fake::default()
            },
            existing: node0()
                .annotation(PROVIDED_IP, "10.0.0.2")
                .coverage_taint()
                .cloud_taint()
                .provider_id("node0.aws.12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            updated: node0()
                .annotation(PROVIDED_IP, "10.0.0.2")
                .coverage_taint()
                .cloud_taint()
                .provider_id("node0.aws.12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            expected_err: true,
        },
        SyncCase {
            name: "provider ID already set",
            cloud: Fake { addresses: cloud_addresses(), exists_by_provider_id: false, ..Fake::default() },
            existing: node0()
                .labels([])
                .ready("Unknown")
                .provider_id("test-provider-id")
                .coverage_taint()
                .cloud_taint()
                .build(),
            updated: node0()
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .provider_id("test-provider-id")
                .coverage_taint()
                .build(),
            expected_err: false,
        },
        // For backward compatibility, cloud providers that do not implement provider IDs do
        // not block the node initialization.
        SyncCase {
            name: "provider ID not implemented",
            cloud: Fake {
                provider: "test".to_owned(),
                ext_id_err: [("node0".to_owned(), FakeError::NotImplemented)].into(),
                ..Fake::default()
            },
            existing: node0().ready("Unknown").cloud_taint().build(),
            updated: node0().ready("Unknown").no_taints().build(),
            expected_err: false,
        },
        SyncCase {
            name: "[instanceV2] node initialized with provider ID",
            cloud: Fake {
                enable_instances_v2: true,
                instance_types: map([("node0", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().cloud_taint().provider_id("fake://12345").build(),
            updated: node0()
                .provider_id("fake://12345")
                .address(Hostname, "node0.cloud.internal")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "[instanceV2] node ignored",
            cloud: Fake {
                enable_instances_v2: true,
                instance_types: map([("node0", "t1.micro"), ("fake://12345", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().build(),
            updated: node0().build(),
            expected_err: false,
        },
        SyncCase {
            name: "[instanceV2] zone/region topology labels added",
            cloud: Fake {
                enable_instances_v2: true,
                instance_types: map([("node0", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                provider_id: map([("node0", "fake://12345")]),
                addresses: cloud_addresses(),
                provider: "aws".to_owned(),
                zone: zone_us_west(),
                ..Fake::default()
            },
            existing: node0().labels([]).ready("Unknown").cloud_taint().build(),
            updated: node0()
                .labels([
                    ("failure-domain.beta.kubernetes.io/region", "us-west"),
                    ("failure-domain.beta.kubernetes.io/zone", "us-west-1a"),
                    ("topology.kubernetes.io/region", "us-west"),
                    ("topology.kubernetes.io/zone", "us-west-1a"),
                ])
                .provider_id("fake://12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "[instanceV2] node addresses",
            cloud: Fake {
                enable_instances_v2: true,
                ext_id: map([("node0", "12345")]),
                provider_id: map([("node0", "fake://12345")]),
                addresses: cloud_addresses(),
                exists_by_provider_id: true,
                ..Fake::default()
            },
            existing: node0().labels([]).coverage_taint().cloud_taint().ready("Unknown").build(),
            updated: node0()
                .coverage_taint()
                .provider_id("fake://12345")
                .address(Hostname, "node0.cloud.internal")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .ready("Unknown")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "[instanceV2] provided node IP address",
            cloud: Fake {
                enable_instances_v2: true,
                addresses: cloud_addresses_without_hostname(),
                exists_by_provider_id: true,
                ..Fake::default()
            },
            existing: node0()
                .annotation(PROVIDED_IP, "10.0.0.1")
                .coverage_taint()
                .cloud_taint()
                .provider_id("node0.aws.12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            updated: node0()
                .annotation(PROVIDED_IP, "10.0.0.1")
                .coverage_taint()
                .provider_id("node0.aws.12345")
                .ready("Unknown")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "[instanceV2] provided additional labels",
            cloud: Fake {
                enable_instances_v2: true,
                addresses: cloud_addresses_without_hostname(),
                exists_by_provider_id: true,
                zone: zone_us_west(),
                additional_labels: map([("topology.k8s.cp/zone-id", "az1"), ("my.custom.label/foo", "bar")]),
                ..Fake::default()
            },
            existing: node0()
                .annotation(PROVIDED_IP, "10.0.0.1")
                .coverage_taint()
                .cloud_taint()
                .provider_id("node0.cp.12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            updated: node0()
                .annotation(PROVIDED_IP, "10.0.0.1")
                .labels([
                    ("failure-domain.beta.kubernetes.io/region", "us-west"),
                    ("failure-domain.beta.kubernetes.io/zone", "us-west-1a"),
                    ("topology.kubernetes.io/region", "us-west"),
                    ("topology.kubernetes.io/zone", "us-west-1a"),
                    ("topology.k8s.cp/zone-id", "az1"),
                    ("my.custom.label/foo", "bar"),
                ])
                .coverage_taint()
                .provider_id("node0.cp.12345")
                .ready("Unknown")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "[instanceV2] provided additional labels with labels to discard",
            cloud: Fake {
                enable_instances_v2: true,
                addresses: cloud_addresses_without_hostname(),
                exists_by_provider_id: true,
                zone: zone_us_west(),
                additional_labels: map([
                    // Kubernetes reserves the k8s.io and kubernetes.io namespaces: discarded.
                    ("topology.kubernetes.io/region", "us-other-west"),
                    ("topology.k8s.io/region", "us-other-west"),
                    ("kubernetes.io/region", "us-other-west"),
                    ("k8s.io/region", "us-other-west"),
                    // Labels that already exist are discarded.
                    ("my.custom.label/foo", "bar"),
                    ("my.custom.label/bar", "foo"),
                    // Labels that do not match the regex are added.
                    ("app.k8snio/bar", "foo"),
                    ("k8snio/bar", "foo"),
                ]),
                ..Fake::default()
            },
            existing: node0()
                .annotation(PROVIDED_IP, "10.0.0.1")
                .labels([("my.custom.label/foo", "fizz"), ("my.custom.label/bar", "foo")])
                .coverage_taint()
                .cloud_taint()
                .provider_id("node0.cp.12345")
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            updated: node0()
                .annotation(PROVIDED_IP, "10.0.0.1")
                .labels([
                    ("failure-domain.beta.kubernetes.io/region", "us-west"),
                    ("failure-domain.beta.kubernetes.io/zone", "us-west-1a"),
                    ("topology.kubernetes.io/region", "us-west"),
                    ("topology.kubernetes.io/zone", "us-west-1a"),
                    ("my.custom.label/foo", "fizz"),
                    ("my.custom.label/bar", "foo"),
                    ("app.k8snio/bar", "foo"),
                    ("k8snio/bar", "foo"),
                ])
                .coverage_taint()
                .provider_id("node0.cp.12345")
                .ready("Unknown")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .address(Hostname, "node0.cloud.internal")
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "[instanceV2] provider ID already set",
            cloud: Fake {
                enable_instances_v2: true,
                addresses: cloud_addresses(),
                exists_by_provider_id: false,
                ..Fake::default()
            },
            existing: node0()
                .labels([])
                .ready("Unknown")
                .provider_id("test-provider-id")
                .coverage_taint()
                .cloud_taint()
                .build(),
            updated: node0()
                .ready("Unknown")
                .address(Hostname, "node0.cloud.internal")
                .address(InternalIp, "10.0.0.1")
                .address(ExternalIp, "132.143.154.163")
                .provider_id("test-provider-id")
                .coverage_taint()
                .build(),
            expected_err: false,
        },
        SyncCase {
            name: "[instanceV2] provider ID not implemented",
            cloud: Fake {
                enable_instances_v2: true,
                provider: "test".to_owned(),
                ext_id_err: [("node0".to_owned(), FakeError::NotImplemented)].into(),
                ..Fake::default()
            },
            existing: node0().ready("Unknown").cloud_taint().build(),
            updated: node0().ready("Unknown").cloud_taint().build(),
            expected_err: true,
        },
        SyncCase {
            name: "[instanceV2] error getting InstanceMetadata",
            cloud: Fake {
                enable_instances_v2: true,
                provider: "test".to_owned(),
                ext_id_err: [("node0".to_owned(), FakeError::NotImplemented)].into(),
                metadata_err: Some(FakeError::Msg("metadata error")),
                ..Fake::default()
            },
            existing: node0().ready("Unknown").cloud_taint().build(),
            updated: node0().ready("Unknown").cloud_taint().build(),
            expected_err: true,
        },
    ];
    assert_eq!(cases.len(), 22, "upstream Test_syncNode has 22 cases");

    for case in cases {
        let cloud = FakeCloud::from(case.cloud);
        let (updated, result) = sync_node_outcome(&cloud, &case.existing).await;
        assert_eq!(result.is_err(), case.expected_err, "case {:?}: error got: {result:?}", case.name);
        assert_node_eq(case.name, &updated, &case.updated);
    }
}

struct ReconcileCase {
    name: &'static str,
    labels: Vec<(&'static str, &'static str)>,
    expected_labels: Vec<(&'static str, &'static str)>,
}

/// Go `Test_reconcileNodeLabels`. Upstream calls `reconcileNodeLabels` directly; ours is
/// `plan_label_reconcile` (what `plan_sync` returns for an initialized node), checked both
/// directly and through `plan_sync`.
#[tokio::test]
async fn test_reconcile_node_labels() {
    let cases = vec![
        ReconcileCase {
            name: "requires reconcile",
            labels: vec![
                (LABEL_ZONE_BETA, "foo"),
                (LABEL_REGION_BETA, "bar"),
                (LABEL_INSTANCE_TYPE_BETA, "the-best-type"),
            ],
            expected_labels: vec![
                (LABEL_ZONE_BETA, "foo"),
                (LABEL_REGION_BETA, "bar"),
                (LABEL_ZONE, "foo"),
                (LABEL_REGION, "bar"),
                (LABEL_INSTANCE_TYPE_BETA, "the-best-type"),
                (LABEL_INSTANCE_TYPE, "the-best-type"),
            ],
        },
        ReconcileCase {
            name: "doesn't require reconcile",
            labels: vec![
                (LABEL_ZONE_BETA, "foo"),
                (LABEL_REGION_BETA, "bar"),
                (LABEL_ZONE, "foo"),
                (LABEL_REGION, "bar"),
                (LABEL_INSTANCE_TYPE_BETA, "the-best-type"),
                (LABEL_INSTANCE_TYPE, "the-best-type"),
            ],
            expected_labels: vec![
                (LABEL_ZONE_BETA, "foo"),
                (LABEL_REGION_BETA, "bar"),
                (LABEL_ZONE, "foo"),
                (LABEL_REGION, "bar"),
                (LABEL_INSTANCE_TYPE_BETA, "the-best-type"),
                (LABEL_INSTANCE_TYPE, "the-best-type"),
            ],
        },
        ReconcileCase {
            name: "require reconcile -- secondary labels are different from primary",
            labels: vec![
                (LABEL_ZONE_BETA, "foo"),
                (LABEL_REGION_BETA, "bar"),
                (LABEL_ZONE, "wrongfoo"),
                (LABEL_REGION, "wrongbar"),
                (LABEL_INSTANCE_TYPE_BETA, "the-best-type"),
                (LABEL_INSTANCE_TYPE, "the-wrong-type"),
            ],
            expected_labels: vec![
                (LABEL_ZONE_BETA, "foo"),
                (LABEL_REGION_BETA, "bar"),
                (LABEL_ZONE, "foo"),
                (LABEL_REGION, "bar"),
                (LABEL_INSTANCE_TYPE_BETA, "the-best-type"),
                (LABEL_INSTANCE_TYPE, "the-best-type"),
            ],
        },
    ];
    assert_eq!(cases.len(), 3, "upstream Test_reconcileNodeLabels has 3 cases");

    for case in cases {
        let labels = case.labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let expected: std::collections::BTreeMap<String, String> =
            case.expected_labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let mut node = node_named("node01").build();
        node.metadata.labels = Some(labels);

        let mut reconciled = node.metadata.labels.clone().unwrap_or_default();
        reconciled.extend(plan_label_reconcile(&node));
        assert_eq!(reconciled, expected, "case {:?}: updated node labels", case.name);

        // The same through plan_sync; an initialized node never reaches the cloud.
        let cloud = FakeCloud::from(Fake::default());
        let (updated, result) = sync_node_outcome(&cloud, &node).await;
        assert!(result.is_ok(), "case {:?}: unexpected error {result:?}", case.name);
        assert_eq!(updated.metadata.labels.as_ref(), Some(&expected), "case {:?}: labels via plan_sync", case.name);
        assert_eq!(cloud.calls(), Vec::<String>::new(), "case {:?}: cloud calls", case.name);
    }
}

/// The tainted node of `TestNodeAddressesNotUpdate[V2]`.
fn tainted_node_without_addresses() -> Node {
    node0().labels([]).ready("Unknown").cloud_taint().build()
}

/// Upstream gets the addresses with `getInstanceNodeAddresses` (must not fail) and hands them
/// to `updateNodeAddress`, which must not write them because the node is still tainted. Our
/// address refresh is `plan_status_updates`; it must plan no write for the tainted node.
async fn assert_node_addresses_not_updated(cloud: FakeCloud) {
    let existing = tainted_node_without_addresses();
    let addresses = get_instance_node_addresses(&cloud, &existing).await;
    assert!(addresses.is_ok(), "get instance metadata with error {addresses:?}");

    let updates = plan_status_updates(&cloud, &[Arc::new(existing.clone())], 1).await;
    assert_eq!(updates, Vec::new(), "node addresses should not be updated");
}

/// Go `TestNodeAddressesNotUpdateV2`.
#[tokio::test]
async fn test_node_addresses_not_update_v2() {
    assert_node_addresses_not_updated(FakeCloud::from(Fake {
        enable_instances_v2: true,
        addresses: cloud_addresses(),
        exists_by_provider_id: false,
        ..Fake::default()
    }))
    .await;
}

/// Go `TestNodeAddressesNotUpdate`.
#[tokio::test]
async fn test_node_addresses_not_update() {
    assert_node_addresses_not_updated(FakeCloud::from(Fake {
        addresses: cloud_addresses(),
        exists_by_provider_id: false,
        ..Fake::default()
    }))
    .await;
}

struct MetadataCase {
    name: &'static str,
    cloud: Fake,
    existing: Node,
    /// `None` when upstream expects an error.
    expected: Option<InstanceMetadata>,
}

/// Go `TestGetInstanceMetadata`.
#[tokio::test]
async fn test_get_instance_metadata() {
    let cases = vec![
        MetadataCase {
            name: "cloud implemented with Instances and provider ID",
            cloud: Fake {
                instance_types: map([("node0", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                provider_id: map([("node0", "fake://12345")]),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().cloud_taint().build(),
            expected: Some(InstanceMetadata {
                provider_id: "fake://12345".to_owned(),
                node_addresses: cloud_addresses(),
                ..InstanceMetadata::default()
            }),
        },
        MetadataCase {
            name: "cloud implemented with Instances (providerID not implemented)",
            cloud: Fake {
                instance_types: map([("node0", "t1.micro"), ("fake://12345", "t1.micro")]),
                ext_id_err: [("node0".to_owned(), FakeError::NotImplemented)].into(),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().build(),
            expected: Some(InstanceMetadata { node_addresses: cloud_addresses(), ..InstanceMetadata::default() }),
        },
        MetadataCase {
            name: "cloud implemented with Instances (providerID not implemented) and node with providerID",
            cloud: Fake {
                instance_types: map([("node0", "t1.micro"), ("fake://12345", "t1.micro")]),
                ext_id_err: [("node0".to_owned(), FakeError::NotImplemented)].into(),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().provider_id("fake://asdasd").build(),
            expected: Some(InstanceMetadata {
                provider_id: "fake://asdasd".to_owned(),
                node_addresses: cloud_addresses(),
                ..InstanceMetadata::default()
            }),
        },
        MetadataCase {
            name: "cloud implemented with InstancesV2 (with providerID)",
            cloud: Fake {
                enable_instances_v2: true,
                instance_types: map([("node0", "t1.micro"), ("fake://12345", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                provider_id: map([("node0", "fake://12345")]),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().cloud_taint().build(),
            expected: Some(InstanceMetadata {
                provider_id: "fake://12345".to_owned(),
                node_addresses: cloud_addresses(),
                ..InstanceMetadata::default()
            }),
        },
        // It will be requeued later. Upstream returns the metadata together with the error and
        // also compares it; our `Result` carries only the error (callers ignore metadata on
        // error upstream too), so the error is what we check.
        MetadataCase {
            name: "cloud implemented with InstancesV2 (without providerID)",
            cloud: Fake {
                enable_instances_v2: true,
                instance_types: map([("node0", "t1.micro"), ("fake://12345", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().cloud_taint().build(),
            expected: None,
        },
        MetadataCase {
            name: "cloud implemented with InstancesV2 (without providerID) and node with providerID",
            cloud: Fake {
                enable_instances_v2: true,
                instance_types: map([("node0", "t1.micro"), ("fake://12345", "t1.micro")]),
                ext_id: map([("node0", "12345")]),
                addresses: cloud_addresses(),
                ..Fake::default()
            },
            existing: node0().provider_id("fake://12345").build(),
            expected: Some(InstanceMetadata {
                provider_id: "fake://12345".to_owned(),
                instance_type: "t1.micro".to_owned(),
                node_addresses: cloud_addresses(),
                ..InstanceMetadata::default()
            }),
        },
    ];
    assert_eq!(cases.len(), 6, "upstream TestGetInstanceMetadata has 6 cases");

    for case in cases {
        let cloud = FakeCloud::from(case.cloud);
        let got = get_instance_metadata(&cloud, &case.existing).await;
        match (got, case.expected) {
            (Ok(metadata), Some(expected)) => {
                assert_eq!(metadata, Some(expected), "case {:?}: unexpected metadata", case.name);
            }
            (Err(e), None) => {
                assert!(
                    matches!(e, MetadataError::MissingProviderId(ref n) if n == "node0"),
                    "case {:?}: unexpected error {e:?}",
                    case.name
                );
                assert_eq!(
                    e.to_string(),
                    "cloud provider does not set node provider ID for node node0",
                    "case {:?}: error text",
                    case.name
                );
            }
            (got, expected) => panic!("case {:?}: error expected {} got: {got:?}", case.name, expected.is_none()),
        }
    }
}

struct StatusCase {
    name: &'static str,
    workers: usize,
    nodes: usize,
}

/// Go `TestUpdateNodeStatus`: one address lookup per initialized node, whatever the number of
/// workers. The fake's 10ms latency runs on paused (auto-advancing) time, so the pass takes
/// exactly one latency per round of `workers` lookups: `--concurrent-node-status-updates`
/// (upstream 1.36) sets how many nodes are updated at once.
#[tokio::test(start_paused = true)]
async fn test_update_node_status() {
    let cases = [
        StatusCase { name: "single thread", workers: 1, nodes: 100 },
        StatusCase { name: "5 workers", workers: 5, nodes: 100 },
        StatusCase { name: "10 workers", workers: 10, nodes: 100 },
        StatusCase { name: "30 workers", workers: 30, nodes: 100 },
    ];
    assert_eq!(cases.len(), 4, "upstream TestUpdateNodeStatus has 4 cases");

    for case in cases {
        let cloud = FakeCloud::from(Fake {
            addresses: cloud_addresses(),
            request_delay: std::time::Duration::from_millis(10),
            ..Fake::default()
        });
        let nodes: Vec<Arc<Node>> =
            (0..case.nodes).map(|i| Arc::new(node_named(&format!("node0{i}")).build())).collect();

        let started = tokio::time::Instant::now();
        let updates = plan_status_updates(&cloud, &nodes, case.workers).await;
        let rounds = case.nodes.div_ceil(case.workers) as u32;
        let elapsed = started.elapsed();
        assert!(
            elapsed >= rounds * std::time::Duration::from_millis(10)
                && elapsed < (rounds + 1) * std::time::Duration::from_millis(10),
            "case {:?}: {elapsed:?} for {rounds} rounds of lookups",
            case.name
        );

        let calls = cloud.calls();
        assert_eq!(calls.len(), case.nodes, "case {:?}: expected {} cloud-provider calls", case.name, case.nodes);
        assert!(
            calls.iter().all(|c| c == "node-addresses-by-provider-id"),
            "case {:?}: only address lookups expected, got {calls:?}",
            case.name
        );
        // Upstream's fake clientset swallows the patches; every node lacks the addresses.
        assert_eq!(updates.len(), case.nodes, "case {:?}: address updates", case.name);
    }
}
