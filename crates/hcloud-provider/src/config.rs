//! Configuration from the environment, with the official Hetzner CCM's variable names,
//! formats and defaults. Every problem is collected and reported together.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use secrecy::SecretString;

pub use crate::env::ConfigErrors;
use crate::env::EnvReader;
use crate::load_balancers::defaults as lb_env;
use crate::load_balancers::defaults::LbDefaults;
pub use crate::robot::config::RobotConfig;

/// Which ExternalIPs nodes get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressFamily {
    /// The public IPv4 only (default).
    Ipv4,
    /// The public IPv6 (`<net>::1`) only.
    Ipv6,
    /// Both.
    DualStack,
}

/// How the shared server inventory caches (`HCLOUD_SERVER_CACHE_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    /// One paginated list serves every lookup within the max age (default).
    All,
    /// One request per server, cached per server.
    One,
    /// No caching: every lookup is a request.
    Off,
}

/// The provider's configuration.
pub struct Config {
    /// The Hetzner Cloud API token (`HCLOUD_TOKEN`, or the file `HCLOUD_TOKEN_FILE` names).
    pub token: SecretString,
    /// `HCLOUD_TOKEN_FILE` when the token came from it (`HCLOUD_TOKEN` unset): the file is
    /// watched, and a new token in it is checked and used without a restart
    /// ([`crate::rotation`]). A token from `HCLOUD_TOKEN` cannot change.
    pub token_file: Option<PathBuf>,
    /// The API base URL (`HCLOUD_ENDPOINT`); `None`: the public API.
    pub endpoint: Option<String>,
    /// `HCLOUD_DEBUG`: log every API request and response (token redacted).
    pub debug: bool,
    /// `HCLOUD_NETWORK`: private network id or name.
    pub network: Option<String>,
    /// Which public IPs become the Nodes' ExternalIPs (`HCLOUD_INSTANCES_ADDRESS_FAMILY`).
    pub address_family: AddressFamily,
    /// Whether Nodes get the zone label (`HCLOUD_INSTANCES_ZONE_LABEL_ENABLED`).
    pub zone_label_enabled: bool,
    /// How the shared server inventory caches (`HCLOUD_SERVER_CACHE_MODE`).
    pub cache_mode: CacheMode,
    /// `HCLOUD_SERVER_CACHE_MAX_AGE`: how old server data may be for node initialization and
    /// address refreshes.
    pub cache_max_age: Duration,
    /// `HCLOUD_SERVER_CACHE_LIFECYCLE_MAX_AGE` (hcloud-ccm only): how old server data may be
    /// for the node-lifecycle existence/shutdown checks. A negative answer is always
    /// confirmed by a direct lookup before a node is deleted.
    pub lifecycle_max_age: Duration,
    /// `HCLOUD_SERVER_CACHE_CHANGE_DETECTION` (hcloud-ccm only, default true): in a project of
    /// more than 8 pages of servers, the address refresh confirms its list by a look at the
    /// newest actions; false lists every server on every refresh, as the official CCM does.
    pub change_detection: bool,
    /// `HCLOUD_METRICS_ADDRESS` when `HCLOUD_METRICS_ENABLED` is on (default `:8233`): where
    /// the plain-HTTP `/metrics` listener of the official CCM listens (Go listen syntax).
    pub metrics_address: Option<String>,
    /// `HCLOUD_NETWORK_ROUTES_ENABLED` (default true) with `HCLOUD_NETWORK` set: the provider
    /// offers routes in the network.
    pub routes_enabled: bool,
    /// The cluster's pod network (the program's `--cluster-cidr`, an input of
    /// [`Config::from_env`]): routes are created and deleted only inside it.
    pub cluster_cidrs: Vec<ipnet::IpNet>,
    /// `HCLOUD_LOAD_BALANCERS_ENABLED` (default true): offer Load Balancers.
    pub load_balancers_enabled: bool,
    /// The other `HCLOUD_LOAD_BALANCERS_*`: cluster-wide defaults of the annotations.
    pub load_balancers: LbDefaults,
    /// `HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE` (hcloud-ccm only, default 5m): how old the shared
    /// Load Balancer list may get before it is read again.
    pub load_balancers_max_age: Duration,
    /// Robot (dedicated server) settings (`ROBOT_*`); `None` unless `ROBOT_ENABLED` is true.
    pub robot: Option<RobotConfig>,
    /// Non-fatal findings worth a log line (e.g. an unusual token length).
    pub warnings: Vec<String>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("token", &"[redacted]")
            .field("token_file", &self.token_file)
            .field("endpoint", &self.endpoint)
            .field("debug", &self.debug)
            .field("network", &self.network)
            .field("address_family", &self.address_family)
            .field("zone_label_enabled", &self.zone_label_enabled)
            .field("cache_mode", &self.cache_mode)
            .field("cache_max_age", &self.cache_max_age)
            .field("lifecycle_max_age", &self.lifecycle_max_age)
            .field("change_detection", &self.change_detection)
            .field("routes_enabled", &self.routes_enabled)
            .field("cluster_cidrs", &self.cluster_cidrs)
            .field("load_balancers_enabled", &self.load_balancers_enabled)
            .field("load_balancers", &self.load_balancers)
            .field("robot", &self.robot)
            .finish_non_exhaustive()
    }
}

