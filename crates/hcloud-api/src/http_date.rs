//! HTTP-date parsing (RFC 9110 §5.6.7), for `Retry-After`: the three forms a recipient must
//! accept, read with `jiff`.
//!
//! - IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, through jiff's RFC 2822 parser, so any
//!   Internet Message Format date is read too (numeric offsets, `UT`, no weekday), as RFC 9110
//!   encourages recipients to be robust to;
//! - RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT`, whose two-digit year is placed by RFC 9110's
//!   rule: a date more than 50 years in the future means the century before;
//! - asctime `Sun Nov  6 08:49:37 1994` (UTC).
//!
//! The weekday must be a weekday name but is not checked against the date: it is redundant,
//! and a sender that gets it wrong still means the date.

use jiff::civil::DateTime;
use jiff::fmt::rfc2822::DateTimeParser;
use jiff::fmt::strtime::BrokenDownTime;
use jiff::tz::Offset;
use jiff::{Timestamp, ToSpan};

/// RFC 5322 dates, IMF-fixdate among them.
static IMF_PARSER: DateTimeParser = DateTimeParser::new().relaxed_weekday(true);
/// `Sun Nov  6 08:49:37 1994`; a space in the format matches any run of spaces.
const ASCTIME: &str = "%a %b %e %H:%M:%S %Y";
/// `Sunday, 06-Nov-94 08:49:37 GMT`.
const RFC850: &str = "%A, %d-%b-%y %H:%M:%S GMT";

/// The instant an HTTP-date names, or `None` if `value` is none of the three forms or names
/// no valid date. `now` places an RFC 850 date's two-digit year.
pub(crate) fn parse(value: &str, now: Timestamp) -> Option<Timestamp> {
    if let Ok(at) = IMF_PARSER.parse_timestamp(value) {
        return Some(at);
    }
    if let Ok(mut tm) = BrokenDownTime::parse(ASCTIME, value) {
        tm.set_weekday(None);
        return Offset::UTC.to_timestamp(tm.to_datetime().ok()?).ok();
    }
    let mut tm = BrokenDownTime::parse(RFC850, value).ok()?;
    tm.set_weekday(None);
    Offset::UTC.to_timestamp(rfc850_datetime(tm, now)?).ok()
}

/// The civil time of a parsed RFC 850 date: of the years ending in its two digits, the latest
/// that puts it at most 50 years after `now`.
fn rfc850_datetime(mut tm: BrokenDownTime, now: Timestamp) -> Option<DateTime> {
    let limit = Offset::UTC.to_datetime(now).checked_add(50.years()).ok()?;
    // `%y` read two digits and put them in 1969..=2068; only the digits count here.
    let two_digits = tm.year()?.rem_euclid(100);
    let year = limit.year() - (limit.year() - two_digits).rem_euclid(100);
    tm.set_year(Some(year)).ok()?;
    let at = tm.to_datetime().ok()?;
    if at <= limit {
        return Some(at);
    }
    // In the limit's year but after it: a century earlier.
    tm.set_year(Some(year - 100)).ok()?;
    tm.to_datetime().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9110's example instant, 1994-11-06T08:49:37Z.
    const EXAMPLE: i64 = 784_111_777;

    fn ts(rfc3339: &str) -> Timestamp {
        rfc3339.parse().unwrap_or_else(|e| panic!("{rfc3339}: {e}"))
    }

    fn secs(value: &str, now: &str) -> Option<i64> {
        parse(value, ts(now)).map(Timestamp::as_second)
    }

    #[test]
    fn the_three_forms_of_rfc_9110() {
        let now = "2026-01-01T00:00:00Z";
        assert_eq!(secs("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(EXAMPLE));
        assert_eq!(secs("Sunday, 06-Nov-94 08:49:37 GMT", now), Some(EXAMPLE));
        assert_eq!(secs("Sun Nov  6 08:49:37 1994", now), Some(EXAMPLE));
        assert_eq!(secs("Wed Nov 16 08:49:37 1994", now), Some(EXAMPLE + 10 * 86_400));
        assert_eq!(secs("Tue, 29 Feb 2000 00:00:05 GMT", now), Some(951_782_405));
    }

    #[test]
    fn other_internet_message_format_dates() {
        let now = "2026-01-01T00:00:00Z";
        assert_eq!(secs("Sun, 06 Nov 1994 09:49:37 +0100", now), Some(EXAMPLE));
        assert_eq!(secs("06 Nov 1994 08:49:37 UT", now), Some(EXAMPLE));
        assert_eq!(secs("Sun, 6 Nov 1994 08:49:37 GMT", now), Some(EXAMPLE));
        // RFC 5322 §4.3: an unknown alphabetic zone is read as UTC.
        assert_eq!(secs("Sun, 06 Nov 1994 08:49:37 UTC", now), Some(EXAMPLE));
    }

    #[test]
    fn a_wrong_weekday_is_ignored() {
        let now = "2026-01-01T00:00:00Z";
        assert_eq!(secs("Mon, 06 Nov 1994 08:49:37 GMT", now), Some(EXAMPLE));
        assert_eq!(secs("Monday, 06-Nov-94 08:49:37 GMT", now), Some(EXAMPLE));
        assert_eq!(secs("Mon Nov  6 08:49:37 1994", now), Some(EXAMPLE));
    }

    #[test]
    fn rfc_850_years_lie_at_most_50_years_ahead() {
        // 2026 + 50 = 2076: "76" is 2076 until the date passes the limit, then 1976.
        let now = "2026-06-01T00:00:00Z";
        assert_eq!(secs("Monday, 01-Jun-76 00:00:00 GMT", now), Some(ts("2076-06-01T00:00:00Z").as_second()));
        assert_eq!(secs("Wednesday, 02-Jun-76 00:00:00 GMT", now), Some(ts("1976-06-02T00:00:00Z").as_second()));
        assert_eq!(secs("Tuesday, 01-Jan-30 00:00:00 GMT", now), Some(ts("2030-01-01T00:00:00Z").as_second()));
        // jiff alone would put "68" in 2068 and "69" in 1969; RFC 9110 goes by the current date.
        let later = "2090-01-01T00:00:00Z";
        assert_eq!(secs("Wednesday, 01-Jan-10 00:00:00 GMT", later), Some(ts("2110-01-01T00:00:00Z").as_second()));
        assert_eq!(secs("Tuesday, 01-Jan-69 00:00:00 GMT", later), Some(ts("2069-01-01T00:00:00Z").as_second()));
    }

    #[test]
    fn malformed_dates_are_none() {
        let now = "2026-01-01T00:00:00Z";
        for bad in [
            "",
            "soon",
            "-1",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994",
            "Sun, 31 Feb 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT trailing",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 UTC",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994 GMT",
            "Sun Nov 31 08:49:37 1994",
        ] {
            assert_eq!(secs(bad, now), None, "{bad:?}");
        }
    }
}
