//! Load balancer settings: type, algorithm, public interface, reverse DNS, protection.

use std::net::IpAddr;

use crate::error::ApiError;
use crate::state::effect::Effect;
use crate::state::records::TargetRecord;
use crate::state::store::State;
use crate::wire::request::{ChangeDnsPtrRequest, IdOrName};
pub(super) fn validate_algorithm(kind: &str, field: &str) -> Result<String, ApiError> {
    match kind {
        "round_robin" | "least_connections" => Ok(kind.to_owned()),
        other => Err(ApiError::invalid_input(field, format!("unknown algorithm '{other}'"))),
    }
}

impl State {
    /// `change_type`.
    pub fn change_lb_type(&mut self, id: u64, r: &IdOrName) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        let lb_type = self.orderable_lb_type(r)?;
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
    /// Disabling needs a private network and no target that uses a public IP
    /// (`load_balancer_not_attached_to_network`, `targets_without_use_private_ip`).
    pub fn set_public_interface(&mut self, id: u64, enabled: bool) -> Result<u64, ApiError> {
        let lb = self.lb_for_action(id)?;
        if !enabled {
            if lb.private_net.is_empty() {
                return Err(ApiError::new(
                    "load_balancer_not_attached_to_network",
                    format!("load balancer {id} is not attached to a network; it needs its public interface"),
                ));
            }
            let public = lb.targets.iter().any(|t| match t {
                TargetRecord::Server { use_private_ip, .. } | TargetRecord::LabelSelector { use_private_ip, .. } => {
                    !use_private_ip
                }
                TargetRecord::Ip { .. } => false,
            });
            if public {
                return Err(ApiError::new(
                    "targets_without_use_private_ip",
                    format!("load balancer {id} has targets that use their public IP"),
                ));
            }
        }
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
}
