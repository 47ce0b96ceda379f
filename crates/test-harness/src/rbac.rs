//! The cloud-controller-manager's RBAC, as the test control plane grants it: the ClusterRole's
//! rules are **the shipped ones**, read from the Helm chart's
//! `deploy/chart/hcloud-ccm/files/clusterrole-rules.json` (embedded at compile time; the
//! chart's `clusterrole.yaml` and the static manifests `deploy/hcloud-ccm*.yaml` render the same
//! file). Every end-to-end test runs hcloud-ccm as [`CCM_USER`] with exactly these rules against
//! a kube-apiserver that enforces RBAC, so a controller needing a verb the shipped role lacks
//! fails those tests.
//!
//! The rules are only what hcloud-ccm calls (nodes: get/list/watch/patch/delete; nodes/status:
//! patch; services: list/watch; services/status: patch; core events: create/patch;
//! leases: get/create/update), each granted by the official ClusterRole too (the deploy tests
//! compare them with the official chart's render), so hcloud-ccm runs under that role. The
//! official chart's `configmaps`, `serviceaccounts`, `services/status update` and `nodes *` are
//! not needed and not granted.
//!
//! Besides its own ClusterRole, the CCM's ServiceAccount is bound to the built-in ClusterRole
//! `system:auth-delegator` ([`ccm_auth_delegator_binding`]): it grants `create` on
//! `tokenreviews.authentication.k8s.io` and `subjectaccessreviews.authorization.k8s.io`, which
//! the CCM's secure port (`--secure-port`, 10258) needs to authenticate and authorize requests
//! to `/metrics` by delegating to the API server, as every upstream controller manager does.
//! And, in `kube-system`, to the built-in Role `extension-apiserver-authentication-reader`
//! ([`ccm_authentication_reader_binding`]): it grants reading the ConfigMap
//! `kube-system/extension-apiserver-authentication`, where the secure port looks up the
//! cluster's client CA and front-proxy settings at start-up (unless
//! `--authentication-skip-lookup`). The chart creates the same bindings.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding, RoleRef, Subject};
use kube::api::ObjectMeta;

use crate::error::HarnessError;

/// Namespace of the CCM's ServiceAccount.
pub const CCM_NAMESPACE: &str = "kube-system";
/// Name of the CCM's ServiceAccount (the official chart's name, so users can switch).
pub const CCM_SERVICE_ACCOUNT: &str = "hcloud-cloud-controller-manager";
/// The user name the API server sees for the CCM's ServiceAccount.
pub const CCM_USER: &str = "system:serviceaccount:kube-system:hcloud-cloud-controller-manager";
/// Name of the CCM's ClusterRole (the official one's).
pub const CCM_CLUSTER_ROLE: &str = "system:hcloud-cloud-controller-manager";
/// Name of the CCM's ClusterRoleBinding to [`CCM_CLUSTER_ROLE`] (the official one's, so an
/// install over the official one leaves no second binding).
pub const CCM_CLUSTER_ROLE_BINDING: &str = "system:hcloud-cloud-controller-manager:restricted";

/// The built-in ClusterRole granting `create` on TokenReviews and SubjectAccessReviews.
pub const AUTH_DELEGATOR_CLUSTER_ROLE: &str = "system:auth-delegator";
/// Name of the ClusterRoleBinding of the CCM's ServiceAccount to [`AUTH_DELEGATOR_CLUSTER_ROLE`].
pub const CCM_AUTH_DELEGATOR_BINDING: &str = "hcloud-cloud-controller-manager:system:auth-delegator";

/// The built-in Role in `kube-system` (kube-apiserver bootstraps it) granting `get`, `list` and
/// `watch` on the ConfigMap [`AUTHENTICATION_CONFIGMAP`].
pub const AUTHENTICATION_READER_ROLE: &str = "extension-apiserver-authentication-reader";
/// Namespace of [`AUTHENTICATION_READER_ROLE`], of [`AUTHENTICATION_CONFIGMAP`] and of the
/// CCM's binding to that Role.
pub const AUTHENTICATION_NAMESPACE: &str = "kube-system";
/// The ConfigMap in which kube-apiserver publishes its client CA and front-proxy settings.
pub const AUTHENTICATION_CONFIGMAP: &str = "extension-apiserver-authentication";
/// Name of the RoleBinding of the CCM's ServiceAccount to [`AUTHENTICATION_READER_ROLE`].
pub const CCM_AUTHENTICATION_READER_BINDING: &str =
    "hcloud-cloud-controller-manager:extension-apiserver-authentication-reader";

/// The shipped ClusterRole rules file, relative to the repository root.
pub const CCM_RULES_PATH: &str = "deploy/chart/hcloud-ccm/files/clusterrole-rules.json";

/// The shipped ClusterRole rules, as JSON (a list of RBAC `PolicyRule`s).
pub const CCM_RULES_JSON: &str = include_str!("../../../deploy/chart/hcloud-ccm/files/clusterrole-rules.json");

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/name".to_owned(), "hcloud-cloud-controller-manager".to_owned())])
}

/// The shipped rules ([`CCM_RULES_JSON`]) as Kubernetes `PolicyRule`s.
pub fn ccm_policy_rules() -> Result<Vec<PolicyRule>, HarnessError> {
    serde_json::from_str(CCM_RULES_JSON)
        .map_err(|e| HarnessError::RbacRules { path: CCM_RULES_PATH, message: e.to_string() })
}

