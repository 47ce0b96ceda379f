//! The cluster-wide Load Balancer defaults from `HCLOUD_LOAD_BALANCERS_*` (the official CCM's
//! names, formats and defaults); the matching annotation overrides each of them.

use std::time::Duration;

use hcloud_api::models::Algorithm;
use ipnet::IpNet;

use super::groups::SharingNamespaces;
use crate::env::EnvReader;

/// Cluster-wide defaults of the Load Balancer annotations, from `HCLOUD_LOAD_BALANCERS_*`
/// (all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LbDefaults {
    /// Where new Load Balancers are created (`HCLOUD_LOAD_BALANCERS_LOCATION`).
    pub location: Option<String>,
    /// The network zone new Load Balancers are created in (`HCLOUD_LOAD_BALANCERS_NETWORK_ZONE`).
    pub network_zone: Option<String>,
    /// Leave private IPs out of the Service status (`HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS`).
    pub disable_private_ingress: bool,
    /// Targets use the servers' private IPs (`HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP`).
    pub use_private_ip: bool,
    /// Leave the IPv6 address out of the Service status (`HCLOUD_LOAD_BALANCERS_DISABLE_IPV6`).
    pub disable_ipv6: bool,
    /// How traffic is spread over the targets (`HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE`; unset:
    /// the API's round_robin at create, never changed later).
    pub algorithm: Option<Algorithm>,
    /// Whether the public interface is off (`HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK`;
    /// unset: the public interface is not managed).
    pub disable_public_network: Option<bool>,
    /// Seconds between health checks (`HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL`).
    pub health_check_interval: Option<u32>,
    /// Seconds until a health check fails (`HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT`).
    pub health_check_timeout: Option<u32>,
    /// Failed checks until a target is unhealthy (`HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES`).
    pub health_check_retries: Option<u32>,
    /// The subnet of `HCLOUD_NETWORK` Load Balancers attach to
    /// (`HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE`).
    pub private_subnet_ip_range: Option<IpNet>,
    /// The Load Balancer type, e.g. `lb21` (`HCLOUD_LOAD_BALANCERS_TYPE`; unset: `lb11` for a new
    /// Load Balancer and a `LoadBalancerTypeUnconfigured` event at each sync).
    pub lb_type: Option<String>,
    /// PROXY protocol on every port (`HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL`; unset: not sent).
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
    /// `HCLOUD_LOAD_BALANCERS_SHARING_NAMESPACES` (hcloud-ccm only, default none): namespaces
    /// whose Services share Load Balancers with each other by `sharing-key`.
    pub sharing_namespaces: SharingNamespaces,
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
        "Default Load Balancer type (unset: lb11 for new Load Balancers and a LoadBalancerTypeUnconfigured warning).",
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
        "HCLOUD_LOAD_BALANCERS_SHARING_NAMESPACES",
        "hcloud-ccm only: namespaces (comma-separated, or * for all) whose Services share Load Balancers with each \
         other by the sharing-key annotation; other Services share only within their namespace. Default: none.",
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

/// The enablement switch, the defaults and the inventory max age, read through `r` (which
/// collects the problems).
pub fn from_env(r: &mut EnvReader<'_>) -> (bool, LbDefaults, Duration) {
    let enabled = r.bool("HCLOUD_LOAD_BALANCERS_ENABLED").unwrap_or(true);
    let location = r.var("HCLOUD_LOAD_BALANCERS_LOCATION");
    let network_zone = r.var("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE");
    if location.is_some() && network_zone.is_some() {
        r.problem(
            "HCLOUD_LOAD_BALANCERS_LOCATION and HCLOUD_LOAD_BALANCERS_NETWORK_ZONE are both set; set only one of them",
        );
    }
    let algorithm = r.choice_ignoring_case(
        "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE",
        &[("round_robin", Algorithm::RoundRobin), ("least_connections", Algorithm::LeastConnections)],
    );
    let private_subnet_ip_range = r.cidr("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE");
    let health_check_retries = r.int("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", 0, 100);
    let sharing_namespaces = match r.var("HCLOUD_LOAD_BALANCERS_SHARING_NAMESPACES") {
        Some(v) => SharingNamespaces::parse(&v).unwrap_or_else(|e| {
            r.problem(format!("HCLOUD_LOAD_BALANCERS_SHARING_NAMESPACES: {e}"));
            SharingNamespaces::None
        }),
        None => SharingNamespaces::None,
    };
    let max_age = r.duration("HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE").unwrap_or(Duration::from_secs(300));
    let defaults = LbDefaults {
        location,
        network_zone,
        disable_private_ingress: r.bool("HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS").unwrap_or(false),
        use_private_ip: r.bool("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP").unwrap_or(false),
        disable_ipv6: r.bool("HCLOUD_LOAD_BALANCERS_DISABLE_IPV6").unwrap_or(false),
        algorithm,
        disable_public_network: r.bool("HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK"),
        health_check_interval: r.seconds("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", HEALTH_CHECK_SECONDS),
        health_check_timeout: r.seconds("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", HEALTH_CHECK_SECONDS),
        health_check_retries,
        private_subnet_ip_range,
        lb_type: r.var("HCLOUD_LOAD_BALANCERS_TYPE"),
        uses_proxyprotocol: r.bool("HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL"),
        health_check_local_endpoints: r.bool("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_LOCAL_ENDPOINTS").unwrap_or(false),
        unhealthy_target_warning_after: r
            .seconds("HCLOUD_LOAD_BALANCERS_UNHEALTHY_TARGET_WARNING_AFTER", UNHEALTHY_WARNING_SECONDS)
            .filter(|s| *s > 0),
        keep_foreign: r.bool("HCLOUD_LOAD_BALANCERS_KEEP_FOREIGN").unwrap_or(false),
        sharing_namespaces,
    };
    (enabled, defaults, max_age)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn read(pairs: &[(&str, &str)]) -> (bool, LbDefaults, Duration, Vec<String>) {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let get = move |k: &str| m.get(k).cloned();
        let mut r = EnvReader::new(&get);
        let (enabled, d, age) = from_env(&mut r);
        (enabled, d, age, r.finish().err().map(|e| e.0).unwrap_or_default())
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
            ("HCLOUD_LOAD_BALANCERS_SHARING_NAMESPACES", "edge, shop,"),
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
                sharing_namespaces: SharingNamespaces::Listed(["edge".into(), "shop".into()].into()),
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
            ("HCLOUD_LOAD_BALANCERS_SHARING_NAMESPACES", "shop,Team_A"),
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
            "SHARING_NAMESPACES: Team_A is not a namespace name; accepted: namespace names separated by commas, or * \
             for all",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
        assert_eq!(errors.len(), 12);
    }

    #[test]
    fn two_bad_values_are_reported_together_exactly() {
        let (_, _, _, errors) = read(&[
            ("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", "many"),
            ("HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE", "5"),
        ]);
        assert_eq!(
            errors,
            vec![
                "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES: \"many\" is invalid; accepted: an integer from 0 to 100",
                "HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE: \"5\" is not a duration; use Go syntax like 10s, 1m30s, 500ms (at \
                 most 2562047h47m16.854775807s)",
            ]
        );
    }
}
