//! Actions: creation, lazy settling, effects applied on completion, injected failures.

use std::time::Instant;

use super::effect::{ActionRecord, Effect, render_action};
use super::records::{CertStatus, Member, PrivateNic};
use super::store::{State, bump};
use crate::control::{ActionFailure, ResourceKind, ResourceRef};
use crate::pagination::PageRequest;
use crate::sort::{SortRequest, SortValue};
use crate::time::now_unix;
use crate::wire::{Action, ActionError, ActionStatus, Meta, ServerProtection};

/// The fields `GET /{resource}/actions` sorts by.
pub(crate) const ACTION_SORT_FIELDS: &[&str] = &["id", "command", "status", "started", "finished"];

/// Filters of `GET /{resource}/actions` (`/servers/actions`, `/primary_ips/actions`).
#[derive(Debug, Default)]
pub(crate) struct ActionFilter {
    /// Only these ids (`id`, repeated), if any.
    pub ids: Vec<u64>,
    /// Only these statuses (`status`, repeated), if any.
    pub statuses: Vec<ActionStatus>,
    /// Requested order (see [`ACTION_SORT_FIELDS`]); by id without one.
    pub sort: SortRequest,
}

fn status_name(status: ActionStatus) -> &'static str {
    match status {
        ActionStatus::Running => "running",
        ActionStatus::Success => "success",
        ActionStatus::Error => "error",
    }
}

impl State {
    /// Registers `count` upcoming action failures.
    pub fn add_action_failure(&mut self, failure: ActionFailure) {
        if failure.count > 0 {
            self.action_failures.push(failure);
        }
    }

    fn take_failure(&mut self, command: &str) -> Option<ActionError> {
        let idx = self.action_failures.iter().position(|f| f.command.as_deref().is_none_or(|c| c == command))?;
        let f = &mut self.action_failures[idx];
        f.count -= 1;
        let err = ActionError {
            code: f.code.clone(),
            message: if f.message.is_empty() { format!("action {command} failed") } else { f.message.clone() },
        };
        if f.count == 0 {
            self.action_failures.remove(idx);
        }
        Some(err)
    }

    /// Starts an action on `resources` (the first one is locked while it runs).
    /// With a zero action delay it finishes before this returns.
    pub fn start_action(&mut self, command: &str, resources: Vec<ResourceRef>, effect: Option<Effect>) -> u64 {
        let fail = self.take_failure(command);
        let now = Instant::now();
        let mut record = self.new_action(command, resources, now);
        record.due = now + self.action_delay;
        record.effect = effect;
        record.fail = fail;
        let id = record.id;
        self.actions.insert(id, record);
        self.running.insert(id);
        if self.action_delay.is_zero() {
            self.finish_action(id);
        }
        id
    }

    /// Records an action that finished successfully at once: what the API shows for a change
    /// the control surface makes instantly (a Primary IP swapped) and the API makes through an
    /// action, so clients watching the action lists see it as they would.
    pub fn record_finished_action(&mut self, command: &str, resources: Vec<ResourceRef>) -> u64 {
        let now = Instant::now();
        let mut record = self.new_action(command, resources, now);
        record.status = ActionStatus::Success;
        record.finished = Some(now_unix());
        let id = record.id;
        self.actions.insert(id, record);
        self.finished_order.push_back((now, id));
        id
    }

    /// A running action on `resources` with the next id, started at `now`, due at once,
    /// without effect or injected failure (not yet recorded).
    fn new_action(&mut self, command: &str, resources: Vec<ResourceRef>, now: Instant) -> ActionRecord {
        ActionRecord {
            id: bump(&mut self.ids.action),
            command: command.to_owned(),
            status: ActionStatus::Running,
            started: now_unix(),
            started_at: now,
            finished: None,
            resources,
            error: None,
            due: now,
            effect: None,
            fail: None,
        }
    }

    /// Finishes every action that is due at `now`, in id order, then forgets finished
    /// actions older than the retention.
    pub fn settle(&mut self, now: Instant) {
        self.settled_at = Some(now);
        let due: Vec<u64> =
            self.running.iter().copied().filter(|id| self.actions.get(id).is_some_and(|a| a.due <= now)).collect();
        for id in due {
            self.finish_action(id);
        }
        self.prune_actions(now);
    }

    /// Removes finished actions whose end lies more than the retention before `now` (the
    /// API does not keep actions forever; this also bounds the fake's memory).
    fn prune_actions(&mut self, now: Instant) {
        while let Some((finished, id)) = self.finished_order.front().copied() {
            if now.saturating_duration_since(finished) < self.action_retention {
                break;
            }
            self.finished_order.pop_front();
            self.actions.remove(&id);
        }
    }

