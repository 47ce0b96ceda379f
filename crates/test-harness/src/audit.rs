//! The API server's audit log, and identities that it records: what a process did to the API
//! server, as the API server saw it (every request of a ServiceAccount, with its verb, object
//! and answer code), for tests that must show a process wrote nothing, or was never refused.
//!
//! Every [`ControlPlane`] writes an audit log ([`AUDIT_POLICY`]): one JSON line per finished
//! request of a user in the group `system:serviceaccounts`, at level `Metadata` (no bodies), and
//! nothing for the static identities (admin, the CCM's, the restricted one), so the suite's other
//! traffic costs nothing. A test gets an audited identity from
//! [`ControlPlane::service_account_kubeconfig`]: a ServiceAccount of its own and a token the
//! API server issued for it (TokenRequest), as a Pod's would be.

use std::path::PathBuf;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde::Deserialize;

pub use crate::audit_policy::AUDIT_POLICY;
use crate::audit_policy::LOG_FILE;
use crate::control_plane::ControlPlane;
use crate::error::HarnessError;
use crate::kubeconfig::{base64, kubeconfig};

/// The verbs that change something (all others only read).
pub const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// One request as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// The user name, e.g. `system:serviceaccount:kube-system:ccm`.
    pub user: String,
    /// The API verb: get, list, watch, create, update, patch, delete, ...
    pub verb: String,
    /// The request's path and query.
    pub uri: String,
    /// The resource (`nodes`), with `/<subresource>` when there is one (`services/status`).
    pub resource: String,
    /// The API group (empty for the core group).
    pub api_group: String,
    /// The object's namespace, if namespaced.
    pub namespace: Option<String>,
    /// The object's name, if the request named one.
    pub name: Option<String>,
    /// The HTTP status code of the answer.
    pub code: u16,
    /// The client's `User-Agent` (a controller manager's names the controller last:
    /// `<program>/<version> (<os>/<arch>) <controller>`).
    pub user_agent: String,
}

impl AuditEvent {
    /// Whether the request was one that changes something ([`WRITE_VERBS`]).
    pub fn is_write(&self) -> bool {
        WRITE_VERBS.contains(&self.verb.as_str())
    }
}

impl std::fmt::Display for AuditEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} -> {} ({})", self.verb, self.uri, self.code, self.user)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEvent {
    #[serde(default)]
    verb: String,
    #[serde(default)]
    request_u_r_i: String,
    #[serde(default)]
    user_agent: String,
    #[serde(default)]
    user: RawUser,
    #[serde(default)]
    object_ref: Option<RawObjectRef>,
    #[serde(default)]
    response_status: Option<RawStatus>,
}

#[derive(Deserialize, Default)]
struct RawUser {
    #[serde(default)]
    username: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: Option<String>,
    #[serde(default)]
    api_group: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize, Default)]
struct RawStatus {
    #[serde(default)]
    code: u16,
}

/// Parses the audit log's JSON lines (a line that does not parse, e.g. one being written, is
/// skipped).
pub fn parse_audit_log(text: &str) -> Vec<AuditEvent> {
    text.lines()
        .filter_map(|line| serde_json::from_str::<RawEvent>(line).ok())
        .map(|raw| {
            let object = raw.object_ref.unwrap_or_default();
            let resource = match object.subresource {
                Some(sub) if !sub.is_empty() => format!("{}/{sub}", object.resource),
                _ => object.resource,
            };
            AuditEvent {
                user: raw.user.username,
                verb: raw.verb,
                uri: raw.request_u_r_i,
                resource,
                api_group: object.api_group,
                namespace: object.namespace,
                name: object.name,
                code: raw.response_status.map_or(0, |s| s.code),
                user_agent: raw.user_agent,
            }
        })
        .collect()
}

impl ControlPlane {
    /// The audit log's file.
    pub fn audit_log_path(&self) -> PathBuf {
        self.dir().join(LOG_FILE)
    }

    /// Every request the audit log holds so far (of ServiceAccount users only, see
    /// [`AUDIT_POLICY`]).
    pub fn audit_events(&self) -> Result<Vec<AuditEvent>, HarnessError> {
        let path = self.audit_log_path();
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(parse_audit_log(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(HarnessError::io(format!("reading {}", path.display()), e)),
        }
    }

    /// The requests of `user` the audit log holds so far.
    pub fn audit_events_of(&self, user: &str) -> Result<Vec<AuditEvent>, HarnessError> {
        Ok(self.audit_events()?.into_iter().filter(|e| e.user == user).collect())
    }

    /// A kubeconfig for the ServiceAccount `namespace/name` (created if missing) with a token
    /// the API server issues for it (TokenRequest, valid 2 hours), and the user name the API
    /// server sees (`system:serviceaccount:<namespace>:<name>`). Its requests are audited.
    pub async fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(PathBuf, String), HarnessError> {
        let admin = self.admin_client().await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(admin, namespace);
        let account = ServiceAccount {
            metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
            ..ServiceAccount::default()
        };
        match accounts.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(e) => return Err(HarnessError::kube(format!("creating ServiceAccount {namespace}/{name}"), e)),
        }
        let request = TokenRequest {
            spec: Some(TokenRequestSpec { expiration_seconds: Some(7200), ..TokenRequestSpec::default() }),
            ..TokenRequest::default()
        };
        let issued: TokenRequest =
            accounts
                .create_subresource("token", name, &PostParams::default(), &request)
                .await
                .map_err(|e| HarnessError::kube(format!("requesting a token for {namespace}/{name}"), e))?;
        let token = issued.status.and_then(|s| s.token).unwrap_or_default();
        let user = format!("system:serviceaccount:{namespace}:{name}");
        let ca = std::fs::read(self.dir().join("certs/apiserver.crt"))
            .map_err(|e| HarnessError::io("reading the API server's certificate", e))?;
        let path = self.dir().join(format!("sa-{namespace}-{name}.kubeconfig"));
        std::fs::write(&path, kubeconfig(self.server_url(), &base64(&ca), &user, &token))
            .map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))?;
        Ok((path, user))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_lines_parse_into_events() {
        let log = concat!(
            r#"{"kind":"Event","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns/services/s/status","verb":"patch","user":{"username":"system:serviceaccount:kube-system:a","groups":["system:serviceaccounts"]},"userAgent":"hcloud-ccm/0.1.0 (linux/amd64) service-lb-controller","objectRef":{"resource":"services","namespace":"ns","name":"s","apiVersion":"v1","subresource":"status"},"responseStatus":{"metadata":{},"code":200}}"#,
            "\n",
            r#"{"kind":"Event","verb":"get","requestURI":"/api/v1/nodes/n","user":{"username":"u"},"objectRef":{"resource":"nodes","name":"n","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","reason":"Forbidden","code":403}}"#,
            "\n",
            r#"{"kind":"Event","verb":"get","requestURI":"/healthz","user":{"username":"u"},"responseStatus":{"code":200}}"#,
            "\n{\"half a line",
        );
        let events = parse_audit_log(log);
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].resource, "services/status");
        assert_eq!(events[0].namespace.as_deref(), Some("ns"));
        assert_eq!(events[0].user_agent, "hcloud-ccm/0.1.0 (linux/amd64) service-lb-controller");
        assert_eq!(events[1].user_agent, "");
        assert!(events[0].is_write());
        assert_eq!((events[1].code, events[1].resource.as_str(), events[1].is_write()), (403, "nodes", false));
        assert_eq!(events[2].resource, "");
    }
}
