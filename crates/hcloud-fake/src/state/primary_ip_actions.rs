//! `POST /primary_ips/{id}/actions/assign` and `/unassign`: a Primary IP moved between a
//! server and the project's unassigned ones by an action (`assign_primary_ip`,
//! `unassign_primary_ip`) whose resources are the server and the Primary IP, so it shows on
//! `GET /servers/actions` and `GET /primary_ips/actions`, as the API's does. The change is
//! made when the action finishes.
//!
//! Checks, as the API describes them: the server must be off (`422 server_not_stopped`); a
//! Primary IP assigned to a server cannot be assigned (`422 primary_ip_already_assigned`); a
//! server has at most one of each type (`422 server_has_ipv4` / `server_has_ipv6`); a server's
//! IPv4 that is a Load Balancer target (by server, public) cannot be unassigned
//! (`422 server_is_load_balancer_target`). The fake's own choices where the API description
//! says nothing: another location than the server's, or unassigning a Primary IP that is not
//! assigned, answer `400 invalid_input`; a Primary IP or server with an action running
//! answers `locked`. Not modelled: a server left without any network interface.

use super::effect::Effect;
use super::records::{PrimaryIpAddr, PrimaryIpRecord, PublicV4, PublicV6, TargetRecord};
use super::servers::dns_ptr_v4;
use super::store::State;
use crate::control::{ResourceKind, ResourceRef};
use crate::error::ApiError;
use crate::wire::ServerStatus;
use crate::wire::request::AssignPrimaryIpRequest;

impl State {
    /// Whether an action involving the Primary IP is running.
    fn primary_ip_busy(&self, id: u64) -> bool {
        let r = ResourceRef::primary_ip(id);
        self.is_locked(ResourceKind::PrimaryIp, id)
            || self.running.iter().any(|a| self.actions.get(a).is_some_and(|a| a.resources.contains(&r)))
    }

    /// The server holding Primary IP `id`, and whether it is its IPv4.
    fn primary_ip_holder(&self, id: u64) -> Option<(u64, bool)> {
        self.servers.values().find_map(|s| {
            if s.ipv4.as_ref().is_some_and(|v| v.id == id) {
                Some((s.id, true))
            } else if s.ipv6.as_ref().is_some_and(|v| v.id == id) {
                Some((s.id, false))
            } else {
                None
            }
        })
    }

    fn ensure_stopped(&self, server: u64) -> Result<(), ApiError> {
        if self.server_record(server)?.status != ServerStatus::Off {
            return Err(ApiError::new(
                "server_not_stopped",
                format!("server {server} is running, but needs to be powered off"),
            ));
        }
        self.ensure_unlocked(ResourceKind::Server, server)
    }

    /// `POST /primary_ips/{id}/actions/assign`: the action's id.
    pub fn assign_primary_ip(&mut self, id: u64, req: &AssignPrimaryIpRequest) -> Result<u64, ApiError> {
        if req.assignee_type != "server" {
            return Err(ApiError::invalid_input(
                "assignee_type",
                format!("unknown assignee type '{}'", req.assignee_type),
            ));
        }
        if self.primary_ip_busy(id) {
            return Err(ApiError::locked("primary_ip", id));
        }
        let Some(p) = self.primary_ips.get(&id) else {
            return Err(match self.primary_ip_holder(id) {
                Some((server, _)) => ApiError::new(
                    "primary_ip_already_assigned",
                    format!("primary IP {id} is already assigned to server {server}"),
                ),
                None => ApiError::not_found("primary_ip", id),
            });
        };
        let (v4, location) = (matches!(p.addr, PrimaryIpAddr::V4(_)), p.location.name.clone());
        let server = req.assignee_id;
        let s = self.server_record(server)?;
        if v4 && s.ipv4.is_some() {
            return Err(ApiError::new("server_has_ipv4", format!("server {server} already has an IPv4 address")));
        }
        if !v4 && s.ipv6.is_some() {
            return Err(ApiError::new("server_has_ipv6", format!("server {server} already has an IPv6 address")));
        }
        if s.location.name != location {
            return Err(ApiError::invalid_input(
                "assignee_id",
                format!("primary IP {id} is in {location}, server {server} in {}", s.location.name),
            ));
        }
        self.ensure_stopped(server)?;
        let resources = vec![ResourceRef::server(server), ResourceRef::primary_ip(id)];
        Ok(self.start_action("assign_primary_ip", resources, Some(Effect::AssignPrimaryIp { primary_ip: id, server })))
    }

