//! Per-port annotations (hcloud-ccm only): `load-balancer.hetzner.cloud/port.<port>.<option>`
//! overrides the Service-wide `load-balancer.hetzner.cloud/<option>` for the Load Balancer
//! service listening on `<port>`, so one Service can serve 80 as http, 443 as https with a
//! certificate and 22 as tcp without PROXY protocol. Pure; problems are collected like every
//! other annotation's, naming the per-port annotation, and nothing is sent while there is one.
//!
//! A Service without per-port annotations never reaches this module: its Load Balancer is the
//! official CCM's.

use std::collections::{BTreeMap, BTreeSet};

use cloud_provider::IpMode;
use hcloud_api::models::LbProtocol;
use k8s_openapi::api::core::v1::Service;

use super::annotations::{self as a, Invalid, PER_PORT, PORT_PREFIX, Reader};
use super::defaults::LbDefaults;
use super::local_health::local_endpoints_health;
use super::port_spec::{CertRef, CertificateSpec, HealthSpec, HttpSpec, PortSpec, cert_refs, health, transport};

/// The settings of one port that has per-port annotations (the rest inherited from the
/// Service-wide annotations and variables, exactly as a port without any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSettings {
    /// `tcp`, `http` or `https`: `port.<port>.protocol`, else the Service-wide `protocol`
    /// annotation, else `tcp`.
    pub protocol: LbProtocol,
    /// PROXY protocol, if configured.
    pub proxyprotocol: Option<bool>,
    /// HTTP options.
    pub http: HttpSpec,
    /// Uploaded certificates of this port (`port.<port>.http-certificates`); `None`: the
    /// Service-wide certificates (uploaded or managed).
    pub certificates: Option<Vec<CertRef>>,
    /// Health check.
    pub health: HealthSpec,
}

/// Whether any per-port annotation is present.
pub(super) fn ports_annotated(map: Option<&BTreeMap<String, String>>) -> bool {
    map.is_some_and(|m| m.keys().any(|k| k.starts_with(PORT_PREFIX)))
}

fn options() -> String {
    PER_PORT.iter().map(|o| o.trim_start_matches(a::PREFIX)).collect::<Vec<_>>().join(", ")
}

/// The per-port annotations' ports, each key checked: a known option and a TCP port of the
/// Service.
fn annotated_ports(map: &BTreeMap<String, String>, tcp: &[u16], problems: &mut Vec<Invalid>) -> BTreeSet<u16> {
    let mut out = BTreeSet::new();
    let ports = tcp.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
    for (key, value) in map.range(PORT_PREFIX.to_owned()..).take_while(|(k, _)| k.starts_with(PORT_PREFIX)) {
        let rest = &key[PORT_PREFIX.len()..];
        let (port, option) = rest.split_once('.').unwrap_or((rest, ""));
        if !PER_PORT.iter().any(|o| o.trim_start_matches(a::PREFIX) == option) {
            problems.push(Invalid::new(
                format!("annotation {key}"),
                value,
                format!(
                    "accepted: {PORT_PREFIX}<port>.<option> with <option> one of {}; the others are Service-wide",
                    options()
                ),
            ));
            continue;
        }
        // Only the plain number is read (`port.0443.` would never be).
        match port.parse::<u16>().ok().filter(|p| p.to_string() == port && tcp.contains(p)) {
            Some(p) => {
                out.insert(p);
            }
            None => problems.push(Invalid::new(
                format!("annotation {key}"),
                value,
                format!("port {port} is not a TCP port of this Service; accepted ports: {ports}"),
            )),
        }
    }
    out
}

/// The settings of every port of `svc` named by a per-port annotation; every TCP port is
/// checked (a port that inherits https needs a certificate too). A port's health check is the
/// `externalTrafficPolicy: Local` one where the Service opted in, unless the port has a
/// `health-check-protocol` or `health-check-port` (its own or the Service-wide one).
pub(super) fn port_settings(
    svc: &Service,
    defaults: &LbDefaults,
    ports: &[PortSpec],
    service_certificates: &CertificateSpec,
    problems: &mut Vec<Invalid>,
) -> BTreeMap<u16, PortSettings> {
    let Some(map) = svc.metadata.annotations.as_ref() else {
        return BTreeMap::new();
    };
    let tcp: Vec<u16> = ports.iter().map(|p| p.port).collect();
    let annotated = annotated_ports(map, &tcp, problems);
    let mut out = BTreeMap::new();
    for p in ports {
        let mut r = Reader::for_port(Some(map), p.port);
        let (protocol, proxyprotocol, http) = transport(&mut r, defaults);
        let certificates = match r.port_key(a::HTTP_CERTIFICATES) {
            Some(key) => {
                let list = r.list(a::HTTP_CERTIFICATES).unwrap_or_default();
                if list.is_empty() {
                    r.problems.push(Invalid::new(
                        format!("annotation {key}"),
                        r.raw(a::HTTP_CERTIFICATES).unwrap_or_default(),
                        "accepted: comma-separated ids or names of uploaded certificates",
                    ));
                }
                Some(cert_refs(list))
            }
            None => None,
        };
        if protocol == LbProtocol::Https && certificates.is_none() && *service_certificates == CertificateSpec::None {
            let setting = r.port_key(a::PROTOCOL).unwrap_or_else(|| a::PROTOCOL.to_owned());
            r.problems.push(Invalid::new(
                format!("annotation {setting}"),
                "https",
                format!(
                    "port {} uses https and needs a certificate: set {} or {} to certificate ids or names, or {}=managed",
                    p.port,
                    a::port_annotation(p.port, a::HTTP_CERTIFICATES),
                    a::HTTP_CERTIFICATES,
                    a::CERTIFICATE_TYPE
                ),
            ));
        }
        let health = health(&mut r, defaults, &protocol);
        let health = local_endpoints_health(&mut r, svc, defaults, health);
        problems.append(&mut r.problems);
        if annotated.contains(&p.port) {
            out.insert(p.port, PortSettings { protocol, proxyprotocol, http, certificates, health });
        }
    }
    out
}

/// The status' `ipMode`: `Proxy` when the ports use the PROXY protocol. When they disagree it
/// is `Proxy` too: with `VIP`, kube-proxy sends in-cluster traffic for the Load Balancer's IP
/// straight to the pods, without the PROXY header the backend of a PROXY port expects; with
/// `Proxy` in-cluster clients go through the Load Balancer, which is right for every port.
pub(super) fn ip_mode(service: Option<bool>, ports: &[PortSpec], settings: &BTreeMap<u16, PortSettings>) -> IpMode {
    let proxy = |p: &PortSpec| settings.get(&p.port).map_or(service, |s| s.proxyprotocol) == Some(true);
    let any = if ports.is_empty() { service == Some(true) } else { ports.iter().any(proxy) };
    if any { IpMode::Proxy } else { IpMode::Vip }
}

#[cfg(test)]
#[path = "ports_tests.rs"]
mod tests;
