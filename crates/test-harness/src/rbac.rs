//! The cloud-controller-manager's RBAC: one definition shared by the test control plane, the
//! deploy manifests and the tests that check them.
//!
//! The rules equal the official Hetzner CCM's ClusterRole
//! (`system:hcloud-cloud-controller-manager`), plus `get` on Services and the
//! `events.k8s.io` group, because our controllers read single Services and may record events
//! through the `events.k8s.io/v1` API.
//!
//! Besides its own ClusterRole, the CCM's ServiceAccount is bound to the built-in ClusterRole
//! `system:auth-delegator` ([`ccm_auth_delegator_binding`]): it grants `create` on
//! `tokenreviews.authentication.k8s.io` and `subjectaccessreviews.authorization.k8s.io`, which
//! the CCM's secure port (`--secure-port`, 10258) needs to authenticate and authorize requests
//! to `/metrics` by delegating to the API server, as every upstream controller manager does.
//! The official chart does not create this binding (there, protected paths of the secure port
//! cannot be authorized); the official rules in [`CCM_RBAC_RULES`] stay untouched.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::ObjectMeta;

/// Namespace of the CCM's ServiceAccount.
pub const CCM_NAMESPACE: &str = "kube-system";
/// Name of the CCM's ServiceAccount (the official chart's name, so users can switch).
pub const CCM_SERVICE_ACCOUNT: &str = "hcloud-cloud-controller-manager";
/// The user name the API server sees for the CCM's ServiceAccount.
pub const CCM_USER: &str = "system:serviceaccount:kube-system:hcloud-cloud-controller-manager";
/// Name of the CCM's ClusterRole and ClusterRoleBinding.
pub const CCM_CLUSTER_ROLE: &str = "system:hcloud-cloud-controller-manager";

/// The built-in ClusterRole granting `create` on TokenReviews and SubjectAccessReviews.
pub const AUTH_DELEGATOR_CLUSTER_ROLE: &str = "system:auth-delegator";
/// Name of the ClusterRoleBinding of the CCM's ServiceAccount to [`AUTH_DELEGATOR_CLUSTER_ROLE`].
pub const CCM_AUTH_DELEGATOR_BINDING: &str = "hcloud-cloud-controller-manager:system:auth-delegator";

/// One RBAC rule, as plain data (usable without k8s-openapi, e.g. to render YAML).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RbacRule {
    /// API groups (`""` is the core group).
    pub api_groups: &'static [&'static str],
    /// Resources, including subresources such as `nodes/status`.
    pub resources: &'static [&'static str],
    /// Verbs (`"*"` is all).
    pub verbs: &'static [&'static str],
}

/// The CCM's ClusterRole rules.
pub const CCM_RBAC_RULES: &[RbacRule] = &[
    RbacRule { api_groups: &[""], resources: &["nodes"], verbs: &["*"] },
    RbacRule { api_groups: &[""], resources: &["nodes/status"], verbs: &["patch"] },
    RbacRule { api_groups: &["", "events.k8s.io"], resources: &["events"], verbs: &["create", "patch", "update"] },
    RbacRule { api_groups: &[""], resources: &["services"], verbs: &["get", "list", "watch"] },
    RbacRule { api_groups: &[""], resources: &["services/status"], verbs: &["patch", "update"] },
    RbacRule { api_groups: &[""], resources: &["configmaps"], verbs: &["get", "list", "watch"] },
    RbacRule { api_groups: &[""], resources: &["serviceaccounts"], verbs: &["create"] },
    RbacRule {
        api_groups: &["coordination.k8s.io"],
        resources: &["leases"],
        verbs: &["create", "get", "list", "watch", "update"],
    },
];

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/name".to_owned(), "hcloud-cloud-controller-manager".to_owned())])
}

/// [`CCM_RBAC_RULES`] as Kubernetes `PolicyRule`s.
pub fn ccm_policy_rules() -> Vec<PolicyRule> {
    CCM_RBAC_RULES
        .iter()
        .map(|rule| PolicyRule {
            api_groups: Some(strings(rule.api_groups)),
            resources: Some(strings(rule.resources)),
            verbs: strings(rule.verbs),
            ..PolicyRule::default()
        })
        .collect()
}

/// The CCM's ClusterRole ([`CCM_CLUSTER_ROLE`] with [`ccm_policy_rules`]).
pub fn ccm_cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(CCM_CLUSTER_ROLE.to_owned()),
            labels: Some(labels()),
            ..ObjectMeta::default()
        },
        rules: Some(ccm_policy_rules()),
        ..ClusterRole::default()
    }
}

/// Binds [`CCM_CLUSTER_ROLE`] to the ServiceAccount `kube-system/hcloud-cloud-controller-manager`.
pub fn ccm_cluster_role_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(CCM_CLUSTER_ROLE.to_owned()),
            labels: Some(labels()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: CCM_CLUSTER_ROLE.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: CCM_SERVICE_ACCOUNT.to_owned(),
            namespace: Some(CCM_NAMESPACE.to_owned()),
            ..Subject::default()
        }]),
    }
}

/// Binds the built-in ClusterRole [`AUTH_DELEGATOR_CLUSTER_ROLE`] to the CCM's ServiceAccount,
/// so that its secure port can delegate authentication (TokenReview) and authorization
/// (SubjectAccessReview) to the API server.
pub fn ccm_auth_delegator_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(CCM_AUTH_DELEGATOR_BINDING.to_owned()),
            labels: Some(labels()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: AUTH_DELEGATOR_CLUSTER_ROLE.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: CCM_SERVICE_ACCOUNT.to_owned(),
            namespace: Some(CCM_NAMESPACE.to_owned()),
            ..Subject::default()
        }]),
    }
}

/// The CCM's ServiceAccount object.
pub fn ccm_service_account() -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some(CCM_SERVICE_ACCOUNT.to_owned()),
            namespace: Some(CCM_NAMESPACE.to_owned()),
            labels: Some(labels()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_name_matches_service_account() {
        assert_eq!(CCM_USER, format!("system:serviceaccount:{CCM_NAMESPACE}:{CCM_SERVICE_ACCOUNT}"));
    }

    #[test]
    fn nodes_have_all_verbs_and_status_only_patch() {
        let rules = ccm_policy_rules();
        let find = |resource: &str| {
            rules
                .iter()
                .find(|r| r.resources.as_deref().unwrap_or_default().iter().any(|x| x == resource))
                .map(|r| r.verbs.clone())
        };
        assert_eq!(find("nodes"), Some(vec!["*".to_owned()]));
        assert_eq!(find("nodes/status"), Some(vec!["patch".to_owned()]));
        assert_eq!(find("leases"), Some(strings(&["create", "get", "list", "watch", "update"])));
    }

    #[test]
    fn auth_delegator_binding_targets_the_ccm_service_account() {
        let binding = ccm_auth_delegator_binding();
        assert_eq!(binding.role_ref.kind, "ClusterRole");
        assert_eq!(binding.role_ref.name, "system:auth-delegator");
        let subjects = binding.subjects.unwrap_or_default();
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(
            format!("system:serviceaccount:{}:{}", subjects[0].namespace.as_deref().unwrap_or(""), subjects[0].name),
            CCM_USER
        );
        // Distinct from the CCM's own binding, whose rules stay the official ones.
        assert_ne!(binding.metadata.name.as_deref(), Some(CCM_CLUSTER_ROLE));
    }
}
