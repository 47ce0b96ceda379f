//! `ROBOT_*`: the Robot part of the configuration, with the official CCM's names, defaults and
//! validation (both credentials or neither; Robot together with routes is an error). Called by
//! [`crate::config::Config::from_env`], which reports these errors with all the others.

use std::fmt;
use std::time::Duration;

use secrecy::SecretString;

use crate::env::EnvReader;

/// Robot (dedicated server) settings, with `ROBOT_ENABLED=true`.
#[derive(Clone)]
pub struct RobotConfig {
    /// `ROBOT_USER` and `ROBOT_PASSWORD` (or their `_FILE`s); `None`: LB-only mode without a
    /// Robot client (Robot nodes are still recognized, and become Load Balancer IP targets
    /// through their InternalIP).
    pub credentials: Option<(String, SecretString)>,
    /// `ROBOT_ENDPOINT` (hcloud-ccm only): the Robot webservice URL.
    pub endpoint: String,
    /// `ROBOT_CACHE_TIMEOUT` (default 5m): how long the server list is reused.
    pub cache_timeout: Duration,
    /// `ROBOT_RATE_LIMIT_WAIT_TIME` (default 0): after a rate-limit answer (or a 403), Robot
    /// calls fail locally for this long.
    pub rate_limit_wait: Duration,
    /// `ROBOT_FORWARD_INTERNAL_IPS` (default true): copy the kubelet's InternalIPs.
    pub forward_internal_ips: bool,
}

impl fmt::Debug for RobotConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotConfig")
            .field("user", &self.credentials.as_ref().map(|(u, _)| u))
            .field("password", &self.credentials.as_ref().map(|_| "[redacted]"))
            .field("endpoint", &self.endpoint)
            .field("cache_timeout", &self.cache_timeout)
            .field("rate_limit_wait", &self.rate_limit_wait)
            .field("forward_internal_ips", &self.forward_internal_ips)
            .finish()
    }
}

