//! Load balancer networks: `attach_to_network`, `detach_from_network` and the private
//! interfaces they add and remove.

use std::net::Ipv4Addr;

use crate::control::ResourceRef;
use crate::error::ApiError;
use crate::state::effect::Effect;
use crate::state::records::{Member, TargetRecord};
use crate::state::store::State;
use crate::state::validate::{parse_ipv4, parse_ipv4_net};
use crate::wire::request::{AttachLoadBalancerToNetworkRequest, DetachFromNetworkRequest};
impl State {
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

    /// After the last network is gone, targets that used a private IP cannot stay.
    pub(crate) fn drop_private_targets_without_network(&mut self, id: u64) {
        if let Some(lb) = self.load_balancers.get_mut(&id)
            && lb.private_net.is_empty()
        {
            lb.targets.retain(|t| match t {
                TargetRecord::Server { use_private_ip, .. } | TargetRecord::LabelSelector { use_private_ip, .. } => {
                    !use_private_ip
                }
                TargetRecord::Ip { .. } => true,
            });
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
}
