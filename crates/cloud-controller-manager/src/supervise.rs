//! Supervision of the manager's long-running tasks: the controllers, the informers' watches, the
//! provider's event queue and the program's own tasks ([`crate::Manager::spawn_task`], e.g.
//! hcloud-ccm's credential rotation). A task that ends before it was told to stop, by returning or by
//! panicking, is logged as an error naming it, and its health check fails from then on: the
//! liveness probe restarts the process (upstream crashes at once). A stopped task is not
//! restarted here, because its state is unknown.
//!
//! - A controller's check is on `/healthz` (controllers run only on the leader); so is a
//!   program's task's (it runs on every replica, but the replica still serves without it: its
//!   end calls for a restart, not for taking the replica out of service).
//! - An informer's and the event queue's checks are on `/healthz` and `/readyz`: they run on
//!   every replica, and without them the controllers work from a cache that no longer changes,
//!   or the provider's events are lost. `informer-sync` (`/readyz`) also reports a stopped
//!   informer ([`informers_synced`]).
//!
//! Panics inside one reconcile, one pass or one informer handler do not get here: the runtime
//! catches and counts them (see `controller_runtime`), and the task goes on.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use controller_runtime::{Synced, panic_message};
use controller_serving::{Health, Probe};
use futures::FutureExt as _;
use tokio_util::sync::CancellationToken;
use tracing::error;

/// The probes of a controller's check.
const CONTROLLER_PROBES: &[Probe] = &[Probe::Healthz];
/// The probes of the checks of what feeds the controllers (informers, the event queue).
const FEED_PROBES: &[Probe] = &[Probe::Healthz, Probe::Readyz];

/// A supervised task: how it is named, which probes it fails, and when it may end.
pub(crate) struct Supervised {
    /// The health check's name (`/<probe>/<check>`), also the `task` field of the logs.
    check: String,
    /// How messages name it.
    what: String,
    /// The probes its check belongs to.
    probes: &'static [Probe],
    /// What its end means for the rest, for the error log.
    consequence: &'static str,
    /// The task may end once this fired.
    stop: CancellationToken,
}

impl Supervised {
    /// Controller `name` (its check has the controller's name), stopped by `stop`.
    pub(crate) fn controller(name: &str, stop: CancellationToken) -> Self {
        Supervised {
            check: name.to_owned(),
            what: name.to_owned(),
            probes: CONTROLLER_PROBES,
            consequence: "its objects are no longer reconciled",
            stop,
        }
    }

    /// The informer of `kind` (check `<kind>-informer`, lower case), stopped by `shutdown`.
    pub(crate) fn informer(kind: &str, shutdown: CancellationToken) -> Self {
        Supervised {
            check: format!("{}-informer", kind.to_ascii_lowercase()),
            what: format!("the {kind} informer"),
            probes: FEED_PROBES,
            consequence: "the controllers work from a cache that no longer follows the API server",
            stop: shutdown,
        }
    }

    /// The program's task `check` (`what` in messages; `consequence`: what its end means),
    /// stopped by `shutdown`.
    pub(crate) fn task(check: &str, what: &str, consequence: &'static str, shutdown: CancellationToken) -> Self {
        Supervised {
            check: check.to_owned(),
            what: what.to_owned(),
            probes: CONTROLLER_PROBES,
            consequence,
            stop: shutdown,
        }
    }

    /// The queue publishing the provider's events (check `provider-events`), stopped by
    /// `shutdown`.
    pub(crate) fn event_queue(shutdown: CancellationToken) -> Self {
        Supervised {
            check: "provider-events".to_owned(),
            what: "the provider's event queue".to_owned(),
            probes: FEED_PROBES,
            consequence: "the provider's events are no longer published",
            stop: shutdown,
        }
    }
}

/// Runs `task` with a health check that fails once it ended before its stop token fired,
/// whether it returned or panicked; `stopped` is called then.
pub(crate) fn supervise(
    supervised: Supervised,
    task: impl Future<Output = ()> + Send + 'static,
    health: &Health,
    stopped: impl FnOnce() + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let Supervised { check, what, probes, consequence, stop } = supervised;
    let exited = Arc::new(AtomicBool::new(false));
    let done = exited.clone();
    let reason = format!("{what} stopped");
    health.register(&check, probes, move || if exited.load(Ordering::Relaxed) { Err(reason.clone()) } else { Ok(()) });
    let failing = probes.iter().map(|p| format!("/{p}")).collect::<Vec<_>>().join(" and ");
    async move {
        // Unwind safety: after a panic the task's future is dropped, never polled again.
        let outcome = AssertUnwindSafe(task).catch_unwind().await;
        match outcome {
            Ok(()) if stop.is_cancelled() => return,
            Ok(()) => error!(task = %check, "{what} stopped unexpectedly: {consequence}; {failing} fail from now on"),
            Err(panic) => error!(
                task = %check,
                panic = panic_message(&*panic),
                "{what} panicked and stopped: {consequence}; {failing} fail from now on"
            ),
        }
        done.store(true, Ordering::Relaxed);
        stopped();
    }
}

/// The `informer-sync` check (`/readyz`): every informer holds its first complete list and
/// still runs.
pub(crate) fn informers_synced(informers: &[(&str, Synced)]) -> Result<(), String> {
    for (kind, synced) in informers {
        if synced.is_stopped() {
            return Err(format!("the {kind} informer stopped"));
        }
        if !synced.is_synced() {
            return Err(format!("the {kind} informer has not synced yet"));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "supervise_tests.rs"]
mod tests;
