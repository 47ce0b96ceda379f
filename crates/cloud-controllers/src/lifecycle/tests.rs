//! Ports of upstream's `controllers/nodelifecycle/node_lifecycle_controller_test.go`
//! (k8s.io/cloud-provider).
//!
//! Upstream runs `MonitorNodes` once over a one-node store and reads the node back. In our
//! terms ([`monitor_node_outcome`]) that is `decide(cloud, node)`, then the exact write the
//! controller sends (`LifecycleDecision::write`) applied as the API server applies it: a
//! merge patch, or a deletion (`None`); an error keeps the node unchanged.
//!
//! Upstream's `Test_NodesShutdown` also asserts that every event carries
//! `involvedObject.apiVersion`; events are built by `controller_runtime::object_ref`, which is
//! not part of `decide`, so that check belongs with the events tests.

use cloud_provider::Cloud;
use k8s_openapi::api::core::v1::Node;
use pretty_assertions::assert_eq;

use super::decide::{LifecycleWrite, decide, shutdown_taint};
use super::metrics::LifecycleMetrics;
use crate::node::metadata::get_provider_id;
use crate::testing::{Fake, FakeCloud, FakeError, assert_node_eq, map, node as node_named};
use controller_runtime::merge_patch::apply_merge_patch_to;

/// A `node0` created 2012-01-01, as in every upstream table.
fn node0() -> crate::testing::NodeBuilder {
    node_named("node0").created_2012()
}

/// The node upstream's `MonitorNodes` leaves behind; `None` if it deleted it.
async fn monitor_node_outcome<C: Cloud>(cloud: &C, node: &Node) -> Option<Node> {
    match decide(cloud, node, &LifecycleMetrics::default()).await {
        Ok(decision) => match decision.write(node) {
            None => Some(node.clone()),
            Some(LifecycleWrite::Delete { uid }) => {
                assert_eq!(uid, node.metadata.uid, "the delete is conditional on the decided node's UID");
                None
            }
            Some(LifecycleWrite::Patch(patch)) => Some(apply_merge_patch_to(node, &patch).expect("patch applies")),
        },
        Err(_) => Some(node.clone()),
    }
}

struct Case {
    name: &'static str,
    cloud: Fake,
    existing: Node,
    /// `None` when upstream expects the node deleted.
    expected: Option<Node>,
}

async fn run(cases: Vec<Case>) {
    for case in cases {
        let cloud = FakeCloud::from(case.cloud);
        let outcome = monitor_node_outcome(&cloud, &case.existing).await;
        match (&outcome, &case.expected) {
            (None, None) => {}
            (Some(got), Some(expected)) => assert_node_eq(case.name, got, expected),
            _ => panic!(
                "case {:?}: expected deleted={} got deleted={} (node {outcome:?})",
                case.name,
                case.expected.is_none(),
                outcome.is_none()
            ),
        }
    }
}