/// Every environment variable this provider reads besides the `HCLOUD_LOAD_BALANCERS_*` ones
/// (see [`crate::load_balancers::defaults::ENV_HELP`]), with its meaning (for `--help`).
pub const ENV_HELP: &[(&str, &str)] = &[
    (
        "HCLOUD_TOKEN",
        "Hetzner Cloud API token (required, or HCLOUD_TOKEN_FILE). Checked at start-up; cannot change without a restart.",
    ),
    (
        "HCLOUD_TOKEN_FILE",
        "File holding the token (whitespace trimmed); HCLOUD_TOKEN wins if both are set. Watched: a new token in it \
         (e.g. an updated Secret) is checked (it must see this cluster's project: HCLOUD_NETWORK's network, else a \
         Node's server) and used without a restart; a refused one (or another project's) is not used.",
    ),
    ("HCLOUD_ENDPOINT", "API base URL (default https://api.hetzner.cloud/v1)."),
    ("HCLOUD_DEBUG", "true: log every API request and response body (the token is never logged). Default false."),
    ("HCLOUD_NETWORK", "Private network id or name: nodes get their IP in it as InternalIP. Resolved at start-up."),
    ("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv4 (default), ipv6 or dualstack: which public IPs become ExternalIP."),
    (
        "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED",
        "Set the zone label (legacy datacenter name, e.g. fsn1-dc14). Default true.",
    ),
    ("HCLOUD_SERVER_CACHE_MODE", "all (default: one paginated list serves all lookups), one (per server) or off."),
    (
        "HCLOUD_SERVER_CACHE_MAX_AGE",
        "Max age of cached server data for node initialization and address refresh (Go duration, default 10s).",
    ),
    (
        "HCLOUD_NETWORK_ROUTES_ENABLED",
        "With HCLOUD_NETWORK: manage routes for the nodes' pod CIDRs in the network (needs --allocate-node-cidrs \
         and --cluster-cidr). Default true.",
    ),
    ("HCLOUD_METRICS_ENABLED", "Serve /metrics (and the health paths) over plain HTTP. Default true."),
    ("HCLOUD_METRICS_ADDRESS", "Listen address of that listener, Go syntax (default :8233, all interfaces)."),
    (
        "HCLOUD_SERVER_CACHE_CHANGE_DETECTION",
        "hcloud-ccm only: above 8 pages of servers, the address refresh lists every server only after a server or \
         Primary IP action (or a change of HCLOUD_NETWORK's servers) and at a safety resync. false: list every \
         server on every refresh, as the official CCM (a rename then shows within one refresh). Default true.",
    ),
    (
        "HCLOUD_SERVER_CACHE_LIFECYCLE_MAX_AGE",
        "Max age of cached server data for node-lifecycle checks (default 1m); deletions are always confirmed by a direct lookup.",
    ),
    ("ROBOT_ENABLED", "true: support Robot (dedicated) servers as Nodes and Load Balancer targets. Default false."),
    (
        "ROBOT_USER",
        "Robot webservice user (or ROBOT_USER_FILE); set with ROBOT_PASSWORD or neither (neither: Load Balancer-only mode). \
         ROBOT_USER_FILE and ROBOT_PASSWORD_FILE are watched: new credentials are checked (GET /server) and used \
         without a restart.",
    ),
    ("ROBOT_PASSWORD", "Robot webservice password (or ROBOT_PASSWORD_FILE); never logged."),
    ("ROBOT_CACHE_TIMEOUT", "How long the Robot server list is reused (Go duration, default 5m)."),
    (
        "ROBOT_RATE_LIMIT_WAIT_TIME",
        "After a Robot rate-limit answer or HTTP 403, no Robot request for this long (Go duration, default 0).",
    ),
    ("ROBOT_FORWARD_INTERNAL_IPS", "Copy the kubelet's InternalIPs (--node-ip) onto Robot Nodes. Default true."),
    ("ROBOT_ENDPOINT", "(hcloud-ccm only) Robot webservice URL (default https://robot-ws.your-server.de)."),
];

