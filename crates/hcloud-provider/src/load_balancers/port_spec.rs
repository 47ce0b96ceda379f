//! The per-port part of the desired Load Balancer: protocol, HTTP options, certificates and
//! health check, read from annotations (Service-wide or `port.<port>.*`) with the cluster
//! defaults. [`super::spec`] assembles a whole Load Balancer from these; [`super::ports`]
//! applies per-port overrides with the same readers.

use hcloud_api::models::{CertificateId, LbProtocol};

use super::annotations::{self as a, Reader};
use super::defaults::{HEALTH_CHECK_SECONDS, LbDefaults};

/// An uploaded certificate as the annotation names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertRef {
    /// By id.
    Id(CertificateId),
    /// By name.
    Name(String),
}

/// Which certificates HTTPS ports use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateSpec {
    /// None configured.
    None,
    /// Uploaded certificates by id or name.
    Uploaded(Vec<CertRef>),
    /// A managed certificate the provider creates (found again by the Service-UID label).
    Managed {
        /// The certificate's name in the project (`http-managed-certificate-name`, else
        /// `ccm-managed-certificate-<Service UID>`).
        name: String,
        /// The domains it is issued for (`http-managed-certificate-domains`).
        domains: Vec<String>,
        /// Issue it from the ACME staging CA.
        staging: bool,
    },
}

/// HTTP options of http/https ports; `None` leaves the API's value alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpSpec {
    /// Sticky-session cookie name.
    pub cookie_name: Option<String>,
    /// Cookie lifetime, seconds.
    pub cookie_lifetime: Option<u32>,
    /// Redirect HTTP to HTTPS.
    pub redirect_http: Option<bool>,
    /// Whether a client sticks to one target via the cookie (`http-sticky-sessions`).
    pub sticky_sessions: Option<bool>,
    /// Idle timeout, seconds.
    pub timeout_idle: Option<u32>,
}

/// Health check protocol as configured (`https` is the API's `http` with TLS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthProtocol {
    /// TCP connect.
    Tcp,
    /// HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

/// The health check. Without any health check annotation or variable it is a TCP check on the
/// NodePort, as in the official CCM; `None` fields leave the API's value alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSpec {
    /// `tcp`, `http` or `https` (`health-check-protocol`; without it `tcp`, or the port's protocol
    /// when other health check settings are given).
    pub protocol: HealthProtocol,
    /// Port (default: the NodePort of each port).
    pub port: Option<u16>,
    /// Interval, seconds.
    pub interval: Option<u32>,
    /// Timeout, seconds.
    pub timeout: Option<u32>,
    /// Failed checks in a row before a target counts as unhealthy (`health-check-retries`,
    /// else `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES`).
    pub retries: Option<u32>,
    /// Host header (http/https only).
    pub domain: Option<String>,
    /// Path (http/https only).
    pub path: Option<String>,
    /// Expected status codes (http/https only).
    pub status_codes: Option<Vec<String>>,
    /// TLS (`https`, or `health-check-http-validate-certificate`).
    pub tls: Option<bool>,
}

/// One Service port the Load Balancer serves: listen on `port`, forward to `node_port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSpec {
    /// The Service port (the LB's listen port).
    pub port: u16,
    /// The NodePort (the LB's destination port).
    pub node_port: u16,
}

pub(super) const PROTOCOLS: &[&str] = &["tcp", "http", "https"];

fn lb_protocol(p: &str) -> LbProtocol {
    match p {
        "http" => LbProtocol::Http,
        "https" => LbProtocol::Https,
        _ => LbProtocol::Tcp,
    }
}

/// Protocol, PROXY protocol and HTTP options, read by `r` (Service-wide or for one port).
pub(super) fn transport(r: &mut Reader<'_>, defaults: &LbDefaults) -> (LbProtocol, Option<bool>, HttpSpec) {
    let protocol = lb_protocol(r.choice(a::PROTOCOL, PROTOCOLS).unwrap_or("tcp"));
    let proxyprotocol = bool_or(r, a::USES_PROXYPROTOCOL, defaults.uses_proxyprotocol);
    let http = HttpSpec {
        cookie_name: r.string(a::HTTP_COOKIE_NAME),
        cookie_lifetime: r.seconds(a::HTTP_COOKIE_LIFETIME, 1, u32::MAX),
        redirect_http: r.bool(a::HTTP_REDIRECT_HTTP),
        sticky_sessions: r.bool(a::HTTP_STICKY_SESSIONS),
        timeout_idle: r.seconds(a::HTTP_TIMEOUT_IDLE, 1, u32::MAX),
    };
    (protocol, proxyprotocol, http)
}

/// Certificate ids (numbers) or names.
pub(super) fn cert_refs(list: Vec<String>) -> Vec<CertRef> {
    list.into_iter()
        .map(|c| match c.parse::<i64>() {
            Ok(id) => CertRef::Id(CertificateId(id)),
            Err(_) => CertRef::Name(c),
        })
        .collect()
}

