//! Load balancer targets: validation, weights against the type's limit, health,
//! `add_target`, `remove_target`.

use std::net::{IpAddr, Ipv4Addr};

use sync_lock::Unpoison as _;

use crate::control::TargetHealthOverride;
use crate::data_plane::health::Health;
use crate::error::ApiError;
use crate::label_selector::LabelSelector;
use crate::state::effect::Effect;
use crate::state::records::{HealthKey, TargetRecord};
use crate::state::store::State;
use crate::wire::request::TargetRequest;
use crate::wire::{LoadBalancerType, ServerStatus, Service, TargetHealthStatus};
/// What target validation needs to know about the load balancer.
pub(super) struct TargetContext<'a> {
    pub(super) private_nets: &'a [(u64, Ipv4Addr)],
    pub(super) public_enabled: bool,
}

/// Health per service (see [`State::target_status`]).
pub(super) fn health_for(state: &State, lb: u64, target: &HealthKey, services: &[Service]) -> Vec<TargetHealthStatus> {
    services
        .iter()
        .map(|s| TargetHealthStatus {
            listen_port: s.listen_port,
            status: state.target_status(lb, s.listen_port, target).to_owned(),
        })
        .collect()
}

/// Valid target health states.
pub(crate) const HEALTH_STATES: [&str; 3] = ["healthy", "unhealthy", "unknown"];

impl State {
    /// The health a load balancer reports for a target on the service listening on
    /// `listen_port`: what a test set for the target (for that port, else for all ports);
    /// else, with the data plane on, what its health checks found (`unknown` before the first
    /// completes); else `healthy` for a running server, `unhealthy` for a server that is not
    /// running (its checks would fail), `unknown` for an IP target (nothing checks it).
    pub(crate) fn target_status(&self, lb: u64, listen_port: u16, target: &HealthKey) -> &str {
        let set = self
            .target_health
            .get(&(lb, target.clone(), Some(listen_port)))
            .or_else(|| self.target_health.get(&(lb, target.clone(), None)));
        if let Some(status) = set {
            return status;
        }
        if let Some(board) = &self.health_board {
            return board.lock_unpoisoned().health(lb, listen_port, target).map_or("unknown", Health::as_str);
        }
        match target {
            HealthKey::Server(id) if self.servers.get(id).is_some_and(|s| s.status == ServerStatus::Running) => {
                "healthy"
            }
            HealthKey::Server(_) => "unhealthy",
            HealthKey::Ip(_) => "unknown",
        }
    }

    /// Sets or clears the health a load balancer reports for a target (see
    /// [`TargetHealthOverride`]).
    pub fn set_target_health(&mut self, lb: u64, o: &TargetHealthOverride) -> Result<(), ApiError> {
        self.lb_record(lb)?;
        let key = match (o.server, &o.ip) {
            (Some(id), None) => HealthKey::Server(id),
            (None, Some(ip)) => HealthKey::Ip(
                ip.parse::<IpAddr>()
                    .map_err(|_| ApiError::invalid_input("ip", format!("'{ip}' is not an IP address")))?
                    .to_string(),
            ),
            _ => return Err(ApiError::invalid_input("server", "give exactly one of server and ip")),
        };
        match &o.status {
            Some(status) if !HEALTH_STATES.contains(&status.as_str()) => {
                Err(ApiError::invalid_input("status", format!("'{status}' is not one of {HEALTH_STATES:?}")))
            }
            Some(status) => {
                self.target_health.insert((lb, key, o.listen_port), status.clone());
                Ok(())
            }
            None => {
                self.target_health.remove(&(lb, key, o.listen_port));
                Ok(())
            }
        }
    }

    /// How many targets a target counts as.
    pub(super) fn target_weight(&self, t: &TargetRecord) -> u64 {
        match t {
            TargetRecord::LabelSelector { selector, .. } => {
                (self.servers.values().filter(|s| selector.matches(&s.labels)).count() as u64).max(1)
            }
            _ => 1,
        }
    }

    /// A target from a request, validated against the load balancer's situation.
    pub(super) fn resolve_target(
        &self,
        req: &TargetRequest,
        ctx: &TargetContext<'_>,
    ) -> Result<TargetRecord, ApiError> {
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

    pub(super) fn check_new_target(
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
}
