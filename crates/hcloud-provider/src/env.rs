//! One reader for the environment variables of the configuration ([`crate::config`], its
//! `ROBOT_*` part and the `HCLOUD_LOAD_BALANCERS_*` defaults): every bad value becomes one
//! message naming the variable, the value and what is accepted, and reading goes on, so a
//! configuration with three bad variables reports all three at once (as the annotation
//! [`Reader`](crate::load_balancers::annotations::Reader) does for a Service).
//!
//! Formats, as in the official CCM: booleans in Go's `ParseBool` syntax, durations in Go's
//! `ParseDuration` syntax. An empty variable counts as unset. The values of [`SECRETS`] are
//! never part of a message.

use std::time::Duration;

use cloud_provider::helpers::go_syntax::{GO_DURATION_MAX, parse_go_bool, parse_go_duration};
use ipnet::IpNet;

use crate::load_balancers::annotations::{parse_cidr, whole_seconds};

/// Variables whose values are secrets: a message about one says `[redacted]` instead.
pub const SECRETS: &[&str] = &["HCLOUD_TOKEN", "ROBOT_PASSWORD"];

/// All configuration problems found, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration:\n  - {}", .0.join("\n  - "))]
pub struct ConfigErrors(pub Vec<String>);

/// Reads variables through a lookup function, collecting problems and warnings.
pub struct EnvReader<'a> {
    get: &'a dyn Fn(&str) -> Option<String>,
    errors: Vec<String>,
    warnings: Vec<String>,
}

impl<'a> EnvReader<'a> {
    /// A reader over `get` (e.g. `&|k| std::env::var(k).ok()`).
    pub fn new(get: &'a dyn Fn(&str) -> Option<String>) -> EnvReader<'a> {
        EnvReader { get, errors: Vec::new(), warnings: Vec::new() }
    }

    /// The value of `name`; `None` if unset or empty.
    pub fn var(&self, name: &str) -> Option<String> {
        (self.get)(name).filter(|v| !v.is_empty())
    }

    /// Whether `name` is set to a non-empty value.
    pub fn is_set(&self, name: &str) -> bool {
        self.var(name).is_some()
    }

    /// A bad setting that is not about one value (e.g. two variables that exclude each other).
    pub fn problem(&mut self, message: impl Into<String>) {
        self.errors.push(message.into());
    }

    /// A finding worth a log line that does not stop the program.
    pub fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    /// Records that `name` has the bad value `value`: `<name>: <value> <what>`, the value
    /// quoted, or `[redacted]` for one of [`SECRETS`].
    fn reject(&mut self, name: &str, value: &str, what: &str) {
        let shown = if SECRETS.contains(&name) { "[redacted]".to_owned() } else { format!("{value:?}") };
        self.errors.push(format!("{name}: {shown} {what}"));
    }

    /// Records that `value` of `name` is invalid: `<name>: <value> is invalid; <accepted>`.
    pub fn invalid(&mut self, name: &str, value: &str, accepted: &str) {
        self.reject(name, value, &format!("is invalid; {accepted}"));
    }

    /// `name`, or else the contents of the file `<name>_FILE` names, whitespace trimmed (the
    /// plain variable wins). A file that cannot be read is a problem naming `<name>_FILE`;
    /// the value itself never appears in a message.
    pub fn var_or_file(&mut self, name: &str) -> Option<String> {
        if let Some(v) = self.var(name) {
            return Some(v.trim().to_owned());
        }
        let file_var = format!("{name}_FILE");
        let path = self.var(&file_var)?;
        match std::fs::read_to_string(&path) {
            Ok(contents) => Some(contents.trim().to_owned()),
            Err(e) => {
                self.problem(format!("{file_var}: cannot read {path:?}: {e}"));
                None
            }
        }
    }

    /// The file `<name>_FILE` names when `<name>` itself is unset: where
    /// [`var_or_file`](Self::var_or_file) read the value from (the file to watch for a new
    /// value), or `None` when the value came from the plain variable or nowhere.
    pub fn file_of(&self, name: &str) -> Option<std::path::PathBuf> {
        if self.is_set(name) {
            return None;
        }
        self.var(&format!("{name}_FILE")).map(std::path::PathBuf::from)
    }

    /// A boolean in Go's `ParseBool` syntax.
    pub fn bool(&mut self, name: &str) -> Option<bool> {
        let v = self.var(name)?;
        let parsed = parse_go_bool(&v);
        if parsed.is_none() {
            self.reject(name, &v, "is not a boolean; accepted: true, false, 1, 0, t, f");
        }
        parsed
    }

    /// A duration in Go's `ParseDuration` syntax.
    pub fn duration(&mut self, name: &str) -> Option<Duration> {
        let v = self.var(name)?;
        let parsed = parse_go_duration(&v);
        if parsed.is_none() {
            self.reject(
                name,
                &v,
                &format!("is not a duration; use Go syntax like 10s, 1m30s, 500ms (at most {GO_DURATION_MAX})"),
            );
        }
        parsed
    }

    /// A duration in whole seconds within `min..=max`.
    pub fn seconds(&mut self, name: &str, (min, max): (u32, u32)) -> Option<u32> {
        let v = self.var(name)?;
        match whole_seconds(self.duration(name)?, min, max) {
            Ok(s) => Some(s),
            Err(why) => {
                self.invalid(name, &v, &why);
                None
            }
        }
    }

    /// An unsigned integer within `min..=max`.
    pub fn int(&mut self, name: &str, min: u32, max: u32) -> Option<u32> {
        let v = self.var(name)?;
        match v.parse::<u32>() {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.invalid(name, &v, &format!("accepted: an integer from {min} to {max}"));
                None
            }
        }
    }

