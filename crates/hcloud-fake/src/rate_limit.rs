//! The API's rate limit: one token bucket per fake.
//!
//! Every authenticated `/v1` request takes one token; an empty bucket answers
//! `429 rate_limit_exceeded`. Tokens refill continuously at `refill_per_second` up to
//! `capacity`. Every `/v1` response carries `RateLimit-Limit` (capacity),
//! `RateLimit-Remaining` (whole tokens left) and `RateLimit-Reset` (unix seconds when the
//! bucket will be full again; with a refill rate of 0 a bucket that is not full reports a
//! time one year ahead, since it never refills on its own).

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Rate limit settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateLimitConfig {
    /// Bucket size (default 3600).
    pub capacity: u32,
    /// Tokens added per second (default 1.0).
    pub refill_per_second: f64,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self { capacity: 3600, refill_per_second: 1.0 }
    }
}

/// Header values after a request was accounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RateLimitStatus {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// `RateLimit-Limit`.
    pub limit: u32,
    /// `RateLimit-Remaining`.
    pub remaining: u32,
    /// `RateLimit-Reset` (unix seconds).
    pub reset: i64,
}

/// The token bucket.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    config: RateLimitConfig,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(config: RateLimitConfig) -> Self {
        Self { config, tokens: f64::from(config.capacity), last: Instant::now() }
    }

    /// Current settings.
    pub fn config(&self) -> RateLimitConfig {
        self.config
    }

    /// New settings; the bucket starts full.
    pub fn reconfigure(&mut self, config: RateLimitConfig) {
        *self = Self::new(config);
    }

    /// Fills the bucket.
    pub fn refill_full(&mut self) {
        self.tokens = f64::from(self.config.capacity);
        self.last = Instant::now();
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        let rate = self.config.refill_per_second.max(0.0);
        self.tokens = (self.tokens + elapsed * rate).min(f64::from(self.config.capacity));
        self.last = now;
    }

    fn status(&self, allowed: bool, now_unix: i64) -> RateLimitStatus {
        let capacity = f64::from(self.config.capacity);
        let missing = (capacity - self.tokens).max(0.0);
        let rate = self.config.refill_per_second;
        let reset = if missing <= 0.0 {
            now_unix
        } else if rate > 0.0 {
            // Bounded by capacity / rate; the cast saturates for absurd values.
            now_unix.saturating_add((missing / rate).ceil() as i64)
        } else {
            now_unix + 365 * 86_400
        };
        RateLimitStatus {
            allowed,
            limit: self.config.capacity,
            // tokens is within 0..=capacity (a u32), so the cast cannot overflow.
            remaining: self.tokens.floor().max(0.0) as u32,
            reset,
        }
    }

    /// Takes one token if available.
    pub fn acquire(&mut self, now: Instant, now_unix: i64) -> RateLimitStatus {
        self.refill(now);
        let allowed = self.tokens >= 1.0;
        if allowed {
            self.tokens -= 1.0;
        }
        self.status(allowed, now_unix)
    }

    /// The headers without taking a token (for requests rejected before accounting).
    pub fn peek(&mut self, now: Instant, now_unix: i64) -> RateLimitStatus {
        self.refill(now);
        self.status(true, now_unix)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn empties_and_refills() {
        let mut b = TokenBucket::new(RateLimitConfig { capacity: 2, refill_per_second: 1.0 });
        let t0 = Instant::now();
        assert!(b.acquire(t0, 100).allowed);
        let s = b.acquire(t0, 100);
        assert!(s.allowed);
        assert_eq!(s.remaining, 0);
        assert_eq!(s.reset, 102);
        assert!(!b.acquire(t0, 100).allowed);
        let s = b.acquire(t0 + Duration::from_millis(1500), 101);
        assert!(s.allowed);
        assert_eq!(s.limit, 2);
    }

    #[test]
    fn zero_refill_never_refills() {
        let mut b = TokenBucket::new(RateLimitConfig { capacity: 1, refill_per_second: 0.0 });
        let t0 = Instant::now();
        assert!(b.acquire(t0, 0).allowed);
        assert!(!b.acquire(t0 + Duration::from_secs(100), 100).allowed);
        b.refill_full();
        assert!(b.acquire(Instant::now(), 0).allowed);
    }
}
