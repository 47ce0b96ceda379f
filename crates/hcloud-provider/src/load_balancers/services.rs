//! One Load Balancer service per Service port: listen on the port, forward to its NodePort,
//! with the Service-wide protocol, PROXY protocol, HTTP options, certificates and health
//! check, or the port's own where per-port annotations set them. Pure: the desired service, the body that adds it, and the `update_service` body
//! that fixes an observed service — or `None` when it already matches, so nothing is sent.
//!
//! Settings the annotations and variables leave unset are not compared and keep the API's
//! value (as in the official CCM, removing an annotation does not revert a setting).

use hcloud_api::models::{
    CertificateId, HealthCheck, HealthCheckHttp, HttpOptions, LbProtocol, LbService, UpdateHttpOptions,
    UpdateServiceRequest,
};

use std::collections::BTreeMap;

use super::port_spec::{HealthProtocol, HealthSpec, HttpSpec};
use super::spec::LbSpec;

/// The API's health check defaults (used where nothing is configured and the API needs a value).
pub const DEFAULT_INTERVAL: u32 = 15;
/// The API's default health check timeout.
pub const DEFAULT_TIMEOUT: u32 = 10;
/// The API's default health check retries.
pub const DEFAULT_RETRIES: u32 = 3;
/// The API's default HTTP health check path.
pub const DEFAULT_PATH: &str = "/";

fn default_status_codes() -> Vec<String> {
    vec!["2??".to_owned(), "3??".to_owned()]
}

/// The desired HTTP options of an http/https port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredHttp {
    /// Name of the sticky-session cookie (`http-cookie-name`); None keeps the API's value
    /// (`HCLBSTICKY` on create).
    pub cookie_name: Option<String>,
    /// Cookie lifetime, seconds.
    pub cookie_lifetime: Option<u32>,
    /// Certificates (sorted); empty for http.
    pub certificates: Vec<CertificateId>,
    /// Redirect HTTP to HTTPS.
    pub redirect_http: Option<bool>,
    /// Whether a client sticks to one target via the cookie (`http-sticky-sessions`); None keeps
    /// the API's value (off on create).
    pub sticky_sessions: Option<bool>,
    /// Idle timeout, seconds.
    pub timeout_idle: Option<u32>,
}

/// The desired HTTP part of a health check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredHealthHttp {
    /// Host header.
    pub domain: Option<String>,
    /// Request path of the check (`health-check-http-path`); None keeps the API's value (`/` on
    /// create).
    pub path: Option<String>,
    /// Status codes that count as healthy, `?` a wildcard digit (`http-status-codes`); None
    /// keeps the API's value (`2??`, `3??` on create).
    pub status_codes: Option<Vec<String>>,
    /// Whether the check speaks HTTPS (an `https` health check, or
    /// `health-check-http-validate-certificate`).
    pub tls: bool,
}

