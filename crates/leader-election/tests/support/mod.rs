//! Shared helpers of the API-server tests: short timings, a candidate that behaves like the
//! application (acquire, keep, release on stop), waiting on the published state.

#![allow(dead_code)] // each test binary uses a different subset

pub mod counting;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use leader_election::{ElectionConfig, Fence, LeaderElector, LeaderState, Lost};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use counting::{RequestLog, counted_client};

/// Generous bound for conditions that normally hold within a second or two.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Logs of the crate under test, shown for failing tests (`RUST_LOG` overrides).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("leader_election=debug,test_harness=info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

/// lease 3 s / renew 2 s / retry 0.5 s.
pub fn short_config(namespace: &str, name: &str, identity: &str) -> ElectionConfig {
    ElectionConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
        ..ElectionConfig::new(namespace, name, identity)
    }
}

/// How a candidate's run ended.
#[derive(Debug)]
pub enum Outcome {
    /// Shut down before it ever led.
    NeverLed,
    /// Led, was stopped, and released (the release's result).
    Released(Result<(), String>),
    /// Led and lost.
    Lost(Lost),
}

/// One replica doing what the application does: acquire → keep(shutdown) → release on Ok.
pub struct Candidate {
    pub identity: String,
    pub elector: Arc<LeaderElector>,
    pub state: watch::Receiver<LeaderState>,
    pub fence: watch::Receiver<Option<Fence>>,
    pub shutdown: CancellationToken,
    task: Option<JoinHandle<Outcome>>,
}

impl Candidate {
    pub fn spawn(client: kube::Client, config: ElectionConfig) -> Result<Candidate> {
        let identity = config.identity.clone();
        let elector = Arc::new(LeaderElector::new(client, config)?);
        let state = elector.state();
        let (fence_tx, fence) = watch::channel(None);
        let shutdown = CancellationToken::new();
        let task = {
            let elector = elector.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let Some(mut leadership) = elector.acquire(&shutdown).await else { return Outcome::NeverLed };
                fence_tx.send_replace(Some(leadership.fence()));
                match leadership.keep(&shutdown).await {
                    Ok(()) => Outcome::Released(leadership.release().await.map_err(|e| e.to_string())),
                    Err(lost) => Outcome::Lost(lost),
                }
            })
        };
        Ok(Candidate { identity, elector, state, fence, shutdown, task: Some(task) })
    }

    /// Waits until the published state satisfies `predicate`; returns when it was seen.
    pub async fn wait_state(
        &mut self,
        timeout: Duration,
        description: &str,
        predicate: impl Fn(&LeaderState) -> bool,
    ) -> Result<Instant> {
        wait_state(&mut self.state, timeout, &format!("{}: {description}", self.identity), predicate).await
    }

    /// Waits until this candidate leads; returns its fence.
    pub async fn wait_leading(&mut self, timeout: Duration) -> Result<Fence> {
        self.wait_state(timeout, "leading", |s| *s == LeaderState::Leading).await?;
        let fence = self.fence.wait_for(Option::is_some).await.context("candidate task ended")?.clone();
        fence.context("fence published")
    }

    pub fn is_leading(&self) -> bool {
        *self.state.borrow() == LeaderState::Leading
    }

    pub fn current_fence(&self) -> Option<Fence> {
        self.fence.borrow().clone()
    }

    /// Waits (bounded) for the run to end without asking it to.
    pub async fn outcome(&mut self, timeout: Duration) -> Result<Outcome> {
        let task = self.task.as_mut().context("outcome already taken")?;
        let outcome = tokio::time::timeout(timeout, task)
            .await
            .with_context(|| format!("{}: the run did not end within {timeout:?}", self.identity))??;
        self.task = None;
        Ok(outcome)
    }

    /// Asks the run to stop (shutdown) and waits for it.
    pub async fn stop(mut self) -> Result<Outcome> {
        self.shutdown.cancel();
        self.outcome(PATIENCE).await
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Waits until `state` satisfies `predicate` (checking the current value first).
pub async fn wait_state(
    state: &mut watch::Receiver<LeaderState>,
    timeout: Duration,
    description: &str,
    predicate: impl Fn(&LeaderState) -> bool,
) -> Result<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        if predicate(&state.borrow_and_update()) {
            return Ok(Instant::now());
        }
        match tokio::time::timeout_at(deadline, state.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => bail!("{description}: the elector is gone; last state {:?}", *state.borrow()),
            Err(_) => bail!("timed out after {timeout:?} waiting for {description}; last state {:?}", *state.borrow()),
        }
    }
}

/// The Lease as the admin sees it.
pub async fn read_lease(admin: &kube::Client, namespace: &str, name: &str) -> Result<Lease> {
    Api::<Lease>::namespaced(admin.clone(), namespace).get(name).await.with_context(|| format!("reading lease {name}"))
}

/// `spec.holderIdentity` of a Lease ("" when absent).
pub fn holder(lease: &Lease) -> String {
    lease.spec.as_ref().and_then(|s| s.holder_identity.clone()).unwrap_or_default()
}
