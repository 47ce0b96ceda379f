//! Load balancers: create/update/delete, services, targets, networks, type, algorithm,
//! public interface, reverse DNS, protection, rendering and listing.
//!
//! Rules enforced (codes and statuses as in [`crate::error`]):
//! - listen ports are unique per load balancer (`source_port_already_used`);
//! - `max_services` / `max_targets` of the type (`resource_limit_exceeded`); a label selector
//!   target counts as the number of servers it matches (at least one);
//! - a duplicate target is `target_already_defined`;
//! - server targets with `use_private_ip` need the load balancer attached to a network
//!   (`load_balancer_not_attached_to_network`) that the server is attached to as well
//!   (`server_not_attached_to_network`); public server targets need a public interface
//!   (`load_balancer_public_interface_disabled`) and a public IPv4 on the server (`missing_ipv4`);
//! - IP targets may not be addresses of fake resources (`cloud_resource_ip_not_allowed`);
//! - attaching to a network twice is `load_balancer_already_attached`, detaching from a
//!   network it is not in is `load_balancer_not_attached_to_network`;
//! - a type change below current usage is `invalid_load_balancer_type`;
//! - `DELETE` with delete protection is `protected`;
//! - removing a target or updating/deleting a service that does not exist is `not_found`.
//!
//! Service defaults on `add_service` (and `services` on create): listen port 80/443 for
//! http/https (required for tcp), destination port 80 for http/https (required for tcp),
//! `proxyprotocol` false, `http` {cookie `HCLBSTICKY`, lifetime 300, no certificates, no
//! redirect, no sticky sessions} for http/https only, health check {protocol `tcp`, port =
//! destination port, interval 15, timeout 10, retries 3}, and for `http` health checks
//! {domain null, path `/`, response "", status codes `2??`,`3??`, tls false}.
//!
//! Target health: for every service, `healthy` when the target server is `running`,
//! `unknown` otherwise (IP targets are always `unknown`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{Effect, LoadBalancerRecord, Member, State, parse_ipv4, parse_ipv4_net, validate_labels, validate_name};
use crate::catalog::catalog;
use crate::control::{ResourceKind, ResourceRef, SeedLoadBalancer};
use crate::error::ApiError;
use crate::label_selector::LabelSelector;
use crate::pagination::PageRequest;
use crate::time::{now_unix, rfc3339};
use crate::wire::request::{
    AttachLoadBalancerToNetworkRequest, ChangeDnsPtrRequest, CreateLoadBalancerRequest, DetachFromNetworkRequest,
    HealthCheckHttpRequest, HealthCheckRequest, IdOrName, ServiceHttpRequest, ServiceRequest, TargetRequest,
    UpdateRequest, UpdateServiceRequest,
};
use crate::wire::{
    Algorithm, HealthCheck, HealthCheckHttp, Labels, LoadBalancer, LoadBalancerPrivateNet, LoadBalancerPublicIp,
    LoadBalancerPublicNet, LoadBalancerType, Location, Meta, Protection, ResourceId, SelectedTarget, ServerStatus,
    Service, ServiceHttp, Target, TargetHealthStatus, TargetIp, TargetLabelSelector,
};

/// A target of a load balancer.
#[derive(Debug, Clone)]
pub(crate) enum TargetRecord {
    /// A server.
    Server { id: u64, use_private_ip: bool },
    /// An IP address.
    Ip { ip: String },
    /// All servers matching a selector.
    LabelSelector { selector: LabelSelector, use_private_ip: bool },
}

impl TargetRecord {
    /// Whether both describe the same target (ignoring `use_private_ip`).
    pub fn same_target(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Server { id: a, .. }, Self::Server { id: b, .. }) => a == b,
            (Self::Ip { ip: a }, Self::Ip { ip: b }) => a == b,
            (Self::LabelSelector { selector: a, .. }, Self::LabelSelector { selector: b, .. }) => {
                a.to_string() == b.to_string()
            }
            _ => false,
        }
    }
}

/// Filters of `GET /load_balancers`.
#[derive(Debug, Default)]
pub(crate) struct LoadBalancerFilter {
    pub name: Option<String>,
    pub label_selector: Option<LabelSelector>,
}

/// What target validation needs to know about the load balancer.
struct TargetContext<'a> {
    private_nets: &'a [(u64, Ipv4Addr)],
    public_enabled: bool,
}

fn validate_algorithm(kind: &str, field: &str) -> Result<String, ApiError> {
    match kind {
        "round_robin" | "least_connections" => Ok(kind.to_owned()),
        other => Err(ApiError::invalid_input(field, format!("unknown algorithm '{other}'"))),
    }
}

