//! The fence: whether this process may act on the outside world (the cloud's API) right now.
//!
//! A provider consults [`Fence::check`] before every request it sends. Start-up checks run
//! while the fence is open; once leader election begins, a standby is fenced off, the leader
//! is let through only while its lease is provably its own (the leader elector's fence), and
//! after leadership ends or shutdown completes nothing passes. Without leader election the
//! fence stays open until shutdown.

use std::fmt;
use std::sync::{Arc, RwLock};
use sync_lock::UnpoisonRw as _;

type LeaseCheck = Arc<dyn Fn() -> bool + Send + Sync>;

#[derive(Clone)]
enum State {
    /// Start-up, or no leader election: everything passes.
    Open,
    /// Waiting for leadership.
    Standby,
    /// Leading while the check holds.
    Leading(LeaseCheck),
    /// Leadership ended or the process stops.
    Closed(String),
}

/// Shared gate for external side effects. Cheap to clone; clones share the state.
#[derive(Clone)]
pub struct Fence(Arc<RwLock<State>>);

impl fmt::Debug for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &*self.read() {
            State::Open => "open".to_owned(),
            State::Standby => "standby".to_owned(),
            State::Leading(_) => "leading".to_owned(),
            State::Closed(why) => format!("closed ({why})"),
        };
        f.debug_tuple("Fence").field(&state).finish()
    }
}

impl Default for Fence {
    fn default() -> Self {
        Fence(Arc::new(RwLock::new(State::Open)))
    }
}

impl Fence {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        // Whole-value writes only; a poisoned lock still holds a valid state.
        self.0.read_unpoisoned()
    }

    fn set(&self, state: State) {
        *self.0.write_unpoisoned() = state;
    }

    /// `Ok` if a side effect may happen now; otherwise why not.
    pub fn check(&self) -> Result<(), String> {
        match &*self.read() {
            State::Open => Ok(()),
            State::Standby => Err("this replica is not the leader".to_owned()),
            State::Leading(current) => {
                if current() {
                    Ok(())
                } else {
                    Err("the leader lease could not be renewed in time; this replica may no longer lead".to_owned())
                }
            }
            State::Closed(why) => Err(why.clone()),
        }
    }

    /// Leader election started: nothing passes until leadership is acquired.
    pub fn standby(&self) {
        self.set(State::Standby);
    }

    /// Leadership acquired: side effects pass while `current()` holds.
    pub fn leading(&self, current: impl Fn() -> bool + Send + Sync + 'static) {
        self.set(State::Leading(Arc::new(current)));
    }

    /// Nothing passes any more.
    pub fn close(&self, why: impl Into<String>) {
        self.set(State::Closed(why.into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn states() {
        let fence = Fence::default();
        assert!(fence.check().is_ok(), "open during start-up");
        fence.standby();
        assert!(fence.check().unwrap_err().contains("not the leader"));
        let current = Arc::new(AtomicBool::new(true));
        let c = current.clone();
        fence.leading(move || c.load(Ordering::SeqCst));
        assert!(fence.clone().check().is_ok());
        current.store(false, Ordering::SeqCst);
        assert!(fence.check().unwrap_err().contains("could not be renewed"));
        fence.close("shutting down");
        assert_eq!(fence.check(), Err("shutting down".to_owned()));
        assert_eq!(format!("{fence:?}"), "Fence(\"closed (shutting down)\")");
    }
}
