//! One async mutex per key, created on first use and dropped with its last user.
//!
//! A controller that must not run two pieces of work for one object at a time (a Service's
//! sync and the node sync's update of its load balancer, say) locks the object's key:
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use controller_runtime::KeyedLock;
//!
//! let locks = KeyedLock::new();
//! let held = locks.lock("default/web").await;
//! assert!(locks.try_lock("default/web").is_none(), "one holder per key");
//! assert!(locks.try_lock("default/api").is_some(), "other keys are free");
//! drop(held);
//! assert!(locks.is_empty(), "nobody holds or waits: nothing is kept");
//! # });
//! ```
//!
//! A key's entry lives exactly as long as someone holds or waits for it: the map never grows
//! with every object ever seen, and nobody has to remove keys of deleted objects. A waiter
//! that is dropped (cancelled) leaves no trace, and a holder that panics releases the key
//! while unwinding (the async mutex is not poisoned), so the next caller gets it.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use sync_lock::Unpoison as _;
use tokio::sync::OwnedMutexGuard;

/// A key's mutex and how many holders and waiters refer to it.
struct Slot {
    mutex: Arc<tokio::sync::Mutex<()>>,
    users: usize,
}

type Slots<K> = Arc<Mutex<HashMap<K, Slot>>>;

/// Async mutual exclusion per key `K` (see the module docs). Cloning shares the locks.
pub struct KeyedLock<K> {
    slots: Slots<K>,
}

impl<K> Clone for KeyedLock<K> {
    fn clone(&self) -> Self {
        KeyedLock { slots: self.slots.clone() }
    }
}

impl<K: Eq + Hash + Clone> Default for KeyedLock<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> std::fmt::Debug for KeyedLock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedLock").field("keys_in_use", &self.slots.lock_unpoisoned().len()).finish()
    }
}

impl<K: Eq + Hash + Clone> KeyedLock<K> {
    /// No key locked.
    pub fn new() -> Self {
        KeyedLock { slots: Arc::default() }
    }

    /// Waits until nobody else holds `key`, then holds it until the guard is dropped. Waiters
    /// of one key get it in the order they asked (tokio's mutex is fair).
    pub async fn lock(&self, key: K) -> KeyedGuard<K> {
        let user = User::register(&self.slots, key);
        let held = user.mutex.clone().lock_owned().await;
        KeyedGuard { _held: held, _user: user }
    }

    /// Holds `key` if nobody else does; `None` (and no trace) otherwise.
    pub fn try_lock(&self, key: K) -> Option<KeyedGuard<K>> {
        let user = User::register(&self.slots, key);
        let held = user.mutex.clone().try_lock_owned().ok()?;
        Some(KeyedGuard { _held: held, _user: user })
    }

    /// How many keys are held or waited for.
    pub fn len(&self) -> usize {
        self.slots.lock_unpoisoned().len()
    }

    /// True if no key is held or waited for.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Holds one key of a [`KeyedLock`] until dropped. Owns what it needs, so it can be kept
/// across awaits and moved into tasks.
#[must_use = "the key is released as soon as the guard is dropped"]
pub struct KeyedGuard<K: Eq + Hash> {
    // Field order is drop order: the mutex is released before the key's use is given back.
    _held: OwnedMutexGuard<()>,
    _user: User<K>,
}

impl<K: Eq + Hash> std::fmt::Debug for KeyedGuard<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyedGuard")
    }
}

/// One holder's or waiter's claim on a key's slot: counted when made, uncounted when dropped
/// (also when a waiting future is cancelled), and the slot goes with its last claim.
struct User<K: Eq + Hash> {
    slots: Slots<K>,
    key: K,
    mutex: Arc<tokio::sync::Mutex<()>>,
}

impl<K: Eq + Hash + Clone> User<K> {
    fn register(slots: &Slots<K>, key: K) -> Self {
        let mutex = {
            let mut map = slots.lock_unpoisoned();
            let slot = map.entry(key.clone()).or_insert_with(|| Slot { mutex: Arc::default(), users: 0 });
            slot.users += 1;
            slot.mutex.clone()
        };
        User { slots: slots.clone(), key, mutex }
    }
}

