//! The Robot variables as `Config::from_env` reads them (kept apart from `config.rs`, which
//! `crate::config` imports, so the two files do not import each other).

use std::collections::HashMap;

use secrecy::ExposeSecret;

use crate::config::{Config, ConfigErrors};
use crate::robot::config::CredentialFiles;

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
    let c =
        with_token(&[("ROBOT_ENABLED", "true"), ("ROBOT_USER_FILE", &u), ("ROBOT_PASSWORD_FILE", &p)]).expect("valid");
    let robot = c.robot.expect("on");
    assert_eq!(
        robot.credential_files,
        CredentialFiles { user: Some(uf.clone()), password: Some(pf.clone()) },
        "watched"
    );
    let (user, pw) = robot.credentials.expect("credentials");
    assert_eq!((user.as_str(), pw.expose_secret()), ("file-user", "file-pw"));
    let c = with_token(&[
        ("ROBOT_ENABLED", "true"),
        ("ROBOT_USER", "plain"),
        ("ROBOT_USER_FILE", &u),
        ("ROBOT_PASSWORD_FILE", &p),
    ])
    .expect("valid");
    let robot = c.robot.expect("on");
    assert_eq!(robot.credentials.expect("credentials").0, "plain", "the plain variable wins");
    assert_eq!(
        robot.credential_files,
        CredentialFiles { user: None, password: Some(pf.clone()) },
        "only the password can change"
    );
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
    let ok =
        with_token(&[("ROBOT_ENABLED", "true"), ("HCLOUD_NETWORK", "k8s"), ("HCLOUD_NETWORK_ROUTES_ENABLED", "false")])
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
