//! The Hetzner client the provider tests use against the fake: no retries (a test sees the
//! fake's first answer), 1 ms between attempts.

#![allow(clippy::expect_used)]

use std::time::Duration;

use hcloud_api::{Client, RetryPolicy, SecretString};

/// A client for the fake at `base_url` that never retries.
pub fn no_retry_client(base_url: &str) -> Client {
    Client::builder(SecretString::from("t".repeat(64)))
        .endpoint(base_url.to_owned())
        .retry_policy(RetryPolicy {
            max_retries: 0,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        })
        .build()
        .expect("client")
}
