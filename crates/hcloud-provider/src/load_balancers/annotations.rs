//! The official CCM's `load-balancer.hetzner.cloud/*` Service annotations (same names and
//! formats) and a reader that parses them, collecting one [`Invalid`] per bad value instead of
//! stopping at the first.
//!
//! Formats, as in the official CCM: booleans in Go's `ParseBool` syntax, durations in Go's
//! `ParseDuration` syntax (sent to the API in whole seconds), lists comma-separated, protocol
//! and algorithm names case-insensitive.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::time::Duration;

use cloud_provider::helpers::go_syntax::{parse_go_bool, parse_go_duration};
use ipnet::IpNet;

/// The prefix every annotation shares.
pub const PREFIX: &str = "load-balancer.hetzner.cloud/";

macro_rules! annotations {
    ($($(#[$doc:meta])* $name:ident = $suffix:literal;)*) => {
        $($(#[$doc])* pub const $name: &str = concat!("load-balancer.hetzner.cloud/", $suffix);)*
        /// Every annotation this provider reads.
        pub const ALL: &[&str] = &[$($name),*];
    };
}

annotations! {
    /// Load Balancer name; a changed value renames it. Default: upstream's default name.
    NAME = "name";
    /// Load Balancer type, e.g. `lb11`.
    TYPE = "type";
    /// Location to create the Load Balancer in (create-only; `""` clears the env default).
    LOCATION = "location";
    /// Network zone to create the Load Balancer in (create-only).
    NETWORK_ZONE = "network-zone";
    /// `round_robin` or `least_connections`.
    ALGORITHM_TYPE = "algorithm-type";
    /// Bool: disable the public interface.
    DISABLE_PUBLIC_NETWORK = "disable-public-network";
    /// Bool: leave private IPs out of the Service status.
    DISABLE_PRIVATE_INGRESS = "disable-private-ingress";
    /// Bool: targets use the servers' private IPs.
    USE_PRIVATE_IP = "use-private-ip";
    /// Fixed private IPv4 in the network.
    PRIVATE_IPV4 = "private-ipv4";
    /// Subnet (CIDR) of the network to take the private IP from.
    PRIVATE_SUBNET_IP_RANGE = "private-subnet-ip-range";
    /// Bool: leave the IPv6 address out of the Service status.
    IPV6_DISABLED = "ipv6-disabled";
    /// Report only this hostname in the Service status.
    HOSTNAME = "hostname";
    /// Reverse DNS of the public IPv4.
    IPV4_RDNS = "ipv4-rdns";
    /// Reverse DNS of the public IPv6.
    IPV6_RDNS = "ipv6-rdns";
    /// Documented read-only, never written (kept for compatibility).
    IPV4 = "ipv4";
    /// Documented read-only, never written (kept for compatibility).
    IPV6 = "ipv6";
    /// Deprecated, unused.
    ID = "id";
    /// Label selector restricting which Nodes become targets.
    NODE_SELECTOR = "node-selector";
    /// `tcp`, `http` or `https`, for every port.
    PROTOCOL = "protocol";
    /// Bool: PROXY protocol on every port (status `ipMode: Proxy`).
    USES_PROXYPROTOCOL = "uses-proxyprotocol";
    /// Sticky-session cookie name.
    HTTP_COOKIE_NAME = "http-cookie-name";
    /// Duration: sticky-session cookie lifetime.
    HTTP_COOKIE_LIFETIME = "http-cookie-lifetime";
    /// Duration: HTTP idle timeout.
    HTTP_TIMEOUT_IDLE = "http-timeout-idle";
    /// `uploaded` (default) or `managed`.
    CERTIFICATE_TYPE = "certificate-type";
    /// Comma-separated ids or names of uploaded certificates.
    HTTP_CERTIFICATES = "http-certificates";
    /// Name of the managed certificate to create.
    HTTP_MANAGED_CERTIFICATE_NAME = "http-managed-certificate-name";
    /// Comma-separated domains of the managed certificate.
    HTTP_MANAGED_CERTIFICATE_DOMAINS = "http-managed-certificate-domains";
    /// Bool: issue the managed certificate from the ACME staging CA.
    HTTP_MANAGED_CERTIFICATE_ACME_STAGING = "http-managed-certificate-acme-staging";
    /// Bool: redirect HTTP to HTTPS.
    HTTP_REDIRECT_HTTP = "http-redirect-http";
    /// Bool: sticky sessions.
    HTTP_STICKY_SESSIONS = "http-sticky-sessions";
    /// `tcp`, `http` or `https`.
    HEALTH_CHECK_PROTOCOL = "health-check-protocol";
    /// Int: health check port (default: the NodePort).
    HEALTH_CHECK_PORT = "health-check-port";
    /// Duration: time between health checks.
    HEALTH_CHECK_INTERVAL = "health-check-interval";
    /// Duration: time until a check fails.
    HEALTH_CHECK_TIMEOUT = "health-check-timeout";
    /// Int: failed checks until a target is unhealthy.
    HEALTH_CHECK_RETRIES = "health-check-retries";
    /// Host header of HTTP health checks.
    HEALTH_CHECK_HTTP_DOMAIN = "health-check-http-domain";
    /// Path of HTTP health checks.
    HEALTH_CHECK_HTTP_PATH = "health-check-http-path";
    /// Bool: HTTP health checks use TLS and validate the certificate.
    HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE = "health-check-http-validate-certificate";
    /// Comma-separated expected status codes of HTTP health checks.
    HTTP_STATUS_CODES = "http-status-codes";
    /// Bool (hcloud-ccm only): with `externalTrafficPolicy: Local` and neither
    /// `health-check-protocol` nor `health-check-port`, check kube-proxy's
    /// `healthCheckNodePort` over HTTP on `/healthz`.
    HEALTH_CHECK_LOCAL_ENDPOINTS = "health-check-local-endpoints";
    /// Duration (hcloud-ccm only): a Warning when Hetzner reports a target unhealthy this
    /// long; `0s` turns it off.
    UNHEALTHY_TARGET_WARNING_AFTER = "unhealthy-target-warning-after";
    /// Bool (hcloud-ccm only): targets and services hcloud-ccm did not add are kept.
    KEEP_FOREIGN = "keep-foreign";
    /// String (hcloud-ccm only): Services with the same key share one Load Balancer, within
    /// their namespace (across the namespaces `HCLOUD_LOAD_BALANCERS_SHARING_NAMESPACES` lists).
    SHARING_KEY = "sharing-key";
}

/// Per-port annotations are `load-balancer.hetzner.cloud/port.<port>.<option>`: `<port>` a TCP
/// port of the Service (its `spec.ports[].port`, the Load Balancer's listen port), `<option>`
/// the suffix of one of [`PER_PORT`]. They override the Service-wide annotation (and its
/// `HCLOUD_LOAD_BALANCERS_*` default) for that port only.
pub const PORT_PREFIX: &str = "load-balancer.hetzner.cloud/port.";

/// The annotations a port can override (hcloud-ccm only; the official CCM has none).
pub const PER_PORT: &[&str] = &[
    PROTOCOL,
    USES_PROXYPROTOCOL,
    HTTP_CERTIFICATES,
    HTTP_COOKIE_NAME,
    HTTP_COOKIE_LIFETIME,
    HTTP_REDIRECT_HTTP,
    HTTP_STICKY_SESSIONS,
    HTTP_TIMEOUT_IDLE,
    HEALTH_CHECK_PROTOCOL,
    HEALTH_CHECK_PORT,
    HEALTH_CHECK_INTERVAL,
    HEALTH_CHECK_TIMEOUT,
    HEALTH_CHECK_RETRIES,
    HEALTH_CHECK_HTTP_DOMAIN,
    HEALTH_CHECK_HTTP_PATH,
    HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE,
    HTTP_STATUS_CODES,
];

/// The per-port form of `annotation` (one of [`PER_PORT`]) for `port`.
pub fn port_annotation(port: u16, annotation: &str) -> String {
    format!("{PORT_PREFIX}{port}.{}", annotation.trim_start_matches(PREFIX))
}

/// The annotations hcloud-ccm adds to the official CCM's (issue 20's opt-in features).
pub const OWN: &[&str] = &[HEALTH_CHECK_LOCAL_ENDPOINTS, UNHEALTHY_TARGET_WARNING_AFTER, KEEP_FOREIGN, SHARING_KEY];

/// The identity label the official CCM puts on Load Balancers (and managed certificates).
pub const LABEL_SERVICE_UID: &str = "hcloud-ccm/service-uid";

/// The label that makes Hetzner issue a managed certificate from the ACME staging CA.
pub const LABEL_USE_STAGING_CA: &str = "HC-Use-Staging-CA";

/// One bad setting: where it came from, its value, and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The setting at fault, e.g. `annotation load-balancer.hetzner.cloud/protocol`.
    pub setting: String,
    /// The value found.
    pub value: String,
    /// What is accepted, or what is wrong.
    pub accepted: String,
}

impl Invalid {
    /// A bad value of `setting`.
    pub fn new(setting: impl Into<String>, value: impl Into<String>, accepted: impl Into<String>) -> Invalid {
        Invalid { setting: setting.into(), value: value.into(), accepted: accepted.into() }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {:?} is invalid; {}", self.setting, self.value, self.accepted)
    }
}

/// Reads annotations, collecting problems.
pub struct Reader<'a> {
    map: Option<&'a BTreeMap<String, String>>,
    /// Reading for this port: its per-port annotations win over the Service-wide ones.
    port: Option<u16>,
    /// Problems found so far.
    pub problems: Vec<Invalid>,
}

const BOOL_ACCEPTED: &str = "accepted: true, false, 1, 0, t, f (Go ParseBool)";

impl<'a> Reader<'a> {
    /// A reader over a Service's annotations.
    pub fn new(map: Option<&'a BTreeMap<String, String>>) -> Reader<'a> {
        Reader { map, port: None, problems: Vec::new() }
    }

    /// A reader for one port: each of [`PER_PORT`] is read from its per-port annotation when
    /// that is present, else from the Service-wide one; problems name the annotation read.
    pub fn for_port(map: Option<&'a BTreeMap<String, String>>, port: u16) -> Reader<'a> {
        Reader { map, port: Some(port), problems: Vec::new() }
    }

    /// The per-port annotation that stands for `name` here, if this reader is for a port and
    /// the Service sets it.
    pub fn port_key(&self, name: &str) -> Option<String> {
        let port = self.port?;
        if !PER_PORT.contains(&name) {
            return None;
        }
        let key = port_annotation(port, name);
        self.map.is_some_and(|m| m.contains_key(&key)).then_some(key)
    }

    /// The raw value, if the annotation (or, for a port, its per-port form) is present (even
    /// if empty).
    pub fn raw(&self, name: &str) -> Option<&'a str> {
        let key = self.port_key(name);
        self.map.and_then(|m| m.get(key.as_deref().unwrap_or(name))).map(String::as_str)
    }

    /// Records a problem with annotation `name` (its per-port form where that was read).
    pub fn invalid(&mut self, name: &str, value: &str, accepted: impl Into<String>) {
        let key = self.port_key(name);
        self.problems.push(Invalid::new(format!("annotation {}", key.as_deref().unwrap_or(name)), value, accepted));
    }

    /// A string value.
    pub fn string(&self, name: &str) -> Option<String> {
        self.raw(name).map(str::to_owned)
    }

    /// A boolean.
    pub fn bool(&mut self, name: &str) -> Option<bool> {
        let v = self.raw(name)?;
        let parsed = parse_go_bool(v);
        if parsed.is_none() {
            self.invalid(name, v, BOOL_ACCEPTED);
        }
        parsed
    }

    /// A duration in whole seconds within `min..=max`.
    pub fn seconds(&mut self, name: &str, min: u32, max: u32) -> Option<u32> {
        let v = self.raw(name)?;
        match parse_go_duration(v) {
            Some(d) => match whole_seconds(d, min, max) {
                Ok(s) => Some(s),
                Err(why) => {
                    self.invalid(name, v, why);
                    None
                }
            },
            None => {
                self.invalid(name, v, "accepted: a Go duration like 15s, 1m30s or 2h (a number needs a unit)");
                None
            }
        }
    }

    /// An integer within `min..=max`.
    pub fn int(&mut self, name: &str, min: i64, max: i64) -> Option<i64> {
        let v = self.raw(name)?;
        match v.trim().parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.invalid(name, v, format!("accepted: an integer from {min} to {max}"));
                None
            }
        }
    }

    /// One of `accepted` (lower-cased first, as the official CCM does).
    pub fn choice(&mut self, name: &str, accepted: &[&'static str]) -> Option<&'static str> {
        let v = self.raw(name)?;
        let lower = v.to_ascii_lowercase();
        let found = accepted.iter().copied().find(|a| *a == lower);
        if found.is_none() {
            self.invalid(name, v, format!("accepted: {}", accepted.join(", ")));
        }
        found
    }

    /// An IPv4 address.
    pub fn ipv4(&mut self, name: &str) -> Option<Ipv4Addr> {
        let v = self.raw(name)?;
        let parsed = v.trim().parse::<Ipv4Addr>().ok();
        if parsed.is_none() {
            self.invalid(name, v, "accepted: an IPv4 address like 10.0.0.5 (private networks are IPv4 only)");
        }
        parsed
    }

    /// A CIDR.
    pub fn cidr(&mut self, name: &str) -> Option<IpNet> {
        let v = self.raw(name)?;
        let parsed = parse_cidr(v);
        if parsed.is_none() {
            self.invalid(name, v, "accepted: an IPv4 CIDR like 10.0.1.0/24");
        }
        parsed
    }

    /// A comma-separated list (entries trimmed; empty entries dropped).
    pub fn list(&self, name: &str) -> Option<Vec<String>> {
        self.raw(name).map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
    }
}

/// A CIDR whose address is the network address (like Go's `net.ParseCIDR`, which accepts a
/// host address too; the network is what counts).
pub fn parse_cidr(v: &str) -> Option<IpNet> {
    v.trim().parse::<IpNet>().ok().map(|n| n.trunc())
}

/// `d` in whole seconds within `min..=max`, or why not.
pub fn whole_seconds(d: Duration, min: u32, max: u32) -> Result<u32, String> {
    if d.subsec_nanos() != 0 {
        return Err(format!("the API takes whole seconds; accepted: {min}s to {max}s, e.g. 15s"));
    }
    match u32::try_from(d.as_secs()) {
        Ok(s) if (min..=max).contains(&s) => Ok(s),
        _ => Err(format!("accepted: {min}s to {max}s")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn names_match_the_official_ccm() {
        assert_eq!(NAME, "load-balancer.hetzner.cloud/name");
        assert_eq!(
            HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE,
            "load-balancer.hetzner.cloud/health-check-http-validate-certificate"
        );
        assert_eq!(HTTP_STATUS_CODES, "load-balancer.hetzner.cloud/http-status-codes");
        assert_eq!(ALL.len() - OWN.len(), 39, "the 38 documented ones and the internal ACME staging switch");
        assert!(OWN.iter().all(|own| ALL.contains(own)));
        assert!(ALL.iter().all(|a| a.starts_with(PREFIX)));
    }

    #[test]
    fn values_parse_like_go_and_problems_name_annotation_value_and_what_is_accepted() {
        let m = map(&[
            (USE_PRIVATE_IP, "T"),
            (DISABLE_PRIVATE_INGRESS, "yes"),
            (HEALTH_CHECK_INTERVAL, "1m"),
            (HEALTH_CHECK_TIMEOUT, "15"),
            (HTTP_COOKIE_LIFETIME, "1.5s"),
            (HEALTH_CHECK_RETRIES, "three"),
            (PROTOCOL, "HTTPS"),
            (ALGORITHM_TYPE, "fastest"),
            (PRIVATE_IPV4, "10.0.0.300"),
            (PRIVATE_SUBNET_IP_RANGE, "10.0.1.7/24"),
            (HTTP_CERTIFICATES, " a, 12 ,,b "),
        ]);
        let mut r = Reader::new(Some(&m));
        assert_eq!(r.bool(USE_PRIVATE_IP), Some(true));
        assert_eq!(r.bool(DISABLE_PRIVATE_INGRESS), None);
        assert_eq!(r.seconds(HEALTH_CHECK_INTERVAL, 1, 3600), Some(60));
        assert_eq!(r.seconds(HEALTH_CHECK_TIMEOUT, 1, 3600), None);
        assert_eq!(r.seconds(HTTP_COOKIE_LIFETIME, 1, u32::MAX), None);
        assert_eq!(r.int(HEALTH_CHECK_RETRIES, 0, 100), None);
        assert_eq!(r.choice(PROTOCOL, &["tcp", "http", "https"]), Some("https"));
        assert_eq!(r.choice(ALGORITHM_TYPE, &["round_robin", "least_connections"]), None);
        assert_eq!(r.ipv4(PRIVATE_IPV4), None);
        assert_eq!(r.cidr(PRIVATE_SUBNET_IP_RANGE).map(|n| n.to_string()).as_deref(), Some("10.0.1.0/24"));
        assert_eq!(r.list(HTTP_CERTIFICATES), Some(vec!["a".into(), "12".into(), "b".into()]));
        assert_eq!(r.bool(IPV6_DISABLED), None, "absent");
        let text: Vec<String> = r.problems.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 6, "{text:#?}");
        assert_eq!(
            text[0],
            "annotation load-balancer.hetzner.cloud/disable-private-ingress: \"yes\" is invalid; accepted: true, \
             false, 1, 0, t, f (Go ParseBool)"
        );
        assert!(text[1].contains("health-check-timeout: \"15\"") && text[1].contains("needs a unit"), "{}", text[1]);
        assert!(text[2].contains("whole seconds"), "{}", text[2]);
        assert!(text[3].contains("an integer from 0 to 100"), "{}", text[3]);
        assert!(text[4].contains("\"fastest\"") && text[4].contains("round_robin, least_connections"), "{}", text[4]);
        assert!(text[5].contains("IPv4 address"), "{}", text[5]);
    }
}
