//! [`LeaderElector`] (standby loop until acquired) and [`Leadership`] (renewal loop, release):
//! the async shell around the pure decisions in [`crate::decide`].

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::api::{CallError, LeaseApi};
use crate::config::{ConfigError, ElectionConfig};
use crate::decide::{Loss, Role, Step, Timing, View, call_timeout, fence_until, next_step, observe, poll_interval};
use crate::fence::{CurrentTerm, Fence, HealthCheck, Term};
use crate::record::{LeaderRecord, Snapshot};
use crate::state::{Error, LeaderState, Lost, LostReason};

/// How often a release write is retried when it conflicts with other writers.
const RELEASE_ATTEMPTS: u32 = 5;

/// Everything an elector and its leaderships share.
struct Ctx {
    api: LeaseApi,
    config: ElectionConfig,
    timing: Timing,
    lease: String,
    state: watch::Sender<LeaderState>,
    current: Arc<CurrentTerm>,
}

impl Ctx {
    fn me(&self) -> &str {
        &self.config.identity
    }

    /// Publishes the holder a standby observed; logs a newly observed leader.
    fn publish_standby(&self, holder: Option<&str>) {
        let new = LeaderState::Standby { holder: holder.map(str::to_owned) };
        self.state.send_if_modified(|state| {
            if *state == new {
                return false;
            }
            if let Some(holder) = holder {
                tracing::info!(lease = %self.lease, identity = %self.me(), leader = %holder, "observed a new leader");
            }
            *state = new;
            true
        });
    }
}

/// Consecutive API failures, logged without flooding: the first, then every tenth.
#[derive(Default)]
struct Failures {
    count: u32,
    last: Option<String>,
}

impl Failures {
    fn failed(&mut self, ctx: &Ctx, operation: &str, error: &CallError) {
        self.count += 1;
        let message = format!("{operation}: {error}");
        if self.count == 1 || self.count.is_multiple_of(10) {
            tracing::warn!(lease = %ctx.lease, identity = %ctx.me(), failures = self.count, error = %message, "leader election: Lease request failed");
        } else {
            tracing::debug!(lease = %ctx.lease, failures = self.count, error = %message, "leader election: Lease request failed");
        }
        self.last = Some(message);
    }

    fn succeeded(&mut self, ctx: &Ctx) {
        if self.count > 0 {
            tracing::info!(lease = %ctx.lease, failures = self.count, "leader election: Lease requests succeed again");
        }
        self.count = 0;
        self.last = None;
    }
}

/// Campaigns for one Lease. Create it once per process with [`LeaderElector::new`], then
/// [`LeaderElector::acquire`] (one call at a time: call it again only after the previous
/// [`Leadership`] was released, lost or dropped).
pub struct LeaderElector {
    ctx: Arc<Ctx>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector").field("config", &self.ctx.config).finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// Validates `config` and prepares to elect on its Lease with `client` (which needs `get`,
    /// `create` and `update` on `coordination.k8s.io` leases in the Lease's namespace).
    pub fn new(client: kube::Client, config: ElectionConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let timing = Timing {
            lease_duration: config.lease_duration,
            renew_deadline: config.renew_deadline,
            retry_period: config.retry_period,
        };
        let (state, _) = watch::channel(LeaderState::Standby { holder: None });
        let ctx = Ctx {
            api: LeaseApi::new(client, &config.namespace, &config.name),
            lease: config.lease_ref(),
            config,
            timing,
            state,
            current: Arc::new(CurrentTerm::default()),
        };
        Ok(LeaderElector { ctx: Arc::new(ctx) })
    }

    /// The validated configuration.
    pub fn config(&self) -> &ElectionConfig {
        &self.ctx.config
    }

    /// This replica's holder identity.
    pub fn identity(&self) -> &str {
        self.ctx.me()
    }

    /// The published state: standby (with the observed holder), leading, lost, released.
    pub fn state(&self) -> watch::Receiver<LeaderState> {
        self.ctx.state.subscribe()
    }

    /// A health check like client-go's `HealthzAdaptor(timeout)` (upstream CCM uses 20 s):
    /// unhealthy only while we believe we lead but our lease expired more than `timeout` ago.
    pub fn health_check(&self, timeout: Duration) -> HealthCheck {
        HealthCheck {
            current: self.ctx.current.clone(),
            lease: self.ctx.lease.clone(),
            lease_duration: self.ctx.timing.lease_duration,
            timeout,
        }
    }

