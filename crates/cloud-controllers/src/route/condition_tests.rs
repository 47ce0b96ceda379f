//! Ports of upstream's `TestUpdateNetworkingCondition` cases: the `NetworkUnavailable`
//! condition the controller writes after a node's routes were handled.

use super::*;
use pretty_assertions::assert_eq;

struct ConditionCase {
    description: &'static str,
    existing: Option<(&'static str, &'static str, &'static str)>,
    routes_created: bool,
    expected_update: bool,
    expected: (&'static str, &'static str, &'static str),
}

pub(super) fn node_with_condition(existing: Option<(&str, &str, &str)>) -> Node {
    let mut n = node("test-node", "test-uid", &["10.244.0.0/24"], "10.0.0.1");
    n.status = Some(NodeStatus::default());
    if let Some((status, reason, message)) = existing {
        n.status.as_mut().expect("status").conditions = Some(vec![NodeCondition {
            type_: NETWORK_UNAVAILABLE.to_owned(),
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            ..NodeCondition::default()
        }]);
    }
    n
}

/// Go `TestUpdateNetworkingCondition`.
#[test]
fn test_update_networking_condition() {
    let created = ("False", "RouteCreated", "RouteController created a route");
    let not_created = ("True", "NoRouteCreated", "RouteController failed to create a route");
    let cases = [
        ConditionCase {
            description: "No existing condition, routes created - should update",
            existing: None,
            routes_created: true,
            expected_update: true,
            expected: created,
        },
        ConditionCase {
            description: "No existing condition, routes not created - should update",
            existing: None,
            routes_created: false,
            expected_update: true,
            expected: not_created,
        },
        ConditionCase {
            description: "Existing condition with same status and reason (RouteCreated) - should not update",
            existing: Some(created),
            routes_created: true,
            expected_update: false,
            expected: created,
        },
        ConditionCase {
            description: "Existing condition with same status but different reason (CalicoIsUp) - should update",
            existing: Some(("False", "CalicoIsUp", "Calico is running on this node")),
            routes_created: true,
            expected_update: true,
            expected: created,
        },
        ConditionCase {
            description: "Existing condition with Status=False but different reason - should update when routes created",
            existing: Some(("False", "ExternalCNI", "External CNI configured")),
            routes_created: true,
            expected_update: true,
            expected: created,
        },
        ConditionCase {
            description: "Existing condition with Status=True and different reason - should update when routes not created",
            existing: Some(("True", "SomeOtherReason", "Some other message")),
            routes_created: false,
            expected_update: true,
            expected: not_created,
        },
        ConditionCase {
            description: "Existing condition with Status=False, transitioning to routes not created - should update",
            existing: Some(created),
            routes_created: false,
            expected_update: true,
            expected: not_created,
        },
        ConditionCase {
            description: "Existing condition with Status=True and NoRouteCreated reason - should not update",
            existing: Some(not_created),
            routes_created: false,
            expected_update: false,
            expected: not_created,
        },
    ];
    for case in cases {
        let n = node_with_condition(case.existing);
        let patch = condition_patch(&n, case.routes_created, &now());
        assert_eq!(patch.is_some(), case.expected_update, "{}", case.description);
        let updated = match patch {
            Some(p) => apply_merge_patch_to(&n, &p).expect("applies"),
            None => n.clone(),
        };
        let c = condition(&updated).expect("condition exists");
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref().unwrap_or_default(), c.message.as_deref().unwrap_or_default()),
            case.expected,
            "{}",
            case.description
        );
        let conditions = updated.status.as_ref().and_then(|s| s.conditions.as_ref()).expect("conditions");
        assert_eq!(conditions.len(), 1, "{}: exactly one NetworkUnavailable condition", case.description);
    }
}

/// Go `TestUpdateNetworkingConditionWithCalicoScenario`.
#[test]
fn test_update_networking_condition_with_calico_scenario() {
    let n = node_with_condition(Some(("False", "CalicoIsUp", "Calico is running on this node")));
    let patch = condition_patch(&n, true, &now()).expect("a patch is sent");
    let updated = apply_merge_patch_to(&n, &patch).expect("applies");
    let c = condition(&updated).expect("condition");
    assert_eq!(c.status, "False", "Expected Status to remain False");
    assert_eq!(c.reason.as_deref(), Some("RouteCreated"), "Expected Reason to be updated to RouteCreated");
    assert_eq!(c.message.as_deref(), Some("RouteController created a route"), "Expected Message to be updated");
}
