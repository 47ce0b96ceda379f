//! The cluster-wide Load Balancer defaults from `HCLOUD_LOAD_BALANCERS_*` (the official CCM's
//! names, formats and defaults); the matching annotation overrides each of them.

use std::time::Duration;

use cloud_provider::helpers::go_syntax::{parse_go_bool, parse_go_duration};
use hcloud_api::models::Algorithm;
use ipnet::IpNet;

use super::annotations::{parse_cidr, whole_seconds};

/// `HCLOUD_LOAD_BALANCERS_*` (all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LbDefaults {
    /// `HCLOUD_LOAD_BALANCERS_LOCATION`.
    pub location: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_NETWORK_ZONE`.
    pub network_zone: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS` (default false).
    pub disable_private_ingress: bool,
    /// `HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP` (default false).
    pub use_private_ip: bool,
    /// `HCLOUD_LOAD_BALANCERS_DISABLE_IPV6` (default false).
    pub disable_ipv6: bool,
    /// `HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE` (unset: the API's round_robin at create, never
    /// changed later).
    pub algorithm: Option<Algorithm>,
    /// `HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK` (unset: the public interface is not
    /// managed).
    pub disable_public_network: Option<bool>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL`, seconds.
    pub health_check_interval: Option<u32>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT`, seconds.
    pub health_check_timeout: Option<u32>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES`.
    pub health_check_retries: Option<u32>,
    /// `HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE`.
    pub private_subnet_ip_range: Option<IpNet>,
    /// `HCLOUD_LOAD_BALANCERS_TYPE` (unset: `lb11` and a `LoadBalancerTypeUnconfigured` event).
    pub lb_type: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL` (unset: not sent).
    pub uses_proxyprotocol: Option<bool>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_LOCAL_ENDPOINTS` (hcloud-ccm only, default false):
    /// `externalTrafficPolicy: Local` Services get kube-proxy's health check.
    pub health_check_local_endpoints: bool,
    /// `HCLOUD_LOAD_BALANCERS_UNHEALTHY_TARGET_WARNING_AFTER` (hcloud-ccm only, unset or `0s`:
    /// off), seconds: a Warning when a target is unhealthy this long.
    pub unhealthy_target_warning_after: Option<u32>,
    /// `HCLOUD_LOAD_BALANCERS_KEEP_FOREIGN` (hcloud-ccm only, default false): targets and
    /// services hcloud-ccm did not add are kept.
    pub keep_foreign: bool,
}

/// What the `HCLOUD_LOAD_BALANCERS_*` variables mean (for `--help`).
pub const ENV_HELP: &[(&str, &str)] = &[
    (
        "HCLOUD_LOAD_BALANCERS_ENABLED",
        "Run the service controller (Load Balancers for LoadBalancer Services). Default true.",
    ),
    ("HCLOUD_LOAD_BALANCERS_LOCATION", "Default location of new Load Balancers (or use NETWORK_ZONE, not both)."),
    ("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "Default network zone of new Load Balancers."),
    (
        "HCLOUD_LOAD_BALANCERS_TYPE",
        "Default Load Balancer type (unset: lb11 and a LoadBalancerTypeUnconfigured event).",
    ),
    ("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "Default algorithm: round_robin or least_connections."),
    (
        "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK",
        "Default for disabling the public interface (unset: not managed).",
    ),
    ("HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS", "Leave private IPs out of Service status. Default false."),
    ("HCLOUD_LOAD_BALANCERS_DISABLE_IPV6", "Leave the IPv6 address out of Service status. Default false."),
    (
        "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP",
        "Targets use the servers' private IPs (needs HCLOUD_NETWORK). Default false.",
    ),
    ("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", "Subnet (CIDR) of HCLOUD_NETWORK Load Balancers attach to."),
    ("HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL", "Default PROXY protocol setting of every port (unset: not sent)."),
    ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "Default health check interval (Go duration, whole seconds)."),
    ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", "Default health check timeout (Go duration, whole seconds)."),
    ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "Default health check retries (integer)."),
    (
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_LOCAL_ENDPOINTS",
        "hcloud-ccm only: Services with externalTrafficPolicy Local and no health-check-protocol/-port annotation \
         are checked over HTTP on their healthCheckNodePort, path /healthz (kube-proxy). Default false.",
    ),
    (
        "HCLOUD_LOAD_BALANCERS_UNHEALTHY_TARGET_WARNING_AFTER",
        "hcloud-ccm only: a Warning on the Service when Hetzner reports one of its targets unhealthy this long (Go \
         duration, whole seconds; unset or 0s: off). Health is read from the Load Balancer list, at least every \
         CACHE_MAX_AGE while a Service has it on.",
    ),
    (
        "HCLOUD_LOAD_BALANCERS_KEEP_FOREIGN",
        "hcloud-ccm only: targets and services hcloud-ccm did not add (by hand, other tools) are kept; what it adds \
         is recorded in hcloud-ccm.managed/* labels on the Load Balancer. Default false.",
    ),
    (
        "HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE",
        "hcloud-ccm only: how old the shared Load Balancer list may get before it is read again (default 5m).",
    ),
];

/// Health check intervals and timeouts the annotations and variables accept, in seconds.
pub const HEALTH_CHECK_SECONDS: (u32, u32) = (1, 3600);

/// Unhealthy-target warning times the annotation and variable accept, in seconds (0: off).
pub const UNHEALTHY_WARNING_SECONDS: (u32, u32) = (0, 7 * 24 * 3600);

/// The enablement switch, the defaults and the inventory max age, read through `var` (which
/// yields `None` for unset or empty variables); problems are appended to `errors`.
pub fn from_env(var: &dyn Fn(&str) -> Option<String>, errors: &mut Vec<String>) -> (bool, LbDefaults, Duration) {
    let boolean = |errors: &mut Vec<String>, k: &str| -> Option<bool> {
        let v = var(k)?;
        let b = parse_go_bool(&v);
        if b.is_none() {
            errors.push(format!("{k}: {v:?} is not a boolean; accepted: true, false, 1, 0, t, f"));
        }
        b
    };
    let seconds_within = |errors: &mut Vec<String>, k: &str, (min, max): (u32, u32)| -> Option<u32> {
        let v = var(k)?;
        match parse_go_duration(&v).map(|d| whole_seconds(d, min, max)) {
            Some(Ok(s)) => Some(s),
            Some(Err(why)) => {
                errors.push(format!("{k}: {v:?} is invalid; {why}"));
                None
            }
            None => {
                errors.push(format!("{k}: {v:?} is not a duration; use Go syntax like 15s or 1m"));
                None
            }
        }
    };
    let seconds = |errors: &mut Vec<String>, k: &str| seconds_within(errors, k, HEALTH_CHECK_SECONDS);
    let enabled = boolean(errors, "HCLOUD_LOAD_BALANCERS_ENABLED").unwrap_or(true);
    let location = var("HCLOUD_LOAD_BALANCERS_LOCATION");
    let network_zone = var("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE");
    if location.is_some() && network_zone.is_some() {
        errors.push(
            "HCLOUD_LOAD_BALANCERS_LOCATION and HCLOUD_LOAD_BALANCERS_NETWORK_ZONE are both set; set only one of them"
                .to_owned(),
        );
    }
    let algorithm = var("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE").and_then(|v| match v.to_ascii_lowercase().as_str() {
        "round_robin" => Some(Algorithm::RoundRobin),
        "least_connections" => Some(Algorithm::LeastConnections),
        _ => {
            errors.push(format!(
                "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE: {v:?} is invalid; accepted: round_robin, least_connections"
            ));
            None
        }
    });
    let private_subnet_ip_range = var("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE").and_then(|v| {
        let net = parse_cidr(&v);
        if net.is_none() {
            errors.push(format!(
                "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE: {v:?} is not a CIDR; accepted: e.g. 10.0.1.0/24"
            ));
        }
        net
    });
    let health_check_retries = var("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES").and_then(|v| match v.parse::<u32>() {
        Ok(n) if n <= 100 => Some(n),
        _ => {
            errors.push(format!(
                "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES: {v:?} is invalid; accepted: an integer from 0 to 100"
            ));
            None
        }
    });
    let max_age = match var("HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE") {
        None => Duration::from_secs(300),
        Some(v) => parse_go_duration(&v).unwrap_or_else(|| {
            errors.push(format!("HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE: {v:?} is not a duration; use Go syntax like 5m"));
            Duration::from_secs(300)
        }),
    };
    let defaults = LbDefaults {
        location,
        network_zone,
        disable_private_ingress: boolean(errors, "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS").unwrap_or(false),
        use_private_ip: boolean(errors, "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP").unwrap_or(false),
        disable_ipv6: boolean(errors, "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6").unwrap_or(false),
        algorithm,
        disable_public_network: boolean(errors, "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK"),
        health_check_interval: seconds(errors, "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL"),
        health_check_timeout: seconds(errors, "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT"),
        health_check_retries,
        private_subnet_ip_range,
        lb_type: var("HCLOUD_LOAD_BALANCERS_TYPE"),
        uses_proxyprotocol: boolean(errors, "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL"),
        health_check_local_endpoints: boolean(errors, "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_LOCAL_ENDPOINTS")
            .unwrap_or(false),
        unhealthy_target_warning_after: seconds_within(
            errors,
            "HCLOUD_LOAD_BALANCERS_UNHEALTHY_TARGET_WARNING_AFTER",
            UNHEALTHY_WARNING_SECONDS,
        )
        .filter(|s| *s > 0),
        keep_foreign: boolean(errors, "HCLOUD_LOAD_BALANCERS_KEEP_FOREIGN").unwrap_or(false),
    };
    (enabled, defaults, max_age)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn read(pairs: &[(&str, &str)]) -> (bool, LbDefaults, Duration, Vec<String>) {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let var = move |k: &str| m.get(k).cloned().filter(|v| !v.is_empty());
        let mut errors = Vec::new();
        let (enabled, d, age) = from_env(&var, &mut errors);
        (enabled, d, age, errors)
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let (enabled, d, age, errors) = read(&[]);
        assert!(enabled);
        assert_eq!(d, LbDefaults::default());
        assert_eq!(age, Duration::from_secs(300));
        assert!(errors.is_empty());
    }

    #[test]
    fn every_variable_is_read() {
        let (enabled, d, age, errors) = read(&[
            ("HCLOUD_LOAD_BALANCERS_ENABLED", "false"),
            ("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "eu-central"),
            ("HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS", "true"),
            ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", "1"),
            ("HCLOUD_LOAD_BALANCERS_DISABLE_IPV6", "t"),
            ("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "LEAST_CONNECTIONS"),
            ("HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK", "false"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "5s"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", "1m"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "5"),
            ("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", "10.0.1.0/24"),
            ("HCLOUD_LOAD_BALANCERS_TYPE", "lb21"),
            ("HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL", "true"),
            ("HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE", "30s"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_LOCAL_ENDPOINTS", "true"),
            ("HCLOUD_LOAD_BALANCERS_UNHEALTHY_TARGET_WARNING_AFTER", "5m"),
            ("HCLOUD_LOAD_BALANCERS_KEEP_FOREIGN", "true"),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        assert!(!enabled);
        assert_eq!(age, Duration::from_secs(30));
        assert_eq!(
            d,
            LbDefaults {
                location: None,
                network_zone: Some("eu-central".into()),
                disable_private_ingress: true,
                use_private_ip: true,
                disable_ipv6: true,
                algorithm: Some(Algorithm::LeastConnections),
                disable_public_network: Some(false),
                health_check_interval: Some(5),
                health_check_timeout: Some(60),
                health_check_retries: Some(5),
                private_subnet_ip_range: Some("10.0.1.0/24".parse().expect("cidr")),
                lb_type: Some("lb21".into()),
                uses_proxyprotocol: Some(true),
                health_check_local_endpoints: true,
                unhealthy_target_warning_after: Some(300),
                keep_foreign: true,
            }
        );
    }

    #[test]
    fn bad_values_are_all_reported_with_what_is_accepted() {
        let (_, _, _, errors) = read(&[
            ("HCLOUD_LOAD_BALANCERS_ENABLED", "maybe"),
            ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
            ("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "eu-central"),
            ("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "random"),
            ("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", "10.0.1.0"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", "10"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", "500ms"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "-1"),
            ("HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL", "on"),
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_LOCAL_ENDPOINTS", "yes"),
            ("HCLOUD_LOAD_BALANCERS_UNHEALTHY_TARGET_WARNING_AFTER", "5"),
            ("HCLOUD_LOAD_BALANCERS_KEEP_FOREIGN", "keep"),
        ]);
        let text = errors.join("\n");
        for needle in [
            "HCLOUD_LOAD_BALANCERS_ENABLED: \"maybe\" is not a boolean",
            "LOCATION and HCLOUD_LOAD_BALANCERS_NETWORK_ZONE are both set",
            "ALGORITHM_TYPE: \"random\" is invalid; accepted: round_robin, least_connections",
            "PRIVATE_SUBNET_IP_RANGE: \"10.0.1.0\" is not a CIDR",
            "HEALTH_CHECK_INTERVAL: \"10\" is not a duration",
            "HEALTH_CHECK_TIMEOUT: \"500ms\" is invalid; the API takes whole seconds",
            "HEALTH_CHECK_RETRIES: \"-1\" is invalid",
            "USES_PROXYPROTOCOL: \"on\" is not a boolean",
            "HEALTH_CHECK_LOCAL_ENDPOINTS: \"yes\" is not a boolean",
            "UNHEALTHY_TARGET_WARNING_AFTER: \"5\" is not a duration",
            "KEEP_FOREIGN: \"keep\" is not a boolean",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
        assert_eq!(errors.len(), 11);
    }
}