    /// Polls the Lease every `retry_period` (+ up to 20 % jitter) and takes it as soon as it is
    /// free, ours, missing, or unchanged for its lease duration. Returns the [`Leadership`], or
    /// `None` once `shutdown` fires. API errors are logged and retried; they never end the
    /// loop. A write already sent when `shutdown` fires is awaited (bounded by
    /// `renew_deadline`) and, if it made us leader, released again before returning `None`.
    pub async fn acquire(&self, shutdown: &CancellationToken) -> Option<Leadership> {
        let ctx = &self.ctx;
        let timing = ctx.timing;
        ctx.current.set(None);
        let mut view = View::Unknown;
        let mut next_poll = Instant::now();
        let mut failures = Failures::default();
        loop {
            if shutdown.is_cancelled() {
                return None;
            }
            let now = Instant::now();
            let role = Role::Standby { next_poll };
            let timeout = call_timeout(role, now, &timing).unwrap_or(timing.renew_deadline);
            match next_step(&view, role, now, ctx.me(), &timing) {
                Step::Wait { until } => {
                    tokio::select! {
                        () = shutdown.cancelled() => return None,
                        () = sleep_until(until) => {}
                    }
                }
                Step::Read => {
                    next_poll = now + poll_interval(&timing, fastrand::f64());
                    let read = tokio::select! {
                        () = shutdown.cancelled() => return None,
                        read = ctx.api.get(timeout) => read,
                    };
                    match read {
                        Ok(read) => {
                            failures.succeeded(ctx);
                            view = observe(&view, read, Instant::now(), ctx.me());
                            ctx.publish_standby(view.holder());
                        }
                        Err(error) => failures.failed(ctx, "reading", &error),
                    }
                }
                step @ (Step::Create | Step::Acquire) => {
                    let sent = Instant::now();
                    let wall = Timestamp::now();
                    let seconds = ctx.config.lease_duration_seconds();
                    let written = match (&step, &view) {
                        (Step::Acquire, View::Present { snapshot, .. }) => {
                            let record = snapshot.record.held_by(ctx.me(), seconds, wall);
                            ctx.api.replace(snapshot, &record, timeout).await
                        }
                        _ => ctx.api.create(&LeaderRecord::created(ctx.me(), seconds, wall), timeout).await,
                    };
                    match written {
                        Ok(snapshot) => {
                            failures.succeeded(ctx);
                            let mut leadership = Leadership::start(ctx.clone(), snapshot, sent);
                            if shutdown.is_cancelled() {
                                // Acquired while shutting down: hand it over at once (a failure
                                // is logged by release_now; the lease then expires by itself).
                                let _ = leadership.release_now().await;
                                return None;
                            }
                            return Some(leadership);
                        }
                        Err(CallError::Conflict | CallError::AlreadyExists | CallError::NotFound) => {
                            // Someone else wrote first: read again at once.
                            tracing::debug!(lease = %ctx.lease, "acquiring raced with another writer; reading again");
                            view = View::Unknown;
                            next_poll = Instant::now();
                        }
                        Err(error) => {
                            failures.failed(ctx, if step == Step::Create { "creating" } else { "acquiring" }, &error);
                            // The outcome is unknown: read before the next attempt.
                            view = View::Unknown;
                            next_poll = Instant::now() + poll_interval(&timing, fastrand::f64());
                        }
                    }
                }
                // A standby never renews or loses; re-read should this ever happen.
                Step::Renew | Step::Lost(_) => view = View::Unknown,
            }
        }
    }
}

/// One term of leadership, returned by [`LeaderElector::acquire`]. Call [`Leadership::keep`]
/// to renew; [`Leadership::release`] to give the lease up. Dropping it ends the term (the
/// fence closes) without releasing: other replicas take over once the lease expires.
pub struct Leadership {
    ctx: Arc<Ctx>,
    term: Arc<Term>,
    view: View,
    renewed_at: Instant,
    next_renewal: Instant,
    lost: Option<Lost>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("lease", &self.ctx.lease)
            .field("identity", &self.ctx.me())
            .field("renewed_at", &self.renewed_at)
            .field("lost", &self.lost)
            .finish_non_exhaustive()
    }
}

impl Leadership {
    /// We hold the lease: `snapshot` was written by a request sent at `sent`.
    fn start(ctx: Arc<Ctx>, snapshot: Snapshot, sent: Instant) -> Leadership {
        let now = Instant::now();
        let term = Term::start(now, fence_until(sent, &ctx.timing));
        ctx.current.set(Some(term.clone()));
        tracing::info!(
            lease = %ctx.lease,
            identity = %ctx.me(),
            transitions = snapshot.record.transitions,
            "acquired leadership"
        );
        ctx.state.send_replace(LeaderState::Leading);
        tokio::spawn(watchdog(ctx.clone(), term.clone()));
        Leadership {
            next_renewal: sent + ctx.timing.retry_period,
            ctx,
            term,
            view: View::Present { snapshot: Box::new(snapshot), changed_at: now },
            renewed_at: sent,
            lost: None,
        }
    }

