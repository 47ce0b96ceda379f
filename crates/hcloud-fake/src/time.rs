//! Wall-clock helpers: unix seconds and RFC 3339 formatting (UTC), without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Current unix time in milliseconds.
pub(crate) fn now_unix_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(_) => 0,
    }
}

/// Current unix time in seconds.
pub(crate) fn now_unix() -> i64 {
    now_unix_ms().div_euclid(1000)
}

/// Civil date (year, month, day) from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    // d is in 1..=31 and m in 1..=12 by construction, so the casts cannot truncate.
    (y, u32::try_from(m).unwrap_or(1), u32::try_from(d).unwrap_or(1))
}

/// Days since 1970-01-01 of a civil date (inverse of `civil_from_days`). Tests write known
/// dates with it; the fake itself only formats.
#[cfg(test)]
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix seconds of a UTC civil time.
#[cfg(test)]
pub(crate) fn unix_from_civil(y: i64, m: u32, d: u32, hh: u32, mm: u32, ss: u32) -> i64 {
    days_from_civil(y, m, d) * 86_400 + i64::from(hh) * 3600 + i64::from(mm) * 60 + i64::from(ss)
}

/// The UTC civil time of unix seconds: (year, month, day, hour, minute, second).
#[cfg(test)]
fn civil_from_unix(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    // rem < 86400, so every part fits in u32.
    let part = |v: i64| u32::try_from(v).unwrap_or(0);
    (y, m, d, part(rem / 3600), part((rem % 3600) / 60), part(rem % 60))
}

/// `YYYY-MM-DDTHH:MM:SS+00:00` for a unix timestamp in seconds (the API's format).
pub(crate) fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+00:00", rem / 3600, (rem % 3600) / 60, rem % 60)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for a unix timestamp in milliseconds (request log).
pub(crate) fn rfc3339_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let base = rfc3339(secs);
    let stem = base.trim_end_matches("+00:00");
    format!("{stem}.{milli:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00+00:00");
        assert_eq!(rfc3339(1_454_198_100), "2016-01-30T23:55:00+00:00");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00+00:00");
        assert_eq!(rfc3339_ms(1_500), "1970-01-01T00:00:01.500Z");
        assert_eq!(unix_from_civil(2016, 1, 30, 23, 55, 0), 1_454_198_100);
        assert_eq!(unix_from_civil(2000, 2, 29, 0, 0, 0), 951_782_400);
        assert_eq!(unix_from_civil(1970, 1, 1, 0, 0, 0), 0);
        for t in [0, 951_782_400, 1_798_675_200, 4_102_444_800, 2_524_608_000] {
            let (y, m, d, hh, mm, ss) = civil_from_unix(t);
            assert_eq!(unix_from_civil(y, m, d, hh, mm, ss), t);
        }
    }
}
