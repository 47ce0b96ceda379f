//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics and a
//! fence that makes "only the leader acts" hold even across partitions.
//!
//! Several replicas of a controller run; only the one holding the Lease may act. This crate
//! decides who that is, keeps the decision fresh, and gives the leader a cheap [`Fence`] to
//! check before every external side effect.
//!
//! # Data flow
//!
//! ```text
//!  kube-apiserver ──GET──▶ api (thin, every call timed out) ──Snapshot──▶ decide::observe
//!        ▲                                                                     │ View
//!        │ POST / PUT + resourceVersion                                        ▼
//!        └──────────── elector (async loops) ◀──Step── decide::next_step(view, role, now)
//!                          │
//!                          ├─▶ watch::Receiver<LeaderState>   (standby / leading / lost …)
//!                          ├─▶ Fence (atomics: is_current, lost token)
//!                          └─▶ HealthCheck (client-go's HealthzAdaptor)
//! ```
//!
//! All decisions are pure functions of the observed Lease and the local monotonic time
//! (the private `decide` module, unit-tested over synthetic instants); the I/O layer only sends
//! the requests they ask for.
//!
//! # Semantics
//!
//! - Only GET, POST and PUT on leases (the usual CCM RBAC grants `create, get, list, watch,
//!   update`, not `patch`). A missing Lease is created. Every write of an existing Lease is a
//!   replace carrying `metadata.resourceVersion`: a 409 means someone else wrote, and the
//!   Lease is read again. Nothing is ever written without that precondition.
//! - The record is client-go's: `holderIdentity`, `leaseDurationSeconds`, `acquireTime`,
//!   `renewTime`, `leaseTransitions` (+1 whenever the holder changes).
//! - Expiry is judged by **local monotonic time** since this replica last saw the record
//!   change, plus the record's `leaseDurationSeconds`; a remote `renewTime` is never compared
//!   with the local clock, so clock skew does not matter. An empty holder is free at once.
//! - The leader renews every `retry_period` with a single PUT from its cached copy. A conflict
//!   re-reads: another holder means lost at once; still us (someone touched the object) means
//!   retry with the fresh version. No successful renewal within `renew_deadline` of the last
//!   one means lost. Every call's timeout ends at the renew deadline at the latest.
//! - A standby polls every `retry_period` plus up to 20 % jitter: one GET per period.
//! - **Fence.** [`Fence::is_current`] is true only while monotonic now < send time of the last
//!   successful write + `renew_deadline`. Another replica takes over at the earliest
//!   `lease_duration` (> `renew_deadline`) after observing that write, so a caller checking
//!   the fence before each side effect never acts after a takeover.
//! - Fail-stop: on loss, [`Leadership::keep`] returns [`Lost`], the fence closes and
//!   [`Fence::lost`] fires. On graceful shutdown, [`Leadership::release`] writes an empty
//!   holder (client-go's `ReleaseOnCancel`) so a standby takes over within about one
//!   `retry_period`.
//!
//! # Example
//!
//! ```no_run
//! use leader_election::{ElectionConfig, LeaderElector, default_identity};
//! use tokio_util::sync::CancellationToken;
//! # async fn run(client: kube::Client, shutdown: CancellationToken) -> Result<(), Box<dyn std::error::Error>> {
//! let config = ElectionConfig::new("kube-system", "my-controller", default_identity());
//! let elector = LeaderElector::new(client, config)?;
//! let Some(mut leadership) = elector.acquire(&shutdown).await else { return Ok(()) };
//! let fence = leadership.fence();
//! let work = fence.lost().child_token();
//! // start the work on `work`; it checks `fence.is_current()` before every side effect
//! match leadership.keep(&shutdown).await {
//!     Ok(()) => {
//!         work.cancel(); // stop the work first, then hand over
//!         leadership.release().await?;
//!     }
//!     Err(lost) => {
//!         work.cancel();
//!         return Err(lost.into()); // exit non-zero
//!     }
//! }
//! # Ok(())
//! # }
//! ```

mod api;
mod config;
mod decide;
mod elector;
mod fence;
mod record;
mod state;

pub use config::{
    ConfigError, DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, ElectionConfig,
    MAX_LEASE_DURATION, default_identity,
};
pub use elector::{LeaderElector, Leadership};
pub use fence::{Fence, HealthCheck, Unhealthy};
pub use state::{Error, LeaderState, Lost, LostReason};

#[cfg(test)]
mod tests {
    /// The application moves these across tasks and into synchronous callbacks.
    #[test]
    fn handles_are_send_and_sync() {
        fn send_sync_static<T: Send + Sync + 'static>() {}
        fn send_static<T: Send + 'static>() {}
        send_sync_static::<crate::Fence>();
        send_sync_static::<crate::HealthCheck>();
        send_sync_static::<crate::LeaderElector>();
        send_static::<crate::Leadership>();
        send_sync_static::<crate::Lost>();
        send_sync_static::<crate::Error>();
    }
}