    /// The value of the option whose name `name` is set to, matched exactly.
    pub fn choice<T: Clone>(&mut self, name: &str, options: &[(&str, T)]) -> Option<T> {
        self.choose(name, options, false)
    }

    /// Like [`choice`](Self::choice), with the value lower-cased first (the options are
    /// lower case).
    pub fn choice_ignoring_case<T: Clone>(&mut self, name: &str, options: &[(&str, T)]) -> Option<T> {
        self.choose(name, options, true)
    }

    fn choose<T: Clone>(&mut self, name: &str, options: &[(&str, T)], fold_case: bool) -> Option<T> {
        let v = self.var(name)?;
        let wanted = if fold_case { v.to_ascii_lowercase() } else { v.clone() };
        let found = options.iter().find(|(option, _)| *option == wanted).map(|(_, value)| value.clone());
        if found.is_none() {
            let names: Vec<&str> = options.iter().map(|(option, _)| *option).collect();
            self.invalid(name, &v, &format!("accepted: {}", names.join(", ")));
        }
        found
    }

    /// A CIDR (its network address; a host address inside it is accepted, as in Go).
    pub fn cidr(&mut self, name: &str) -> Option<IpNet> {
        let v = self.var(name)?;
        let parsed = parse_cidr(&v);
        if parsed.is_none() {
            self.reject(name, &v, "is not a CIDR; accepted: e.g. 10.0.1.0/24");
        }
        parsed
    }

    /// Checks that `value` (of `name`, or its default) is an `http://` or `https://` URL.
    pub fn check_url(&mut self, name: &str, value: &str) {
        if !(value.starts_with("http://") || value.starts_with("https://")) {
            self.reject(name, value, "is not an http:// or https:// URL");
        }
    }