fn validate_service_protocol(p: &str) -> Result<(), ApiError> {
    if matches!(p, "tcp" | "http" | "https") {
        Ok(())
    } else {
        Err(ApiError::invalid_input("protocol", format!("unknown protocol '{p}'")))
    }
}

fn nonzero_port(field: &str, port: u16) -> Result<u16, ApiError> {
    if port == 0 { Err(ApiError::invalid_input(field, "port must be 1-65535")) } else { Ok(port) }
}

fn default_http(req: Option<&ServiceHttpRequest>) -> ServiceHttp {
    let mut http = ServiceHttp {
        cookie_name: "HCLBSTICKY".to_owned(),
        cookie_lifetime: 300,
        certificates: Vec::new(),
        redirect_http: false,
        sticky_sessions: false,
        timeout_idle: None,
    };
    if let Some(r) = req {
        merge_http(&mut http, r);
    }
    http
}

fn merge_http(http: &mut ServiceHttp, r: &ServiceHttpRequest) {
    if let Some(v) = &r.cookie_name {
        http.cookie_name.clone_from(v);
    }
    if let Some(v) = r.cookie_lifetime {
        http.cookie_lifetime = v;
    }
    if let Some(v) = &r.certificates {
        http.certificates.clone_from(v);
    }
    if let Some(v) = r.redirect_http {
        http.redirect_http = v;
    }
    if let Some(v) = r.sticky_sessions {
        http.sticky_sessions = v;
    }
    if r.timeout_idle.is_some() {
        http.timeout_idle = r.timeout_idle;
    }
}

fn default_health_http(r: Option<&HealthCheckHttpRequest>) -> HealthCheckHttp {
    let mut h = HealthCheckHttp {
        domain: None,
        path: "/".to_owned(),
        response: String::new(),
        status_codes: vec!["2??".to_owned(), "3??".to_owned()],
        tls: false,
    };
    if let Some(r) = r {
        merge_health_http(&mut h, r);
    }
    h
}

fn merge_health_http(h: &mut HealthCheckHttp, r: &HealthCheckHttpRequest) {
    if r.domain.is_some() {
        h.domain.clone_from(&r.domain);
    }
    if let Some(v) = &r.path {
        h.path.clone_from(v);
    }
    if let Some(v) = &r.response {
        h.response.clone_from(v);
    }
    if let Some(v) = &r.status_codes {
        h.status_codes.clone_from(v);
    }
    if let Some(v) = r.tls {
        h.tls = v;
    }
}

fn merge_health_check(hc: &mut HealthCheck, r: &HealthCheckRequest) -> Result<(), ApiError> {
    if let Some(p) = &r.protocol {
        if !matches!(p.as_str(), "tcp" | "http") {
            return Err(ApiError::invalid_input(
                "health_check.protocol",
                format!("unknown health check protocol '{p}'"),
            ));
        }
        hc.protocol.clone_from(p);
    }
    if let Some(v) = r.port {
        hc.port = nonzero_port("health_check.port", v)?;
    }
    if let Some(v) = r.interval {
        hc.interval = v;
    }
    if let Some(v) = r.timeout {
        hc.timeout = v;
    }
    if let Some(v) = r.retries {
        hc.retries = v;
    }
    if hc.protocol == "http" {
        let mut h = hc.http.take().unwrap_or_else(|| default_health_http(None));
        if let Some(rh) = &r.http {
            merge_health_http(&mut h, rh);
        }
        hc.http = Some(h);
    } else {
        hc.http = None;
    }
    Ok(())
}

fn health_for(state: &State, server: u64, services: &[Service]) -> Vec<TargetHealthStatus> {
    let healthy = state.servers.get(&server).is_some_and(|s| s.status == ServerStatus::Running);
    services
        .iter()
        .map(|s| TargetHealthStatus {
            listen_port: s.listen_port,
            status: if healthy { "healthy" } else { "unknown" }.to_owned(),
        })
        .collect()
}

impl State {
    /// The load balancer record or `not_found`.
    pub fn lb_record(&self, id: u64) -> Result<&LoadBalancerRecord, ApiError> {
        self.load_balancers.get(&id).ok_or_else(|| ApiError::not_found("load_balancer", id))
    }

    fn check_certificates(&self, http: &ServiceHttp, protocol: &str) -> Result<(), ApiError> {
        if protocol == "https" && http.certificates.is_empty() {
            return Err(ApiError::invalid_input("http.certificates", "https services need at least one certificate"));
        }
        for c in &http.certificates {
            if !self.certificates.contains_key(c) {
                return Err(ApiError::invalid_input("http.certificates", format!("certificate {c} not found")));
            }
        }
        Ok(())
    }