    /// The fence of this term: check [`Fence::is_current`] before every external side effect.
    pub fn fence(&self) -> Fence {
        Fence::new(self.term.clone())
    }

    /// Renews every `retry_period` with one PUT carrying the cached `resourceVersion`. Returns
    /// `Ok(())` when `stop` fires (the lease is still held, NOT released: call
    /// [`Leadership::release`] after stopping the work it guarded), or `Err(Lost)` when no
    /// renewal succeeded within `renew_deadline` of the last successful one, or a conflict
    /// re-read shows another holder. After `Err`, every later call returns the same `Err`.
    ///
    /// Cancel-safe: dropping the future loses no state. A renewal in flight may have been
    /// applied without our knowing; the next write then conflicts and re-reads.
    pub async fn keep(&mut self, stop: &CancellationToken) -> Result<(), Lost> {
        if let Some(lost) = &self.lost {
            return Err(lost.clone());
        }
        let timing = self.ctx.timing;
        loop {
            let now = Instant::now();
            let role = Role::Leader { renewed_at: self.renewed_at, next_renewal: self.next_renewal };
            let step = if self.term.has_ended() {
                // The watchdog saw the fence close first (or the term was ended otherwise).
                Step::Lost(Loss::Deadline { since_renewal: now.saturating_duration_since(self.renewed_at) })
            } else {
                next_step(&self.view, role, now, self.ctx.me(), &timing)
            };
            if let Step::Lost(loss) = step {
                return Err(self.lose(loss));
            }
            if stop.is_cancelled() {
                return Ok(());
            }
            let Some(timeout) = call_timeout(role, now, &timing) else { continue };
            match step {
                Step::Wait { until } => {
                    tokio::select! {
                        () = stop.cancelled() => return Ok(()),
                        () = sleep_until(until) => {}
                    }
                }
                Step::Read => {
                    let read = tokio::select! {
                        () = stop.cancelled() => return Ok(()),
                        read = self.ctx.api.get(timeout) => read,
                    };
                    match read {
                        Ok(read) => self.view = observe(&self.view, read, Instant::now(), self.ctx.me()),
                        Err(error) => self.failed(now, "reading", &error),
                    }
                }
                Step::Create | Step::Renew | Step::Acquire => {
                    let sent = now;
                    let wall = Timestamp::now();
                    let seconds = self.ctx.config.lease_duration_seconds();
                    let write = async {
                        match &self.view {
                            View::Present { snapshot, .. } => {
                                let record = snapshot.record.held_by(self.ctx.me(), seconds, wall);
                                self.ctx.api.replace(snapshot, &record, timeout).await
                            }
                            _ => {
                                let transitions = self.term_transitions();
                                let record =
                                    LeaderRecord { transitions, ..LeaderRecord::created(self.ctx.me(), seconds, wall) };
                                self.ctx.api.create(&record, timeout).await
                            }
                        }
                    };
                    let written = tokio::select! {
                        () = stop.cancelled() => return Ok(()),
                        written = write => written,
                    };
                    match written {
                        Ok(snapshot) => self.renewed(sent, snapshot),
                        Err(CallError::Conflict | CallError::AlreadyExists | CallError::NotFound) => {
                            // Someone else wrote: read at once; the read decides (ours: retry with
                            // the fresh version; another holder: lost).
                            tracing::debug!(lease = %self.ctx.lease, "renewal conflicted; reading the Lease again");
                            self.view = View::Unknown;
                            self.next_renewal = Instant::now();
                        }
                        Err(error) => self.failed(sent, "renewing", &error),
                    }
                }
                Step::Lost(_) => {}
            }
        }
    }

    /// Gives the lease up so a standby takes over at once: closes the fence first, then writes
    /// the record with an empty holder, `leaseDurationSeconds` 1 and `renewTime` now, with the
    /// `resourceVersion` precondition (a conflict re-reads; if another replica holds it by
    /// then there is nothing to release). Bounded by `renew_deadline` in total.
    pub async fn release(mut self) -> Result<(), Error> {
        self.release_now().await
    }

    async fn release_now(&mut self) -> Result<(), Error> {
        let result = self.try_release().await;
        if let Err(error) = &result {
            tracing::warn!(lease = %self.ctx.lease, %error, "releasing the lease failed; it expires by itself");
            if self.lost.is_none() {
                self.ctx.state.send_replace(LeaderState::Stopped);
            }
        }
        result
    }