/// The desired health check (the API knows `tcp` and `http`; `https` is `http` with TLS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredHealth {
    /// `tcp` or `http`.
    pub protocol: LbProtocol,
    /// Port on the target the check connects to (`health-check-port`, else the NodePort).
    pub port: u16,
    /// Interval, seconds.
    pub interval: Option<u32>,
    /// Timeout, seconds.
    pub timeout: Option<u32>,
    /// Failed checks in a row before a target counts as unhealthy, and successful ones before
    /// it is healthy again (`health-check-retries`, else
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES`); None keeps the API's value (3 on create).
    pub retries: Option<u32>,
    /// HTTP options, for `http`.
    pub http: Option<DesiredHealthHttp>,
}

/// The desired Load Balancer service of one Service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredService {
    /// Listen port (the Service port).
    pub listen_port: u16,
    /// Destination port (the NodePort).
    pub destination_port: u16,
    /// `tcp`, `http` or `https` (`protocol` annotation, per port or Service-wide; default `tcp`).
    pub protocol: LbProtocol,
    /// PROXY protocol, if configured.
    pub proxyprotocol: Option<bool>,
    /// HTTP options (http/https only).
    pub http: Option<DesiredHttp>,
    /// Health check.
    pub health: DesiredHealth,
}

/// The desired services of `spec`, with `certificates` resolved to ids.
pub fn desired_services(spec: &LbSpec, certificates: &[CertificateId]) -> Vec<DesiredService> {
    desired_services_by_port(spec, certificates, &BTreeMap::new())
}

fn sorted(ids: &[CertificateId]) -> Vec<CertificateId> {
    let mut certs = ids.to_vec();
    certs.sort();
    certs.dedup();
    certs
}

/// The desired services of `spec`: the Service-wide `certificates` resolved to ids, and those
/// of the ports with their own `http-certificates` in `port_certificates`.
pub fn desired_services_by_port(
    spec: &LbSpec,
    certificates: &[CertificateId],
    port_certificates: &BTreeMap<u16, Vec<CertificateId>>,
) -> Vec<DesiredService> {
    let shared = sorted(certificates);
    spec.ports
        .iter()
        .map(|p| {
            let own = spec.port_settings.get(&p.port);
            let (protocol, proxyprotocol, http_spec, h): (&LbProtocol, Option<bool>, &HttpSpec, &HealthSpec) = match own
            {
                Some(s) => (&s.protocol, s.proxyprotocol, &s.http, &s.health),
                None => (&spec.protocol, spec.proxyprotocol, &spec.http, &spec.health),
            };
            let certs = match own.and_then(|s| s.certificates.as_ref()) {
                Some(_) => sorted(port_certificates.get(&p.port).map(Vec::as_slice).unwrap_or_default()),
                None => shared.clone(),
            };
            let http = match protocol {
                LbProtocol::Http | LbProtocol::Https => Some(DesiredHttp {
                    cookie_name: http_spec.cookie_name.clone(),
                    cookie_lifetime: http_spec.cookie_lifetime,
                    certificates: if *protocol == LbProtocol::Https { certs } else { Vec::new() },
                    redirect_http: http_spec.redirect_http,
                    sticky_sessions: http_spec.sticky_sessions,
                    timeout_idle: http_spec.timeout_idle,
                }),
                _ => None,
            };
            let health = DesiredHealth {
                protocol: if h.protocol == HealthProtocol::Tcp { LbProtocol::Tcp } else { LbProtocol::Http },
                port: h.port.unwrap_or(p.node_port),
                interval: h.interval,
                timeout: h.timeout,
                retries: h.retries,
                http: (h.protocol != HealthProtocol::Tcp).then(|| DesiredHealthHttp {
                    domain: h.domain.clone(),
                    path: h.path.clone(),
                    status_codes: h.status_codes.clone(),
                    tls: h.tls.unwrap_or(false),
                }),
            };
            DesiredService {
                listen_port: p.port,
                destination_port: p.node_port,
                protocol: protocol.clone(),
                proxyprotocol,
                http,
                health,
            }
        })
        .collect()
}

fn differs<T: PartialEq>(want: &Option<T>, have: &T) -> bool {
    want.as_ref().is_some_and(|w| w != have)
}

impl DesiredHealth {
    /// The complete health check, unset values taken from `base` (the observed one) or the
    /// API's defaults.
    fn complete(&self, base: Option<&HealthCheck>) -> HealthCheck {
        let base_http = base.and_then(|b| b.http.as_ref());
        HealthCheck {
            protocol: self.protocol.clone(),
            port: self.port,
            interval: self.interval.or(base.map(|b| b.interval)).unwrap_or(DEFAULT_INTERVAL),
            timeout: self.timeout.or(base.map(|b| b.timeout)).unwrap_or(DEFAULT_TIMEOUT),
            retries: self.retries.or(base.map(|b| b.retries)).unwrap_or(DEFAULT_RETRIES),
            http: self.http.as_ref().map(|h| HealthCheckHttp {
                domain: match &h.domain {
                    Some(d) => Some(d.clone()),
                    None => base_http.and_then(|b| b.domain.clone()),
                },
                path: h.path.clone().or(base_http.map(|b| b.path.clone())).unwrap_or_else(|| DEFAULT_PATH.to_owned()),
                response: None,
                status_codes: h
                    .status_codes
                    .clone()
                    .or(base_http.map(|b| b.status_codes.clone()).filter(|c| !c.is_empty()))
                    .unwrap_or_else(default_status_codes),
                tls: h.tls,
            }),
        }
    }

    fn matches(&self, have: &HealthCheck) -> bool {
        if have.protocol != self.protocol
            || have.port != self.port
            || differs(&self.interval, &have.interval)
            || differs(&self.timeout, &have.timeout)
            || differs(&self.retries, &have.retries)
        {
            return false;
        }
        match (&self.http, &have.http) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(w), Some(h)) => {
                w.tls == h.tls
                    && w.domain.as_ref().is_none_or(|d| h.domain.as_ref() == Some(d))
                    && !differs(&w.path, &h.path)
                    && !differs(&w.status_codes, &h.status_codes)
            }
        }
    }
}

impl DesiredHttp {
    fn matches(&self, have: Option<&HttpOptions>) -> bool {
        let Some(h) = have else {
            return false;
        };
        let mut certs = h.certificates.clone();
        certs.sort();
        certs == self.certificates
            && self.cookie_name.as_ref().is_none_or(|c| h.cookie_name.as_ref() == Some(c))
            && self.cookie_lifetime.is_none_or(|c| h.cookie_lifetime == Some(c))
            && !differs(&self.redirect_http, &h.redirect_http)
            && !differs(&self.sticky_sessions, &h.sticky_sessions)
            && self.timeout_idle.is_none_or(|t| h.timeout_idle == Some(t))
    }
}

impl DesiredService {
    /// The body of `add_service` (and of `services` in the create request).
    pub fn to_add(&self) -> LbService {
        LbService {
            protocol: self.protocol.clone(),
            listen_port: self.listen_port,
            destination_port: self.destination_port,
            proxyprotocol: self.proxyprotocol.unwrap_or(false),
            health_check: Some(self.health.complete(None)),
            http: self.http.as_ref().map(|h| HttpOptions {
                cookie_name: h.cookie_name.clone(),
                cookie_lifetime: h.cookie_lifetime,
                certificates: h.certificates.clone(),
                redirect_http: h.redirect_http.unwrap_or(false),
                sticky_sessions: h.sticky_sessions.unwrap_or(false),
                timeout_idle: h.timeout_idle,
            }),
        }
    }

    /// Whether `have` already is this service.
    pub fn matches(&self, have: &LbService) -> bool {
        have.listen_port == self.listen_port
            && have.destination_port == self.destination_port
            && have.protocol == self.protocol
            && !differs(&self.proxyprotocol, &have.proxyprotocol)
            && have.health_check.as_ref().is_some_and(|hc| self.health.matches(hc))
            && self.http.as_ref().is_none_or(|h| h.matches(have.http.as_ref()))
    }

    /// The `update_service` body that turns `have` into this service, or `None` if it matches.
    pub fn update_for(&self, have: &LbService) -> Option<UpdateServiceRequest> {
        if self.matches(have) {
            return None;
        }
        Some(UpdateServiceRequest {
            listen_port: self.listen_port,
            protocol: Some(self.protocol.clone()),
            destination_port: Some(self.destination_port),
            proxyprotocol: self.proxyprotocol,
            health_check: Some(self.health.complete(have.health_check.as_ref())),
            http: self.http.as_ref().map(|h| UpdateHttpOptions {
                cookie_name: h.cookie_name.clone(),
                cookie_lifetime: h.cookie_lifetime,
                certificates: Some(h.certificates.clone()),
                redirect_http: h.redirect_http,
                sticky_sessions: h.sticky_sessions,
                timeout_idle: h.timeout_idle,
            }),
        })
    }
}

/// `have` after `update_service(req)` was applied (the write-through model of the shared
/// inventory; mirrors the API's merge of the given fields).
pub fn apply_update(have: &mut LbService, req: &UpdateServiceRequest) {
    if let Some(p) = &req.protocol {
        have.protocol = p.clone();
    }
    if let Some(d) = req.destination_port {
        have.destination_port = d;
    }
    if let Some(pp) = req.proxyprotocol {
        have.proxyprotocol = pp;
    }
    if let Some(hc) = &req.health_check {
        have.health_check = Some(hc.clone());
    }
    if have.protocol == LbProtocol::Tcp {
        have.http = None;
    } else if let Some(u) = &req.http {
        let h = have.http.get_or_insert_with(HttpOptions::default);
        if let Some(v) = &u.cookie_name {
            h.cookie_name = Some(v.clone());
        }
        if let Some(v) = u.cookie_lifetime {
            h.cookie_lifetime = Some(v);
        }
        if let Some(v) = &u.certificates {
            h.certificates.clone_from(v);
        }
        if let Some(v) = u.redirect_http {
            h.redirect_http = v;
        }
        if let Some(v) = u.sticky_sessions {
            h.sticky_sessions = v;
        }
        if let Some(v) = u.timeout_idle {
            h.timeout_idle = Some(v);
        }
    }
}