impl<K: Eq + Hash> Drop for User<K> {
    fn drop(&mut self) {
        let mut map = self.slots.lock_unpoisoned();
        // Every `User` counted itself into its key's slot, and a slot is removed only when its
        // count reaches zero, so the slot is there and its count is at least one.
        if let Some(slot) = map.get_mut(&self.key) {
            slot.users = slot.users.saturating_sub(1);
            if slot.users == 0 {
                map.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    const WORK: Duration = Duration::from_secs(10);

    /// Runs one `WORK`-long task per key at once; returns how long all took and how many ran
    /// inside the lock at the same time at most.
    async fn run_concurrently(keys: &[&'static str]) -> (Duration, usize) {
        let locks = KeyedLock::new();
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let tasks: Vec<_> = keys
            .iter()
            .map(|&key| {
                let (locks, inside, most) = (locks.clone(), inside.clone(), most.clone());
                tokio::spawn(async move {
                    let _held = locks.lock(key).await;
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(WORK).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
        assert!(locks.is_empty(), "every key was given back");
        (started.elapsed(), most.load(Ordering::SeqCst))
    }

    #[tokio::test(start_paused = true)]
    async fn one_key_is_held_by_one_caller_at_a_time() {
        let (took, most) = run_concurrently(&["a", "a", "a"]).await;
        assert_eq!(most, 1);
        assert_eq!(took, WORK * 3, "the three ran one after the other");
    }

    #[tokio::test(start_paused = true)]
    async fn different_keys_run_in_parallel() {
        let (took, most) = run_concurrently(&["a", "b", "c"]).await;
        assert_eq!(most, 3);
        assert_eq!(took, WORK, "the three ran at once");
    }

    #[tokio::test]
    async fn a_key_is_kept_only_while_held_or_waited_for() {
        let locks = KeyedLock::new();
        assert!(locks.is_empty());
        let a = locks.lock("a").await;
        let b = locks.lock("b").await;
        assert_eq!(locks.len(), 2);
        let mut waiter = Box::pin(locks.lock("a"));
        assert!(futures::poll!(&mut waiter).is_pending(), "a is held");
        drop(a);
        assert_eq!(locks.len(), 2, "a is waited for");
        let a_again = waiter.await;
        drop(b);
        assert_eq!(locks.len(), 1, "b went with its last guard");
        drop(a_again);
        assert_eq!(locks.len(), 0, "a went with its last guard");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_waiter_leaves_no_entry_and_blocks_nobody() {
        let locks = KeyedLock::new();
        // Cancelled while the key is held.
        let held = locks.lock("k").await;
        let gave_up = tokio::time::timeout(Duration::from_secs(1), locks.lock("k")).await;
        assert!(gave_up.is_err(), "the key is held");
        assert_eq!(locks.len(), 1);
        drop(held);
        assert!(locks.is_empty(), "the cancelled waiter is not counted");

        // Cancelled after the key was handed to it, before it ran: the next waiter gets it.
        let held = locks.lock("k").await;
        let mut first = Box::pin(locks.lock("k"));
        assert!(futures::poll!(&mut first).is_pending());
        let second = tokio::spawn({
            let locks = locks.clone();
            async move { drop(locks.lock("k").await) }
        });
        tokio::task::yield_now().await;
        drop(held);
        drop(first);
        tokio::time::timeout(Duration::from_secs(1), second).await.expect("no deadlock").expect("task");
        assert!(locks.is_empty());
        assert!(locks.try_lock("k").is_some());
    }

    #[tokio::test]
    async fn a_panic_while_holding_releases_the_key() {
        let locks = KeyedLock::new();
        let (holding, held) = tokio::sync::oneshot::channel::<()>();
        let (go, panic_now) = tokio::sync::oneshot::channel::<()>();
        let holder = tokio::spawn({
            let locks = locks.clone();
            async move {
                let _held = locks.lock("k").await;
                let _ = holding.send(());
                let _ = panic_now.await;
                panic!("reconcile bug");
            }
        });
        held.await.expect("the holder holds the key");
        assert!(locks.try_lock("k").is_none());
        let waiter = tokio::spawn({
            let locks = locks.clone();
            async move { drop(locks.lock("k").await) }
        });
        go.send(()).expect("holder waits");
        assert!(holder.await.expect_err("the holder panicked").is_panic());
        waiter.await.expect("the waiter got the key after the panic");
        assert!(locks.is_empty());
        assert!(locks.try_lock("k").is_some(), "the key is free");
    }

    #[test]
    fn keys_need_only_eq_hash_and_clone() {
        #[derive(Clone, PartialEq, Eq, Hash)]
        struct Ref {
            namespace: Option<String>,
            name: String,
        }
        let locks = KeyedLock::new();
        let web = Ref { namespace: Some("default".into()), name: "web".into() };
        let held = locks.try_lock(web.clone()).expect("free");
        assert!(locks.try_lock(web).is_none());
        assert!(locks.try_lock(Ref { namespace: None, name: "web".into() }).is_some());
        drop(held);
        assert!(locks.is_empty());
    }
}
