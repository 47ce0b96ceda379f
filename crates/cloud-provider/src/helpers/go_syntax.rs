//! Go's syntax for configuration values (`strconv.ParseBool`, `time.ParseDuration`), so flags
//! and environment variables accept exactly what the Go cloud-controller-managers accept.

use std::time::Duration;

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The largest duration Go (and [`parse_go_duration`]) accepts, for error messages.
pub const GO_DURATION_MAX: &str = "2562047h47m16.854775807s";

/// Go's `time.ParseDuration` (e.g. `10s`, `1m30s`, `1.5h`, `500ms`; units ns, us, µs, ms, s,
/// m, h), with Go's exact arithmetic and range: whole nanoseconds, at most
/// `2562047h47m16.854775807s` (`i64::MAX` ns, about 292 years; larger values are rejected as
/// Go rejects them, so no accepted duration overflows an `Instant`). Two differences from Go:
/// surrounding whitespace is ignored, and negative durations are rejected (`-0` is zero).
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    const LIMIT: u64 = 1 << 63;
    let s = s.trim();
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return None;
        }
        // The integer part; Go fails on overflow.
        let int_len = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let mut value: u64 = 0;
        for digit in rest[..int_len].bytes() {
            if value > LIMIT / 10 {
                return None;
            }
            value = value * 10 + u64::from(digit - b'0');
            if value > LIMIT {
                return None;
            }
        }
        rest = &rest[int_len..];
        // The fraction; Go ignores the digits that would overflow.
        let (mut fraction, mut scale, mut has_fraction) = (0u64, 1f64, false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.find(|c: char| !c.is_ascii_digit()).unwrap_or(after_dot.len());
            let mut overflow = false;
            for digit in after_dot[..frac_len].bytes() {
                if overflow || fraction > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let next = fraction * 10 + u64::from(digit - b'0');
                if next > LIMIT {
                    overflow = true;
                    continue;
                }
                fraction = next;
                scale *= 10.0;
            }
            has_fraction = frac_len > 0;
            rest = &after_dot[frac_len..];
        }
        if int_len == 0 && !has_fraction {
            return None;
        }
        let unit_len = rest.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(rest.len());
        let unit: u64 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        if value > LIMIT / unit {
            return None;
        }
        value *= unit;
        if fraction > 0 {
            // As Go: float64 is exact enough here (fraction / scale < 1, so at most one hour).
            // The cast truncates, as Go's conversion does; the product is below 3.6e12.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
            let part = (fraction as f64 * (unit as f64 / scale)) as u64;
            value += part;
            if value > LIMIT {
                return None;
            }
        }
        // Both are at most 2^63, so the sum fits.
        total += value;
        if total > LIMIT {
            return None;
        }
    }
    if negative {
        return (total == 0).then_some(Duration::ZERO);
    }
    if total > LIMIT - 1 {
        return None;
    }
    Some(Duration::from_nanos(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_and_bools() {
        assert_eq!(parse_go_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        for bad in ["", "10", "-5s", "5 s", "s", "1d", "1m30"] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
        assert_eq!(parse_go_bool("True"), Some(true));
        assert_eq!(parse_go_bool("0"), Some(false));
        assert_eq!(parse_go_bool("yes"), None);
    }

    /// Go's own table (`time/time_test.go`, `parseDurationTests` and `parseDurationErrorTests`),
    /// less the negative durations, which are rejected here.
    #[test]
    fn go_durations_exactly_as_go_parses_them() {
        const NS: u64 = 1;
        const US: u64 = 1_000;
        const MS: u64 = 1_000_000;
        const S: u64 = 1_000_000_000;
        const M: u64 = 60 * S;
        const H: u64 = 60 * M;
        for (input, nanos) in [
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12µs", 12 * US),
            ("12μs", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * M),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", (1 << 63) - 1),
            ("9223372036854775.807us", (1 << 63) - 1),
            ("9223372036854ms775us807ns", (1 << 63) - 1),
            ("2562047h47m16.854775807s", (1 << 63) - 1),
            ("0.100000000000000000000h", 6 * M),
            ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827),
            // Fractions of minutes and hours are exact, too.
            ("1.1m", 66 * S),
            ("0.7m", 42 * S),
        ] {
            assert_eq!(parse_go_duration(input), Some(Duration::from_nanos(nanos)), "{input:?}");
        }
        for bad in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "\u{85}\u{85}",
            "hello \u{ff}ff world",
            // Beyond Go's range (about 292 years): Go rejects them, and so must a value that
            // later becomes `Instant::now() + d`.
            "9223372036854775808ns",
            "9223372036854775.808us",
            "9223372036854ms775us808ns",
            "2562047h47m16.854775808s",
            "4000000000000000h",
            // Negative durations.
            "-5s",
            "-1ns",
            "-2562047h47m16.854775808s",
        ] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
    }
}
