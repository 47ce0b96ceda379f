//! Retry rules, pure: which failed attempt may be repeated, whether it may have been applied,
//! and how long to wait before the next attempt (exponential backoff, or what the API's
//! `Retry-After` / `RateLimit-*` headers say).
//!
//! | answer                                   | GET / PUT / DELETE | POST            | may have been applied |
//! |------------------------------------------|--------------------|-----------------|-----------------------|
//! | 429 / `rate_limit_exceeded`              | retried            | retried         | no (rejected first)   |
//! | `conflict`                               | retried            | retried         | no                    |
//! | 502, 503, 504, `bad_gateway`, `timeout`  | retried            | not retried     | yes                   |
//! | other 5xx                                | not retried        | not retried     | yes                   |
//! | per-attempt timeout, broken connection   | retried            | not retried     | yes                   |
//! | connection refused (nothing sent)        | retried            | retried         | no                    |
//! | other 4xx (incl. `locked`, `not_found`)  | not retried        | not retried     | no                    |
//!
//! A DELETE whose earlier attempt may have been applied is special: `not_found` on a retry
//! means done (the caller gets success), and `locked` is retried — the lock is most likely the
//! deletion that attempt started.
//!
//! hcloud-go retries `bad_gateway`, `timeout`, non-JSON 502/504 and timeouts for every method;
//! this client does so only where a repetition cannot do harm: a POST that may have been applied
//! is never sent again (a create could run twice; see [`crate::Error::OutcomeUnknown`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::Timestamp;
use reqwest::Method;
use reqwest::header::HeaderMap;

use crate::error::ErrorCode;
use crate::http_date;

/// Retry policy for failed requests (see the module docs for which failures are retried).
///
/// Delays grow exponentially from `base_delay` up to `max_delay`. A 429 (or any retried answer
/// with `Retry-After`) waits as long as the API says — `Retry-After`, or the time until the
/// rate-limit bucket holds a request again, derived from `RateLimit-Reset`,
/// `RateLimit-Limit` and `RateLimit-Remaining` — but at least the exponential delay and at
/// most `max_delay`. No wait runs past the client's overall deadline: if the next attempt
/// could only start after it, the call fails right away with the last error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retries).
    pub max_retries: u32,
    /// Delay before the first retry; doubles each retry.
    pub base_delay: Duration,
    /// Upper bound of one delay.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_retries: 5, base_delay: Duration::from_secs(1), max_delay: Duration::from_secs(60) }
    }
}

impl RetryPolicy {
    /// The delay before retry number `attempt` (0-based): exponential with "equal jitter",
    /// i.e. uniformly in `[d/2, d]` for the capped exponential delay `d`.
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self.base_delay.saturating_mul(1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX));
        let capped = exp.min(self.max_delay);
        let half = capped / 2;
        half + half.mul_f64(fastrand::f64())
    }

    /// The delay before retry number `attempt` when the API hinted a wait: the hint, but at
    /// least the exponential delay and at most `max_delay`.
    pub(crate) fn delay_with_hint(&self, attempt: u32, hint: Option<Duration>) -> Duration {
        let exp = self.delay(attempt);
        match hint {
            Some(h) => h.max(exp).min(self.max_delay),
            None => exp,
        }
    }
}

/// Whether a method can be repeated without changing the outcome.
pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::PUT | Method::DELETE | Method::OPTIONS)
}

/// What a failed attempt means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Sending the request again is safe and may succeed.
    pub(crate) retry: bool,
    /// The request may have reached the API and taken effect.
    pub(crate) maybe_applied: bool,
}

/// The verdict for an HTTP error answer.
pub(crate) fn for_status(method: &Method, status: u16, code: &ErrorCode) -> Verdict {
    let rejected_first = status == 429 || matches!(code, ErrorCode::RateLimitExceeded | ErrorCode::Conflict);
    if rejected_first {
        return Verdict { retry: true, maybe_applied: false };
    }
    if status >= 500 {
        let retryable_kind = matches!(status, 502..=504) || matches!(code, ErrorCode::BadGateway | ErrorCode::Timeout);
        return Verdict { retry: retryable_kind && is_idempotent(method), maybe_applied: true };
    }
    Verdict { retry: false, maybe_applied: false }
}

/// The verdict for a DELETE answer when an earlier attempt of it may have been applied:
/// `locked` is then most likely that deletion still running, so it is retried.
pub(crate) fn for_repeated_delete(verdict: Verdict, code: &ErrorCode) -> Verdict {
    if *code == ErrorCode::Locked { Verdict { retry: true, ..verdict } } else { verdict }
}

