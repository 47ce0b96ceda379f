//! Go bools and Go durations (`parse_go_bool`, `parse_go_duration`): the annotation and
//! environment value parsers.
//!
//! Properties beyond "no panic":
//! - bools are exactly Go's `strconv.ParseBool` table;
//! - a parsed duration printed the way Go's `Duration.String` prints it parses back to itself;
//! - durations compose: `parse(a ++ b) == parse(a) + parse(b)` for two valid unsigned inputs
//!   (Go sums the segments independently), unless the sum passes Go's limit, where it fails;
//! - every accepted duration is at most Go's largest (`i64::MAX` nanoseconds), so it fits an
//!   `Instant`.

#![no_main]

use std::time::{Duration, Instant};

use cloud_provider::helpers::go_syntax::{parse_go_bool, parse_go_duration};
use libfuzzer_sys::fuzz_target;

const GO_MAX_NANOS: u128 = i64::MAX as u128;

/// Go's `Duration.String`.
fn go_string(d: Duration) -> String {
    fn frac(v: u64, prec: usize) -> String {
        if v == 0 {
            return String::new();
        }
        let digits = format!("{v:0prec$}");
        format!(".{}", digits.trim_end_matches('0'))
    }
    let u = u64::try_from(d.as_nanos()).expect("accepted durations fit i64 nanoseconds");
    if u == 0 {
        return "0s".to_owned();
    }
    if u < 1_000_000_000 {
        let (prec, div, unit) = if u < 1_000 {
            (0, 1, "ns")
        } else if u < 1_000_000 {
            (3, 1_000, "µs")
        } else {
            (6, 1_000_000, "ms")
        };
        return format!("{}{}{unit}", u / div, frac(u % div, prec));
    }
    let (secs, nanos) = (u / 1_000_000_000, u % 1_000_000_000);
    let mut out = String::new();
    if secs >= 3600 {
        out.push_str(&format!("{}h", secs / 3600));
    }
    if secs >= 60 {
        out.push_str(&format!("{}m", secs / 60 % 60));
    }
    out.push_str(&format!("{}{}s", secs % 60, frac(nanos, 9)));
    out
}

fn check_duration(s: &str) -> Option<Duration> {
    let d = parse_go_duration(s)?;
    assert!(d.as_nanos() <= GO_MAX_NANOS, "{s:?} gave {d:?}, beyond Go's range");
    assert!(Instant::now().checked_add(d).is_some(), "{s:?} gave {d:?}, beyond an Instant");
    let printed = go_string(d);
    assert_eq!(parse_go_duration(&printed), Some(d), "{s:?} gave {d:?}, printed {printed:?}");
    Some(d)
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };

    let go_bool = match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    };
    assert_eq!(parse_go_bool(s), go_bool, "{s:?}");

    let whole = check_duration(s);
    // Split into two halves at a char boundary and check that segments add up.
    let plain = |p: &str| !p.is_empty() && p != "0" && !p.starts_with(['+', '-']) && !p.contains(char::is_whitespace);
    if let Some((cut, _)) = s.char_indices().nth(s.chars().count() / 2) {
        let (a, b) = s.split_at(cut);
        if let (true, true, Some(da), Some(db)) = (plain(a), plain(b), check_duration(a), check_duration(b)) {
            // A unit must end `a`, or Go would read the digits of `b` into `a`'s last segment.
            if a.ends_with(|c: char| c.is_alphabetic()) {
                let sum = da + db;
                if sum.as_nanos() <= GO_MAX_NANOS {
                    assert_eq!(whole, Some(sum), "{a:?} + {b:?}");
                } else {
                    assert_eq!(whole, None, "{a:?} + {b:?} is beyond Go's range");
                }
            }
        }
    }
});
