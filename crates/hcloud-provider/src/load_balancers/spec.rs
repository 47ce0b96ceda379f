//! Service (annotations, ports) + cluster defaults → the desired Load Balancer, pure.
//!
//! Every annotation is parsed here, before any API call, and every problem is collected: a
//! Service with a bad annotation gets one error naming each bad annotation, its value and what
//! is accepted, and its Load Balancer is left as it is. Precedence is the official CCM's:
//! annotation, then `HCLOUD_LOAD_BALANCERS_*`, then the default.

use std::fmt;
use std::net::Ipv4Addr;

use cloud_provider::IpMode;
use cloud_provider::helpers::label_selector::LabelSelector;
use cloud_provider::helpers::service::service_name;
use hcloud_api::models::{Algorithm, LbProtocol, NetworkId};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Service;

use super::annotations::{self as a, Invalid, Reader};
use super::defaults::{LbDefaults, UNHEALTHY_WARNING_SECONDS};
use super::groups::Group;
use super::local_health::local_endpoints_health;
pub use super::port_spec::{CertRef, CertificateSpec, HealthProtocol, HealthSpec, HttpSpec, PortSpec};
use super::port_spec::{bool_or, certificates, health, transport};
pub use super::ports::PortSettings;
use super::ports::{ip_mode, port_settings, ports_annotated};

/// Where a new Load Balancer is created (create-only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// A location, e.g. `fsn1`.
    Location(String),
    /// A network zone, e.g. `eu-central`.
    NetworkZone(String),
    /// Neither is configured: creating fails (updating an existing one does not need it).
    Unset,
}

/// How the Load Balancer joins `HCLOUD_NETWORK`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSpec {
    /// The network.
    pub id: NetworkId,
    /// A fixed IP (`private-ipv4`).
    pub ip: Option<Ipv4Addr>,
    /// The subnet to take the IP from (`private-subnet-ip-range`).
    pub ip_range: Option<IpNet>,
}

/// What the Service status shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSpec {
    /// `hostname`: report only this.
    pub hostname: Option<String>,
    /// Report the IPv6 address.
    pub ipv6: bool,
    /// Report private-network IPs.
    pub private_ingress: bool,
    /// `VIP`, or `Proxy` with the PROXY protocol.
    pub ip_mode: IpMode,
}

/// The desired Load Balancer of one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbSpec {
    /// `namespace/name` of the Service (for messages).
    pub service: String,
    /// The Service UID (identity label value).
    pub uid: String,
    /// The Load Balancer name (`name` annotation or upstream's default name).
    pub name: String,
    /// Whether `name` came from the annotation (only then an existing LB is renamed).
    pub name_annotated: bool,
    /// Explicitly configured type (annotation or env); `None`: `lb11` at create, no changes.
    pub lb_type: Option<String>,
    /// Where to create it.
    pub placement: Placement,
    /// Algorithm, if configured.
    pub algorithm: Option<Algorithm>,
    /// Public interface enabled, if configured.
    pub public_interface: Option<bool>,
    /// `HCLOUD_NETWORK` attachment, if a network is configured.
    pub network: Option<NetworkSpec>,
    /// Targets use private IPs.
    pub use_private_ip: bool,
    /// Reverse DNS of the IPv4.
    pub ipv4_rdns: Option<String>,
    /// Reverse DNS of the IPv6.
    pub ipv6_rdns: Option<String>,
    /// Protocol of every port (without a per-port annotation).
    pub protocol: LbProtocol,
    /// PROXY protocol of every port, if configured.
    pub proxyprotocol: Option<bool>,
    /// HTTP options.
    pub http: HttpSpec,
    /// The certificates HTTPS ports present (uploaded ones by id or name, or a managed one).
    pub certificates: CertificateSpec,
    /// Health check.
    pub health: HealthSpec,
    /// TCP ports, in Service order.
    pub ports: Vec<PortSpec>,
    /// The settings of the ports named by per-port annotations (`port.<port>.<option>`);
    /// every other port takes the Service-wide ones above. Empty for a Service written for
    /// the official CCM.
    pub port_settings: std::collections::BTreeMap<u16, PortSettings>,
    /// Ports with a protocol the Load Balancer cannot serve (`53/UDP`), skipped.
    pub unsupported_ports: Vec<String>,
    /// Which Nodes become targets.
    pub node_selector: LabelSelector,
    /// What the status shows.
    pub status: StatusSpec,
    /// A Warning when a target is unhealthy this long (`None`: off).
    pub unhealthy_target_warning_after: Option<std::time::Duration>,
    /// Targets and services not recorded as hcloud-ccm's are kept (`super::ownership`).
    pub keep_foreign: bool,
    /// The group whose Load Balancer it shares (`sharing-key`), if any.
    pub sharing: Option<Group>,
}