pub use cloud_provider::helpers::go_syntax::{parse_go_bool, parse_go_duration};

/// Variables of the official CCM that hcloud-ccm accepts but does not act on yet, with what
/// is missing. Setting one logs a warning at start-up, so nobody relies on it unknowingly.
pub const NOT_ACTED_ON: &[(&str, &str)] = &[(
    "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK",
    "hcloud-ccm does not query the metadata service for the attached-network check",
)];

impl Config {
    /// Reads the configuration through `get` (e.g. `|k| std::env::var(k).ok()`); routes are
    /// kept inside `cluster_cidrs` (the program's `--cluster-cidr`). Every problem found is in
    /// the error.
    pub fn from_env(get: impl Fn(&str) -> Option<String>, cluster_cidrs: Vec<IpNet>) -> Result<Config, ConfigErrors> {
        let mut r = EnvReader::new(&get);

        let token = r.var_or_file("HCLOUD_TOKEN");
        let token_file = r.file_of("HCLOUD_TOKEN");
        match token.as_deref().map(|t| (t, crate::rotation::read::token_problem(t))) {
            None if !r.is_set("HCLOUD_TOKEN_FILE") => {
                r.problem("HCLOUD_TOKEN: required (or HCLOUD_TOKEN_FILE): a Hetzner Cloud API token")
            }
            None => {} // the unreadable file is the problem
            Some((_, Some(why))) => r.problem(format!("HCLOUD_TOKEN: {why}")),
            Some((t, None)) if t.len() != 64 => {
                r.warn(format!("HCLOUD_TOKEN: has {} characters; Hetzner Cloud tokens have 64", t.len()))
            }
            Some(_) => {}
        }

        let endpoint = r.var("HCLOUD_ENDPOINT");
        if let Some(e) = &endpoint {
            r.check_url("HCLOUD_ENDPOINT", e);
        }
        let debug = r.bool("HCLOUD_DEBUG").unwrap_or(false);
        let zone_label_enabled = r.bool("HCLOUD_INSTANCES_ZONE_LABEL_ENABLED").unwrap_or(true);
        let address_family = r
            .choice(
                "HCLOUD_INSTANCES_ADDRESS_FAMILY",
                &[
                    ("ipv4", AddressFamily::Ipv4),
                    ("ipv6", AddressFamily::Ipv6),
                    ("dualstack", AddressFamily::DualStack),
                ],
            )
            .unwrap_or(AddressFamily::Ipv4);
        let cache_mode = r
            .choice(
                "HCLOUD_SERVER_CACHE_MODE",
                &[("all", CacheMode::All), ("one", CacheMode::One), ("off", CacheMode::Off)],
            )
            .unwrap_or(CacheMode::All);

        let cache_max_age = if r.is_set("HCLOUD_SERVER_CACHE_MAX_AGE") {
            r.duration("HCLOUD_SERVER_CACHE_MAX_AGE")
        } else if r.is_set("HCLOUD_SERVER_CACHE_TTL") {
            r.warn("HCLOUD_SERVER_CACHE_TTL is deprecated; use HCLOUD_SERVER_CACHE_MAX_AGE");
            r.duration("HCLOUD_SERVER_CACHE_TTL")
        } else {
            None
        }
        .unwrap_or(Duration::from_secs(10));
        let lifecycle_max_age = r.duration("HCLOUD_SERVER_CACHE_LIFECYCLE_MAX_AGE").unwrap_or(Duration::from_secs(60));
        let change_detection = r.bool("HCLOUD_SERVER_CACHE_CHANGE_DETECTION").unwrap_or(true);

        let metrics_address = r
            .bool("HCLOUD_METRICS_ENABLED")
            .unwrap_or(true)
            .then(|| r.var("HCLOUD_METRICS_ADDRESS").unwrap_or_else(|| ":8233".to_owned()));

        let network = r.var("HCLOUD_NETWORK");
        let routes_flag = r.bool("HCLOUD_NETWORK_ROUTES_ENABLED").unwrap_or(true);
        if network.is_none() && r.is_set("HCLOUD_NETWORK_ROUTES_ENABLED") && routes_flag {
            r.warn(
                "HCLOUD_NETWORK_ROUTES_ENABLED has no effect without HCLOUD_NETWORK: routes live in a private network",
            );
        }
        let routes_enabled = network.is_some() && routes_flag;
        let (load_balancers_enabled, load_balancers, load_balancers_max_age) = lb_env::from_env(&mut r);

        for (k, missing) in NOT_ACTED_ON {
            if r.is_set(k) {
                r.warn(format!("{k} is set but has no effect: {missing}"));
            }
        }

        let robot = crate::robot::config::from_env(&mut r, routes_enabled);

        let warnings = r.finish()?;
        Ok(Config {
            token: SecretString::from(token.unwrap_or_default()),
            token_file,
            endpoint,
            debug,
            routes_enabled,
            network,
            cluster_cidrs,
            address_family,
            zone_label_enabled,
            cache_mode,
            cache_max_age,
            lifecycle_max_age: lifecycle_max_age.max(cache_max_age),
            change_detection,
            metrics_address,
            load_balancers_enabled,
            load_balancers,
            load_balancers_max_age,
            robot,
            warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use secrecy::ExposeSecret;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn defaults_match_the_official_ccm() {
        let c = Config::from_env(env(&[("HCLOUD_TOKEN", &"x".repeat(64))]), Vec::new()).expect("valid");
        assert_eq!(c.address_family, AddressFamily::Ipv4);
        assert!(c.zone_label_enabled);
        assert_eq!(c.cache_mode, CacheMode::All);
        assert_eq!(c.cache_max_age, Duration::from_secs(10));
        assert_eq!(c.lifecycle_max_age, Duration::from_secs(60));
        assert!(c.change_detection, "hcloud-ccm's own default");
        assert!(!c.debug);
        assert!(c.network.is_none() && c.endpoint.is_none());
        assert_eq!(c.metrics_address.as_deref(), Some(":8233"));
        assert!(c.warnings.is_empty());
        assert!(c.load_balancers_enabled);
        assert_eq!(c.load_balancers, LbDefaults::default());
        assert_eq!(c.load_balancers_max_age, Duration::from_secs(300));
        let off = Config::from_env(
            env(&[("HCLOUD_TOKEN", &"x".repeat(64)), ("HCLOUD_METRICS_ENABLED", "false")]),
            Vec::new(),
        )
        .expect("valid");
        assert_eq!(off.metrics_address, None);
        let listing = Config::from_env(
            env(&[("HCLOUD_TOKEN", &"x".repeat(64)), ("HCLOUD_SERVER_CACHE_CHANGE_DETECTION", "false")]),
            Vec::new(),
        )
        .expect("valid");
        assert!(!listing.change_detection);
    }

    #[test]
    fn all_errors_are_reported_together() {
        let err = Config::from_env(
            env(&[
                ("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv5"),
                ("HCLOUD_SERVER_CACHE_MODE", "sometimes"),
                ("HCLOUD_SERVER_CACHE_MAX_AGE", "ten seconds"),
                ("HCLOUD_DEBUG", "yes"),
                ("HCLOUD_ENDPOINT", "ftp://x"),
            ]),
            Vec::new(),
        )
        .unwrap_err();
        let text = err.to_string();
        for needle in [
            "HCLOUD_TOKEN: required",
            "HCLOUD_INSTANCES_ADDRESS_FAMILY: \"ipv5\" is invalid; accepted: ipv4, ipv6, dualstack",
            "HCLOUD_SERVER_CACHE_MODE: \"sometimes\" is invalid; accepted: all, one, off",
            "HCLOUD_SERVER_CACHE_MAX_AGE: \"ten seconds\" is not a duration",
            "HCLOUD_DEBUG: \"yes\" is not a boolean",
            "HCLOUD_ENDPOINT",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
        assert_eq!(err.0.len(), 6);
    }

    #[test]
    fn token_file_and_precedence() {
        let dir = std::env::temp_dir().join(format!("hccm-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("token");
        std::fs::write(&file, format!("  {}\n", "f".repeat(64))).expect("write");
        let path = file.to_string_lossy().to_string();
        let c = Config::from_env(env(&[("HCLOUD_TOKEN_FILE", &path)]), Vec::new()).expect("valid");
        assert_eq!(c.token.expose_secret(), "f".repeat(64));
        assert_eq!(c.token_file, Some(file.clone()), "watched");
        let c = Config::from_env(env(&[("HCLOUD_TOKEN_FILE", &path), ("HCLOUD_TOKEN", &"e".repeat(64))]), Vec::new())
            .expect("valid");
        assert_eq!(c.token.expose_secret(), "e".repeat(64), "the plain variable wins");
        assert_eq!(c.token_file, None, "a token from the variable cannot change: nothing to watch");
        let err = Config::from_env(env(&[("HCLOUD_TOKEN_FILE", "/nonexistent/token")]), Vec::new()).unwrap_err();
        assert!(err.to_string().contains("HCLOUD_TOKEN_FILE: cannot read"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn token_is_not_in_debug_output_and_short_token_warns() {
        let c = Config::from_env(env(&[("HCLOUD_TOKEN", "shorttoken-secret")]), Vec::new()).expect("valid");
        assert!(!format!("{c:?}").contains("shorttoken-secret"));
        assert_eq!(c.warnings.len(), 1);
        assert!(c.warnings[0].contains("64"));
    }

    #[test]
    fn official_variables_not_acted_on_yet_are_named_in_a_warning() {
        let c = Config::from_env(
            env(&[
                ("HCLOUD_TOKEN", &"x".repeat(64)),
                ("HCLOUD_LOAD_BALANCERS_TYPE", "lb21"),
                ("ROBOT_CACHE_TIMEOUT", ""),
                ("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true"),
            ]),
            Vec::new(),
        )
        .expect("valid");
        assert_eq!(
            c.warnings,
            vec![
                "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK is set but has no effect: hcloud-ccm does not query the \
                 metadata service for the attached-network check",
            ],
            "an empty variable counts as unset"
        );
        assert_eq!(c.load_balancers.lb_type.as_deref(), Some("lb21"), "acted on now");
        assert!(NOT_ACTED_ON.iter().all(|(k, _)| !k.starts_with("HCLOUD_LOAD_BALANCERS_")));
        assert!(NOT_ACTED_ON.iter().all(|(k, _)| *k != "HCLOUD_NETWORK_ROUTES_ENABLED"), "acted on now");
    }

    #[test]
    fn routes_are_enabled_with_a_network_unless_turned_off() {
        let token = "x".repeat(64);
        let c = |pairs: &[(&str, &str)]| {
            let mut all = vec![("HCLOUD_TOKEN", token.as_str())];
            all.extend_from_slice(pairs);
            Config::from_env(env(&all), Vec::new())
        };
        let on = c(&[("HCLOUD_NETWORK", "k8s")]).expect("valid");
        assert!(on.routes_enabled && on.warnings.is_empty());
        assert!(on.cluster_cidrs.is_empty(), "only the cluster CIDRs given (the program's --cluster-cidr)");
        assert!(
            !c(&[("HCLOUD_NETWORK", "k8s"), ("HCLOUD_NETWORK_ROUTES_ENABLED", "false")]).expect("valid").routes_enabled
        );
        let no_network = c(&[("HCLOUD_NETWORK_ROUTES_ENABLED", "true")]).expect("valid");
        assert!(!no_network.routes_enabled);
        assert_eq!(
            no_network.warnings,
            vec![
                "HCLOUD_NETWORK_ROUTES_ENABLED has no effect without HCLOUD_NETWORK: routes live in a private network"
            ]
        );
        let err = c(&[("HCLOUD_NETWORK", "k8s"), ("HCLOUD_NETWORK_ROUTES_ENABLED", "maybe")]).expect_err("invalid");
        assert_eq!(
            err.0,
            vec!["HCLOUD_NETWORK_ROUTES_ENABLED: \"maybe\" is not a boolean; accepted: true, false, 1, 0, t, f"]
        );
    }

    #[test]
    fn two_bad_main_variables_are_reported_together_with_what_is_accepted() {
        let err = Config::from_env(
            env(&[("HCLOUD_TOKEN", &"x".repeat(64)), ("HCLOUD_DEBUG", "yes"), ("HCLOUD_SERVER_CACHE_MODE", "some")]),
            Vec::new(),
        )
        .expect_err("invalid");
        assert_eq!(
            err.to_string(),
            "invalid configuration:\n  \
             - HCLOUD_DEBUG: \"yes\" is not a boolean; accepted: true, false, 1, 0, t, f\n  \
             - HCLOUD_SERVER_CACHE_MODE: \"some\" is invalid; accepted: all, one, off"
        );
    }

    #[test]
    fn bad_variables_of_all_three_sources_are_reported_together() {
        let err = Config::from_env(
            env(&[
                ("HCLOUD_TOKEN", &"x".repeat(64)),
                ("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv5"),
                ("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "random"),
                ("ROBOT_ENABLED", "maybe"),
            ]),
            Vec::new(),
        )
        .expect_err("invalid");
        assert_eq!(
            err.0,
            vec![
                "HCLOUD_INSTANCES_ADDRESS_FAMILY: \"ipv5\" is invalid; accepted: ipv4, ipv6, dualstack",
                "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE: \"random\" is invalid; accepted: round_robin, least_connections",
                "ROBOT_ENABLED: \"maybe\" is not a boolean; accepted: true, false, 1, 0, t, f",
            ]
        );
    }

    #[test]
    fn the_token_is_never_in_a_message() {
        let err = Config::from_env(env(&[("HCLOUD_TOKEN", "secret token value")]), Vec::new()).expect_err("spaces");
        assert_eq!(err.0, vec!["HCLOUD_TOKEN: contains whitespace; expected a single API token"]);
        let err = Config::from_env(env(&[("HCLOUD_TOKEN", "  ")]), Vec::new()).expect_err("blank");
        assert_eq!(err.0, vec!["HCLOUD_TOKEN: is empty"]);
        let err = Config::from_env(env(&[("HCLOUD_TOKEN", "secret\u{7}bell")]), Vec::new()).expect_err("control");
        assert_eq!(err.0, vec!["HCLOUD_TOKEN: contains control characters; expected a single API token"]);
    }

    #[test]
    fn the_cluster_cidrs_given_are_kept() {
        let cidrs: Vec<IpNet> = vec!["10.244.0.0/16".parse().expect("cidr"), "fd00:10:244::/56".parse().expect("cidr")];
        let c = Config::from_env(env(&[("HCLOUD_TOKEN", &"x".repeat(64)), ("HCLOUD_NETWORK", "k8s")]), cidrs.clone())
            .expect("valid");
        assert_eq!(c.cluster_cidrs, cidrs);
        assert!(format!("{c:?}").contains("10.244.0.0/16"), "{c:?}");
    }
}
