//! Servers in networks: attach/detach actions, instant IP moves, private interfaces.

use crate::control::{ResourceKind, ResourceRef};
use crate::error::ApiError;
use crate::state::effect::Effect;
use crate::state::records::{Member, PrivateNic};
use crate::state::store::State;
use crate::state::validate::{parse_ipv4, parse_ipv4_net};
use crate::wire::request::{AttachServerToNetworkRequest, DetachFromNetworkRequest};

impl State {
    /// `attach_to_network`: IPs are reserved now and assigned when the action finishes.
    pub fn attach_server(&mut self, id: u64, req: &AttachServerToNetworkRequest) -> Result<u64, ApiError> {
        let server = self.server_record(id)?;
        let zone = server.location.network_zone.clone();
        let attached = server.private_net.iter().any(|n| n.network == req.network);
        self.ensure_unlocked(ResourceKind::Server, id)?;
        if !self.networks.contains_key(&req.network) {
            return Err(ApiError::invalid_input("network", format!("network {} not found", req.network)));
        }
        if attached {
            return Err(ApiError::new(
                "server_already_attached",
                format!("server {id} is already attached to network {}", req.network),
            ));
        }
        let requested = req.ip.as_deref().map(|s| parse_ipv4("ip", s)).transpose()?;
        let ip_range = req.ip_range.as_deref().map(|s| parse_ipv4_net("ip_range", s)).transpose()?;
        let aliases =
            req.alias_ips.iter().flatten().map(|s| parse_ipv4("alias_ips", s)).collect::<Result<Vec<_>, _>>()?;
        let ip = self.pick_private_ip(req.network, &zone, requested, ip_range)?;
        for alias in &aliases {
            if *alias == ip {
                return Err(ApiError::new("ip_not_available", format!("{alias} is the primary IP")));
            }
            self.check_private_ip(req.network, &zone, *alias, ip_range)?;
        }
        let action_id = self.peek_action_id();
        if let Some(n) = self.networks.get_mut(&req.network) {
            n.members.insert(ip, Member::Reserved(action_id));
            for alias in &aliases {
                n.members.insert(*alias, Member::Reserved(action_id));
            }
        }
        Ok(self.start_action(
            "attach_to_network",
            vec![ResourceRef::server(id), ResourceRef::network(req.network)],
            Some(Effect::ServerAttach { server: id, network: req.network, ip, alias_ips: aliases }),
        ))
    }

    /// `detach_from_network`.
    pub fn detach_server(&mut self, id: u64, req: &DetachFromNetworkRequest) -> Result<u64, ApiError> {
        let server = self.server_record(id)?;
        let attached = server.private_net.iter().any(|n| n.network == req.network);
        self.ensure_unlocked(ResourceKind::Server, id)?;
        if !self.networks.contains_key(&req.network) {
            return Err(ApiError::invalid_input("network", format!("network {} not found", req.network)));
        }
        if !attached {
            return Err(ApiError::new(
                "server_not_attached_to_network",
                format!("server {id} is not attached to network {}", req.network),
            ));
        }
        Ok(self.start_action(
            "detach_from_network",
            vec![ResourceRef::server(id), ResourceRef::network(req.network)],
            Some(Effect::ServerDetach { server: id, network: req.network }),
        ))
    }

    /// Moves a server's private IP in a network to `ip` at once (what a detach and an attach
    /// with another IP do, without actions): `server_not_attached_to_network` if it is not
    /// attached, `ip_not_available` if `ip` is taken or outside the server's subnets.
    pub fn move_private_ip(&mut self, id: u64, network: u64, ip: &str) -> Result<(), ApiError> {
        let server = self.server_record(id)?;
        let zone = server.location.network_zone.clone();
        let Some(nic) = server.private_net.iter().find(|n| n.network == network).cloned() else {
            return Err(ApiError::new(
                "server_not_attached_to_network",
                format!("server {id} is not attached to network {network}"),
            ));
        };
        let ip = parse_ipv4("ip", ip)?;
        self.check_private_ip(network, &zone, ip, None)?;
        self.detach_server_nic(id, network);
        self.attach_server_nic(id, PrivateNic { ip, ..nic });
        Ok(())
    }

    /// Adds a private interface and registers its IPs in the network.
    pub(crate) fn attach_server_nic(&mut self, server: u64, nic: PrivateNic) {
        if let Some(n) = self.networks.get_mut(&nic.network) {
            n.members.insert(nic.ip, Member::Server(server));
            for a in &nic.alias_ips {
                n.members.insert(*a, Member::Alias(server));
            }
        }
        if let Some(s) = self.servers.get_mut(&server) {
            s.private_net.retain(|p| p.network != nic.network);
            s.private_net.push(nic);
        }
    }

    /// Removes a private interface.
    pub(crate) fn detach_server_nic(&mut self, server: u64, network: u64) {
        if let Some(n) = self.networks.get_mut(&network) {
            n.members.retain(|_, m| *m != Member::Server(server) && *m != Member::Alias(server));
        }
        if let Some(s) = self.servers.get_mut(&server) {
            s.private_net.retain(|p| p.network != network);
        }
    }
}
