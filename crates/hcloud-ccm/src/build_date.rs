//! The build date's format, shared by `build.rs` (which includes this file) and its test.

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC).
pub(crate) fn rfc3339(epoch: u64) -> String {
    let (days, secs) = (epoch / 86_400, epoch % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (non-negative here).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs % 3600 / 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn epoch_seconds_become_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_735_689_599), "2024-12-31T23:59:59Z");
        assert_eq!(rfc3339(4_107_542_400), "2100-03-01T00:00:00Z");
    }

    /// Cargo sets the variables a build script emits with `rustc-env` in the environment of
    /// `cargo test` processes too: the image test runs cargo (through scripts/build-image), so
    /// an emitted name that the script also reads would come back as an input and rerun it.
    #[test]
    fn build_rs_emits_no_variable_it_reads() {
        let output = std::path::Path::new(env!("OUT_DIR")).with_file_name("output");
        let text = std::fs::read_to_string(&output).unwrap_or_else(|e| panic!("{}: {e}", output.display()));
        let read: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("cargo:rerun-if-env-changed=")).collect();
        let emitted: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("cargo:rustc-env="))
            .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
            .collect();
        assert!(!read.is_empty() && !emitted.is_empty(), "{text}");
        let both: Vec<&&str> = emitted.iter().filter(|k| read.contains(k)).collect();
        assert!(both.is_empty(), "build.rs emits variables it reads: {both:?}");
    }

    /// Cargo reruns a build script on every build while a path it watches does not exist: the
    /// build date would change each time, and with it the binary and the image built from it.
    #[test]
    fn build_rs_watches_only_paths_that_exist() {
        let output = std::path::Path::new(env!("OUT_DIR")).with_file_name("output");
        let text = std::fs::read_to_string(&output).unwrap_or_else(|e| panic!("{}: {e}", output.display()));
        let missing: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("cargo:rerun-if-changed="))
            .filter(|p| !std::path::Path::new(p).exists())
            .collect();
        assert!(missing.is_empty(), "build.rs watches paths that do not exist: {missing:?}");
    }
}
