//! Why the manager stopped with an error.

use controller_serving::ServeError;

use crate::kube_client::KubeClientError;

/// Why the manager stopped with an error.
///
/// An underlying error is the [`source`](std::error::Error::source) (or, for a transparent
/// variant, the whole error) and is not repeated in the message, so the chain of causes that
/// the binary prints (anyhow's `{:#}`) names every cause once.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// No Kubernetes client.
    #[error(transparent)]
    Kube(#[from] KubeClientError),
    /// A listener could not start.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// The plain metrics listener could not start.
    #[error("{setting}")]
    PlainListener {
        /// The setting that named the address.
        setting: String,
        /// Why.
        #[source]
        source: ServeError,
    },
    /// The in-cluster lookup of the authentication settings failed
    /// (`--authentication-tolerate-lookup-failure=false`).
    #[error(
        "looking up the client CA and front-proxy settings in configmap \
         kube-system/extension-apiserver-authentication failed (pass --authentication-skip-lookup to not look, \
         or --authentication-tolerate-lookup-failure to continue without them and keep trying)"
    )]
    AuthenticationLookup(#[source] controller_serving::LookupError),
    /// The node IPAM settings cannot be cut into node ranges (checked at flag validation
    /// already, so only a caller building `Options` by hand sees it).
    #[error("node-ipam-controller")]
    NodeIpamConfig(#[source] cloud_controllers::ipam::CidrSetError),
    /// The leader election settings were refused.
    #[error(transparent)]
    LeaderElectionConfig(#[from] leader_election::ConfigError),
    /// Leadership was lost: the process stops so that only the new leader acts (fail-stop).
    #[error("leaderelection lost")]
    LeadershipLost(#[from] leader_election::Lost),
}