/// Go `Test_NodesDeleted`.
#[tokio::test]
async fn test_nodes_deleted() {
    let cases = vec![
        Case {
            name: "node is not ready and does not exist",
            existing: node0().ready("False").build(),
            expected: None,
            cloud: Fake { exists_by_provider_id: false, ..Fake::default() },
        },
        Case {
            name: "node is not ready and provider returns err",
            existing: node0().provider_id("node0").ready("False").build(),
            expected: Some(node0().provider_id("node0").ready("False").build()),
            cloud: Fake {
                exists_by_provider_id: false,
                err_by_provider_id: Some(FakeError::Msg("err!")),
                ..Fake::default()
            },
        },
        Case {
            name: "node is not ready but still exists",
            existing: node0().provider_id("node0").ready("False").build(),
            expected: Some(node0().provider_id("node0").ready("False").build()),
            cloud: Fake { exists_by_provider_id: true, ..Fake::default() },
        },
        Case {
            name: "node ready condition is unknown, node doesn't exist",
            existing: node0().ready("Unknown").build(),
            expected: None,
            cloud: Fake { exists_by_provider_id: false, ..Fake::default() },
        },
        Case {
            name: "node ready condition is unknown, node exists",
            existing: node0().ready("Unknown").build(),
            expected: Some(node0().ready("Unknown").build()),
            cloud: Fake {
                node_shutdown: false,
                exists_by_provider_id: true,
                ext_id: map([("node0", "foo://12345")]),
                ..Fake::default()
            },
        },
        Case {
            name: "node is ready, but provider said it is deleted (maybe a bug in provider)",
            existing: node0().provider_id("node0").ready("True").build(),
            expected: Some(node0().provider_id("node0").ready("True").build()),
            cloud: Fake { exists_by_provider_id: false, ..Fake::default() },
        },
        Case {
            name: "[instance2] node is not ready and does not exist",
            existing: node0().ready("False").build(),
            expected: None,
            cloud: Fake { enable_instances_v2: true, exists_by_provider_id: false, ..Fake::default() },
        },
        Case {
            name: "[instancev2] node is not ready and provider returns err",
            existing: node0().provider_id("node0").ready("False").build(),
            expected: Some(node0().provider_id("node0").ready("False").build()),
            cloud: Fake {
                enable_instances_v2: true,
                exists_by_provider_id: false,
                err_by_provider_id: Some(FakeError::Msg("err!")),
                ..Fake::default()
            },
        },
        Case {
            name: "[instancev2] node is not ready but still exists",
            existing: node0().provider_id("node0").ready("False").build(),
            expected: Some(node0().provider_id("node0").ready("False").build()),
            cloud: Fake { enable_instances_v2: true, exists_by_provider_id: true, ..Fake::default() },
        },
        Case {
            name: "[instancev2] node ready condition is unknown, node doesn't exist",
            existing: node0().ready("Unknown").build(),
            expected: None,
            cloud: Fake { enable_instances_v2: true, exists_by_provider_id: false, ..Fake::default() },
        },
        Case {
            name: "[instancev2] node ready condition is unknown, node exists",
            existing: node0().ready("Unknown").build(),
            expected: Some(node0().ready("Unknown").build()),
            cloud: Fake {
                enable_instances_v2: true,
                node_shutdown: false,
                exists_by_provider_id: true,
                ext_id: map([("node0", "foo://12345")]),
                ..Fake::default()
            },
        },
        Case {
            name: "[instancev2] node is ready, but provider said it is deleted (maybe a bug in provider)",
            existing: node0().provider_id("node0").ready("True").build(),
            expected: Some(node0().provider_id("node0").ready("True").build()),
            cloud: Fake { enable_instances_v2: true, exists_by_provider_id: false, ..Fake::default() },
        },
    ];
    assert_eq!(cases.len(), 12, "upstream Test_NodesDeleted has 12 cases");
    run(cases).await;
}

/// Go `Test_NodesShutdown`. (Upstream builds these timestamps in `time.Local`; see
/// `crate::testing::time`.)
#[tokio::test]
async fn test_nodes_shutdown() {
    let cases = vec![
        Case {
            name: "node is not ready and was shutdown, but exists",
            existing: node0().provider_id("node0").ready("False").build(),
            expected: Some(node0().provider_id("node0").taint(shutdown_taint()).ready("False").build()),
            cloud: Fake {
                node_shutdown: true,
                exists_by_provider_id: true,
                err_shutdown_by_provider_id: None,
                ..Fake::default()
            },
        },
        Case {
            name: "node with empty spec providerID is not ready and was shutdown, but exists",
            existing: node0().provider_id("").ready("False").build(),
            expected: Some(node0().provider_id("").taint(shutdown_taint()).ready("False").build()),
            cloud: Fake {
                node_shutdown: true,
                exists_by_provider_id: true,
                err_shutdown_by_provider_id: None,
                ext_id: map([("node0", "foo://12345")]),
                ..Fake::default()
            },
        },
        Case {
            name: "node with non-existing providerID (missing in cloud provider) gets deleted",
            existing: node0().provider_id("").ready("False").build(),
            expected: None,
            cloud: Fake { err_shutdown_by_provider_id: None, ext_id: map([("node0", "")]), ..Fake::default() },
        },
        Case {
            name: "node with error when getting providerID does not have shutdown taint",
            existing: node0().provider_id("").ready("False").build(),
            expected: Some(node0().provider_id("").ready("False").build()),
            cloud: Fake {
                err_shutdown_by_provider_id: None,
                ext_id_err: [("node0".to_owned(), FakeError::Msg("err!"))].into(),
                ..Fake::default()
            },
        },
        Case {
            name: "node with InstanceID returning InstanceNotFound gets deleted",
            existing: node0().provider_id("").ready("False").build(),
            expected: None,
            cloud: Fake {
                err_shutdown_by_provider_id: None,
                ext_id_err: [("node0".to_owned(), FakeError::InstanceNotFound)].into(),
                ..Fake::default()
            },
        },
        Case {
            name: "node is not ready, but there is error checking if node is shutdown",
            existing: node0().ready("False").build(),
            expected: None,
            cloud: Fake {
                node_shutdown: false,
                err_shutdown_by_provider_id: Some(FakeError::Msg("err!")),
                ..Fake::default()
            },
        },
        Case {
            name: "node is not ready and is not shutdown",
            existing: node0().ready("False").build(),
            expected: None,
            cloud: Fake { node_shutdown: false, err_shutdown_by_provider_id: None, ..Fake::default() },
        },
        Case {
            name: "node is ready but provider says it's shutdown (maybe a bug by provider)",
            existing: node0().ready("True").build(),
            expected: Some(node0().ready("True").build()),
            cloud: Fake { node_shutdown: true, err_shutdown_by_provider_id: None, ..Fake::default() },
        },
        Case {
            name: "node is shutdown but provider says it does not exist",
            existing: node0().ready("Unknown").build(),
            expected: None,
            cloud: Fake {
                node_shutdown: true,
                exists_by_provider_id: false,
                err_shutdown_by_provider_id: None,
                ..Fake::default()
            },
        },
    ];
    assert_eq!(cases.len(), 9, "upstream Test_NodesShutdown has 9 cases");
    run(cases).await;
}