/// The verdict for a transport failure or timeout. `connect` is true if the connection could
/// not be established, i.e. nothing was sent.
pub(crate) fn for_transport(method: &Method, connect: bool) -> Verdict {
    if connect {
        Verdict { retry: true, maybe_applied: false }
    } else {
        Verdict { retry: is_idempotent(method), maybe_applied: true }
    }
}

/// How long the API asks to wait before the next request, from `Retry-After` (seconds or an
/// HTTP date) or — for a 429 — from the rate-limit headers. A `RateLimit-Reset` too large
/// to be a time counts as absent (no hint: the exponential backoff applies).
pub(crate) fn wait_hint(status: u16, headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(d) = headers.get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| parse_retry_after(v, now)) {
        return Some(d);
    }
    if status != 429 {
        return None;
    }
    let num = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<u64>().ok();
    let (limit, remaining, reset) = (num("ratelimit-limit")?, num("ratelimit-remaining")?, num("ratelimit-reset")?);
    Some(wait_for_one_request(limit, remaining, reset_time(reset)?, now))
}

/// The instant a `RateLimit-Reset` value (Unix seconds) names; `None` if no [`SystemTime`]
/// can hold it (the header is then treated as absent).
pub(crate) fn reset_time(unix_secs: u64) -> Option<SystemTime> {
    UNIX_EPOCH.checked_add(Duration::from_secs(unix_secs))
}

/// Time until the bucket holds one request again. The bucket refills linearly and is full
/// (`limit`) at `reset`, so one request takes `(reset - now) / (limit - remaining)`.
pub(crate) fn wait_for_one_request(limit: u64, remaining: u64, reset: SystemTime, now: SystemTime) -> Duration {
    if remaining > 0 {
        return Duration::ZERO;
    }
    let until_full = reset.duration_since(now).unwrap_or(Duration::ZERO);
    let missing = u32::try_from(limit.max(1)).unwrap_or(u32::MAX);
    until_full / missing
}

