//! Wall-clock helpers: unix seconds, and the RFC 3339 strings (UTC) the fake writes, via `jiff`.

use jiff::civil::{self, DateTime};
use jiff::{SignedDuration, Timestamp};

/// 1970-01-01T00:00:00 UTC.
const EPOCH: DateTime = civil::datetime(1970, 1, 1, 0, 0, 0, 0);

/// Current unix time in milliseconds.
pub(crate) fn now_unix_ms() -> i64 {
    Timestamp::now().as_millisecond()
}

/// Current unix time in seconds.
pub(crate) fn now_unix() -> i64 {
    Timestamp::now().as_second()
}

// The UTC civil time is computed as a `DateTime` (years -9999..=9999) rather than through a
// `Timestamp`, whose range ends 26 hours earlier so that any offset can be applied to it: a
// certificate valid until 9999-12-31T23:59:59Z (RFC 5280's "no expiry") must be written as
// such. Times outside the range are written as its nearest end.

/// `YYYY-MM-DDTHH:MM:SS+00:00` for a unix timestamp in seconds (the API's format).
pub(crate) fn rfc3339(secs: i64) -> String {
    // Precision 0: whole seconds only (`DateTime::MAX` has a fraction).
    format!("{:.0}+00:00", EPOCH.saturating_add(SignedDuration::from_secs(secs)))
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for a unix timestamp in milliseconds (request log).
pub(crate) fn rfc3339_ms(ms: i64) -> String {
    format!("{:.3}Z", EPOCH.saturating_add(SignedDuration::from_millis(ms)))
}

/// Unix seconds of an RFC 3339 time; tests write known instants with it.
#[cfg(test)]
pub(crate) fn unix(rfc3339: &str) -> i64 {
    rfc3339.parse::<Timestamp>().unwrap_or_else(|e| panic!("{rfc3339}: {e}")).as_second()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_dates() {
        // Expected strings from `date -u -d @SECS +%Y-%m-%dT%H:%M:%S+00:00`.
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00+00:00");
        assert_eq!(rfc3339(1_454_198_100), "2016-01-30T23:55:00+00:00");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00+00:00");
        assert_eq!(rfc3339(1_798_675_200), "2026-12-31T00:00:00+00:00");
        assert_eq!(rfc3339(2_524_608_000), "2050-01-01T00:00:00+00:00");
        assert_eq!(rfc3339(4_102_444_800), "2100-01-01T00:00:00+00:00");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59+00:00");
        assert_eq!(rfc3339(253_402_300_799), "9999-12-31T23:59:59+00:00");
        assert_eq!(rfc3339(i64::MAX), "9999-12-31T23:59:59+00:00");
        assert_eq!(rfc3339(i64::MIN), "-009999-01-01T00:00:00+00:00");
    }

    #[test]
    fn formats_milliseconds() {
        assert_eq!(rfc3339_ms(1_500), "1970-01-01T00:00:01.500Z");
        assert_eq!(rfc3339_ms(1_000), "1970-01-01T00:00:01.000Z");
        assert_eq!(rfc3339_ms(1_454_198_100_007), "2016-01-30T23:55:00.007Z");
        assert_eq!(rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_ms(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_ms(i64::MAX), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn reads_known_dates() {
        assert_eq!(unix("1970-01-01T00:00:00Z"), 0);
        assert_eq!(unix("2016-01-30T23:55:00Z"), 1_454_198_100);
        assert_eq!(unix("2000-02-29T00:00:00+00:00"), 951_782_400);
    }

    #[test]
    fn the_clock_is_unix_time() {
        // Seconds and milliseconds since the epoch: after 2026-01-01 (this code was written
        // later) and before 2100-01-01.
        let (s, ms) = (now_unix(), now_unix_ms());
        assert!((1_767_225_600..4_102_444_800).contains(&s), "{s}");
        assert!((1_767_225_600_000..4_102_444_800_000).contains(&ms), "{ms}");
    }
}
