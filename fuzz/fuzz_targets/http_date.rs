//! HTTP dates (RFC 9110 §5.6.7: IMF-fixdate, RFC 850, asctime) as `Retry-After` carries them.
//!
//! Input: the first 8 bytes are "now" (seconds, folded into 1900..2200), the rest the value.
//! Properties: a parsed date printed as IMF-fixdate and as asctime parses back to the same
//! instant; as RFC 850 it parses to a date 100·k years away whose year ends in the same two
//! digits, at most 50 years after now; `Retry-After` with a date waits exactly until it.

#![no_main]

use std::time::{Duration, SystemTime};

use hcloud_api::fuzzing::{parse_http_date, parse_retry_after};
use jiff::{Timestamp, ToSpan, tz::Offset};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (head, rest) = data.split_at(8);
    let Ok(value) = std::str::from_utf8(rest) else { return };
    // 1900-01-01 .. about 2200.
    let span = 300 * 365 * 86_400;
    let secs = -2_208_988_800 + i64::from_le_bytes(head.try_into().expect("8 bytes")).rem_euclid(span);
    let Ok(now) = Timestamp::from_second(secs) else { return };

    let Some(at) = parse_http_date(value, now) else { return };
    let civil = Offset::UTC.to_datetime(at);
    if (1..=9999).contains(&civil.year()) {
        for (format, name) in [("%a, %d %b %Y %H:%M:%S GMT", "IMF-fixdate"), ("%a %b %e %H:%M:%S %Y", "asctime")] {
            let printed = civil.strftime(format).to_string();
            assert_eq!(parse_http_date(&printed, now), Some(at), "{value:?} as {name} {printed:?}");
        }
        let rfc850 = civil.strftime("%A, %d-%b-%y %H:%M:%S GMT").to_string();
        if let Some(back) = parse_http_date(&rfc850, now) {
            let back_civil = Offset::UTC.to_datetime(back);
            assert_eq!(back_civil.year().rem_euclid(100), civil.year().rem_euclid(100), "{rfc850:?}");
            assert_eq!(
                (back_civil.month(), back_civil.day(), back_civil.time()),
                (civil.month(), civil.day(), civil.time())
            );
            let limit = Offset::UTC.to_datetime(now).checked_add(50.years()).expect("in range");
            assert!(back_civil <= limit, "{rfc850:?} read as {back_civil}, more than 50 years after {now}");
        }
    }

    let now_sys = SystemTime::from(now);
    if value.trim().parse::<u64>().is_err() {
        let wait = parse_retry_after(value, now_sys).expect("a date is a valid Retry-After");
        let expected = SystemTime::from(at).duration_since(now_sys).unwrap_or(Duration::ZERO);
        assert_eq!(wait, expected, "{value:?}");
    }
});
