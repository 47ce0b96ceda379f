//! Polling with deadlines, instead of sleeps.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use kube::Api;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::HarnessError;

/// Default deadline for conditions in tests: generous, because a loaded 2-core CI machine runs
/// a kube-apiserver, etcd and the binaries under test at once.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Time between polls (the first poll happens immediately).
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Poll the object `name` through `api` until `predicate` holds, or fail after `timeout`.
///
/// `predicate` sees `None` while the object does not exist, so "was deleted" is
/// `|o| o.is_none()` and "exists" is `|o| o.is_some()`. Returns the object as seen when the
/// predicate held. API errors while polling are tolerated (they may be transient) and reported
/// if the deadline passes.
///
/// The timeout error names `description` and shows the last observed state of the object as
/// pretty JSON, so a failing test says what the object looked like.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    timeout: Duration,
    description: &str,
    predicate: impl Fn(Option<&K>) -> bool,
) -> Result<Option<K>, HarnessError>
where
    K: Clone + DeserializeOwned + Serialize + Debug,
{
    let deadline = Instant::now() + timeout;
    let mut last_state: Option<String> = None;
    let mut last_error: Option<String> = None;
    loop {
        match api.get_opt(name).await {
            Ok(object) => {
                if predicate(object.as_ref()) {
                    return Ok(object);
                }
                last_state = Some(match &object {
                    Some(object) => serde_json::to_string_pretty(object)
                        .unwrap_or_else(|e| format!("{object:?} (not serialisable: {e})")),
                    None => "the object does not exist".to_owned(),
                });
            }
            Err(e) => last_error = Some(e.to_string()),
        }
        if Instant::now() >= deadline {
            let mut report = format!("last observed state of {name:?}:\n");
            report.push_str(last_state.as_deref().unwrap_or("(never read successfully)"));
            if let Some(error) = last_error {
                report.push_str(&format!("\nlast API error while polling: {error}"));
            }
            return Err(HarnessError::Timeout { description: description.to_owned(), timeout, last_state: report });
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

/// Poll `condition` until it returns `true`, or fail after `timeout` with an error naming
/// `description`.
///
/// Accepts async closures (`async || ...`) as well as closures returning a future.
pub async fn wait_until(
    timeout: Duration,
    description: &str,
    mut condition: impl AsyncFnMut() -> bool,
) -> Result<(), HarnessError> {
    wait_for_value(timeout, description, async || condition().await.then_some(())).await
}

/// Poll `probe` until it returns `Some(value)` and return that value, or fail after `timeout`
/// with an error naming `description`.
pub async fn wait_for_value<T>(
    timeout: Duration,
    description: &str,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> Result<T, HarnessError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(HarnessError::Timeout {
                description: description.to_owned(),
                timeout,
                last_state: "(the condition never held)".to_owned(),
            });
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_until_returns_once_condition_holds() {
        let mut calls = 0;
        let result = wait_until(Duration::from_secs(5), "third call", async || {
            calls += 1;
            calls >= 3
        })
        .await;
        assert!(result.is_ok());
        assert_eq!(calls, 3);
    }

    #[tokio::test]
    async fn wait_until_times_out_with_description() {
        let started = Instant::now();
        let result = wait_until(Duration::from_millis(300), "never true", async || false).await;
        let Err(error) = result else {
            panic!("expected a timeout");
        };
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(error.to_string().contains("never true"), "{error}");
    }

    #[tokio::test]
    async fn wait_for_value_returns_value() {
        let mut n = 0;
        let value = wait_for_value(Duration::from_secs(5), "n reaches 2", async || {
            n += 1;
            (n == 2).then_some(n * 10)
        })
        .await;
        assert_eq!(value.ok(), Some(20));
    }
}
