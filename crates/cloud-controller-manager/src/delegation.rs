//! The secure port's delegated authentication and authorization from the flags: the review
//! clients (`--authentication-kubeconfig`, `--authorization-kubeconfig`), and upstream's
//! in-cluster lookup of missing client-certificate settings in the ConfigMap
//! `kube-system/extension-apiserver-authentication` (`--authentication-skip-lookup`,
//! `--authentication-tolerate-lookup-failure`): read at start-up, then again every minute (see
//! [`DelegatingAuth::look_up_in_cluster`]).

use controller_serving::{
    AUTHENTICATION_CONFIGMAP, AUTHENTICATION_CONFIGMAP_NAMESPACE, AUTHENTICATION_READER_ROLE, AuthSettings,
    ClientCertSettings, ClusterLookup, DelegatingAuth, LookupError,
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
        Err(error @ (LookupError::Read { .. } | LookupError::Timeout { .. })) if auth.tolerate_lookup_failure => {
            warn!(
                "cannot read configmap {AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP} to look up the \
                 client CA and front-proxy settings ({}); continuing without them and trying again in the \
                 background (bind the Role {AUTHENTICATION_READER_ROLE} in {AUTHENTICATION_CONFIGMAP_NAMESPACE} to \
                 this identity, pass --authentication-skip-lookup to not look, or \
                 --authentication-tolerate-lookup-failure=false to make this fatal)",
                error_chain(&error)
            );
        }
        Err(error) if auth.tolerate_lookup_failure => warn!(
            "{}: the client CA and front-proxy settings of configmap \
             {AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP} are not used until it is fixed (it is \
             read again every minute; --authentication-tolerate-lookup-failure=false makes this fatal)",
            error_chain(&error)
        ),
        Err(error) => return Err(ManagerError::AuthenticationLookup(error)),
    }
    Ok(delegating)
}

/// An error and its sources, `: `-separated.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
