//! The API server's audit policy and where a control plane keeps it and its log: what
//! [`crate::control_plane`] starts kube-apiserver with, and [`crate::audit`] reads back.

use std::path::Path;

/// The audit policy of every control plane: ServiceAccounts' requests once each, when answered.
pub const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
"#;

/// The file names of the policy and the log in the control plane's directory.
pub(crate) const POLICY_FILE: &str = "audit-policy.yaml";
pub(crate) const LOG_FILE: &str = "audit.log";

/// kube-apiserver's flags for [`AUDIT_POLICY`] with the log in `dir`.
pub(crate) fn apiserver_flags(dir: &Path) -> [String; 3] {
    [
        format!("--audit-policy-file={}", dir.join(POLICY_FILE).display()),
        format!("--audit-log-path={}", dir.join(LOG_FILE).display()),
        "--audit-log-format=json".to_owned(),
    ]
}
