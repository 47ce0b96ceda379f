//! Waiting for leadership (upstream: `leaderelection.RunOrDie` in the controller manager).

use controller_runtime::EventRecorder;
use k8s_openapi::api::core::v1::ObjectReference;
use leader_election::{ElectionConfig, LeaderElector, Leadership, default_identity};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::options::LeaderElectionOptions;

/// An elector for `options` with a fresh `<hostname>_<uuid>` identity.
pub(crate) fn elector(
    client: kube::Client,
    options: &LeaderElectionOptions,
) -> Result<LeaderElector, leader_election::ConfigError> {
    let config = ElectionConfig {
        namespace: options.namespace.clone(),
        name: options.name.clone(),
        identity: default_identity(),
        lease_duration: options.lease_duration,
        renew_deadline: options.renew_deadline,
        retry_period: options.retry_period,
    };
    LeaderElector::new(client, config)
}

/// Waits for leadership and announces it with a `LeaderElection` event on the Lease, like
/// client-go. `None` if `shutdown` fired first.
pub(crate) async fn acquire(
    elector: &LeaderElector,
    events: EventRecorder,
    shutdown: &CancellationToken,
) -> Option<Leadership> {
    let config = elector.config();
    info!(lease = %config.lease_ref(), identity = %config.identity, "attempting to acquire leader lease");
    let leadership = elector.acquire(shutdown).await?;
    info!(lease = %config.lease_ref(), identity = %config.identity, "successfully acquired lease");
    let lease = ObjectReference {
        api_version: Some("coordination.k8s.io/v1".to_owned()),
        kind: Some("Lease".to_owned()),
        namespace: Some(config.namespace.clone()),
        name: Some(config.name.clone()),
        ..Default::default()
    };
    events.normal(&lease, "LeaderElection", format!("{} became leader", config.identity)).await;
    Some(leadership)
}
