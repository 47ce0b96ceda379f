//! The secure port's delegated authentication and authorization from the flags: the review
//! clients (`--authentication-kubeconfig`, `--authorization-kubeconfig`), and upstream's
//! in-cluster lookup of missing client-certificate settings in the ConfigMap
//! `kube-system/extension-apiserver-authentication` (`--authentication-skip-lookup`,
//! `--authentication-tolerate-lookup-failure`).
//!
//! Upstream watches the ConfigMap; here it is read once at start-up.

use std::collections::BTreeMap;

use controller_serving::{AuthSettings, CaBundle, ClientCertSettings, DelegatingAuth, RequestHeaderSettings};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use tracing::{info, warn};

use crate::context::ClientFactory;
use crate::error::ManagerError;
use crate::options::AuthOptions;

/// Namespace of the ConfigMap the API server publishes its authentication settings in.
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// Name of that ConfigMap.
pub const AUTHENTICATION_CONFIGMAP: &str = "extension-apiserver-authentication";
/// The built-in Role in `kube-system` that may read it.
pub const AUTHENTICATION_READER_ROLE: &str = "extension-apiserver-authentication-reader";

/// The secure port's authenticator and authorizer.
pub(crate) async fn delegating_auth(
    auth: &AuthOptions,
    clients: &ClientFactory,
) -> Result<DelegatingAuth, ManagerError> {
    let user = "auth-delegator";
    let authentication = clients
        .delegation_client("--authentication-kubeconfig", auth.authentication_kubeconfig.as_deref(), user)
        .await?;
    let authorization =
        clients.delegation_client("--authorization-kubeconfig", auth.authorization_kubeconfig.as_deref(), user).await?;
    let mut client_certificates =
        ClientCertSettings { client_ca: auth.client_ca.clone(), request_header: auth.request_header.clone() };
    let missing = client_certificates.client_ca.is_none() || client_certificates.request_header.is_none();
    if !auth.skip_lookup && missing {
        match read_configmap(&authentication).await {
            Ok(Some(data)) => fill_in(&mut client_certificates, &data),
            Ok(None) => {}
            Err(error) if auth.tolerate_lookup_failure => warn!(
                "cannot read configmap {AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP} to look up the \
                 client CA and front-proxy settings ({error}); continuing without them (bind the Role \
                 {AUTHENTICATION_READER_ROLE} in {AUTHENTICATION_CONFIGMAP_NAMESPACE} to this identity, pass \
                 --authentication-skip-lookup to not look, or --authentication-tolerate-lookup-failure=false to \
                 make this fatal)"
            ),
            Err(error) => return Err(ManagerError::AuthenticationLookup(error)),
        }
    }
    let settings = AuthSettings {
        token_cache_ttl: auth.token_cache_ttl,
        authorized_cache_ttl: auth.authorized_cache_ttl,
        unauthorized_cache_ttl: auth.unauthorized_cache_ttl,
        always_allow_paths: auth.always_allow_paths.clone(),
        client_certificates,
    };
    Ok(DelegatingAuth::with_settings(authentication, authorization, settings)?)
}

/// The ConfigMap's data; `None` when it does not exist (as upstream, not an error).
async fn read_configmap(client: &Client) -> Result<Option<BTreeMap<String, String>>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), AUTHENTICATION_CONFIGMAP_NAMESPACE);
    Ok(api.get_opt(AUTHENTICATION_CONFIGMAP).await?.map(|cm| cm.data.unwrap_or_default()))
}

/// Fills the settings the flags left unset from the ConfigMap's keys (upstream's names;
/// the header lists are JSON arrays).
pub(crate) fn fill_in(settings: &mut ClientCertSettings, data: &BTreeMap<String, String>) {
    let origin =
        |key: &str| format!("(configmap {AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP}, key {key})");
    if settings.client_ca.is_none()
        && let Some(pem) = data.get("client-ca-file").filter(|p| !p.trim().is_empty())
    {
        info!("client certificates are authenticated with the client CA from {}", origin("client-ca-file"));
        settings.client_ca = Some(CaBundle::Pem { origin: origin("client-ca-file"), pem: pem.clone() });
    }
    if settings.request_header.is_none()
        && let Some(pem) = data.get("requestheader-client-ca-file").filter(|p| !p.trim().is_empty())
    {
        let list = |key: &str| -> Vec<String> {
            data.get(key).and_then(|v| serde_json::from_str::<Vec<String>>(v).ok()).unwrap_or_default()
        };
        info!("front-proxy requests are authenticated with the settings from {}", origin("requestheader-*"));
        settings.request_header = Some(RequestHeaderSettings {
            ca: CaBundle::Pem { origin: origin("requestheader-client-ca-file"), pem: pem.clone() },
            allowed_names: list("requestheader-allowed-names"),
            username_headers: list("requestheader-username-headers"),
            uid_headers: list("requestheader-uid-headers"),
            group_headers: list("requestheader-group-headers"),
            extra_headers_prefix: list("requestheader-extra-headers-prefix"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_settings_come_from_the_configmap_given_ones_stay() {
        let data: BTreeMap<String, String> = [
            ("client-ca-file", "CA"),
            ("requestheader-client-ca-file", "PROXY-CA"),
            ("requestheader-allowed-names", "[\"front-proxy-client\"]"),
            ("requestheader-username-headers", "[\"X-Remote-User\"]"),
            ("requestheader-group-headers", "[\"X-Remote-Group\"]"),
            ("requestheader-extra-headers-prefix", "[\"X-Remote-Extra-\"]"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let mut settings = ClientCertSettings::default();
        fill_in(&mut settings, &data);
        assert!(matches!(&settings.client_ca, Some(CaBundle::Pem { pem, .. }) if pem == "CA"));
        let rh = settings.request_header.clone().unwrap_or_else(|| panic!("request header settings"));
        assert!(matches!(&rh.ca, CaBundle::Pem { pem, .. } if pem == "PROXY-CA"));
        assert_eq!(rh.allowed_names, vec!["front-proxy-client".to_owned()]);
        assert_eq!(rh.username_headers, vec!["X-Remote-User".to_owned()]);
        assert!(rh.uid_headers.is_empty());

        let mut given = ClientCertSettings { client_ca: Some(CaBundle::File("/ca.pem".into())), request_header: None };
        fill_in(&mut given, &BTreeMap::new());
        assert_eq!(
            given,
            ClientCertSettings { client_ca: Some(CaBundle::File("/ca.pem".into())), request_header: None }
        );
    }
}