/// The CCM's ClusterRole ([`CCM_CLUSTER_ROLE`] with [`ccm_policy_rules`]).
pub fn ccm_cluster_role() -> Result<ClusterRole, HarnessError> {
    Ok(ClusterRole {
        metadata: ObjectMeta {
            name: Some(CCM_CLUSTER_ROLE.to_owned()),
            labels: Some(labels()),
            ..ObjectMeta::default()
        },
        rules: Some(ccm_policy_rules()?),
        ..ClusterRole::default()
    })
}

/// The CCM's ServiceAccount as a binding's subject.
fn ccm_subject() -> Subject {
    Subject {
        kind: "ServiceAccount".to_owned(),
        name: CCM_SERVICE_ACCOUNT.to_owned(),
        namespace: Some(CCM_NAMESPACE.to_owned()),
        ..Subject::default()
    }
}

/// A reference to the RBAC `kind` (`Role` or `ClusterRole`) called `name`.
fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef { api_group: Some("rbac.authorization.k8s.io".to_owned()), kind: kind.to_owned(), name: name.to_owned() }
}

/// Binds [`CCM_CLUSTER_ROLE`] to the ServiceAccount `kube-system/hcloud-cloud-controller-manager`.
pub fn ccm_cluster_role_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(CCM_CLUSTER_ROLE_BINDING.to_owned()),
            labels: Some(labels()),
            ..ObjectMeta::default()
        },
        role_ref: role_ref("ClusterRole", CCM_CLUSTER_ROLE),
        subjects: Some(vec![ccm_subject()]),
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
        role_ref: role_ref("ClusterRole", AUTH_DELEGATOR_CLUSTER_ROLE),
        subjects: Some(vec![ccm_subject()]),
    }
}

/// Binds the built-in Role [`AUTHENTICATION_READER_ROLE`] in [`AUTHENTICATION_NAMESPACE`] to the
/// CCM's ServiceAccount, so that its secure port can read the cluster's client CA and
/// front-proxy settings from [`AUTHENTICATION_CONFIGMAP`].
pub fn ccm_authentication_reader_binding() -> RoleBinding {
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(CCM_AUTHENTICATION_READER_BINDING.to_owned()),
            namespace: Some(AUTHENTICATION_NAMESPACE.to_owned()),
            labels: Some(labels()),
            ..ObjectMeta::default()
        },
        role_ref: role_ref("Role", AUTHENTICATION_READER_ROLE),
        subjects: Some(vec![ccm_subject()]),
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

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn user_name_matches_service_account() {
        assert_eq!(CCM_USER, format!("system:serviceaccount:{CCM_NAMESPACE}:{CCM_SERVICE_ACCOUNT}"));
    }

    fn verbs_of(rules: &[PolicyRule], group: &str, resource: &str) -> Vec<String> {
        rules
            .iter()
            .filter(|r| r.api_groups.as_deref().unwrap_or_default().iter().any(|g| g == group))
            .filter(|r| r.resources.as_deref().unwrap_or_default().iter().any(|x| x == resource))
            .flat_map(|r| r.verbs.clone())
            .collect()
    }

    #[test]
    fn shipped_rules_parse_and_grant_exactly_what_the_ccm_calls() {
        let rules = ccm_policy_rules().expect("the shipped rules parse");
        assert_eq!(verbs_of(&rules, "", "nodes"), strings(&["get", "list", "watch", "patch", "delete"]));
        assert_eq!(verbs_of(&rules, "", "nodes/status"), strings(&["patch"]));
        assert_eq!(verbs_of(&rules, "", "services"), strings(&["list", "watch"]));
        assert_eq!(verbs_of(&rules, "", "services/status"), strings(&["patch"]));
        assert_eq!(verbs_of(&rules, "", "events"), strings(&["create", "patch"]));
        assert_eq!(verbs_of(&rules, "coordination.k8s.io", "leases"), strings(&["get", "create", "update"]));
        // Nothing else: no wildcard, no other resource (the official role's configmaps and
        // serviceaccounts are not used by hcloud-ccm).
        assert_eq!(rules.len(), 6, "{rules:?}");
        assert!(rules.iter().all(|r| !r.verbs.iter().any(|v| v == "*")), "{rules:?}");
        assert!(rules.iter().all(|r| r.resource_names.is_none() && r.non_resource_urls.is_none()));
    }

    #[test]
    fn cluster_role_carries_the_shipped_rules() {
        let role = ccm_cluster_role().expect("role");
        assert_eq!(role.metadata.name.as_deref(), Some(CCM_CLUSTER_ROLE));
        assert_eq!(role.rules, Some(ccm_policy_rules().expect("rules")));
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
        assert_ne!(binding.metadata.name.as_deref(), Some(CCM_CLUSTER_ROLE_BINDING));
    }

    #[test]
    fn authentication_reader_binding_targets_the_ccm_service_account_in_kube_system() {
        let binding = ccm_authentication_reader_binding();
        assert_eq!(binding.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(binding.role_ref.kind, "Role");
        assert_eq!(binding.role_ref.name, "extension-apiserver-authentication-reader");
        let subjects = binding.subjects.unwrap_or_default();
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(
            format!("system:serviceaccount:{}:{}", subjects[0].namespace.as_deref().unwrap_or(""), subjects[0].name),
            CCM_USER
        );
    }
}
