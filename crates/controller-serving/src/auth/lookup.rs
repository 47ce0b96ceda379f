//! Upstream's in-cluster lookup of the client-certificate settings the flags leave unset: the
//! client CA and the front proxy's settings from the ConfigMap the API server publishes them in
//! (`kube-system/extension-apiserver-authentication`), read with the authentication identity.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use super::client_cert::{CaBundle, ClientCertSettings, RequestHeaderSettings};
use crate::error::ServeError;

/// Namespace of the ConfigMap the API server publishes its authentication settings in.
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// Name of that ConfigMap.
pub const AUTHENTICATION_CONFIGMAP: &str = "extension-apiserver-authentication";
/// The built-in Role in [`AUTHENTICATION_CONFIGMAP_NAMESPACE`] that may read it.
pub const AUTHENTICATION_READER_ROLE: &str = "extension-apiserver-authentication-reader";
/// How long one read of the ConfigMap may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the missing client-certificate settings are looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterLookup {
    /// The ConfigMap's namespace ([`AUTHENTICATION_CONFIGMAP_NAMESPACE`]).
    pub namespace: String,
    /// The ConfigMap's name ([`AUTHENTICATION_CONFIGMAP`]).
    pub name: String,
}

impl Default for ClusterLookup {
    /// The API server's ConfigMap.
    fn default() -> Self {
        ClusterLookup {
            namespace: AUTHENTICATION_CONFIGMAP_NAMESPACE.to_owned(),
            name: AUTHENTICATION_CONFIGMAP.to_owned(),
        }
    }
}

impl ClusterLookup {
    /// `configmap <namespace>/<name>`, for messages.
    pub fn describe(&self) -> String {
        format!("configmap {}/{}", self.namespace, self.name)
    }

    /// Where a key's value came from, for messages: `(configmap <ns>/<name>, key <key>)`.
    fn origin(&self, key: &str) -> String {
        format!("({}, key {key})", self.describe())
    }
}

/// Why the lookup found no usable settings.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The ConfigMap could not be read.
    #[error("cannot read {configmap}")]
    Read {
        /// `configmap <namespace>/<name>`.
        configmap: String,
        /// Whether the API server refused (missing RBAC).
        forbidden: bool,
        /// The API server's or the client's error.
        #[source]
        source: kube::Error,
    },
    /// The read took too long.
    #[error("cannot read {configmap}: no answer within {}s", READ_TIMEOUT.as_secs())]
    Timeout {
        /// `configmap <namespace>/<name>`.
        configmap: String,
    },
    /// A CA bundle it holds is unusable.
    #[error(transparent)]
    Unusable(#[from] ServeError),
}

/// The ConfigMap's data; `None` when it does not exist (as upstream, not an error).
pub(crate) async fn read(
    client: &Client,
    lookup: &ClusterLookup,
) -> Result<Option<BTreeMap<String, String>>, LookupError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &lookup.namespace);
    match tokio::time::timeout(READ_TIMEOUT, api.get_opt(&lookup.name)).await {
        Ok(Ok(found)) => Ok(found.map(|cm| cm.data.unwrap_or_default())),
        Ok(Err(source)) => {
            let forbidden = matches!(&source, kube::Error::Api(status) if status.is_forbidden());
            Err(LookupError::Read { configmap: lookup.describe(), forbidden, source })
        }
        Err(_) => Err(LookupError::Timeout { configmap: lookup.describe() }),
    }
}

/// The settings `wanted` asks for (`client_ca` and `request_header` set to anything: look it up)
/// from the ConfigMap's keys (upstream's names; the header lists are JSON arrays).
pub(crate) fn settings_from(
    data: &BTreeMap<String, String>,
    lookup: &ClusterLookup,
    want_client_ca: bool,
    want_request_header: bool,
) -> ClientCertSettings {
    let mut settings = ClientCertSettings::default();
    if want_client_ca && let Some(pem) = data.get("client-ca-file").filter(|p| !p.trim().is_empty()) {
        settings.client_ca = Some(CaBundle::Pem { origin: lookup.origin("client-ca-file"), pem: pem.clone() });
    }
    if want_request_header && let Some(pem) = data.get("requestheader-client-ca-file").filter(|p| !p.trim().is_empty())
    {
        let list = |key: &str| -> Vec<String> {
            data.get(key).and_then(|v| serde_json::from_str::<Vec<String>>(v).ok()).unwrap_or_default()
        };
        settings.request_header = Some(RequestHeaderSettings {
            ca: CaBundle::Pem { origin: lookup.origin("requestheader-client-ca-file"), pem: pem.clone() },
            allowed_names: list("requestheader-allowed-names"),
            username_headers: list("requestheader-username-headers"),
            uid_headers: list("requestheader-uid-headers"),
            group_headers: list("requestheader-group-headers"),
            extra_headers_prefix: list("requestheader-extra-headers-prefix"),
        });
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_settings_asked_for_come_from_the_configmap() {
        let data = data(&[
            ("client-ca-file", "CA"),
            ("requestheader-client-ca-file", "PROXY-CA"),
            ("requestheader-allowed-names", "[\"front-proxy-client\"]"),
            ("requestheader-username-headers", "[\"X-Remote-User\"]"),
            ("requestheader-group-headers", "[\"X-Remote-Group\"]"),
            ("requestheader-extra-headers-prefix", "[\"X-Remote-Extra-\"]"),
        ]);
        let lookup = ClusterLookup::default();
        let settings = settings_from(&data, &lookup, true, true);
        assert!(matches!(&settings.client_ca, Some(CaBundle::Pem { pem, .. }) if pem == "CA"));
        let rh = settings.request_header.clone().unwrap_or_else(|| panic!("request header settings"));
        assert!(matches!(&rh.ca, CaBundle::Pem { pem, origin } if pem == "PROXY-CA"
            && origin == "(configmap kube-system/extension-apiserver-authentication, key requestheader-client-ca-file)"));
        assert_eq!(rh.allowed_names, vec!["front-proxy-client".to_owned()]);
        assert_eq!(rh.username_headers, vec!["X-Remote-User".to_owned()]);
        assert!(rh.uid_headers.is_empty());
        // What the flags gave is not looked up.
        assert_eq!(settings_from(&data, &lookup, false, false), ClientCertSettings::default());
    }
}
