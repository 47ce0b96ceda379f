//! Batched action waits: every action a Load Balancer change started is tracked here, and one
//! `GET /actions?id=..&id=..` polls all outstanding actions of all Load Balancers at once.
//!
//! - A change whose next step needs the Load Balancer unlocked (the API locks it while one
//!   of its actions runs) waits for that Load Balancer's actions ([`ActionTracker::wait_for`]);
//!   waiters poll on a schedule that starts fast and slows down (250 ms, ×1.5, up to 2 s), and
//!   a poll serves every waiter and every outstanding action. An action is given
//!   [`TrackerPolicy::wait_deadline`] from when it was started: a waiter on a Load Balancer
//!   whose action is older fails ([`WaitError::Timeout`], after one fresh poll) instead of
//!   holding the Service's lock for ever; the action stays tracked, and the Service's next
//!   sync waits again only if it is still running.
//! - The last changes of a reconcile are not waited for: the reconcile returns once the API
//!   accepted them, and a background sweep (first after 1 s, then slower, up to 10 s) confirms
//!   them in batches. A failed action marks its Load Balancer stale in the inventory (read
//!   again before its next use), raises a Warning event on the Service and is reported to the
//!   next waiter on that Load Balancer. A deleted Load Balancer is forgotten
//!   ([`ActionTracker::forget`]); the failures of ones that vanished otherwise (no longer in
//!   the inventory) are dropped with the next failure.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use sync_lock::Unpoison as _;

use cloud_provider::events::{EventObject, EventSink, ProviderEvent};
use hcloud_api::models::{Action, ActionId, ActionStatus, LoadBalancerId};
use hcloud_api::{Client, Error};
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::lb_inventory::LbInventory;

/// How waiters and the sweep poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackerPolicy {
    /// A waiter's first poll.
    pub wait_initial: Duration,
    /// A waiter's slowest poll.
    pub wait_max: Duration,
    /// The sweep's first poll after actions appear.
    pub sweep_initial: Duration,
    /// The sweep's slowest poll.
    pub sweep_max: Duration,
    /// How long an action may run, from when it was started, before waiters on its Load
    /// Balancer give up.
    pub wait_deadline: Duration,
}

/// The default [`TrackerPolicy::wait_deadline`]. Load Balancer actions (create, attach,
/// change_type, targets, services) finish within seconds to about a minute; an action running
/// for two minutes is stuck on Hetzner's side. Every waiter holds its Service's lock, and with
/// upstream's default `--concurrent-service-syncs=1` the only service worker: waiting longer
/// would stall every Service. Giving up costs nothing: nothing was sent after the wait, the
/// action stays tracked, and the sync is retried with backoff.
pub const DEFAULT_WAIT_DEADLINE: Duration = Duration::from_secs(120);

impl Default for TrackerPolicy {
    fn default() -> Self {
        TrackerPolicy {
            wait_initial: Duration::from_millis(250),
            wait_max: Duration::from_secs(2),
            sweep_initial: Duration::from_secs(1),
            sweep_max: Duration::from_secs(10),
            wait_deadline: DEFAULT_WAIT_DEADLINE,
        }
    }
}

#[derive(Debug, Clone)]
struct Tracked {
    lb: LoadBalancerId,
    at: Instant,
    command: String,
    what: String,
    owner: Option<EventObject>,
}

#[derive(Default)]
struct State {
    pending: BTreeMap<ActionId, Tracked>,
    /// The last failure per Load Balancer, with when its action was tracked.
    failed: HashMap<LoadBalancerId, (Instant, String)>,
    sweeping: bool,
}

/// An action of a Load Balancer ended with an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ActionFailed(pub String);

/// Tracks and polls actions. Shared (`Arc`).
pub struct ActionTracker {
    client: Client,
    inventory: Arc<LbInventory>,
    events: Arc<Mutex<Arc<dyn EventSink>>>,
    policy: TrackerPolicy,
    state: Mutex<State>,
    polling: tokio::sync::Mutex<Instant>,
    work: Arc<Notify>,
}

impl Drop for ActionTracker {
    fn drop(&mut self) {
        // Wakes an idle sweep so it sees the tracker is gone and ends.
        self.work.notify_one();
    }
}

