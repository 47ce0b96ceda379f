//! Load balancer services: API defaults, validation, `add_service`, `update_service`,
//! `delete_service`.

use crate::error::ApiError;
use crate::state::effect::Effect;
use crate::state::store::State;
use crate::wire::request::{
    HealthCheckHttpRequest, HealthCheckRequest, ServiceHttpRequest, ServiceRequest, UpdateServiceRequest,
};
use crate::wire::{HealthCheck, HealthCheckHttp, LoadBalancerType, Service, ServiceHttp};
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

/// Idle timeout of http/https services when none is given, in seconds. Since 2026-04-30
/// every HTTP service carries `timeout_idle`; the value is the fake's choice.
pub(crate) const DEFAULT_TIMEOUT_IDLE: u64 = 60;

fn default_http(req: Option<&ServiceHttpRequest>) -> ServiceHttp {
    let mut http = ServiceHttp {
        cookie_name: "HCLBSTICKY".to_owned(),
        cookie_lifetime: 300,
        certificates: Vec::new(),
        redirect_http: false,
        sticky_sessions: false,
        timeout_idle: Some(DEFAULT_TIMEOUT_IDLE),
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
    // The API takes `https` health checks and stores them as `http` with `tls: true`.
    let mut force_tls = false;
    if let Some(p) = &r.protocol {
        match p.as_str() {
            "tcp" | "http" => hc.protocol.clone_from(p),
            "https" => {
                hc.protocol = "http".to_owned();
                force_tls = true;
            }
            _ => {
                return Err(ApiError::invalid_input(
                    "health_check.protocol",
                    format!("unknown health check protocol '{p}'"),
                ));
            }
        }
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
        if force_tls {
            h.tls = true;
        }
        hc.http = Some(h);
    } else {
        hc.http = None;
    }
    Ok(())
}

/// `resource_limit_exceeded` when the services together use more certificates than the
/// type allows.
fn check_certificate_limit<'a>(
    services: impl Iterator<Item = &'a Service>,
    lb_type: &LoadBalancerType,
) -> Result<(), ApiError> {
    let certs: usize = services.filter_map(|s| s.http.as_ref()).map(|h| h.certificates.len()).sum();
    if certs as u64 > lb_type.max_assigned_certificates {
        return Err(ApiError::limit(format!(
            "load balancer type {} allows at most {} certificates, {certs} requested",
            lb_type.name, lb_type.max_assigned_certificates
        )));
    }
    Ok(())
}

impl State {
    pub(super) fn check_certificates(&self, http: &ServiceHttp, protocol: &str) -> Result<(), ApiError> {
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
    pub(super) fn build_service(&self, req: &ServiceRequest) -> Result<Service, ApiError> {
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
    pub(super) fn check_new_service(
        existing: &[Service],
        service: &Service,
        lb_type: &LoadBalancerType,
    ) -> Result<(), ApiError> {
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
        check_certificate_limit(existing.iter().chain(std::iter::once(service)), lb_type)
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
        let others = lb.services.iter().filter(|s| s.listen_port != service.listen_port);
        check_certificate_limit(others.chain(std::iter::once(&service)), lb.lb_type)?;
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
}
