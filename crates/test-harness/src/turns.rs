//! [`ControlPlane::exclusive`]: a control plane of this test binary's pool, for one test at a
//! time.
//!
//! A CCM watches every Node and Service of its cluster, so two end-to-end tests that each run a
//! CCM cannot share one control plane at the same time. Taking turns on one control plane per
//! binary made such tests run one after another, and they mostly wait (for a CCM, a fake's
//! action, the official CCM's polling). The pool gives each test a control plane of its own
//! for its turn: up to [`pool_size`] control planes per test binary, started on demand and
//! handed from one test to the next (a test cleans up what earlier turns left, as it did on the
//! shared control plane). Tests beyond the pool's size wait for a turn.
//!
//! The pool is separate from [`ControlPlane::shared`]: tests that isolate themselves by unique
//! names keep sharing that one, and can never disturb a test that holds a turn.

use std::sync::Mutex;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::control_plane::ControlPlane;
use crate::error::HarnessError;

/// The environment variable that sets [`pool_size`].
pub const POOL_SIZE_VARIABLE: &str = "HCLOUD_CCM_TEST_CONTROL_PLANES";

/// Control planes per test binary when [`POOL_SIZE_VARIABLE`] is unset: enough for the tests
/// that mostly wait to overlap on a 2-core machine, few enough that the machine's memory
/// (each control plane is an etcd and a kube-apiserver, ~0.5 GiB) and CPU are not the limit.
pub const DEFAULT_POOL_SIZE: usize = 3;

/// The number of control planes this test binary's pool may start: [`POOL_SIZE_VARIABLE`] if
/// it is a positive number, else [`DEFAULT_POOL_SIZE`]. `1` restores strict turns on one
/// control plane.
pub fn pool_size() -> usize {
    std::env::var(POOL_SIZE_VARIABLE)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_POOL_SIZE)
}

struct Pool {
    /// One permit per control plane the pool may run; a turn holds one.
    turns: std::sync::OnceLock<std::sync::Arc<Semaphore>>,
    /// Started control planes nobody holds a turn on.
    idle: Mutex<Vec<&'static ControlPlane>>,
}

static POOL: Pool = Pool { turns: std::sync::OnceLock::new(), idle: Mutex::new(Vec::new()) };

/// One test's exclusive use of a control plane of the pool; the control plane goes back to
/// the pool when the turn is dropped (it keeps running, with whatever the test left in it).
#[derive(Debug)]
pub struct Turn {
    control_plane: &'static ControlPlane,
    _permit: OwnedSemaphorePermit,
}

impl Turn {
    /// The control plane of this turn.
    pub fn control_plane(&self) -> &'static ControlPlane {
        self.control_plane
    }
}

impl std::ops::Deref for Turn {
    type Target = ControlPlane;

    fn deref(&self) -> &ControlPlane {
        self.control_plane
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // The permit is released after this push (fields drop after `drop`), so the next test
        // finds this control plane idle instead of starting another.
        lock(&POOL.idle).push(self.control_plane);
    }
}

/// The pool's idle list; a panic while it was held cannot leave it inconsistent (a push or a
/// pop), so a poisoned lock is used as it is.
fn lock<'a>(idle: &'a Mutex<Vec<&'static ControlPlane>>) -> std::sync::MutexGuard<'a, Vec<&'static ControlPlane>> {
    idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ControlPlane {
    /// A control plane for this test alone until the returned [`Turn`] is dropped: an idle one
    /// of this binary's pool, a newly started one while the pool has fewer than
    /// [`pool_size`], or else the next one another test gives back.
    ///
    /// Safe to call from many `#[tokio::test]`s at once (each with its own runtime). A failed
    /// start is returned to the caller and frees the turn for the next test to try.
    pub async fn exclusive() -> Result<Turn, HarnessError> {
        let turns = POOL.turns.get_or_init(|| std::sync::Arc::new(Semaphore::new(pool_size())));
        let permit = std::sync::Arc::clone(turns)
            .acquire_owned()
            .await
            .map_err(|_| HarnessError::SharedStart("the control-plane pool is closed".to_owned()))?;
        let idle = lock(&POOL.idle).pop();
        let control_plane = match idle {
            Some(control_plane) => control_plane,
            None => {
                // The pool lives as long as the test binary: the control plane is leaked on
                // purpose, like the shared one in its static, and stopped by its lifelines
                // when the process exits.
                let started = ControlPlane::start().await?;
                Box::leak(Box::new(started))
            }
        };
        Ok(Turn { control_plane, _permit: permit })
    }
}