    /// A service from a request, with API defaults filled in.
    fn build_service(&self, req: &ServiceRequest) -> Result<Service, ApiError> {
        validate_service_protocol(&req.protocol)?;
        let (listen_default, dest_default) = match req.protocol.as_str() {
            "http" => (Some(80), Some(80)),
            "https" => (Some(443), Some(80)),
            _ => (None, None),
        };
        let listen_port = req
            .listen_port
            .or(listen_default)
            .ok_or_else(|| ApiError::invalid_input("listen_port", "listen_port is required"))?;
        let destination_port = req
            .destination_port
            .or(dest_default)
            .ok_or_else(|| ApiError::invalid_input("destination_port", "destination_port is required"))?;
        let listen_port = nonzero_port("listen_port", listen_port)?;
        let destination_port = nonzero_port("destination_port", destination_port)?;
        let http = if req.protocol == "tcp" {
            None
        } else {
            let http = default_http(req.http.as_ref());
            self.check_certificates(&http, &req.protocol)?;
            Some(http)
        };
        let mut health_check = HealthCheck {
            protocol: "tcp".to_owned(),
            port: destination_port,
            interval: 15,
            timeout: 10,
            retries: 3,
            http: None,
        };
        if let Some(hc) = &req.health_check {
            merge_health_check(&mut health_check, hc)?;
        }
        Ok(Service {
            protocol: req.protocol.clone(),
            listen_port,
            destination_port,
            proxyprotocol: req.proxyprotocol.unwrap_or(false),
            health_check,
            http,
        })
    }

    /// Checks a new service against the existing ones and the type's limits.
    fn check_new_service(existing: &[Service], service: &Service, lb_type: &LoadBalancerType) -> Result<(), ApiError> {
        if existing.iter().any(|s| s.listen_port == service.listen_port) {
            return Err(ApiError::new(
                "source_port_already_used",
                format!("listen port {} is already used", service.listen_port),
            ));
        }
        if existing.len() as u64 >= lb_type.max_services {
            return Err(ApiError::limit(format!(
                "load balancer type {} allows at most {} services",
                lb_type.name, lb_type.max_services
            )));
        }
        let certs: usize = existing
            .iter()
            .chain(std::iter::once(service))
            .filter_map(|s| s.http.as_ref())
            .map(|h| h.certificates.len())
            .sum();
        if certs as u64 > lb_type.max_assigned_certificates {
            return Err(ApiError::limit(format!(
                "load balancer type {} allows at most {} certificates",
                lb_type.name, lb_type.max_assigned_certificates
            )));
        }
        Ok(())
    }

    /// How many targets a target counts as.
    fn target_weight(&self, t: &TargetRecord) -> u64 {
        match t {
            TargetRecord::LabelSelector { selector, .. } => {
                (self.servers.values().filter(|s| selector.matches(&s.labels)).count() as u64).max(1)
            }
            _ => 1,
        }
    }

    /// A target from a request, validated against the load balancer's situation.
    fn resolve_target(&self, req: &TargetRequest, ctx: &TargetContext<'_>) -> Result<TargetRecord, ApiError> {
        let use_private_ip = req.use_private_ip.unwrap_or(false);
        match req.kind.as_str() {
            "server" => {
                let id =
                    req.server.map(|s| s.id).ok_or_else(|| ApiError::invalid_input("server", "server is required"))?;
                let server = self
                    .servers
                    .get(&id)
                    .ok_or_else(|| ApiError::invalid_input("server", format!("server {id} not found")))?;
                if use_private_ip {
                    if ctx.private_nets.is_empty() {
                        return Err(ApiError::new(
                            "load_balancer_not_attached_to_network",
                            "the load balancer is not attached to a network",
                        ));
                    }
                    let shares =
                        server.private_net.iter().any(|nic| ctx.private_nets.iter().any(|(n, _)| *n == nic.network));
                    if !shares {
                        return Err(ApiError::new(
                            "server_not_attached_to_network",
                            format!("server {id} is not attached to a network of the load balancer"),
                        ));
                    }
                } else {
                    if !ctx.public_enabled {
                        return Err(ApiError::new(
                            "load_balancer_public_interface_disabled",
                            "the public interface is disabled; use the private IP",
                        ));
                    }
                    if server.ipv4.is_none() {
                        return Err(ApiError::new("missing_ipv4", format!("server {id} has no public IPv4")));
                    }
                }
                Ok(TargetRecord::Server { id, use_private_ip })
            }
            "ip" => {
                let ip = req.ip.as_ref().ok_or_else(|| ApiError::invalid_input("ip", "ip is required"))?;
                let addr: IpAddr = ip
                    .ip
                    .parse()
                    .map_err(|_| ApiError::invalid_input("ip", format!("'{}' is not an IP address", ip.ip)))?;
                if let IpAddr::V4(v4) = addr
                    && self.public_ips.is_used_v4(v4)
                {
                    return Err(ApiError::new(
                        "cloud_resource_ip_not_allowed",
                        format!("{v4} belongs to a Hetzner Cloud resource"),
                    ));
                }
                Ok(TargetRecord::Ip { ip: addr.to_string() })
            }
            "label_selector" => {
                let sel = req
                    .label_selector
                    .as_ref()
                    .ok_or_else(|| ApiError::invalid_input("label_selector", "label_selector is required"))?;
                let selector = LabelSelector::parse(&sel.selector)
                    .map_err(|e| ApiError::invalid_input("label_selector", e.to_string()))?;
                if use_private_ip && ctx.private_nets.is_empty() {
                    return Err(ApiError::new(
                        "load_balancer_not_attached_to_network",
                        "the load balancer is not attached to a network",
                    ));
                }
                Ok(TargetRecord::LabelSelector { selector, use_private_ip })
            }
            other => Err(ApiError::invalid_input("type", format!("unknown target type '{other}'"))),
        }
    }

