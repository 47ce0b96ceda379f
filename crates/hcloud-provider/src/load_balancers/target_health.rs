//! Warnings about targets Hetzner reports unhealthy for longer than a configured time
//! (hcloud-ccm only, opt-in: `unhealthy-target-warning-after` /
//! `HCLOUD_LOAD_BALANCERS_UNHEALTHY_TARGET_WARNING_AFTER`).
//!
//! The health comes with the Load Balancer itself (`targets[].health_status`, per listen port),
//! so it costs no request of its own: every sync looks at the Load Balancer it just used, and,
//! while some Service has the warning on, a background pass looks at every watched Load
//! Balancer each time the shared list is older than its max age
//! (`HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE`) — one list for all of them, so the warning also
//! comes when nothing else happens. A target port is "unhealthy since" the first observation
//! that reported it unhealthy; it is warned about once per unhealthy spell (healthy again,
//! removed or `unknown` ends the spell).
//!
//! [`HealthWatch`] is the pure part (observations in, warnings out); [`HealthWarnings`] keeps
//! the watched Services and runs the background pass.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use sync_lock::Unpoison as _;

use cloud_provider::events::{EventObject, EventSink, ProviderEvent};
use hcloud_api::models::{HealthStatus, LoadBalancer, LoadBalancerId, TargetHealth};
use tokio::time::Instant;
use tracing::{debug, error, warn};

use super::lb_inventory::LbInventory;
use super::targets::TargetRef;

/// The reason of the warning.
pub const UNHEALTHY_TARGET: &str = "UnhealthyLoadBalancerTarget";

/// One target port unhealthy for at least the configured time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// The unhealthy target: a cloud server, or a Robot server's IP.
    pub target: TargetRef,
    /// The Load Balancer service's listen port.
    pub listen_port: u16,
    /// Unhealthy for at least this long (since the first observation).
    pub for_at_least: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Spell {
    since: Instant,
    warned: bool,
}

/// Unhealthy spells per Load Balancer, target and port. Pure.
#[derive(Debug, Default)]
pub struct HealthWatch {
    spells: HashMap<LoadBalancerId, BTreeMap<(TargetRef, u16), Spell>>,
}

/// Every (target, health of one port) the Load Balancer reports, servers selected by a
/// label-selector target included.
fn health_of(lb: &LoadBalancer) -> Vec<(TargetRef, &TargetHealth)> {
    let mut out = Vec::new();
    for t in &lb.targets {
        let own = match (&t.server, &t.ip) {
            (Some(s), _) => Some(TargetRef::Server(s.id)),
            (None, Some(ip)) => Some(TargetRef::Ip(ip.ip)),
            _ => None,
        };
        if let Some(r) = own {
            out.extend(t.health_status.iter().map(|h| (r, h)));
        }
        for selected in &t.targets {
            if let Some(s) = selected.server {
                out.extend(selected.health_status.iter().map(|h| (TargetRef::Server(s.id), h)));
            }
        }
    }
    out
}

/// The health statuses `hcloud_ccm_load_balancer_target_ports` counts.
pub const HEALTH_STATUSES: [&str; 3] = ["healthy", "unhealthy", "unknown"];