struct ProviderIdCase {
    name: &'static str,
    cloud: Fake,
    existing: Node,
    expected_provider_id: &'static str,
    /// The expected error text, if any.
    expected_err: Option<&'static str>,
}

/// Go `Test_GetProviderID`.
#[tokio::test]
async fn test_get_provider_id() {
    let cases = vec![
        ProviderIdCase {
            name: "node initialized with provider ID",
            cloud: Fake::default(),
            existing: node_named("node0").provider_id("fake://12345").build(),
            expected_provider_id: "fake://12345",
            expected_err: None,
        },
        ProviderIdCase {
            name: "node initialized with provider ID with InstancesV2",
            cloud: Fake { enable_instances_v2: true, ..Fake::default() },
            existing: node_named("node0").provider_id("fake://12345").build(),
            expected_provider_id: "fake://12345",
            expected_err: None,
        },
        ProviderIdCase {
            name: "cloud implemented with Instances",
            cloud: Fake { ext_id: map([("node0", "12345")]), ..Fake::default() },
            existing: node_named("node0").build(),
            expected_provider_id: "fake://12345",
            expected_err: None,
        },
        ProviderIdCase {
            name: "cloud implemented with InstancesV2",
            cloud: Fake { enable_instances_v2: true, provider_id: map([("node0", "fake://12345")]), ..Fake::default() },
            existing: node_named("node0").build(),
            expected_provider_id: "fake://12345",
            expected_err: None,
        },
        ProviderIdCase {
            name: "cloud implemented with InstancesV2 (without providerID)",
            cloud: Fake { enable_instances_v2: true, ..Fake::default() },
            existing: node_named("node0").build(),
            expected_provider_id: "",
            expected_err: None,
        },
        ProviderIdCase {
            name: "cloud implemented with Instances with instance missing",
            cloud: Fake { ext_id_err: [("node0".to_owned(), FakeError::InstanceNotFound)].into(), ..Fake::default() },
            existing: node_named("node0").build(),
            expected_provider_id: "",
            expected_err: Some("instance not found"),
        },
        ProviderIdCase {
            name: "cloud implemented with Instances with unknown error",
            cloud: Fake {
                ext_id_err: [("node0".to_owned(), FakeError::Msg("unknown error"))].into(),
                ..Fake::default()
            },
            existing: node_named("node0").build(),
            expected_provider_id: "",
            expected_err: Some("failed to get instance ID from cloud provider: unknown error"),
        },
    ];
    assert_eq!(cases.len(), 7, "upstream Test_GetProviderID has 7 cases");

    for case in cases {
        let cloud = FakeCloud::from(case.cloud);
        let (provider_id, err) = match get_provider_id(&cloud, &case.existing).await {
            Ok(pid) => (pid, None),
            Err(e) => (String::new(), Some(e.to_string())),
        };
        assert_eq!(err.as_deref(), case.expected_err, "case {:?}: error", case.name);
        assert_eq!(provider_id, case.expected_provider_id, "case {:?}: unexpected providerID", case.name);
    }
}