    fn check_new_target(
        &self,
        existing: &[TargetRecord],
        target: &TargetRecord,
        lb_type: &LoadBalancerType,
    ) -> Result<(), ApiError> {
        if existing.iter().any(|t| t.same_target(target)) {
            return Err(ApiError::new("target_already_defined", "the target is already defined"));
        }
        let used: u64 = existing.iter().map(|t| self.target_weight(t)).sum();
        if used + self.target_weight(target) > lb_type.max_targets {
            return Err(ApiError::limit(format!(
                "load balancer type {} allows at most {} targets",
                lb_type.name, lb_type.max_targets
            )));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_load_balancer(
        &mut self,
        name: &str,
        lb_type: &'static LoadBalancerType,
        location: &'static Location,
        labels: Labels,
        algorithm: String,
        network: Option<(u64, Option<Ipv4Addr>)>,
        public_enabled: bool,
        services: &[ServiceRequest],
        targets: &[TargetRequest],
        protection_delete: bool,
    ) -> Result<u64, ApiError> {
        validate_name(name)?;
        if self.load_balancers.values().any(|l| l.name == name) {
            return Err(ApiError::uniqueness("name"));
        }
        validate_labels(&labels)?;
        let mut private_nets = Vec::new();
        if let Some((network, ip)) = network {
            if !self.networks.contains_key(&network) {
                return Err(ApiError::invalid_input("network", format!("network {network} not found")));
            }
            let ip = self.pick_private_ip(network, &location.network_zone, ip, None)?;
            private_nets.push((network, ip));
        }
        let mut built_services: Vec<Service> = Vec::new();
        for s in services {
            let service = self.build_service(s)?;
            Self::check_new_service(&built_services, &service, lb_type)?;
            built_services.push(service);
        }
        let ctx = TargetContext { private_nets: &private_nets, public_enabled };
        let mut built_targets: Vec<TargetRecord> = Vec::new();
        for t in targets {
            let target = self.resolve_target(t, &ctx)?;
            self.check_new_target(&built_targets, &target, lb_type)?;
            built_targets.push(target);
        }
        let ipv4 = self.public_ips.allocate_v4()?;
        let ipv6_net = self.public_ips.allocate_v6()?;
        let ipv6 = Ipv6Addr::from(u128::from(ipv6_net.network()) + 1);
        let id = super::bump(&mut self.ids.load_balancer);
        let o = ipv4.octets();
        self.load_balancers.insert(
            id,
            LoadBalancerRecord {
                id,
                name: name.to_owned(),
                lb_type,
                location,
                labels,
                created: now_unix(),
                algorithm,
                public_enabled,
                ipv4,
                ipv4_dns_ptr: format!("static.{}.{}.{}.{}.clients.your-server.de", o[3], o[2], o[1], o[0]),
                ipv6_net,
                ipv6,
                ipv6_dns_ptr: format!("static.{}.clients.your-server.de", ipv6.to_string().replace(':', "-")),
                private_net: Vec::new(),
                services: built_services,
                targets: built_targets,
                protection: Protection { delete: protection_delete },
            },
        );
        for (network, ip) in private_nets {
            self.attach_lb_nic(id, network, ip);
        }
        Ok(id)
    }

    /// `POST /load_balancers`: returns (load balancer id, action id).
    pub fn create_load_balancer(&mut self, req: &CreateLoadBalancerRequest) -> Result<(u64, u64), ApiError> {
        let cat = catalog();
        let lb_type = cat.load_balancer_type(&req.load_balancer_type).ok_or_else(|| {
            ApiError::invalid_input(
                "load_balancer_type",
                format!("unknown load balancer type '{}'", req.load_balancer_type.describe()),
            )
        })?;
        let location = match (&req.location, &req.network_zone) {
            (Some(l), _) => cat
                .location(l)
                .ok_or_else(|| ApiError::invalid_input("location", format!("unknown location '{}'", l.describe())))?,
            (None, Some(zone)) => cat
                .location_in_zone(zone)
                .ok_or_else(|| ApiError::invalid_input("network_zone", format!("unknown network zone '{zone}'")))?,
            (None, None) => {
                return Err(ApiError::invalid_input("location", "location or network_zone is required"));
            }
        };
        let algorithm = match &req.algorithm {
            Some(a) => validate_algorithm(&a.kind, "algorithm")?,
            None => "round_robin".to_owned(),
        };
        let id = self.insert_load_balancer(
            &req.name,
            lb_type,
            location,
            req.labels.clone().unwrap_or_default(),
            algorithm,
            req.network.map(|n| (n, None)),
            req.public_interface.unwrap_or(true),
            req.services.as_deref().unwrap_or_default(),
            req.targets.as_deref().unwrap_or_default(),
            false,
        )?;
        let action = self.start_action("create_load_balancer", vec![ResourceRef::load_balancer(id)], None);
        Ok((id, action))
    }

    /// Seeds a load balancer instantly.
    pub fn seed_load_balancer(&mut self, seed: &SeedLoadBalancer) -> Result<u64, ApiError> {
        let cat = catalog();
        let lb_type = cat.load_balancer_type(&IdOrName::Name(seed.load_balancer_type.clone())).ok_or_else(|| {
            ApiError::invalid_input(
                "load_balancer_type",
                format!("unknown load balancer type '{}'", seed.load_balancer_type),
            )
        })?;
        let location = cat
            .location(&IdOrName::Name(seed.location.clone()))
            .ok_or_else(|| ApiError::invalid_input("location", format!("unknown location '{}'", seed.location)))?;
        let algorithm = validate_algorithm(&seed.algorithm, "algorithm")?;
        let network = match &seed.network {
            Some(r) => {
                let id = self.resolve_network(r, "network")?;
                let ip = seed.ip.as_deref().map(|s| parse_ipv4("ip", s)).transpose()?;
                Some((id, ip))
            }
            None => None,
        };
        self.insert_load_balancer(
            &seed.name,
            lb_type,
            location,
            seed.labels.clone(),
            algorithm,
            network,
            seed.public_interface,
            &seed.services,
            &seed.targets,
            seed.protection_delete,
        )
    }

    /// `PUT /load_balancers/{id}`: name and labels (labels replace).
    pub fn update_load_balancer(&mut self, id: u64, req: &UpdateRequest) -> Result<(), ApiError> {
        self.lb_record(id)?;
        self.ensure_unlocked(ResourceKind::LoadBalancer, id)?;
        if let Some(name) = &req.name {
            validate_name(name)?;
            if self.load_balancers.values().any(|l| &l.name == name && l.id != id) {
                return Err(ApiError::uniqueness("name"));
            }
        }
        if let Some(labels) = &req.labels {
            validate_labels(labels)?;
        }
        if let Some(lb) = self.load_balancers.get_mut(&id) {
            if let Some(name) = &req.name {
                lb.name.clone_from(name);
            }
            if let Some(labels) = &req.labels {
                lb.labels.clone_from(labels);
            }
        }
        Ok(())
    }

    /// `DELETE /load_balancers/{id}`.
    pub fn delete_load_balancer(&mut self, id: u64) -> Result<(), ApiError> {
        let lb = self.lb_record(id)?;
        let protected = lb.protection.delete;
        self.ensure_unlocked(ResourceKind::LoadBalancer, id)?;
        if protected {
            return Err(ApiError::protected("load_balancer", id));
        }
        if let Some(lb) = self.load_balancers.remove(&id) {
            for (network, _) in &lb.private_net {
                if let Some(n) = self.networks.get_mut(network) {
                    n.members.retain(|_, m| *m != Member::LoadBalancer(id));
                }
            }
            self.public_ips.release_v4(lb.ipv4);
            self.public_ips.release_v6(lb.ipv6_net);
        }
        Ok(())
    }

    fn lb_for_action(&self, id: u64) -> Result<&LoadBalancerRecord, ApiError> {
        let lb = self.lb_record(id)?;
        self.ensure_unlocked(ResourceKind::LoadBalancer, id)?;
        Ok(lb)
    }

    fn lb_action(&mut self, id: u64, command: &str, effect: Effect) -> u64 {
        self.start_action(command, vec![ResourceRef::load_balancer(id)], Some(effect))
    }

    /// `add_service`.
    pub fn add_service(&mut self, id: u64, req: &ServiceRequest) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        let service = self.build_service(req)?;
        Self::check_new_service(&lb.services, &service, lb.lb_type)?;
        Ok(self.lb_action(id, "add_service", Effect::AddService { lb: id, service }))
    }

    /// `update_service`: merges the given fields into the service.
    pub fn update_service(&mut self, id: u64, req: &UpdateServiceRequest) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        let mut service = lb.services.iter().find(|s| s.listen_port == req.listen_port).cloned().ok_or_else(|| {
            ApiError::new("not_found", format!("service with listen port {} not found", req.listen_port))
        })?;
        if let Some(p) = &req.protocol {
            validate_service_protocol(p)?;
            service.protocol.clone_from(p);
        }
        if let Some(p) = req.destination_port {
            service.destination_port = nonzero_port("destination_port", p)?;
        }
        if let Some(p) = req.proxyprotocol {
            service.proxyprotocol = p;
        }
        if let Some(hc) = &req.health_check {
            merge_health_check(&mut service.health_check, hc)?;
        }
        if service.protocol == "tcp" {
            service.http = None;
        } else {
            let mut http = service.http.take().unwrap_or_else(|| default_http(None));
            if let Some(h) = &req.http {
                merge_http(&mut http, h);
            }
            self.check_certificates(&http, &service.protocol)?;
            service.http = Some(http);
        }
        Ok(self.lb_action(id, "update_service", Effect::UpdateService { lb: id, service }))
    }