    /// The warnings, or every problem found.
    pub fn finish(self) -> Result<Vec<String>, ConfigErrors> {
        if self.errors.is_empty() { Ok(self.warnings) } else { Err(ConfigErrors(self.errors)) }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn every_problem_is_collected_into_one_error_naming_variable_value_and_what_is_accepted() {
        let get = lookup(&[
            ("A_BOOL", "yes"),
            ("A_DURATION", "ten seconds"),
            ("A_CHOICE", "IPV4"),
            ("SECONDS", "1.5s"),
            ("AN_INT", "101"),
            ("A_CIDR", "10.0.1.0"),
            ("A_URL", "ftp://x"),
            ("GOOD_BOOL", "T"),
            ("EMPTY", ""),
        ]);
        let mut r = EnvReader::new(&get);
        assert_eq!(r.bool("A_BOOL"), None);
        assert_eq!(r.duration("A_DURATION"), None);
        assert_eq!(r.choice("A_CHOICE", &[("ipv4", 4), ("ipv6", 6)]), None, "matched exactly");
        assert_eq!(r.seconds("SECONDS", (1, 3600)), None);
        assert_eq!(r.int("AN_INT", 0, 100), None);
        assert_eq!(r.cidr("A_CIDR"), None);
        r.check_url("A_URL", "ftp://x");
        assert_eq!(r.bool("GOOD_BOOL"), Some(true));
        assert_eq!(r.choice_ignoring_case("A_CHOICE", &[("ipv4", 4)]), Some(4));
        assert_eq!(r.bool("EMPTY"), None, "empty counts as unset");
        assert!(!r.is_set("EMPTY") && r.var("UNSET").is_none());
        r.warn("a note");
        let err = r.finish().expect_err("seven problems");
        assert_eq!(
            err.to_string(),
            "invalid configuration:\n  \
             - A_BOOL: \"yes\" is not a boolean; accepted: true, false, 1, 0, t, f\n  \
             - A_DURATION: \"ten seconds\" is not a duration; use Go syntax like 10s, 1m30s, 500ms (at most \
             2562047h47m16.854775807s)\n  \
             - A_CHOICE: \"IPV4\" is invalid; accepted: ipv4, ipv6\n  \
             - SECONDS: \"1.5s\" is invalid; the API takes whole seconds; accepted: 1s to 3600s, e.g. 15s\n  \
             - AN_INT: \"101\" is invalid; accepted: an integer from 0 to 100\n  \
             - A_CIDR: \"10.0.1.0\" is not a CIDR; accepted: e.g. 10.0.1.0/24\n  \
             - A_URL: \"ftp://x\" is not an http:// or https:// URL"
        );
    }

    #[test]
    fn without_problems_the_warnings_come_back() {
        let get = lookup(&[("B", "0")]);
        let mut r = EnvReader::new(&get);
        assert_eq!(r.bool("B"), Some(false));
        r.warn("B is deprecated");
        assert_eq!(r.finish(), Ok(vec!["B is deprecated".to_owned()]));
    }

    #[test]
    fn secret_values_never_appear_in_a_message() {
        let get = lookup(&[("HCLOUD_TOKEN", "token-secret-value"), ("ROBOT_PASSWORD", "robot-secret-pw")]);
        let mut r = EnvReader::new(&get);
        assert_eq!(r.bool("HCLOUD_TOKEN"), None);
        assert_eq!(r.choice("ROBOT_PASSWORD", &[("a", ())]), None);
        let err = r.finish().expect_err("two problems");
        assert_eq!(
            err.0,
            vec![
                "HCLOUD_TOKEN: [redacted] is not a boolean; accepted: true, false, 1, 0, t, f",
                "ROBOT_PASSWORD: [redacted] is invalid; accepted: a",
            ]
        );
    }

    #[test]
    fn a_file_variable_is_read_trimmed_and_the_plain_variable_wins() {
        let dir = std::env::temp_dir().join(format!("hccm-env-reader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("secret");
        std::fs::write(&file, "  from-file \n").expect("write");
        let path = file.to_string_lossy().to_string();
        let get = lookup(&[("S_FILE", &path), ("P", "plain"), ("P_FILE", &path), ("M_FILE", "/nonexistent/secret")]);
        let mut r = EnvReader::new(&get);
        assert_eq!(r.var_or_file("S").as_deref(), Some("from-file"));
        assert_eq!(r.var_or_file("P").as_deref(), Some("plain"));
        assert_eq!(r.var_or_file("M"), None);
        assert_eq!(r.var_or_file("UNSET"), None);
        assert_eq!(r.file_of("S"), Some(file.clone()), "S came from its file");
        assert_eq!(r.file_of("P"), None, "P came from the plain variable");
        assert_eq!(r.file_of("UNSET"), None);
        let err = r.finish().expect_err("unreadable file");
        assert_eq!(err.0.len(), 1);
        assert!(err.0[0].starts_with("M_FILE: cannot read \"/nonexistent/secret\": "), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
