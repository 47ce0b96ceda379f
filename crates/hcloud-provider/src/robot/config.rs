//! `ROBOT_*`: the Robot part of the configuration, with the official CCM's names, defaults and
//! validation (both credentials or neither; Robot together with routes is an error). Called by
//! [`crate::config::Config::from_env`], which reports these errors with all the others.

use std::fmt;
use std::path::PathBuf;
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
    /// With credentials: the files they came from (`ROBOT_USER_FILE`, `ROBOT_PASSWORD_FILE`,
    /// each only when its plain variable is unset), watched for new credentials
    /// ([`crate::rotation`]); a part from a plain variable cannot change.
    pub credential_files: CredentialFiles,
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

/// Where the Robot credentials came from: the files to watch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialFiles {
    /// `ROBOT_USER_FILE`, when the user came from it.
    pub user: Option<PathBuf>,
    /// `ROBOT_PASSWORD_FILE`, when the password came from it.
    pub password: Option<PathBuf>,
}

impl fmt::Debug for RobotConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotConfig")
            .field("user", &self.credentials.as_ref().map(|(u, _)| u))
            .field("password", &self.credentials.as_ref().map(|_| "[redacted]"))
            .field("credential_files", &self.credential_files)
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
    let credential_files = match &credentials {
        Some(_) => CredentialFiles { user: r.file_of("ROBOT_USER"), password: r.file_of("ROBOT_PASSWORD") },
        None => CredentialFiles::default(),
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
    robot_enabled.then_some(RobotConfig {
        credentials,
        credential_files,
        endpoint,
        cache_timeout,
        rate_limit_wait,
        forward_internal_ips,
    })
}