impl ActionTracker {
    /// A tracker polling through `client`, marking failed Load Balancers stale in `inventory`.
    pub fn new(
        client: Client,
        inventory: Arc<LbInventory>,
        events: Arc<Mutex<Arc<dyn EventSink>>>,
        policy: TrackerPolicy,
    ) -> Arc<ActionTracker> {
        Arc::new(ActionTracker {
            client,
            inventory,
            events,
            policy,
            state: Mutex::default(),
            polling: tokio::sync::Mutex::new(Instant::now()),
            work: Arc::new(Notify::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Entries are inserted and removed whole; a poisoned map is still consistent.
        self.state.lock_unpoisoned()
    }

    /// Tracks `action` of Load Balancer `lb`, started for `what` on behalf of `owner`.
    pub fn track(self: &Arc<Self>, lb: LoadBalancerId, action: &Action, what: String, owner: Option<EventObject>) {
        match action.status {
            ActionStatus::Success => return,
            ActionStatus::Error => {
                let message = action.error.as_ref().map(|e| e.message.clone()).unwrap_or_default();
                self.failure(lb, Instant::now(), &action.command, &what, &message, owner);
                return;
            }
            _ => {}
        }
        let start_sweep = {
            let mut s = self.lock();
            s.pending
                .insert(action.id, Tracked { lb, at: Instant::now(), command: action.command.clone(), what, owner });
            !std::mem::replace(&mut s.sweeping, true)
        };
        if start_sweep {
            // The sweep holds only a weak reference: it ends with the tracker.
            tokio::spawn(sweep(Arc::downgrade(self), self.work.clone()));
        } else {
            self.work.notify_one();
        }
    }

    /// Forgets `lb` (deleted, or no longer a Service's): its outstanding actions and its last
    /// failure.
    pub fn forget(&self, lb: LoadBalancerId) {
        let mut s = self.lock();
        s.pending.retain(|_, t| t.lb != lb);
        s.failed.remove(&lb);
    }

    /// How many Load Balancers have a failure not yet reported to a waiter (for tests).
    pub fn failed_len(&self) -> usize {
        self.lock().failed.len()
    }

    /// How many actions are outstanding.
    pub fn outstanding(&self) -> usize {
        self.lock().pending.len()
    }

    /// The outstanding actions of `lb`: (id, command, when tracked), oldest first.
    fn pending_of(&self, lb: LoadBalancerId) -> Vec<(ActionId, String, Instant)> {
        let mut out: Vec<_> = self
            .lock()
            .pending
            .iter()
            .filter(|(_, t)| t.lb == lb)
            .map(|(id, t)| (*id, t.command.clone(), t.at))
            .collect();
        out.sort_by_key(|(id, _, at)| (*at, *id));
        out
    }

    /// Waits until no action of `lb` is outstanding. Fails if an action of `lb` tracked at or
    /// after `since` ended with an error (earlier failures were reported already: event, fresh
    /// read), if a poll failed for good, or if an action is still running
    /// [`TrackerPolicy::wait_deadline`] after it was started (checked after at least one poll
    /// of this wait).
    pub async fn wait_for(&self, lb: LoadBalancerId, since: Instant) -> Result<(), WaitError> {
        let mut interval = self.policy.wait_initial;
        let mut polled = false;
        loop {
            if let Some((at, message)) = self.lock().failed.remove(&lb)
                && at >= since
            {
                return Err(WaitError::Failed(ActionFailed(message)));
            }
            let pending = self.pending_of(lb);
            let Some((_, _, oldest)) = pending.first() else {
                return Ok(());
            };
            let deadline = *oldest + self.policy.wait_deadline;
            let now = Instant::now();
            if polled && now >= deadline {
                return Err(WaitError::Timeout {
                    lb,
                    deadline: self.policy.wait_deadline,
                    running: pending.into_iter().map(|(id, command, _)| (id, command)).collect(),
                });
            }
            tokio::time::sleep(interval.min(deadline.saturating_duration_since(now))).await;
            interval = interval.mul_f64(1.5).min(self.policy.wait_max);
            self.poll(now).await.map_err(WaitError::Poll)?;
            polled = true;
        }
    }

    /// Polls every outstanding action in one batched request, unless a poll finished after
    /// `asked` (then its answer is as good).
    async fn poll(&self, asked: Instant) -> Result<(), Error> {
        let mut last = self.polling.lock().await;
        if *last > asked {
            return Ok(());
        }
        let ids: Vec<ActionId> = self.lock().pending.keys().copied().collect();
        if ids.is_empty() {
            *last = Instant::now();
            return Ok(());
        }
        let result = self.client.actions().get_many(&ids).await;
        *last = Instant::now();
        let fresh = match result {
            Ok(f) => f,
            Err(e) if e.is_transient() => {
                warn!(actions = ids.len(), error = %e, "polling Load Balancer actions failed; polling again later");
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let by_id: HashMap<ActionId, &Action> = fresh.iter().map(|a| (a.id, a)).collect();
        let mut done = Vec::new();
        for id in ids {
            match by_id.get(&id) {
                Some(a) if a.status == ActionStatus::Running => {}
                Some(a) => done.push((id, Some((*a).clone()))),
                // Finished and pruned by the API: the outcome is unknown, so the Load
                // Balancer is read again before its next use.
                None => done.push((id, None)),
            }
        }
        for (id, action) in done {
            let Some(t) = self.lock().pending.remove(&id) else { continue };
            match action {
                Some(a) if a.status == ActionStatus::Error => {
                    let message = a.error.as_ref().map(|e| format!("{} ({})", e.message, e.code)).unwrap_or_default();
                    self.failure(t.lb, t.at, &t.command, &t.what, &message, t.owner);
                }
                Some(_) => debug!(action = %id, lb = %t.lb, command = %t.command, "action finished"),
                None => {
                    debug!(action = %id, lb = %t.lb, "action no longer known to the API; reading the Load Balancer again");
                    self.inventory.mark_stale(t.lb);
                }
            }
        }
        Ok(())
    }

    fn failure(
        &self,
        lb: LoadBalancerId,
        at: Instant,
        command: &str,
        what: &str,
        message: &str,
        owner: Option<EventObject>,
    ) {
        let text = format!("Load Balancer {lb}: {what} failed: action {command}: {message}");
        warn!("{text}");
        self.inventory.mark_stale(lb);
        {
            let mut s = self.lock();
            // Failures of Load Balancers that are gone (deleted outside the CCM) are never
            // waited for: dropped, so the map stays bounded by the Load Balancers that exist.
            s.failed.retain(|id, _| self.inventory.contains(*id));
            s.failed.insert(lb, (at, text.clone()));
        }
        if let Some(owner) = owner {
            let sink = self.events.lock_unpoisoned().clone();
            sink.publish(ProviderEvent::warning(
                owner.clone(),
                "LoadBalancerActionFailed",
                format!("{text}; the Service is synced again"),
            ));
            // Nothing else would bring the service controller back to this Service.
            sink.resync(&owner);
        }
    }
}

/// Why [`ActionTracker::wait_for`] failed.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// An action of the Load Balancer failed.
    #[error(transparent)]
    Failed(ActionFailed),
    /// Polling failed for good (e.g. the request was not allowed to be sent).
    #[error("polling Load Balancer actions: {0}")]
    Poll(Error),
    /// An action of the Load Balancer is still running after the deadline.
    #[error(
        "Load Balancer {lb}: {} still running {deadline:?} after {}; nothing more is changed until {} \
         finishes, the sync is retried",
        running.iter().map(|(id, c)| format!("action {c} ({id})")).collect::<Vec<_>>().join(", "),
        if running.len() == 1 { "it was started" } else { "the oldest was started" },
        if running.len() == 1 { "it" } else { "they" }
    )]
    Timeout {
        /// The Load Balancer.
        lb: LoadBalancerId,
        /// The deadline ([`TrackerPolicy::wait_deadline`]).
        deadline: Duration,
        /// Its running actions: (id, command).
        running: Vec<(ActionId, String)>,
    },
}

/// Confirms outstanding actions in the background: first after `sweep_initial`, then slower,
/// until none is left; ends when the tracker is dropped.
async fn sweep(tracker: Weak<ActionTracker>, work: Arc<Notify>) {
    let Some(policy) = tracker.upgrade().map(|t| t.policy) else { return };
    let mut interval = policy.sweep_initial;
    loop {
        tokio::time::sleep(interval).await;
        let Some(t) = tracker.upgrade() else { return };
        if t.outstanding() == 0 {
            // Idle: wait for new work (`track` stores a wake-up if it comes in between), then
            // start fast again.
            drop(t);
            work.notified().await;
            interval = policy.sweep_initial;
            continue;
        }
        if let Err(e) = t.poll(Instant::now()).await {
            debug!(error = %e, "background confirmation of Load Balancer actions failed; trying again later");
        }
        interval = interval.mul_f64(1.5).min(policy.sweep_max);
    }
}
