//! The headers the client reads from every API answer: `RateLimit-Limit`,
//! `RateLimit-Remaining`, `RateLimit-Reset` (the client's rate-limit view) and `Retry-After`
//! (seconds or an HTTP date), which with the rate-limit headers make the wait before a retry.
//!
//! Input: the first line is the status, every further line `name: value`. Properties: no
//! panic on any value (a `RateLimit-Reset` past what a time can hold once overflowed); a
//! numeric `Retry-After` is the wait; without `Retry-After` only a 429 gets a hint, and that
//! hint never runs past the reset; the rate-limit view is the headers' numbers.

#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use hcloud_api::fuzzing::{rate_limit, wait_hint};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut lines = data.split(|b| *b == b'\n');
    let first = lines.next().unwrap_or_default();
    let status = std::str::from_utf8(first).ok().and_then(|s| s.trim().parse::<u16>().ok()).unwrap_or(429);
    let mut headers = HeaderMap::new();
    for line in lines {
        let Some(colon) = line.iter().position(|b| *b == b':') else { continue };
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(line[..colon].trim_ascii()),
            HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        headers.append(name, value);
    }
    // A fixed "now" keeps runs reproducible: 2026-01-01T00:00:00Z.
    let now = UNIX_EPOCH + Duration::from_secs(1_767_225_600);
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let num = |name: &str| text(name).and_then(|v| v.parse::<u64>().ok());

    let view = rate_limit(&headers);
    if let Some(rl) = view {
        let (limit, remaining, reset) = (num("ratelimit-limit"), num("ratelimit-remaining"), num("ratelimit-reset"));
        assert_eq!(Some(u64::from(rl.limit)), limit.map(|l| l.min(u64::from(u32::MAX))));
        assert_eq!(Some(u64::from(rl.remaining)), remaining.map(|r| r.min(u64::from(u32::MAX))));
        assert_eq!(rl.reset.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs()), reset);
    }

    let hint = wait_hint(status, &headers, now);
    match text("retry-after") {
        Some(v) if v.parse::<u64>().is_ok() => {
            assert_eq!(hint, v.parse::<u64>().ok().map(Duration::from_secs), "Retry-After: {v:?}");
        }
        Some(_) if hint.is_some() => {}
        _ if status != 429 => assert_eq!(hint, None, "only a 429 has a rate-limit hint"),
        _ => {
            if let (Some(wait), Some(reset)) = (hint, num("ratelimit-reset")) {
                let until_reset = UNIX_EPOCH
                    .checked_add(Duration::from_secs(reset))
                    .and_then(|r| r.duration_since(now).ok())
                    .unwrap_or(Duration::ZERO);
                assert!(wait <= until_reset, "{wait:?} past the reset in {until_reset:?}");
            }
        }
    }
});