    /// `delete_service`.
    pub fn delete_service(&mut self, id: u64, listen_port: u16) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        if !lb.services.iter().any(|s| s.listen_port == listen_port) {
            return Err(ApiError::new("not_found", format!("service with listen port {listen_port} not found")));
        }
        Ok(self.lb_action(id, "delete_service", Effect::DeleteService { lb: id, listen_port }))
    }

    /// `add_target`.
    pub fn add_target(&mut self, id: u64, req: &TargetRequest) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        let ctx = TargetContext { private_nets: &lb.private_net, public_enabled: lb.public_enabled };
        let target = self.resolve_target(req, &ctx)?;
        self.check_new_target(&lb.targets, &target, lb.lb_type)?;
        Ok(self.lb_action(id, "add_target", Effect::AddTarget { lb: id, target }))
    }

    /// `remove_target`.
    pub fn remove_target(&mut self, id: u64, req: &TargetRequest) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        let key = match req.kind.as_str() {
            "server" => TargetRecord::Server {
                id: req.server.map(|s| s.id).ok_or_else(|| ApiError::invalid_input("server", "server is required"))?,
                use_private_ip: false,
            },
            "ip" => {
                let ip = req.ip.as_ref().ok_or_else(|| ApiError::invalid_input("ip", "ip is required"))?;
                let addr: IpAddr = ip
                    .ip
                    .parse()
                    .map_err(|_| ApiError::invalid_input("ip", format!("'{}' is not an IP address", ip.ip)))?;
                TargetRecord::Ip { ip: addr.to_string() }
            }
            "label_selector" => {
                let sel = req
                    .label_selector
                    .as_ref()
                    .ok_or_else(|| ApiError::invalid_input("label_selector", "label_selector is required"))?;
                TargetRecord::LabelSelector {
                    selector: LabelSelector::parse(&sel.selector)
                        .map_err(|e| ApiError::invalid_input("label_selector", e.to_string()))?,
                    use_private_ip: false,
                }
            }
            other => {
                return Err(ApiError::invalid_input("type", format!("unknown target type '{other}'")));
            }
        };
        if !lb.targets.iter().any(|t| t.same_target(&key)) {
            return Err(ApiError::new("not_found", "target not found"));
        }
        Ok(self.lb_action(id, "remove_target", Effect::RemoveTarget { lb: id, target: key }))
    }

    /// `attach_to_network`: the IP is reserved now and assigned when the action finishes.
    pub fn attach_lb(&mut self, id: u64, req: &AttachLoadBalancerToNetworkRequest) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        let zone = lb.location.network_zone.clone();
        let attached = lb.private_net.iter().any(|(n, _)| *n == req.network);
        if !self.networks.contains_key(&req.network) {
            return Err(ApiError::invalid_input("network", format!("network {} not found", req.network)));
        }
        if attached {
            return Err(ApiError::new(
                "load_balancer_already_attached",
                format!("load balancer {id} is already attached to network {}", req.network),
            ));
        }
        let requested = req.ip.as_deref().map(|s| parse_ipv4("ip", s)).transpose()?;
        let ip_range = req.ip_range.as_deref().map(|s| parse_ipv4_net("ip_range", s)).transpose()?;
        let ip = self.pick_private_ip(req.network, &zone, requested, ip_range)?;
        let action_id = self.peek_action_id();
        if let Some(n) = self.networks.get_mut(&req.network) {
            n.members.insert(ip, Member::Reserved(action_id));
        }
        Ok(self.start_action(
            "attach_to_network",
            vec![ResourceRef::load_balancer(id), ResourceRef::network(req.network)],
            Some(Effect::LbAttach { lb: id, network: req.network, ip }),
        ))
    }

    /// `detach_from_network`.
    pub fn detach_lb(&mut self, id: u64, req: &DetachFromNetworkRequest) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        if !lb.private_net.iter().any(|(n, _)| *n == req.network) {
            return Err(ApiError::new(
                "load_balancer_not_attached_to_network",
                format!("load balancer {id} is not attached to network {}", req.network),
            ));
        }
        Ok(self.start_action(
            "detach_from_network",
            vec![ResourceRef::load_balancer(id), ResourceRef::network(req.network)],
            Some(Effect::LbDetach { lb: id, network: req.network }),
        ))
    }

    /// `change_type`.
    pub fn change_lb_type(&mut self, id: u64, r: &IdOrName) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        let lb_type = catalog().load_balancer_type(r).ok_or_else(|| {
            ApiError::invalid_input("load_balancer_type", format!("unknown load balancer type '{}'", r.describe()))
        })?;
        let targets: u64 = lb.targets.iter().map(|t| self.target_weight(t)).sum();
        if lb.services.len() as u64 > lb_type.max_services || targets > lb_type.max_targets {
            return Err(ApiError::new(
                "invalid_load_balancer_type",
                format!("type {} is too small for {} services and {targets} targets", lb_type.name, lb.services.len()),
            ));
        }
        Ok(self.lb_action(id, "change_load_balancer_type", Effect::LbChangeType { lb: id, lb_type }))
    }

    /// `change_algorithm`.
    pub fn change_algorithm(&mut self, id: u64, kind: &str) -> Result<u64, ApiError> {
        self.lb_for_action(id)?;
        let algorithm = validate_algorithm(kind, "type")?;
        Ok(self.lb_action(id, "change_algorithm", Effect::LbAlgorithm { lb: id, algorithm }))
    }

    /// `enable_public_interface` / `disable_public_interface`.
    pub fn set_public_interface(&mut self, id: u64, enabled: bool) -> Result<u64, ApiError> {
        self.lb_for_action(id)?;
        let command = if enabled { "enable_public_interface" } else { "disable_public_interface" };
        Ok(self.lb_action(id, command, Effect::LbPublicInterface { lb: id, enabled }))
    }

    /// `change_dns_ptr`: `ip` must be one of the load balancer's public IPs.
    pub fn change_lb_dns_ptr(&mut self, id: u64, req: &ChangeDnsPtrRequest) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        let parsed: Option<IpAddr> = req.ip.parse().ok();
        let ours = parsed == Some(IpAddr::V4(lb.ipv4)) || parsed == Some(IpAddr::V6(lb.ipv6));
        if !ours {
            return Err(ApiError::invalid_input("ip", format!("{} is not a public IP of load balancer {id}", req.ip)));
        }
        Ok(self.lb_action(
            id,
            "change_dns_ptr",
            Effect::LbDnsPtr { lb: id, ip: req.ip.clone(), dns_ptr: req.dns_ptr.clone() },
        ))
    }

    /// `change_protection`.
    pub fn change_lb_protection(&mut self, id: u64, delete: Option<bool>) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        let delete = delete.unwrap_or(lb.protection.delete);
        Ok(self.lb_action(id, "change_protection", Effect::LbProtection { lb: id, delete }))
    }

    pub(crate) fn set_lb_dns_ptr(&mut self, id: u64, ip: &str, dns_ptr: Option<String>) {
        let Some(lb) = self.load_balancers.get_mut(&id) else {
            return;
        };
        let parsed: Option<IpAddr> = ip.parse().ok();
        if parsed == Some(IpAddr::V4(lb.ipv4)) {
            let o = lb.ipv4.octets();
            lb.ipv4_dns_ptr =
                dns_ptr.unwrap_or_else(|| format!("static.{}.{}.{}.{}.clients.your-server.de", o[3], o[2], o[1], o[0]));
        } else if parsed == Some(IpAddr::V6(lb.ipv6)) {
            let v6 = lb.ipv6;
            lb.ipv6_dns_ptr = dns_ptr
                .unwrap_or_else(|| format!("static.{}.clients.your-server.de", v6.to_string().replace(':', "-")));
        }
    }

    /// Adds a private interface to a load balancer.
    pub(crate) fn attach_lb_nic(&mut self, id: u64, network: u64, ip: Ipv4Addr) {
        let Some(n) = self.networks.get_mut(&network) else {
            return;
        };
        n.members.insert(ip, Member::LoadBalancer(id));
        if let Some(lb) = self.load_balancers.get_mut(&id) {
            lb.private_net.retain(|(n, _)| *n != network);
            lb.private_net.push((network, ip));
        }
    }

    /// Removes a private interface of a load balancer.
    pub(crate) fn detach_lb_nic(&mut self, id: u64, network: u64) {
        if let Some(n) = self.networks.get_mut(&network) {
            n.members.retain(|_, m| *m != Member::LoadBalancer(id));
        }
        if let Some(lb) = self.load_balancers.get_mut(&id) {
            lb.private_net.retain(|(n, _)| *n != network);
        }
    }

    fn render_target(&self, lb: &LoadBalancerRecord, t: &TargetRecord) -> Target {
        match t {
            TargetRecord::Server { id, use_private_ip } => Target {
                kind: "server".to_owned(),
                server: Some(ResourceId { id: *id }),
                ip: None,
                label_selector: None,
                health_status: Some(health_for(self, *id, &lb.services)),
                use_private_ip: Some(*use_private_ip),
                targets: None,
            },
            TargetRecord::Ip { ip } => Target {
                kind: "ip".to_owned(),
                server: None,
                ip: Some(TargetIp { ip: ip.clone() }),
                label_selector: None,
                health_status: Some(
                    lb.services
                        .iter()
                        .map(|s| TargetHealthStatus { listen_port: s.listen_port, status: "unknown".to_owned() })
                        .collect(),
                ),
                use_private_ip: None,
                targets: None,
            },
            TargetRecord::LabelSelector { selector, use_private_ip } => Target {
                kind: "label_selector".to_owned(),
                server: None,
                ip: None,
                label_selector: Some(TargetLabelSelector { selector: selector.to_string() }),
                health_status: None,
                use_private_ip: Some(*use_private_ip),
                targets: Some(
                    self.servers
                        .values()
                        .filter(|s| selector.matches(&s.labels))
                        .map(|s| SelectedTarget {
                            kind: "server".to_owned(),
                            server: ResourceId { id: s.id },
                            health_status: health_for(self, s.id, &lb.services),
                            use_private_ip: *use_private_ip,
                        })
                        .collect(),
                ),
            },
        }
    }

    /// The load balancer as served.
    pub fn render_load_balancer(&self, lb: &LoadBalancerRecord) -> LoadBalancer {
        LoadBalancer {
            id: lb.id,
            name: lb.name.clone(),
            public_net: LoadBalancerPublicNet {
                enabled: lb.public_enabled,
                ipv4: LoadBalancerPublicIp { ip: Some(lb.ipv4.to_string()), dns_ptr: Some(lb.ipv4_dns_ptr.clone()) },
                ipv6: LoadBalancerPublicIp { ip: Some(lb.ipv6.to_string()), dns_ptr: Some(lb.ipv6_dns_ptr.clone()) },
            },
            private_net: lb
                .private_net
                .iter()
                .map(|(network, ip)| LoadBalancerPrivateNet { network: *network, ip: ip.to_string() })
                .collect(),
            location: lb.location.clone(),
            load_balancer_type: lb.lb_type.clone(),
            protection: lb.protection,
            labels: lb.labels.clone(),
            created: rfc3339(lb.created),
            services: lb.services.clone(),
            targets: lb.targets.iter().map(|t| self.render_target(lb, t)).collect(),
            algorithm: Algorithm { kind: lb.algorithm.clone() },
            outgoing_traffic: Some(0),
            ingoing_traffic: Some(0),
            included_traffic: catalog().lb_included_traffic(lb.lb_type, &lb.location.name),
        }
    }

    /// A load balancer as served.
    pub fn load_balancer(&self, id: u64) -> Option<LoadBalancer> {
        self.load_balancers.get(&id).map(|l| self.render_load_balancer(l))
    }

    /// `GET /load_balancers`.
    pub fn list_load_balancers(&self, filter: &LoadBalancerFilter, page: PageRequest) -> (Vec<LoadBalancer>, Meta) {
        let matching: Vec<&LoadBalancerRecord> = self
            .load_balancers
            .values()
            .filter(|l| filter.name.as_ref().is_none_or(|n| &l.name == n))
            .filter(|l| filter.label_selector.as_ref().is_none_or(|sel| sel.matches(&l.labels)))
            .collect();
        let (slice, meta) = page.apply(&matching);
        (slice.iter().map(|l| self.render_load_balancer(l)).collect(), meta)
    }
}