    /// `POST /primary_ips/{id}/actions/unassign`: the action's id.
    pub fn unassign_primary_ip(&mut self, id: u64) -> Result<u64, ApiError> {
        if self.primary_ip_busy(id) {
            return Err(ApiError::locked("primary_ip", id));
        }
        let Some((server, v4)) = self.primary_ip_holder(id) else {
            return Err(match self.primary_ips.contains_key(&id) {
                true => ApiError::invalid_input("id", format!("primary IP {id} is not assigned")),
                false => ApiError::not_found("primary_ip", id),
            });
        };
        self.ensure_stopped(server)?;
        let public_target =
            |t: &TargetRecord| matches!(t, TargetRecord::Server { id, use_private_ip: false } if *id == server);
        if v4 && self.load_balancers.values().any(|lb| lb.targets.iter().any(public_target)) {
            return Err(ApiError::new(
                "server_is_load_balancer_target",
                format!("the IPv4 address of server {server} is a load balancer target"),
            ));
        }
        let resources = vec![ResourceRef::server(server), ResourceRef::primary_ip(id)];
        let effect = Effect::UnassignPrimaryIp { primary_ip: id, server };
        Ok(self.start_action("unassign_primary_ip", resources, Some(effect)))
    }

    /// The assign action's effect: the unassigned Primary IP becomes the server's (if both
    /// are still there and the server has none of its type).
    pub(super) fn apply_assign_primary_ip(&mut self, primary_ip: u64, server: u64) {
        let Some(s) = self.servers.get(&server) else { return };
        let Some(p) = self.primary_ips.get(&primary_ip) else { return };
        let free = match p.addr {
            PrimaryIpAddr::V4(_) => s.ipv4.is_none(),
            PrimaryIpAddr::V6(_) => s.ipv6.is_none(),
        };
        if !free {
            return;
        }
        let (Some(p), Some(s)) = (self.primary_ips.remove(&primary_ip), self.servers.get_mut(&server)) else {
            return;
        };
        match p.addr {
            PrimaryIpAddr::V4(ip) => s.ipv4 = Some(PublicV4 { id: p.id, ip, dns_ptr: dns_ptr_v4(ip), meta: p.meta }),
            PrimaryIpAddr::V6(net) => {
                s.ipv6 = Some(PublicV6 { id: p.id, net, meta: p.meta, dns_ptrs: Default::default() });
            }
        }
    }

    /// The unassign action's effect: the server's Primary IP becomes an unassigned one of its
    /// location (keeping its id, address, name, labels and `auto_delete`).
    pub(super) fn apply_unassign_primary_ip(&mut self, primary_ip: u64, server: u64) {
        let Some(s) = self.servers.get_mut(&server) else { return };
        let addr = if s.ipv4.as_ref().is_some_and(|v| v.id == primary_ip) {
            s.ipv4.take().map(|v| (PrimaryIpAddr::V4(v.ip), v.meta))
        } else if s.ipv6.as_ref().is_some_and(|v| v.id == primary_ip) {
            s.ipv6.take().map(|v| (PrimaryIpAddr::V6(v.net), v.meta))
        } else {
            None
        };
        if let Some((addr, meta)) = addr {
            let record =
                PrimaryIpRecord { id: primary_ip, addr, location: s.location.clone(), created: s.created, meta };
            self.primary_ips.insert(primary_ip, record);
        }
    }
}
