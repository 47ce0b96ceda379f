//! Poison-tolerant locking for `std::sync::{Mutex, RwLock}`.
//!
//! A lock is poisoned when a thread panicked while holding it. Every lock in this workspace
//! guards state that stays consistent across such a panic (each critical section is a single
//! map or counter update, and a reconcile that panics is recovered and retried), so a poisoned
//! lock is taken as it is instead of spreading the panic to every later caller. [`Unpoison`]
//! is that rule, written once:
//!
//! ```
//! use std::sync::Mutex;
//! use sync_lock::Unpoison as _;
//!
//! let counter = Mutex::new(0);
//! *counter.lock_unpoisoned() += 1;
//! assert_eq!(*counter.lock_unpoisoned(), 1);
//! ```

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks that are taken even when poisoned (see the crate docs for why that is sound here).
pub trait Unpoison {
    /// The guard of an exclusive lock.
    type Guard<'a>
    where
        Self: 'a;

    /// Takes the lock exclusively, ignoring poison.
    fn lock_unpoisoned(&self) -> Self::Guard<'_>;
}

impl<T: ?Sized> Unpoison for Mutex<T> {
    type Guard<'a>
        = MutexGuard<'a, T>
    where
        Self: 'a;

    fn lock_unpoisoned(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: ?Sized> Unpoison for RwLock<T> {
    type Guard<'a>
        = RwLockWriteGuard<'a, T>
    where
        Self: 'a;

    fn lock_unpoisoned(&self) -> RwLockWriteGuard<'_, T> {
        self.write_unpoisoned()
    }
}

/// Read and write halves of an `RwLock`, ignoring poison.
pub trait UnpoisonRw<T: ?Sized> {
    /// Shared read access, ignoring poison.
    fn read_unpoisoned(&self) -> RwLockReadGuard<'_, T>;
    /// Exclusive write access, ignoring poison.
    fn write_unpoisoned(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> UnpoisonRw<T> for RwLock<T> {
    fn read_unpoisoned(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_unpoisoned(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Waits on `condvar` with `guard`, ignoring poison.
pub fn wait_unpoisoned<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_poisoned_mutex_is_taken_with_its_value() {
        let m = Arc::new(Mutex::new(41));
        let m2 = m.clone();
        let joined = std::thread::spawn(move || {
            let mut g = m2.lock_unpoisoned();
            *g += 1;
            panic!("poisoning the lock on purpose");
        })
        .join();
        assert!(joined.is_err(), "the thread panicked");
        assert!(m.is_poisoned());
        assert_eq!(*m.lock_unpoisoned(), 42);
    }

    #[test]
    fn a_poisoned_rwlock_is_read_and_written() {
        let rw = Arc::new(RwLock::new(String::from("a")));
        let rw2 = rw.clone();
        let joined = std::thread::spawn(move || {
            let mut g = rw2.write_unpoisoned();
            g.push('b');
            panic!("poisoning the lock on purpose");
        })
        .join();
        assert!(joined.is_err(), "the thread panicked");
        assert!(rw.is_poisoned());
        assert_eq!(*rw.read_unpoisoned(), "ab");
        rw.lock_unpoisoned().push('c');
        assert_eq!(*rw.read_unpoisoned(), "abc");
    }

    #[test]
    fn a_poisoned_mutex_is_waited_on() {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let p2 = pair.clone();
        let joined = std::thread::spawn(move || {
            let _g = p2.0.lock_unpoisoned();
            panic!("poisoning the lock on purpose");
        })
        .join();
        assert!(joined.is_err(), "the thread panicked");
        let p3 = pair.clone();
        let notifier = std::thread::spawn(move || {
            *p3.0.lock_unpoisoned() = true;
            p3.1.notify_all();
        });
        let mut ready = pair.0.lock_unpoisoned();
        while !*ready {
            ready = wait_unpoisoned(&pair.1, ready);
        }
        drop(ready);
        assert!(notifier.join().is_ok());
    }
}