/// The annotation if present (problems recorded), else the default.
pub(super) fn bool_or(r: &mut Reader<'_>, name: &str, default: Option<bool>) -> Option<bool> {
    match r.raw(name) {
        Some(_) => r.bool(name),
        None => default,
    }
}

pub(super) fn certificates(r: &mut Reader<'_>, uid: &str, https: bool) -> CertificateSpec {
    let managed = match r.choice(a::CERTIFICATE_TYPE, &["uploaded", "managed"]) {
        Some("managed") => true,
        Some(_) => false,
        None if r.raw(a::CERTIFICATE_TYPE).is_some() => return CertificateSpec::None,
        None => false,
    };
    if managed {
        let domains = r.list(a::HTTP_MANAGED_CERTIFICATE_DOMAINS).unwrap_or_default();
        if domains.is_empty() {
            let value = r.raw(a::HTTP_MANAGED_CERTIFICATE_DOMAINS).unwrap_or_default().to_owned();
            r.invalid(
                a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                &value,
                format!("required with {}=managed: a comma-separated list of domains", a::CERTIFICATE_TYPE),
            );
        }
        let name = r
            .string(a::HTTP_MANAGED_CERTIFICATE_NAME)
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| default_certificate_name(uid));
        let staging = match r.raw(a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING) {
            Some(_) => r.bool(a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING).unwrap_or(false),
            None => false,
        };
        return CertificateSpec::Managed { name, domains, staging };
    }
    match r.list(a::HTTP_CERTIFICATES) {
        Some(list) if !list.is_empty() => CertificateSpec::Uploaded(cert_refs(list)),
        other => {
            if https {
                let value =
                    other.map(|_| r.raw(a::HTTP_CERTIFICATES).unwrap_or_default().to_owned()).unwrap_or_default();
                r.invalid(
                    a::HTTP_CERTIFICATES,
                    &value,
                    format!(
                        "protocol https needs a certificate: set {} to certificate ids or names, or {}=managed",
                        a::HTTP_CERTIFICATES,
                        a::CERTIFICATE_TYPE
                    ),
                );
            }
            CertificateSpec::None
        }
    }
}

pub(super) fn health(r: &mut Reader<'_>, defaults: &LbDefaults, service_protocol: &LbProtocol) -> HealthSpec {
    let (min, max) = HEALTH_CHECK_SECONDS;
    let ann_protocol = r.choice(a::HEALTH_CHECK_PROTOCOL, PROTOCOLS);
    let port = r.int(a::HEALTH_CHECK_PORT, 1, 65535).and_then(|p| u16::try_from(p).ok());
    let interval = match r.raw(a::HEALTH_CHECK_INTERVAL) {
        Some(_) => r.seconds(a::HEALTH_CHECK_INTERVAL, min, max),
        None => defaults.health_check_interval,
    };
    let timeout = match r.raw(a::HEALTH_CHECK_TIMEOUT) {
        Some(_) => r.seconds(a::HEALTH_CHECK_TIMEOUT, min, max),
        None => defaults.health_check_timeout,
    };
    let retries = match r.raw(a::HEALTH_CHECK_RETRIES) {
        Some(_) => r.int(a::HEALTH_CHECK_RETRIES, 0, 100).and_then(|n| u32::try_from(n).ok()),
        None => defaults.health_check_retries,
    };
    // As in the official CCM: the health check follows the service protocol only if some
    // health check setting is present; otherwise it is a plain TCP check on the NodePort.
    let configured = ann_protocol.is_some()
        || r.raw(a::HEALTH_CHECK_PROTOCOL).is_some()
        || port.is_some()
        || interval.is_some()
        || timeout.is_some()
        || retries.is_some();
    let protocol = match ann_protocol {
        Some("http") => HealthProtocol::Http,
        Some("https") => HealthProtocol::Https,
        Some(_) => HealthProtocol::Tcp,
        None if !configured => HealthProtocol::Tcp,
        None => match service_protocol {
            LbProtocol::Http => HealthProtocol::Http,
            LbProtocol::Https => HealthProtocol::Https,
            _ => HealthProtocol::Tcp,
        },
    };
    let mut spec = HealthSpec {
        protocol,
        port,
        interval,
        timeout,
        retries,
        domain: None,
        path: None,
        status_codes: None,
        tls: None,
    };
    if protocol != HealthProtocol::Tcp {
        spec.domain = r.string(a::HEALTH_CHECK_HTTP_DOMAIN);
        spec.path = r.string(a::HEALTH_CHECK_HTTP_PATH);
        spec.status_codes = r.list(a::HTTP_STATUS_CODES).filter(|l| !l.is_empty());
        let validate = match r.raw(a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE) {
            Some(_) => r.bool(a::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE),
            None => None,
        };
        spec.tls = Some(protocol == HealthProtocol::Https || validate == Some(true));
    }
    spec
}

/// The name of a Service's managed certificate when `http-managed-certificate-name` is not set
/// (the official CCM's).
pub fn default_certificate_name(uid: &str) -> String {
    format!("ccm-managed-certificate-{uid}")
}