    /// Finishes every running action now.
    pub fn finish_all(&mut self) {
        let all: Vec<u64> = self.running.iter().copied().collect();
        for id in all {
            self.finish_action(id);
        }
    }

    fn finish_action(&mut self, id: u64) {
        self.running.remove(&id);
        let Some(action) = self.actions.get_mut(&id) else {
            return;
        };
        action.finished = Some(now_unix());
        self.finished_order.push_back((Instant::now(), id));
        let effect = action.effect.take();
        match action.fail.take() {
            Some(err) => {
                action.status = ActionStatus::Error;
                action.error = Some(err.clone());
                if let Some(effect) = effect {
                    self.revert_effect(id, effect, err);
                }
            }
            None => {
                action.status = ActionStatus::Success;
                if let Some(effect) = effect {
                    self.apply_effect(id, effect);
                }
            }
        }
    }

    /// Drops IPs reserved by an action.
    fn release_reserved(&mut self, network: u64, action: u64) {
        if let Some(n) = self.networks.get_mut(&network) {
            n.members.retain(|_, m| *m != Member::Reserved(action));
        }
    }

    fn revert_effect(&mut self, action: u64, effect: Effect, err: ActionError) {
        match effect {
            Effect::ServerAttach { network, .. } | Effect::LbAttach { network, .. } => {
                self.release_reserved(network, action);
            }
            Effect::ServerDelete { server, previous } => {
                if let Some(s) = self.servers.get_mut(&server) {
                    s.status = previous;
                }
            }
            Effect::IssueCertificate { certificate } => {
                if let Some(c) = self.certificates.get_mut(&certificate) {
                    c.status = Some(CertStatus {
                        issuance: "failed".to_owned(),
                        renewal: "unavailable".to_owned(),
                        error: Some(err),
                    });
                }
            }
            _ => {}
        }
    }

    fn apply_effect(&mut self, action: u64, effect: Effect) {
        match effect {
            Effect::ServerStatus { server, status } => {
                if let Some(s) = self.servers.get_mut(&server) {
                    s.status = status;
                }
            }
            Effect::ServerAttach { server, network, ip, alias_ips } => {
                self.release_reserved(network, action);
                let mac = self.next_mac();
                if self.servers.contains_key(&server) && self.networks.contains_key(&network) {
                    self.attach_server_nic(server, PrivateNic { network, ip, alias_ips, mac });
                }
            }
            Effect::ServerDetach { server, network } => self.detach_server_nic(server, network),
            Effect::ServerDelete { server, .. } => self.remove_server(server),
            Effect::AddRoute { network, route } => {
                if let Some(n) = self.networks.get_mut(&network)
                    && !n.routes.contains(&route)
                {
                    n.routes.push(route);
                }
            }
            Effect::DeleteRoute { network, route } => {
                if let Some(n) = self.networks.get_mut(&network) {
                    n.routes.retain(|r| *r != route);
                }
            }
            Effect::AddSubnet { network, subnet } => {
                if let Some(n) = self.networks.get_mut(&network) {
                    n.subnets.push(subnet);
                }
            }
            Effect::DeleteSubnet { network, ip_range } => {
                if let Some(n) = self.networks.get_mut(&network) {
                    n.subnets.retain(|s| s.ip_range != ip_range);
                }
            }
            Effect::NetworkIpRange { network, ip_range } => {
                if let Some(n) = self.networks.get_mut(&network) {
                    n.ip_range = ip_range;
                }
            }
            Effect::NetworkProtection { network, delete } => {
                if let Some(n) = self.networks.get_mut(&network) {
                    n.protection.delete = delete;
                }
            }
            Effect::ServerDnsPtr { server, ip, dns_ptr } => self.set_server_dns_ptr(server, ip, dns_ptr),
            Effect::ServerProtection { server, delete, rebuild } => {
                if let Some(s) = self.servers.get_mut(&server) {
                    s.protection = ServerProtection { delete, rebuild };
                }
            }
            Effect::AddService { lb, service } => {
                if let Some(l) = self.load_balancers.get_mut(&lb) {
                    l.services.retain(|s| s.listen_port != service.listen_port);
                    l.services.push(service);
                }
            }
            Effect::UpdateService { lb, service } => {
                if let Some(l) = self.load_balancers.get_mut(&lb) {
                    for s in &mut l.services {
                        if s.listen_port == service.listen_port {
                            *s = service.clone();
                        }
                    }
                }
            }
            Effect::DeleteService { lb, listen_port } => {
                if let Some(l) = self.load_balancers.get_mut(&lb) {
                    l.services.retain(|s| s.listen_port != listen_port);
                }
            }
            Effect::AddTarget { lb, target } => {
                if let Some(l) = self.load_balancers.get_mut(&lb)
                    && !l.targets.iter().any(|t| t.same_target(&target))
                {
                    l.targets.push(target);
                }
            }
            Effect::RemoveTarget { lb, target } => {
                if let Some(l) = self.load_balancers.get_mut(&lb) {
                    l.targets.retain(|t| !t.same_target(&target));
                }
            }
            Effect::LbAttach { lb, network, ip } => {
                self.release_reserved(network, action);
                if self.load_balancers.contains_key(&lb) {
                    self.attach_lb_nic(lb, network, ip);
                }
            }
            Effect::LbDetach { lb, network } => {
                self.detach_lb_nic(lb, network);
                self.drop_private_targets_without_network(lb);
            }
            Effect::LbDelete { lb } => self.remove_load_balancer(lb),
            Effect::LbChangeType { lb, lb_type } => {
                if let Some(l) = self.load_balancers.get_mut(&lb) {
                    l.lb_type = lb_type;
                }
            }
            Effect::LbAlgorithm { lb, algorithm } => {
                if let Some(l) = self.load_balancers.get_mut(&lb) {
                    l.algorithm = algorithm;
                }
            }
            Effect::LbPublicInterface { lb, enabled } => {
                if let Some(l) = self.load_balancers.get_mut(&lb) {
                    l.public_enabled = enabled;
                }
            }
            Effect::LbDnsPtr { lb, ip, dns_ptr } => self.set_lb_dns_ptr(lb, &ip, dns_ptr),
            Effect::LbProtection { lb, delete } => {
                if let Some(l) = self.load_balancers.get_mut(&lb) {
                    l.protection.delete = delete;
                }
            }
            Effect::IssueCertificate { certificate } => self.issue_certificate(certificate),
            Effect::AssignPrimaryIp { primary_ip, server } => self.apply_assign_primary_ip(primary_ip, server),
            Effect::UnassignPrimaryIp { primary_ip, server } => self.apply_unassign_primary_ip(primary_ip, server),
        }
    }

