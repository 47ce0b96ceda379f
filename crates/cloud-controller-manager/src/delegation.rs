//! The secure port's delegated authentication and authorization from the flags: the review
//! clients (`--authentication-kubeconfig`, `--authorization-kubeconfig`), and upstream's
//! in-cluster lookup of missing client-certificate settings in the ConfigMap
//! `kube-system/extension-apiserver-authentication` (`--authentication-skip-lookup`,
//! `--authentication-tolerate-lookup-failure`; see [`controller_serving::ClusterLookup`]).

use controller_serving::{
    AUTHENTICATION_CONFIGMAP, AUTHENTICATION_CONFIGMAP_NAMESPACE, AUTHENTICATION_READER_ROLE, AuthSettings,
    ClientCertSettings, ClusterLookup, DelegatingAuth,
};
use tracing::warn;

use crate::context::ClientFactory;
use crate::error::ManagerError;
use crate::options::AuthOptions;

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
    let settings = AuthSettings {
        token_cache_ttl: auth.token_cache_ttl,
        authorized_cache_ttl: auth.authorized_cache_ttl,
        unauthorized_cache_ttl: auth.unauthorized_cache_ttl,
        always_allow_paths: auth.always_allow_paths.clone(),
        client_certificates: ClientCertSettings {
            client_ca: auth.client_ca.clone(),
            request_header: auth.request_header.clone(),
        },
    };
    let delegating = DelegatingAuth::with_settings(authentication, authorization, settings)?;
    if auth.skip_lookup {
        return Ok(delegating);
    }
    match delegating.look_up_in_cluster(ClusterLookup::default()).await {
        Ok(()) => {}
        Err(error) if auth.tolerate_lookup_failure => warn!(
            "cannot read configmap {AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP} to look up the \
             client CA and front-proxy settings ({error}); continuing without them (bind the Role \
             {AUTHENTICATION_READER_ROLE} in {AUTHENTICATION_CONFIGMAP_NAMESPACE} to this identity, pass \
             --authentication-skip-lookup to not look, or --authentication-tolerate-lookup-failure=false to \
             make this fatal)"
        ),
        Err(error) => return Err(ManagerError::AuthenticationLookup(error)),
    }
    Ok(delegating)
}