/// How many target ports of `lb` are in each of [`HEALTH_STATUSES`] (a target checked on two
/// ports counts twice).
pub fn port_health_counts(lb: &LoadBalancer) -> [(&'static str, usize); 3] {
    let mut counts = HEALTH_STATUSES.map(|s| (s, 0));
    for (_, h) in health_of(lb) {
        let index = match h.status {
            HealthStatus::Healthy => 0,
            HealthStatus::Unhealthy => 1,
            _ => 2,
        };
        if let Some((_, n)) = counts.get_mut(index) {
            *n += 1;
        }
    }
    counts
}

impl HealthWatch {
    /// Records what `lb` reports at `now`; returns the target ports unhealthy for at least
    /// `after` that were not reported yet in their spell, sorted.
    pub fn observe(&mut self, lb: &LoadBalancer, now: Instant, after: Duration) -> Vec<Unhealthy> {
        let old = self.spells.remove(&lb.id).unwrap_or_default();
        let mut spells = BTreeMap::new();
        let mut due = Vec::new();
        for (target, h) in health_of(lb) {
            if h.status != HealthStatus::Unhealthy {
                continue;
            }
            let key = (target, h.listen_port);
            let mut spell = old.get(&key).copied().unwrap_or(Spell { since: now, warned: false });
            let lasted = now.saturating_duration_since(spell.since);
            if !spell.warned && lasted >= after {
                spell.warned = true;
                due.push(Unhealthy { target, listen_port: h.listen_port, for_at_least: lasted });
            }
            spells.insert(key, spell);
        }
        if !spells.is_empty() {
            self.spells.insert(lb.id, spells);
        }
        due.sort_by_key(|u| (u.target, u.listen_port));
        due
    }

    /// Forgets a Load Balancer.
    pub fn forget(&mut self, id: LoadBalancerId) {
        self.spells.remove(&id);
    }

    /// How many Load Balancers have unhealthy target ports (for tests).
    pub fn len(&self) -> usize {
        self.spells.len()
    }

    /// Whether no Load Balancer has unhealthy target ports.
    pub fn is_empty(&self) -> bool {
        self.spells.is_empty()
    }
}

/// The warning text.
pub fn message(lb: &LoadBalancer, u: &Unhealthy, nodes: &HashMap<TargetRef, String>, after: Duration) -> String {
    let what = match u.target {
        TargetRef::Server(id) => format!("server {id}"),
        TargetRef::Ip(ip) => format!("IP {ip}"),
    };
    let node = nodes.get(&u.target).map(|n| format!(" (Node {n})")).unwrap_or_default();
    format!(
        "Hetzner reports target {what}{node} of Load Balancer {} ({}) unhealthy on port {} for at least {}s (warning \
         after {}s): its health check fails, so it gets no traffic on that port",
        lb.name,
        lb.id,
        u.listen_port,
        u.for_at_least.as_secs(),
        after.as_secs()
    )
}

#[derive(Debug, Clone)]
struct Watched {
    lb: LoadBalancerId,
    owner: EventObject,
    after: Duration,
    nodes: HashMap<TargetRef, String>,
}

#[derive(Default)]
struct State {
    watch: HealthWatch,
    /// By Service UID.
    watched: HashMap<String, Watched>,
    pass_running: bool,
}

/// The watched Services and their background pass. Cheap to share (`Arc`).
pub struct HealthWarnings {
    inventory: Arc<LbInventory>,
    events: Arc<Mutex<Arc<dyn EventSink>>>,
    period: Duration,
    state: Mutex<State>,
}

impl HealthWarnings {
    /// Warnings from `inventory`'s Load Balancers, published to `events`; the background pass
    /// runs every `period` (the inventory's max age).
    pub fn new(inventory: Arc<LbInventory>, events: Arc<Mutex<Arc<dyn EventSink>>>, period: Duration) -> Arc<Self> {
        Arc::new(HealthWarnings { inventory, events, period, state: Mutex::default() })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Whole-value updates only; a poisoned state is still consistent.
        self.state.lock_unpoisoned()
    }

    /// After a sync of the Service `uid` (owner `owner`) that left its Load Balancer as `lb`:
    /// with `after` set, watch it and warn about what is due; without, stop watching it.
    pub fn synced(
        self: &Arc<Self>,
        uid: &str,
        owner: &EventObject,
        lb: &LoadBalancer,
        after: Option<Duration>,
        nodes: HashMap<TargetRef, String>,
    ) {
        let Some(after) = after else {
            self.unwatch(uid);
            return;
        };
        let start = {
            let mut s = self.lock();
            s.watched.insert(uid.to_owned(), Watched { lb: lb.id, owner: owner.clone(), after, nodes });
            !std::mem::replace(&mut s.pass_running, true)
        };
        self.check(uid, lb);
        if start {
            let me = self.clone();
            let pass = tokio::spawn(async move { me.run().await });
            // A panic ends the pass (its guard marks it ended, so the next sync starts another).
            tokio::spawn(async move {
                if let Err(e) = pass.await
                    && e.is_panic()
                {
                    let payload = e.into_panic();
                    error!(
                        panic = panic_text(payload.as_ref()),
                        "the unhealthy-target pass panicked; the next sync of a watched Service starts it again"
                    );
                }
            });
        }
    }

    /// Stops watching the Service `uid` (its warning is off, or it is gone).
    pub fn unwatch(&self, uid: &str) {
        let mut s = self.lock();
        if let Some(w) = s.watched.remove(uid) {
            s.watch.forget(w.lb);
        }
    }

    /// Whether the background pass is running (for tests).
    pub fn pass_running(&self) -> bool {
        self.lock().pass_running
    }

    /// Whether the Service `uid` is watched (for tests).
    pub fn watches(&self, uid: &str) -> bool {
        self.lock().watched.contains_key(uid)
    }

    fn check(&self, uid: &str, lb: &LoadBalancer) {
        let events = {
            let mut s = self.lock();
            let Some(w) = s.watched.get(uid).cloned() else { return };
            let due = s.watch.observe(lb, Instant::now(), w.after);
            due.iter()
                .map(|u| ProviderEvent::warning(w.owner.clone(), UNHEALTHY_TARGET, message(lb, u, &w.nodes, w.after)))
                .collect::<Vec<_>>()
        };
        if events.is_empty() {
            return;
        }
        let sink = self.events.lock_unpoisoned().clone();
        for e in events {
            sink.publish(e);
        }
    }

    /// The background pass: while any Service is watched, every `period` the shared list is
    /// read if it is older than its max age and every watched Load Balancer is looked at.
    async fn run(self: Arc<Self>) {
        let mut guard = PassGuard { warnings: &self, ended: false };
        loop {
            tokio::time::sleep(self.period).await;
            let watched: Vec<(String, LoadBalancerId)> = {
                let mut s = self.lock();
                if s.watched.is_empty() {
                    // Under the lock `synced` takes to decide whether to start a pass.
                    s.pass_running = false;
                    guard.ended = true;
                    return;
                }
                s.watched.iter().map(|(uid, w)| (uid.clone(), w.lb)).collect()
            };
            if let Err(e) = self.inventory.refresh().await {
                warn!(error = %e, "reading the Load Balancer list for target health failed; trying again later");
                continue;
            }
            for (uid, id) in watched {
                match self.inventory.cached(id) {
                    Some(lb) => self.check(&uid, &lb),
                    None => debug!(load_balancer = %id, "watched Load Balancer is not in the list"),
                }
            }
        }
    }
}

/// The message of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => s,
        (None, Some(s)) => s,
        (None, None) => "(no message)",
    }
}

/// Marks the background pass as no longer running when it is dropped without having ended on
/// its own: after a panic (the runtime drops the panicked task's future), or when its task is
/// aborted. Otherwise `pass_running` would stay true for ever and no pass would start again.
struct PassGuard<'a> {
    warnings: &'a HealthWarnings,
    /// The pass ended on its own and said so under the lock.
    ended: bool,
}

impl Drop for PassGuard<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.warnings.lock().pass_running = false;
        }
    }
}

#[cfg(test)]
#[path = "target_health_tests.rs"]
mod tests;
