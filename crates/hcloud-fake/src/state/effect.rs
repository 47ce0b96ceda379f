//! Actions as recorded: the effect an action applies when it finishes, and the served shape.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use ipnet::Ipv4Net;

use super::records::{RouteRecord, SubnetRecord, TargetRecord};
use crate::control::ResourceRef;
use crate::time::rfc3339;
use crate::wire::{Action, ActionError, ActionStatus, LoadBalancerType, Resource, ServerStatus, Service};

/// The state change an action makes when it finishes successfully.
#[derive(Debug, Clone)]
pub(crate) enum Effect {
    /// Set a server's status (create, power on/off, shutdown).
    ServerStatus { server: u64, status: ServerStatus },
    /// Attach a server to a network with reserved IPs.
    ServerAttach { server: u64, network: u64, ip: Ipv4Addr, alias_ips: Vec<Ipv4Addr> },
    /// Detach a server from a network.
    ServerDetach { server: u64, network: u64 },
    /// Delete a server (its status is `deleting` meanwhile).
    ServerDelete { server: u64, previous: ServerStatus },
    /// Add a route.
    AddRoute { network: u64, route: RouteRecord },
    /// Delete a route.
    DeleteRoute { network: u64, route: RouteRecord },
    /// Add a subnet.
    AddSubnet { network: u64, subnet: SubnetRecord },
    /// Delete the subnet with this range.
    DeleteSubnet { network: u64, ip_range: Ipv4Net },
    /// Extend a network's range.
    NetworkIpRange { network: u64, ip_range: Ipv4Net },
    /// Change a network's delete protection.
    NetworkProtection { network: u64, delete: bool },
    /// Change (`None`: reset) a reverse DNS entry of a server's public IP.
    ServerDnsPtr { server: u64, ip: IpAddr, dns_ptr: Option<String> },
    /// Change a server's delete and rebuild protection.
    ServerProtection { server: u64, delete: bool, rebuild: bool },
    /// Add a service.
    AddService { lb: u64, service: Service },
    /// Replace a service (same listen port).
    UpdateService { lb: u64, service: Service },
    /// Delete a service.
    DeleteService { lb: u64, listen_port: u16 },
    /// Add a target.
    AddTarget { lb: u64, target: TargetRecord },
    /// Remove the target at a key.
    RemoveTarget { lb: u64, target: TargetRecord },
    /// Attach a load balancer to a network with a reserved IP.
    LbAttach { lb: u64, network: u64, ip: Ipv4Addr },
    /// Detach a load balancer from a network (targets that used it go too).
    LbDetach { lb: u64, network: u64 },
    /// Delete a load balancer.
    LbDelete { lb: u64 },
    /// Change the type.
    LbChangeType { lb: u64, lb_type: &'static LoadBalancerType },
    /// Change the algorithm.
    LbAlgorithm { lb: u64, algorithm: String },
    /// Enable/disable the public interface.
    LbPublicInterface { lb: u64, enabled: bool },
    /// Change a reverse DNS entry (`None` resets it).
    LbDnsPtr { lb: u64, ip: String, dns_ptr: Option<String> },
    /// Change delete protection.
    LbProtection { lb: u64, delete: bool },
    /// Issue a managed certificate.
    IssueCertificate { certificate: u64 },
    /// Assign an unassigned Primary IP to a server.
    AssignPrimaryIp { primary_ip: u64, server: u64 },
    /// Unassign a server's Primary IP (it stays, unassigned).
    UnassignPrimaryIp { primary_ip: u64, server: u64 },
}

/// The action as served at `at`.
pub(crate) fn render_action(a: &ActionRecord, at: Instant) -> Action {
    Action {
        id: a.id,
        command: a.command.clone(),
        status: a.status,
        progress: a.progress(at),
        started: rfc3339(a.started),
        finished: a.finished.map(rfc3339),
        resources: a.resources.iter().map(|r| Resource { id: r.id, kind: r.kind.as_str().to_owned() }).collect(),
        error: a.error.clone(),
    }
}

/// An action.
#[derive(Debug, Clone)]
pub(crate) struct ActionRecord {
    pub id: u64,
    pub command: String,
    pub status: ActionStatus,
    pub started: i64,
    pub started_at: Instant,
    pub finished: Option<i64>,
    pub resources: Vec<ResourceRef>,
    pub error: Option<ActionError>,
    pub due: Instant,
    pub effect: Option<Effect>,
    pub fail: Option<ActionError>,
}

impl ActionRecord {
    /// Progress in percent: 100 when finished; while running, the share of its delay that
    /// has passed (at most 99), so it grows over time like the API's.
    pub fn progress(&self, now: Instant) -> u8 {
        if self.status != ActionStatus::Running {
            return 100;
        }
        let total = self.due.saturating_duration_since(self.started_at).as_secs_f64();
        let done = now.saturating_duration_since(self.started_at).as_secs_f64();
        if total <= 0.0 {
            return 99;
        }
        // The ratio is clamped to 0..=99 before the cast.
        (done / total * 100.0).clamp(0.0, 99.0) as u8
    }
}
