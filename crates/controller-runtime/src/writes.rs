//! Helpers for the thin write layer of every controller: patch parameters carrying the
//! caller's field manager, error classification, client-go's `RetryOnConflict`, and
//! [`patch_replanned`] (a planned patch, planned again from a fresh read after a conflict).
//!
//! Controllers compute their writes as data (a JSON merge patch) in pure planners and send
//! them here unchanged, so tests check exactly what is sent.

use std::future::Future;
use std::time::Duration;

use kube::api::PatchParams;

/// Patch parameters that record `field_manager` as the writer.
pub fn patch_params(field_manager: &str) -> PatchParams {
    PatchParams { field_manager: Some(field_manager.to_owned()), ..Default::default() }
}

/// True if the error is a 409 Conflict (a `resourceVersion` precondition failed).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// True if the error is a 404 Not Found.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// How often and how fast [`retry_on_conflict`] retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConflictRetry {
    /// Attempts in total (the first one included).
    pub steps: u32,
    /// Sleep between attempts; full jitter (factor 1.0) is added on top.
    pub base: Duration,
}

impl ConflictRetry {
    /// Upstream's `UpdateNodeSpecBackoff` (cloud-node controller): 20 steps, 50 ms.
    pub const UPDATE_NODE_SPEC: ConflictRetry = ConflictRetry { steps: 20, base: Duration::from_millis(50) };
    /// Upstream's taint and label helpers (`RetryOnConflict` with 5 steps, 100 ms).
    pub const NODE_HELPERS: ConflictRetry = ConflictRetry { steps: 5, base: Duration::from_millis(100) };
}

/// Retries `attempt` on 409 Conflict like client-go's `RetryOnConflict`: up to `retry.steps`
/// attempts, sleeping `retry.base` plus full jitter between them. `attempt` gets the attempt
/// number (0 = first) so it can read fresh state on retries. Any other error, or the last
/// conflict, is returned.
pub async fn retry_on_conflict<T, F, Fut>(retry: ConflictRetry, mut attempt: F) -> Result<T, kube::Error>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut n = 0;
    loop {
        match attempt(n).await {
            Err(e) if is_conflict(&e) && n + 1 < retry.steps => {
                let jitter = retry.base.mul_f64(fastrand::f64());
                tokio::time::sleep(retry.base + jitter).await;
                n += 1;
            }
            other => return other,
        }
    }
}

/// Sends the JSON merge patch `plan` makes of `object` (nothing when it makes none); after a
/// 409 Conflict, reads the object again with `read` and plans again from that, up to
/// `retry.steps` attempts (client-go's `RetryOnConflict` around a read and a patch). The
/// patch sent is always the plan of the state it was planned from.
///
/// `read` and `send` return plain futures (not async closures) so a caller that must be
/// `Send` can be.
pub async fn patch_replanned<K, R, S>(
    retry: ConflictRetry,
    object: &K,
    read: impl Fn() -> R,
    plan: impl Fn(&K) -> Option<serde_json::Value>,
    send: impl Fn(serde_json::Value) -> S,
) -> Result<(), kube::Error>
where
    R: Future<Output = Result<K, kube::Error>>,
    S: Future<Output = Result<(), kube::Error>>,
{
    let (read, plan, send) = (&read, &plan, &send);
    retry_on_conflict(retry, |attempt| async move {
        let fresh;
        let current = if attempt == 0 {
            object
        } else {
            fresh = read().await?;
            &fresh
        };
        match plan(current) {
            Some(patch) => send(patch).await,
            None => Ok(()),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("test", "Test").with_code(code).boxed())
    }

    #[tokio::test(start_paused = true)]
    async fn conflicts_are_retried_up_to_the_step_limit_and_other_errors_are_not() {
        let mut calls = 0;
        let r: Result<(), _> = retry_on_conflict(ConflictRetry { steps: 3, base: Duration::from_millis(10) }, |_| {
            calls += 1;
            async { Err(api_error(409)) }
        })
        .await;
        assert!(r.is_err_and(|e| is_conflict(&e)));
        assert_eq!(calls, 3);

        let mut calls = 0;
        let r: Result<(), _> = retry_on_conflict(ConflictRetry::NODE_HELPERS, |_| {
            calls += 1;
            async { Err(api_error(404)) }
        })
        .await;
        assert!(r.is_err_and(|e| is_not_found(&e)));
        assert_eq!(calls, 1);

        let mut seen = Vec::new();
        let r = retry_on_conflict(ConflictRetry::NODE_HELPERS, |n| {
            seen.push(n);
            async move { if n < 2 { Err(api_error(409)) } else { Ok(n) } }
        })
        .await;
        assert_eq!(r.ok(), Some(2));
        assert_eq!(seen, vec![0, 1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_conflicting_patch_is_planned_again_from_a_fresh_read() {
        use std::sync::Mutex;
        let sent: Mutex<Vec<serde_json::Value>> = Mutex::default();
        let reads = Mutex::new(0);
        // Version 1 is what the caller saw; the server has version 2 (the first patch conflicts),
        // and the fresh read needs no write at all in the second case.
        let r = patch_replanned(
            ConflictRetry::NODE_HELPERS,
            &1u32,
            || {
                *reads.lock().unwrap() += 1;
                async { Ok(2u32) }
            },
            |v: &u32| Some(serde_json::json!({ "planned_from": v })),
            |patch| {
                let first = sent.lock().unwrap().is_empty();
                sent.lock().unwrap().push(patch);
                async move { if first { Err(api_error(409)) } else { Ok(()) } }
            },
        )
        .await;
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(*reads.lock().unwrap(), 1);
        assert_eq!(
            *sent.lock().unwrap(),
            vec![serde_json::json!({ "planned_from": 1 }), serde_json::json!({ "planned_from": 2 })]
        );

        let sent = Mutex::new(0);
        let r = patch_replanned(
            ConflictRetry::NODE_HELPERS,
            &1u32,
            || async { Ok(2u32) },
            |v: &u32| (*v == 1).then(|| serde_json::json!({})),
            |_| {
                *sent.lock().unwrap() += 1;
                async { Err(api_error(409)) }
            },
        )
        .await;
        assert!(r.is_ok(), "the fresh state needs no patch: {r:?}");
        assert_eq!(*sent.lock().unwrap(), 1);

        let r = patch_replanned(
            ConflictRetry::NODE_HELPERS,
            &1u32,
            || async { Err(api_error(404)) },
            |_: &u32| Some(serde_json::json!({})),
            |_| async { Err(api_error(409)) },
        )
        .await;
        assert!(r.is_err_and(|e| is_not_found(&e)), "a failed read ends it");
    }
}
