//! Test time: moving tokio's clock, by which the inventory, the Robot cache and its circuit age
//! their data.

use std::time::Duration;

/// Moves tokio's clock forward by `by` at once: no real sleep, so "older than the max age"
/// holds exactly and "younger" is never broken by a slow machine.
pub async fn age(by: Duration) {
    tokio::time::pause();
    tokio::time::advance(by).await;
    tokio::time::resume();
}
