//! Waiting for actions: poll `GET /actions?id=..` with growing intervals until every action
//! finished, one failed, or the wait's timeout passed.
//!
//! A poll that fails transiently (5xx, timeout, broken connection, rate limit — after the
//! request's own retries) does not end the wait: the action runs on at the API regardless,
//! so the waiter logs the failure and polls again at the next interval. A poll that fails
//! for good (the request gate refused it, the token was rejected, the answer was malformed)
//! ends the wait with that error. An action that a successful poll no longer returns has
//! finished and been pruned by the API: the wait ends with [`Error::ActionGone`] (outcome
//! unknown) instead of polling until the timeout.

use std::time::{Duration, Instant};

use tracing::warn;

use crate::client::Client;
use crate::error::{Error, ErrorCode};
use crate::models::{Action, ActionId, ActionStatus};
use crate::poll::PollPolicy;

fn failed(a: &Action) -> Error {
    let (code, message) = a
        .error
        .as_ref()
        .map(|e| (e.code.clone(), e.message.clone()))
        .unwrap_or_else(|| (ErrorCode::Unknown("action_failed".into()), "no error details".into()));
    Error::ActionFailed { id: a.id, command: a.command.clone(), code, message }
}

impl Client {
    /// Waits until `action` finishes, polling `GET /actions?id=` with growing intervals.
    ///
    /// Returns the finished action, [`Error::ActionFailed`] if it ended with `error`, or
    /// [`Error::ActionTimeout`] after `timeout`. Transient poll failures do not end the wait.
    pub async fn wait_for_action(&self, action: &Action, timeout: Duration) -> Result<Action, Error> {
        let mut done = self.wait_for_actions(std::slice::from_ref(action), timeout).await?;
        done.pop().ok_or_else(|| Error::Decode {
            request: format!("GET /actions/{}", action.id),
            message: "the API did not return the action".to_owned(),
        })
    }

    /// Waits until all `actions` finish, polling them together with `GET /actions?id=..`.
    /// Fails with the first action that ended with `error`. Transient poll failures do not
    /// end the wait (see the module docs).
    pub async fn wait_for_actions(&self, actions: &[Action], timeout: Duration) -> Result<Vec<Action>, Error> {
        self.wait_for_actions_with(actions, timeout, self.poll_policy()).await
    }

    /// [`Client::wait_for_actions`] with its own poll policy, for callers that know how long
    /// their actions usually take (the first poll at that time costs one request instead of
    /// several).
    pub async fn wait_for_actions_with(
        &self,
        actions: &[Action],
        timeout: Duration,
        policy: PollPolicy,
    ) -> Result<Vec<Action>, Error> {
        let started = Instant::now();
        let mut current: Vec<Action> = actions.to_vec();
        let mut interval = policy.initial;
        let mut failed_polls = 0u32;
        loop {
            if let Some(a) = current.iter().find(|a| a.status == ActionStatus::Error) {
                return Err(failed(a));
            }
            let pending: Vec<ActionId> =
                current.iter().filter(|a| a.status != ActionStatus::Success).map(|a| a.id).collect();
            if pending.is_empty() {
                return Ok(current);
            }
            if started.elapsed() >= timeout {
                let stuck = current.iter().find(|a| a.status != ActionStatus::Success);
                return Err(Error::ActionTimeout {
                    id: stuck.map(|a| a.id).unwrap_or_default(),
                    command: stuck.map(|a| a.command.clone()).unwrap_or_default(),
                    waited: started.elapsed(),
                });
            }
            let remaining = timeout.saturating_sub(started.elapsed());
            tokio::time::sleep(interval.min(remaining)).await;
            interval = interval.mul_f64(1.5).min(policy.max);
            match self.actions().get_many(&pending).await {
                Ok(fresh) => {
                    failed_polls = 0;
                    if let Some(gone) = pending.iter().find(|id| !fresh.iter().any(|f| f.id == **id))
                        && let Some(a) = current.iter().find(|a| a.id == *gone)
                    {
                        return Err(Error::ActionGone { id: a.id, command: a.command.clone() });
                    }
                    for f in fresh {
                        if let Some(slot) = current.iter_mut().find(|a| a.id == f.id) {
                            *slot = f;
                        }
                    }
                }
                Err(e) if e.is_transient() => {
                    failed_polls += 1;
                    warn!(actions = ?pending, failed_polls, error = %e, "polling Hetzner API actions failed; polling again");
                }
                Err(e) => return Err(e),
            }
        }
    }
}