    /// The action as served, if it exists.
    pub fn action(&self, id: u64) -> Option<Action> {
        self.actions.get(&id).map(|a| render_action(a, self.render_time()))
    }

    /// The time actions are rendered at: the last settle's (see `settled_at`), else now.
    pub(super) fn render_time(&self) -> Instant {
        self.settled_at.unwrap_or_else(Instant::now)
    }

    /// Actions of a resource kind (optionally one resource), sorted by id.
    pub fn actions_of(&self, kind: ResourceKind, id: Option<u64>) -> Vec<Action> {
        self.actions
            .values()
            .filter(|a| a.resources.iter().any(|r| r.kind == kind && id.is_none_or(|id| r.id == id)))
            .map(|a| render_action(a, self.render_time()))
            .collect()
    }

    /// `GET /{resource}/actions`: the actions involving a resource of `kind` (those of
    /// deleted resources too, until they are pruned), filtered, sorted and paged. An action
    /// still running has no `finished`: it sorts before every finished one.
    pub fn list_kind_actions(
        &self,
        kind: ResourceKind,
        filter: &ActionFilter,
        page: PageRequest,
    ) -> (Vec<Action>, Meta) {
        let mut matching: Vec<&ActionRecord> = self
            .actions
            .values()
            .filter(|a| a.resources.iter().any(|r| r.kind == kind))
            .filter(|a| filter.ids.is_empty() || filter.ids.contains(&a.id))
            .filter(|a| filter.statuses.is_empty() || filter.statuses.contains(&a.status))
            .collect();
        filter.sort.apply(&mut matching, |a, field| match field {
            "command" => SortValue::Text(Some(a.command.as_str())),
            "status" => SortValue::Text(Some(status_name(a.status))),
            "started" => SortValue::Int(a.started),
            "finished" => SortValue::Int(a.finished.unwrap_or(i64::MIN)),
            _ => SortValue::id(a.id),
        });
        let (slice, meta) = page.apply(&matching);
        let at = self.render_time();
        (slice.iter().map(|a| render_action(a, at)).collect(), meta)
    }
}
