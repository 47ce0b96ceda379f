//! Parsers and checks for flag values that need more than clap: feature gates, the cluster
//! CIDRs, a `loadBalancerClass` name, upstream's node-controller rules.

use cloud_controllers::route::plan::parse_cidr_sloppy;
use std::time::Duration;

use cloud_provider::helpers::go_syntax::{parse_go_bool, parse_go_duration};
use cloud_provider::helpers::label_selector::{is_dns_subdomain, is_name_segment};
use ipnet::IpNet;

/// The upstream feature gate of the watch-based route mode (KEP-5237).
pub const WATCH_BASED_ROUTES_GATE: &str = "CloudControllerManagerWatchBasedRoutesReconciliation";

/// Upstream feature gates of the cloud-controller-manager that are accepted without effect.
const IGNORED_GATES: &[&str] = &["CloudControllerManagerWebhook"];

/// The parsed `--feature-gates`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGates {
    /// `CloudControllerManagerWatchBasedRoutesReconciliation` (default true here; upstream's
    /// default is false, the official Hetzner chart sets it to true).
    pub watch_based_routes: bool,
    /// Gates this program does not know (warned about).
    pub unknown: Vec<String>,
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates { watch_based_routes: true, unknown: Vec::new() }
    }
}

/// Parses `--feature-gates` (`Name=bool` pairs, comma-separated, Go booleans); a later pair
/// wins for the same gate, so the occurrences of a repeated flag parse as one joined list.
pub fn parse_feature_gates(s: &str) -> Result<FeatureGates, String> {
    let mut gates = FeatureGates::default();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((name, value)) = item.split_once('=') else {
            return Err(format!(
                "--feature-gates: {item:?} is not Name=true|false (e.g. {WATCH_BASED_ROUTES_GATE}=true)"
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        let Some(on) = parse_go_bool(value) else {
            return Err(format!(
                "--feature-gates: {name}={value:?}: the value is not a boolean; accepted: true, false"
            ));
        };
        match name {
            WATCH_BASED_ROUTES_GATE => gates.watch_based_routes = on,
            n if IGNORED_GATES.contains(&n) => {}
            n if gates.unknown.iter().any(|u| u == n) => {}
            n => gates.unknown.push(n.to_owned()),
        }
    }
    Ok(gates)
}

/// Parses `--cluster-cidr` like upstream's `processCIDRs`: comma-separated, at most two, and
/// two only as a dual-stack pair (one IPv4, one IPv6). Empty gives no CIDRs.
pub fn parse_cluster_cidrs(s: &str) -> Result<Vec<IpNet>, String> {
    let items: Vec<&str> = s.split(',').map(str::trim).filter(|i| !i.is_empty()).collect();
    let mut cidrs = Vec::new();
    for item in &items {
        match parse_cidr_sloppy(item) {
            Some(c) => cidrs.push(c),
            None => {
                return Err(format!(
                    "--cluster-cidr: {item:?} is not a CIDR (expected e.g. 10.244.0.0/16, or an IPv4 and an IPv6 CIDR, \
                     comma-separated)"
                ));
            }
        }
    }
    match cidrs.as_slice() {
        [] | [_] => Ok(cidrs),
        [a, b] if a.addr().is_ipv4() != b.addr().is_ipv4() => Ok(cidrs),
        [_, _] => Err(format!("--cluster-cidr: {s:?}: two CIDRs must be a dual-stack pair, one IPv4 and one IPv6")),
        _ => Err(format!("--cluster-cidr: {s:?}: at most two CIDRs (one IPv4 and one IPv6) are supported")),
    }
}

/// Checks a `spec.loadBalancerClass` value the way the API server does (a qualified name:
/// an optional DNS subdomain prefix and `/`, then a name of at most 63 alphanumeric
/// characters, `-`, `_` or `.`, starting and ending alphanumeric: the rules of a label key).
/// Empty is accepted (unset).
pub fn validate_qualified_name(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    let (prefix, name) = match value.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    if !is_name_segment(name) {
        return Err(format!(
            "the name part {name:?} must be 1-63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric"
        ));
    }
    if let Some(prefix) = prefix.filter(|p| !is_dns_subdomain(p)) {
        return Err(format!("the prefix {prefix:?} must be a lowercase DNS subdomain"));
    }
    Ok(())
}

/// Upstream `NodeControllerOptions.Validate`.
pub fn validate_node_controller(concurrent_node_syncs: i64, concurrent_node_status_updates: i64) -> Vec<String> {
    let mut errors = Vec::new();
    if concurrent_node_syncs <= 0 {
        errors.push("concurrent-node-syncs must be a positive number".to_owned());
    }
    if concurrent_node_status_updates < 0 {
        errors.push("concurrent-node-status-updates cannot be a negative number".to_owned());
    }
    errors
}

/// Upstream `NodeLifecycleControllerOptions.Validate` (1.37).
pub fn validate_node_lifecycle_controller(concurrent_node_lifecycle_syncs: i64) -> Vec<String> {
    if concurrent_node_lifecycle_syncs < 1 {
        return vec![format!(
            "concurrent-node-lifecycle-syncs must be at least 1, but got {concurrent_node_lifecycle_syncs}"
        )];
    }
    Vec::new()
}

/// clap's parser of a Go boolean flag value (`strconv.ParseBool`).
pub(crate) fn go_bool(s: &str) -> Result<bool, String> {
    parse_go_bool(s).ok_or_else(|| format!("{s:?} is not a boolean; accepted: true, false, 1, 0, t, f"))
}

/// clap's parser of a Go duration flag value (`time.ParseDuration`).
pub(crate) fn go_duration(s: &str) -> Result<Duration, String> {
    parse_go_duration(s).ok_or_else(|| format!("{s:?} is not a duration; use Go syntax like 5s, 1m30s, 5m0s"))
}
