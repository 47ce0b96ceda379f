//! Periodic loops (upstream's `wait.UntilWithContext`): run, then wait the period, until
//! shutdown. The period slides: it starts when a pass ends, so slow passes never pile up.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Runs `pass` now and then every `period` after the previous pass ended, until `shutdown`.
/// A pass in progress when `shutdown` fires is dropped at its next await point.
pub async fn every<F, Fut>(period: Duration, shutdown: &CancellationToken, mut pass: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = pass() => {}
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn passes_start_a_period_after_the_previous_one_ended() {
        let starts: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let token = CancellationToken::new();
        let t0 = Instant::now();
        let task = tokio::spawn({
            let starts = starts.clone();
            let token = token.clone();
            async move {
                every(Duration::from_secs(5), &token, || {
                    let starts = starts.clone();
                    async move {
                        starts.lock().expect("lock").push(Instant::now());
                        tokio::time::sleep(Duration::from_secs(2)).await; // a slow pass
                    }
                })
                .await
            }
        });
        tokio::time::sleep(Duration::from_secs(15)).await;
        token.cancel();
        task.await.expect("joins");
        let offsets: Vec<u64> = starts.lock().expect("lock").iter().map(|t| (*t - t0).as_secs()).collect();
        assert_eq!(offsets, vec![0, 7, 14]);
    }
}