/// Parses `Retry-After`: delta-seconds or an HTTP-date (see [`crate::http_date`]); a date in
/// the past means no wait.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = http_date::parse(value, Timestamp::try_from(now).ok()?)?;
    Some(SystemTime::from(at).duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().expect("header value"));
        }
        h
    }

    #[test]
    fn retry_delay_grows_and_is_capped_with_jitter() {
        let p = RetryPolicy { max_retries: 5, base_delay: Duration::from_secs(1), max_delay: Duration::from_secs(10) };
        for _ in 0..100 {
            let d0 = p.delay(0);
            assert!(d0 >= Duration::from_millis(500) && d0 <= Duration::from_secs(1), "{d0:?}");
            let d3 = p.delay(3);
            assert!(d3 >= Duration::from_secs(4) && d3 <= Duration::from_secs(8), "{d3:?}");
            let d10 = p.delay(10);
            assert!(d10 >= Duration::from_secs(5) && d10 <= Duration::from_secs(10), "{d10:?}");
            let d_huge = p.delay(u32::MAX);
            assert!(d_huge <= Duration::from_secs(10));
        }
    }

    #[test]
    fn a_hint_is_honoured_between_the_backoff_and_max_delay() {
        let p =
            RetryPolicy { max_retries: 5, base_delay: Duration::from_millis(10), max_delay: Duration::from_secs(5) };
        for _ in 0..50 {
            assert_eq!(p.delay_with_hint(0, Some(Duration::from_secs(2))), Duration::from_secs(2));
            assert_eq!(p.delay_with_hint(0, Some(Duration::from_secs(600))), Duration::from_secs(5));
            let tiny = p.delay_with_hint(0, Some(Duration::ZERO));
            assert!(tiny >= Duration::from_millis(5) && tiny <= Duration::from_millis(10), "{tiny:?}");
        }
    }

    #[test]
    fn verdicts() {
        let (get, post, delete) = (Method::GET, Method::POST, Method::DELETE);
        let v = |retry, maybe_applied| Verdict { retry, maybe_applied };
        // Rejected before applying: retried for every method.
        assert_eq!(for_status(&post, 429, &ErrorCode::RateLimitExceeded), v(true, false));
        assert_eq!(for_status(&post, 429, &ErrorCode::Unknown("http_429".into())), v(true, false));
        assert_eq!(for_status(&post, 409, &ErrorCode::Conflict), v(true, false));
        // 5xx: may have been applied; retried only where repeating is harmless.
        assert_eq!(for_status(&get, 502, &ErrorCode::BadGateway), v(true, true));
        assert_eq!(for_status(&delete, 504, &ErrorCode::Timeout), v(true, true));
        assert_eq!(for_status(&get, 500, &ErrorCode::BadGateway), v(true, true), "the code counts, too");
        assert_eq!(for_status(&get, 500, &ErrorCode::ServerError), v(false, true));
        assert_eq!(for_status(&post, 502, &ErrorCode::BadGateway), v(false, true));
        // Other 4xx: final, nothing happened.
        assert_eq!(for_status(&get, 423, &ErrorCode::Locked), v(false, false));
        assert_eq!(for_status(&delete, 404, &ErrorCode::NotFound), v(false, false));
        assert_eq!(for_status(&post, 409, &ErrorCode::UniquenessError), v(false, false));
        // A DELETE that may already have started: its own lock is waited out.
        assert_eq!(for_repeated_delete(v(false, false), &ErrorCode::Locked), v(true, false));
        assert_eq!(for_repeated_delete(v(false, false), &ErrorCode::Protected), v(false, false));
        // Transport.
        assert_eq!(for_transport(&post, true), v(true, false));
        assert_eq!(for_transport(&post, false), v(false, true));
        assert_eq!(for_transport(&get, false), v(true, true));
    }

    #[test]
    fn wait_hint_from_rate_limit_headers() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        // 3600 per hour, empty, full again in an hour: one request per second.
        let h = headers(&[("ratelimit-limit", "3600"), ("ratelimit-remaining", "0"), ("ratelimit-reset", "4600")]);
        assert_eq!(wait_hint(429, &h, now), Some(Duration::from_secs(1)));
        // Not a 429: the rate-limit headers are informational.
        assert_eq!(wait_hint(503, &h, now), None);
        let h = headers(&[("ratelimit-limit", "2"), ("ratelimit-remaining", "0"), ("ratelimit-reset", "1001")]);
        assert_eq!(wait_hint(429, &h, now), Some(Duration::from_millis(500)));
        // Reset in the past: no wait beyond the backoff.
        let h = headers(&[("ratelimit-limit", "2"), ("ratelimit-remaining", "0"), ("ratelimit-reset", "10")]);
        assert_eq!(wait_hint(429, &h, now), Some(Duration::ZERO));
        assert_eq!(wait_hint(429, &HeaderMap::new(), now), None);
        // Retry-After wins.
        let h = headers(&[("retry-after", "7"), ("ratelimit-limit", "2"), ("ratelimit-remaining", "0")]);
        assert_eq!(wait_hint(429, &h, now), Some(Duration::from_secs(7)));
        assert_eq!(wait_hint(503, &h, now), Some(Duration::from_secs(7)));
    }

    #[test]
    fn a_rate_limit_reset_beyond_any_time_gives_no_hint() {
        // `UNIX_EPOCH + u64::MAX seconds` overflowed and panicked (found by fuzzing). Such a
        // header is treated as absent: the exponential backoff applies.
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let huge = u64::MAX.to_string();
        let h = headers(&[("ratelimit-limit", "3600"), ("ratelimit-remaining", "0"), ("ratelimit-reset", &huge)]);
        assert_eq!(wait_hint(429, &h, now), None);
    }

    #[test]
    fn retry_after_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770);
        // 784111777 = Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example).
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now + Duration::from_secs(60)),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after(" 120 ", now), Some(Duration::from_secs(120)));
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29T00:00:00Z
        assert_eq!(parse_retry_after("Tue, 29 Feb 2000 00:00:05 GMT", leap), Some(Duration::from_secs(5)));
        // The obsolete forms RFC 9110 makes a recipient accept, and other RFC 5322 dates.
        for same in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 09:49:37 +0100"] {
            assert_eq!(parse_retry_after(same, now), Some(Duration::from_secs(7)), "{same:?}");
        }
        // "UTC" is no RFC 5322 zone name; RFC 5322 §4.3 reads unknown ones as UTC.
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 UTC", now), Some(Duration::from_secs(7)));
        // Before 1970 is in the past, too.
        assert_eq!(parse_retry_after("Fri, 01 Jan 1960 00:00:00 GMT", now), Some(Duration::ZERO));
        for bad in ["soon", "-1", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994", "Sun, 31 Feb 1994 08:49:37 GMT"]
        {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }
}