    async fn try_release(&mut self) -> Result<(), Error> {
        self.term.released();
        let ctx = self.ctx.clone();
        let deadline = Instant::now() + ctx.timing.renew_deadline;
        for _ in 0..RELEASE_ATTEMPTS {
            let timeout = deadline.saturating_duration_since(Instant::now());
            if timeout.is_zero() {
                return Err(Error::Timeout {
                    operation: "releasing",
                    lease: ctx.lease.clone(),
                    timeout: ctx.timing.renew_deadline,
                });
            }
            let result = match &self.view {
                View::Present { snapshot, .. } if snapshot.record.holder == ctx.me() => {
                    let record = snapshot.record.released(Timestamp::now());
                    match ctx.api.replace(snapshot, &record, timeout).await {
                        Ok(_) => {
                            tracing::info!(lease = %ctx.lease, identity = %ctx.me(), "released leadership");
                            if self.lost.is_none() {
                                ctx.state.send_replace(LeaderState::Released);
                            }
                            return Ok(());
                        }
                        Err(CallError::Conflict | CallError::NotFound) => ctx.api.get(timeout).await,
                        Err(error) => Err(error),
                    }
                }
                View::Unknown => ctx.api.get(timeout).await,
                View::Present { .. } | View::Absent { .. } => {
                    tracing::info!(lease = %ctx.lease, holder = ?self.view.holder(), "nothing to release: the lease is not ours");
                    if self.lost.is_none() {
                        ctx.state.send_replace(LeaderState::Released);
                    }
                    return Ok(());
                }
            };
            match result {
                Ok(read) => self.view = observe(&self.view, read, Instant::now(), ctx.me()),
                Err(CallError::Timeout(timeout)) => {
                    return Err(Error::Timeout { operation: "releasing", lease: ctx.lease.clone(), timeout });
                }
                Err(CallError::Api(source)) => {
                    return Err(Error::Api { operation: "releasing", lease: ctx.lease.clone(), source });
                }
                Err(_) => self.view = View::Unknown,
            }
        }
        Err(Error::Conflicts { operation: "releasing", lease: ctx.lease.clone(), attempts: RELEASE_ATTEMPTS })
    }

    /// The transitions count to keep when re-creating a deleted Lease.
    fn term_transitions(&self) -> i32 {
        match &self.view {
            View::Present { snapshot, .. } => snapshot.record.transitions,
            _ => 0,
        }
    }

    fn renewed(&mut self, sent: Instant, snapshot: Snapshot) {
        let now = Instant::now();
        self.renewed_at = sent;
        self.next_renewal = sent + self.ctx.timing.retry_period;
        self.view = View::Present { snapshot: Box::new(snapshot), changed_at: now };
        self.term.renewed(now, fence_until(sent, &self.ctx.timing));
        if self.term.set_last_error(None).is_some() {
            tracing::info!(lease = %self.ctx.lease, "renewal succeeded again");
        }
        tracing::trace!(lease = %self.ctx.lease, "renewed");
    }

    fn failed(&mut self, attempt: Instant, operation: &str, error: &CallError) {
        let message = format!("{operation}: {error}");
        tracing::warn!(lease = %self.ctx.lease, identity = %self.ctx.me(), error = %message, "lease renewal failed; retrying until the renew deadline");
        self.term.set_last_error(Some(message));
        self.next_renewal = attempt + self.ctx.timing.retry_period;
    }

    fn lose(&mut self, loss: Loss) -> Lost {
        let reason = LostReason::from_loss(loss, self.term.last_error());
        let lost = Lost { lease: self.ctx.lease.clone(), reason: reason.clone() };
        if self.term.end() {
            tracing::error!(lease = %self.ctx.lease, identity = %self.ctx.me(), %reason, "lost leadership");
            self.ctx.state.send_replace(LeaderState::Lost { reason });
        }
        self.lost = Some(lost.clone());
        lost
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if self.term.end() {
            tracing::info!(lease = %self.ctx.lease, identity = %self.ctx.me(), "stopped leading without releasing the lease; it expires by itself");
            self.ctx.state.send_replace(LeaderState::Stopped);
        }
    }
}

/// Ends the term when its fence closes, so [`Fence::lost`] fires at the renew deadline even
/// while nobody polls [`Leadership::keep`].
async fn watchdog(ctx: Arc<Ctx>, term: Arc<Term>) {
    let ended = term.ended_token();
    loop {
        let until = term.valid_until();
        tokio::select! {
            () = ended.cancelled() => return,
            () = sleep_until(until) => {}
        }
        let now = Instant::now();
        if now >= term.valid_until() {
            if term.end() {
                let since_renewal = now.saturating_duration_since(until) + ctx.timing.renew_deadline;
                let reason = LostReason::RenewDeadlineExceeded { since_renewal, last_error: term.last_error() };
                tracing::error!(lease = %ctx.lease, identity = %ctx.me(), %reason, "lost leadership");
                ctx.state.send_replace(LeaderState::Lost { reason });
            }
            return;
        }
    }
}

#[cfg(test)]
#[path = "elector_tests.rs"]
mod tests;