/// Reads the `ROBOT_*` variables through `r`, which collects the problems and notes;
/// `routes` is whether routes would be enabled. `None` unless `ROBOT_ENABLED` is true.
pub(crate) fn from_env(r: &mut EnvReader<'_>, routes: bool) -> Option<RobotConfig> {
    let robot_enabled = r.bool("ROBOT_ENABLED").unwrap_or(false);
    // An empty credential (an empty file, or only whitespace) counts as unset.
    let user = r.var_or_file("ROBOT_USER").filter(|u| !u.is_empty());
    let password = r.var_or_file("ROBOT_PASSWORD").filter(|p| !p.is_empty());
    let credentials = match (user, password) {
        (Some(u), Some(p)) => Some((u, SecretString::from(p))),
        (None, None) => None,
        (Some(_), None) if robot_enabled => {
            r.problem(
                "ROBOT_USER is set but ROBOT_PASSWORD is not: set both Robot credentials (or their _FILE \
                 variants) or neither",
            );
            None
        }
        (None, Some(_)) if robot_enabled => {
            r.problem(
                "ROBOT_PASSWORD is set but ROBOT_USER is not: set both Robot credentials (or their _FILE \
                 variants) or neither",
            );
            None
        }
        (_, _) => None,
    };
    let cache_timeout = r.duration("ROBOT_CACHE_TIMEOUT").unwrap_or(Duration::from_secs(300));
    let rate_limit_wait = r.duration("ROBOT_RATE_LIMIT_WAIT_TIME").unwrap_or(Duration::ZERO);
    let forward_internal_ips = r.bool("ROBOT_FORWARD_INTERNAL_IPS").unwrap_or(true);
    let endpoint = r.var("ROBOT_ENDPOINT").unwrap_or_else(|| hcloud_api::robot::DEFAULT_ROBOT_ENDPOINT.to_owned());
    r.check_url("ROBOT_ENDPOINT", &endpoint);
    if robot_enabled && routes {
        r.problem(
            "ROBOT_ENABLED=true with HCLOUD_NETWORK_ROUTES_ENABLED (default true with HCLOUD_NETWORK): using \
             routes with Robot is not supported; set HCLOUD_NETWORK_ROUTES_ENABLED=false",
        );
    }
    if !robot_enabled {
        for k in [
            "ROBOT_USER",
            "ROBOT_USER_FILE",
            "ROBOT_PASSWORD",
            "ROBOT_PASSWORD_FILE",
            "ROBOT_CACHE_TIMEOUT",
            "ROBOT_RATE_LIMIT_WAIT_TIME",
            "ROBOT_FORWARD_INTERNAL_IPS",
            "ROBOT_ENDPOINT",
        ] {
            if r.is_set(k) {
                r.warn(format!("{k} is set but has no effect without ROBOT_ENABLED=true"));
            }
        }
    }
    robot_enabled.then_some(RobotConfig { credentials, endpoint, cache_timeout, rate_limit_wait, forward_internal_ips })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use secrecy::ExposeSecret;

    use crate::config::{Config, ConfigErrors};

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    fn with_token(pairs: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
        let token = "x".repeat(64);
        let mut all = vec![("HCLOUD_TOKEN", token.as_str())];
        all.extend_from_slice(pairs);
        Config::from_env(env(&all), Vec::new())
    }

    #[test]
    fn robot_defaults_match_the_official_ccm() {
        assert!(with_token(&[]).expect("valid").robot.is_none(), "off by default");
        let r = with_token(&[("ROBOT_ENABLED", "true")]).expect("valid").robot.expect("enabled");
        assert!(r.credentials.is_none(), "neither credential: LB-only mode");
        assert_eq!(r.cache_timeout, std::time::Duration::from_secs(300));
        assert_eq!(r.rate_limit_wait, std::time::Duration::ZERO);
        assert!(r.forward_internal_ips);
        assert_eq!(r.endpoint, "https://robot-ws.your-server.de");
        let r = with_token(&[
            ("ROBOT_ENABLED", "1"),
            ("ROBOT_USER", "u"),
            ("ROBOT_PASSWORD", "robot-secret-pw"),
            ("ROBOT_CACHE_TIMEOUT", "1m"),
            ("ROBOT_RATE_LIMIT_WAIT_TIME", "30s"),
            ("ROBOT_FORWARD_INTERNAL_IPS", "false"),
            ("ROBOT_ENDPOINT", "http://127.0.0.1:1/robot"),
        ])
        .expect("valid");
        assert!(!format!("{r:?}").contains("robot-secret-pw"), "the password is redacted");
        let robot = r.robot.expect("enabled");
        let (user, password) = robot.credentials.expect("credentials");
        assert_eq!((user.as_str(), password.expose_secret()), ("u", "robot-secret-pw"));
        assert_eq!(robot.cache_timeout, std::time::Duration::from_secs(60));
        assert_eq!(robot.rate_limit_wait, std::time::Duration::from_secs(30));
        assert!(!robot.forward_internal_ips);
        assert_eq!(robot.endpoint, "http://127.0.0.1:1/robot");
    }

    #[test]
    fn robot_credentials_from_files_and_precedence() {
        let dir = std::env::temp_dir().join(format!("hccm-robot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (uf, pf) = (dir.join("user"), dir.join("password"));
        std::fs::write(&uf, "file-user\n").expect("write");
        std::fs::write(&pf, "  file-pw \n").expect("write");
        let (u, p) = (uf.to_string_lossy().to_string(), pf.to_string_lossy().to_string());
        let c = with_token(&[("ROBOT_ENABLED", "true"), ("ROBOT_USER_FILE", &u), ("ROBOT_PASSWORD_FILE", &p)])
            .expect("valid");
        let (user, pw) = c.robot.expect("on").credentials.expect("credentials");
        assert_eq!((user.as_str(), pw.expose_secret()), ("file-user", "file-pw"));
        let c = with_token(&[
            ("ROBOT_ENABLED", "true"),
            ("ROBOT_USER", "plain"),
            ("ROBOT_USER_FILE", &u),
            ("ROBOT_PASSWORD_FILE", &p),
        ])
        .expect("valid");
        assert_eq!(c.robot.expect("on").credentials.expect("credentials").0, "plain", "the plain variable wins");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_rate_limit_wait_beyond_gos_range_is_a_config_error_naming_the_variable() {
        // It used to be accepted (up to u64::MAX seconds) and made the first rate-limit answer
        // panic in `Instant::now() + ROBOT_RATE_LIMIT_WAIT_TIME`.
        let err = with_token(&[("ROBOT_ENABLED", "true"), ("ROBOT_RATE_LIMIT_WAIT_TIME", "4000000000000000h")])
            .expect_err("out of range");
        assert_eq!(
            err.0,
            vec![
                "ROBOT_RATE_LIMIT_WAIT_TIME: \"4000000000000000h\" is not a duration; use Go syntax like 10s, \
                 1m30s, 500ms (at most 2562047h47m16.854775807s)"
            ]
        );
        let max = with_token(&[("ROBOT_ENABLED", "true"), ("ROBOT_RATE_LIMIT_WAIT_TIME", "2562047h47m16.854775807s")])
            .expect("Go's largest duration");
        let wait = max.robot.expect("enabled").rate_limit_wait;
        assert!(std::time::Instant::now().checked_add(wait).is_some(), "{wait:?} fits an Instant");
    }

    #[test]
    fn robot_config_errors_are_reported_with_the_others() {
        let err = with_token(&[
            ("ROBOT_ENABLED", "true"),
            ("ROBOT_USER", "u"),
            ("ROBOT_CACHE_TIMEOUT", "five minutes"),
            ("ROBOT_FORWARD_INTERNAL_IPS", "sometimes"),
            ("HCLOUD_NETWORK", "k8s"),
            ("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv5"),
        ])
        .expect_err("invalid");
        let text = err.to_string();
        for needle in [
            "ROBOT_USER is set but ROBOT_PASSWORD is not",
            "ROBOT_CACHE_TIMEOUT: \"five minutes\" is not a duration",
            "ROBOT_FORWARD_INTERNAL_IPS: \"sometimes\" is not a boolean",
            "using routes with Robot is not supported",
            "HCLOUD_INSTANCES_ADDRESS_FAMILY",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
        assert_eq!(err.0.len(), 5, "{text}");
        let err = with_token(&[("ROBOT_ENABLED", "true"), ("ROBOT_PASSWORD", "p")]).expect_err("partial");
        assert_eq!(err.0.len(), 1);
        assert!(err.0[0].starts_with("ROBOT_PASSWORD is set but ROBOT_USER is not"), "{err}");
        // Robot with a network but routes turned off is fine.
        let ok = with_token(&[
            ("ROBOT_ENABLED", "true"),
            ("HCLOUD_NETWORK", "k8s"),
            ("HCLOUD_NETWORK_ROUTES_ENABLED", "false"),
        ])
        .expect("valid");
        assert!(ok.robot.is_some() && !ok.routes_enabled);
        // Robot variables without ROBOT_ENABLED are named in a warning.
        let off = with_token(&[("ROBOT_USER", "u")]).expect("valid");
        assert!(off.robot.is_none());
        assert_eq!(off.warnings, vec!["ROBOT_USER is set but has no effect without ROBOT_ENABLED=true"]);
    }

    #[test]
    fn two_bad_robot_variables_are_reported_together_without_the_password() {
        let err = with_token(&[
            ("ROBOT_ENABLED", "true"),
            ("ROBOT_PASSWORD", "robot-secret-pw"),
            ("ROBOT_RATE_LIMIT_WAIT_TIME", "a while"),
        ])
        .expect_err("invalid");
        assert_eq!(
            err.0,
            vec![
                "ROBOT_PASSWORD is set but ROBOT_USER is not: set both Robot credentials (or their _FILE variants) \
                 or neither",
                "ROBOT_RATE_LIMIT_WAIT_TIME: \"a while\" is not a duration; use Go syntax like 10s, 1m30s, 500ms (at \
                 most 2562047h47m16.854775807s)",
            ]
        );
        assert!(!err.to_string().contains("robot-secret-pw"));
    }

    #[test]
    fn an_empty_credential_file_counts_as_unset() {
        let dir = std::env::temp_dir().join(format!("hccm-robot-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let empty = dir.join("empty");
        std::fs::write(&empty, "\n").expect("write");
        let path = empty.to_string_lossy().to_string();
        let c = with_token(&[("ROBOT_ENABLED", "true"), ("ROBOT_USER_FILE", &path), ("ROBOT_PASSWORD_FILE", &path)])
            .expect("valid");
        assert!(c.robot.expect("on").credentials.is_none(), "Load Balancer-only mode");
        std::fs::remove_dir_all(&dir).ok();
    }
}