/// A Service whose annotations cannot be used; nothing was changed because of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidService {
    /// `namespace/name`.
    pub service: String,
    /// Every problem found.
    pub problems: Vec<Invalid>,
    /// The status the Service's valid annotations and the defaults give (a bad status
    /// annotation counts as absent): an invalid Service still reports its Load Balancer.
    pub status: StatusSpec,
}

impl fmt::Display for InvalidService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.problems.iter().map(ToString::to_string).collect();
        write!(
            f,
            "Service {} has an invalid load balancer configuration, so its Load Balancer is left unchanged: {}",
            self.service,
            list.join("; ")
        )
    }
}

impl std::error::Error for InvalidService {}

/// Whether the Service is giving up its Load Balancer: being deleted, or no longer of type
/// LoadBalancer (upstream's `needsCleanup`).
pub fn leaving(svc: &Service) -> bool {
    svc.metadata.deletion_timestamp.is_some()
        || svc.spec.as_ref().and_then(|s| s.type_.as_deref()) != Some("LoadBalancer")
}

impl LbSpec {
    /// The desired Load Balancer of `svc` with `defaults`, where `network` is the configured
    /// `HCLOUD_NETWORK`.
    pub fn from_service(
        svc: &Service,
        defaults: &LbDefaults,
        network: Option<NetworkId>,
    ) -> Result<LbSpec, InvalidService> {
        let mut r = Reader::new(svc.metadata.annotations.as_ref());
        let service = service_name(svc);
        let uid = svc.metadata.uid.clone().unwrap_or_default();

        let (name, name_annotated) = match r.string(a::NAME) {
            Some(n) if n.trim().is_empty() || n.len() > 63 => {
                r.invalid(a::NAME, &n, "accepted: a name of 1 to 63 characters");
                (String::new(), true)
            }
            Some(n) => (n, true),
            None => (cloud_provider::default_load_balancer_name(svc), false),
        };

        let lb_type = match r.string(a::TYPE) {
            Some(t) if t.trim().is_empty() => {
                r.invalid(a::TYPE, &t, "accepted: a Load Balancer type name like lb11, lb21, lb31");
                None
            }
            Some(t) => Some(t),
            None => defaults.lb_type.clone(),
        };

        let ann_location = r.string(a::LOCATION);
        let ann_zone = r.string(a::NETWORK_ZONE);
        if let (Some(l), Some(z)) = (&ann_location, &ann_zone)
            && !l.is_empty()
            && !z.is_empty()
        {
            r.problems.push(Invalid::new(
                format!("annotations {} and {}", a::LOCATION, a::NETWORK_ZONE),
                format!("{l}, {z}"),
                "set only one of them: a Load Balancer is created either in a location or in a network zone",
            ));
        }
        let location = match ann_location {
            Some(l) if l.is_empty() => None,
            Some(l) => Some(l),
            None => defaults.location.clone(),
        };
        let zone = match ann_zone {
            Some(z) if z.is_empty() => None,
            Some(z) => Some(z),
            None => defaults.network_zone.clone(),
        };
        let placement = match (location, zone) {
            (Some(l), _) => Placement::Location(l),
            (None, Some(z)) => Placement::NetworkZone(z),
            (None, None) => Placement::Unset,
        };

        let algorithm = match r.choice(a::ALGORITHM_TYPE, &["round_robin", "least_connections"]) {
            Some("least_connections") => Some(Algorithm::LeastConnections),
            Some(_) => Some(Algorithm::RoundRobin),
            None if r.raw(a::ALGORITHM_TYPE).is_some() => None,
            None => defaults.algorithm.clone(),
        };
        let public_interface = bool_or(&mut r, a::DISABLE_PUBLIC_NETWORK, defaults.disable_public_network).map(|d| !d);

        let private_ip = r.ipv4(a::PRIVATE_IPV4);
        let ann_range = r.cidr(a::PRIVATE_SUBNET_IP_RANGE);
        let network = match network {
            Some(id) => {
                Some(NetworkSpec { id, ip: private_ip, ip_range: ann_range.or(defaults.private_subnet_ip_range) })
            }
            None => {
                for name in [a::PRIVATE_IPV4, a::PRIVATE_SUBNET_IP_RANGE] {
                    if let Some(v) = r.raw(name) {
                        r.invalid(name, v, "it needs a private network, and HCLOUD_NETWORK is not set");
                    }
                }
                None
            }
        };
        let use_private_ip = bool_or(&mut r, a::USE_PRIVATE_IP, Some(defaults.use_private_ip)).unwrap_or(false);
        if use_private_ip && network.is_none() {
            let (setting, value) = match r.raw(a::USE_PRIVATE_IP) {
                Some(v) => (format!("annotation {}", a::USE_PRIVATE_IP), v.to_owned()),
                None => ("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP".to_owned(), "true".to_owned()),
            };
            r.problems.push(Invalid::new(
                setting,
                value,
                "private IP targets need a private network: set HCLOUD_NETWORK or use-private-ip=false",
            ));
        }

        let ipv4_rdns = r.string(a::IPV4_RDNS).filter(|s| !s.is_empty());
        let ipv6_rdns = r.string(a::IPV6_RDNS).filter(|s| !s.is_empty());

        let (protocol, proxyprotocol, http) = transport(&mut r, defaults);
        // With per-port annotations, each port checks that it has a certificate if it needs one.
        let per_port = ports_annotated(svc.metadata.annotations.as_ref());
        let certificates = certificates(&mut r, &uid, protocol == LbProtocol::Https && !per_port);
        let health = health(&mut r, defaults, &protocol);
        let health = local_endpoints_health(&mut r, svc, defaults, health);

        let mut ports = Vec::new();
        let mut unsupported_ports = Vec::new();
        for (i, p) in svc.spec.as_ref().and_then(|s| s.ports.as_ref()).into_iter().flatten().enumerate() {
            let proto = p.protocol.as_deref().unwrap_or("TCP");
            let port = u16::try_from(p.port).unwrap_or(0);
            if !proto.eq_ignore_ascii_case("TCP") {
                unsupported_ports.push(format!("{}/{proto}", p.port));
                continue;
            }
            match p.node_port.and_then(|n| u16::try_from(n).ok()).filter(|n| *n > 0) {
                Some(node_port) if port > 0 => ports.push(PortSpec { port, node_port }),
                _ => r.problems.push(Invalid::new(
                    format!("spec.ports[{i}].nodePort"),
                    p.node_port.map(|n| n.to_string()).unwrap_or_default(),
                    "Hetzner Load Balancers forward to NodePorts; allocate one (allocateLoadBalancerNodePorts: true)",
                )),
            }
        }

        let node_selector = match r.raw(a::NODE_SELECTOR) {
            Some(v) => LabelSelector::parse(v).unwrap_or_else(|e| {
                r.invalid(a::NODE_SELECTOR, v, format!("accepted: a Kubernetes label selector ({e})"));
                LabelSelector::default()
            }),
            None => LabelSelector::default(),
        };

        let port_settings = if per_port {
            port_settings(svc, defaults, &ports, &certificates, &mut r.problems)
        } else {
            std::collections::BTreeMap::new()
        };

        // A bad value falls back to the default here (its problem is recorded all the same), so
        // an invalid Service still has a status to report.
        let status = StatusSpec {
            hostname: r.string(a::HOSTNAME).filter(|h| !h.is_empty()),
            ipv6: !bool_or(&mut r, a::IPV6_DISABLED, Some(defaults.disable_ipv6)).unwrap_or(defaults.disable_ipv6),
            private_ingress: !bool_or(&mut r, a::DISABLE_PRIVATE_INGRESS, Some(defaults.disable_private_ingress))
                .unwrap_or(defaults.disable_private_ingress),
            ip_mode: ip_mode(proxyprotocol.or(defaults.uses_proxyprotocol), &ports, &port_settings),
        };

        let (min, max) = UNHEALTHY_WARNING_SECONDS;
        let unhealthy_target_warning_after = match r.raw(a::UNHEALTHY_TARGET_WARNING_AFTER) {
            Some(_) => r.seconds(a::UNHEALTHY_TARGET_WARNING_AFTER, min, max),
            None => defaults.unhealthy_target_warning_after,
        }
        .filter(|s| *s > 0)
        .map(|s| std::time::Duration::from_secs(s.into()));

        let keep_foreign = bool_or(&mut r, a::KEEP_FOREIGN, Some(defaults.keep_foreign)).unwrap_or(false);

        let sharing = r.string(a::SHARING_KEY).filter(|k| !k.is_empty()).and_then(|key| {
            let namespace = svc.metadata.namespace.as_deref().unwrap_or("default");
            Group::of(namespace, &key, &defaults.sharing_namespaces)
                .map_err(|accepted| r.invalid(a::SHARING_KEY, &key, accepted))
                .ok()
        });

        if !r.problems.is_empty() {
            let mut problems: Vec<Invalid> = Vec::with_capacity(r.problems.len());
            for p in r.problems {
                // A bad Service-wide value is read again for every port that inherits it.
                if !problems.contains(&p) {
                    problems.push(p);
                }
            }
            return Err(InvalidService { service, problems, status });
        }
        Ok(LbSpec {
            service,
            uid,
            name,
            name_annotated,
            lb_type,
            placement,
            algorithm,
            public_interface,
            network,
            use_private_ip,
            ipv4_rdns,
            ipv6_rdns,
            protocol,
            proxyprotocol,
            http,
            certificates,
            health,
            ports,
            port_settings,
            unsupported_ports,
            node_selector,
            status,
            unhealthy_target_warning_after,
            keep_foreign,
            sharing,
        })
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
pub(crate) mod tests;
