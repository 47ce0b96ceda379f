//! Load balancer lifecycle: create (with services, targets and network in one request),
//! seed, update, delete, and the lookups every load balancer action starts with.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::settings::validate_algorithm;
use super::targets::TargetContext;
use crate::catalog::catalog;
use crate::control::{ResourceKind, ResourceRef, SeedLoadBalancer};
use crate::error::ApiError;
use crate::state::effect::Effect;
use crate::state::records::{LoadBalancerRecord, Member, TargetRecord};
use crate::state::store::{State, bump};
use crate::state::validate::{parse_ipv4, validate_labels, validate_name};
use crate::time::now_unix;
use crate::wire::request::{CreateLoadBalancerRequest, IdOrName, ServiceRequest, TargetRequest, UpdateRequest};
use crate::wire::{Labels, LoadBalancerType, Location, Protection, Service};
impl State {
    /// The load balancer record or `not_found`.
    pub fn lb_record(&self, id: u64) -> Result<&LoadBalancerRecord, ApiError> {
        self.load_balancers.get(&id).ok_or_else(|| ApiError::not_found("load_balancer", id))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert_load_balancer(
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
        let ipv4 = match &mut self.lb_address_pool {
            Some(pool) => {
                let ip = pool.allocate(|ip| self.public_ips.is_used_v4(ip))?;
                self.public_ips.reserve_v4(ip)?;
                ip
            }
            None => self.public_ips.allocate_v4()?,
        };
        let ipv6_net = self.public_ips.allocate_v6()?;
        let ipv6 = Ipv6Addr::from(u128::from(ipv6_net.network()) + 1);
        let id = bump(&mut self.ids.load_balancer);
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
        let lb_type = self.orderable_lb_type(&req.load_balancer_type)?;
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

    /// `DELETE /load_balancers/{id}`: an action (`delete_load_balancer`) that removes the
    /// load balancer when it finishes; meanwhile it is locked, as the API answers today
    /// (`200` with the action; it answered `204` before).
    pub fn delete_load_balancer(&mut self, id: u64) -> Result<u64, ApiError> {
        let lb = self.lb_record(id)?;
        let protected = lb.protection.delete;
        self.ensure_unlocked(ResourceKind::LoadBalancer, id)?;
        if protected {
            return Err(ApiError::protected("load_balancer", id));
        }
        Ok(self.lb_action(id, "delete_load_balancer", Effect::LbDelete { lb: id }))
    }

    /// Removes a load balancer with its private IPs, public IPs and health overrides.
    pub(crate) fn remove_load_balancer(&mut self, id: u64) {
        let Some(lb) = self.load_balancers.remove(&id) else {
            return;
        };
        for (network, _) in &lb.private_net {
            if let Some(n) = self.networks.get_mut(network) {
                n.members.retain(|_, m| *m != Member::LoadBalancer(id));
            }
        }
        match &mut self.lb_address_pool {
            Some(pool) if pool.contains(lb.ipv4) => {
                self.public_ips.unreserve_v4(lb.ipv4);
                pool.release(lb.ipv4);
            }
            _ => self.public_ips.release_v4(lb.ipv4),
        }
        self.public_ips.release_v6(lb.ipv6_net);
        self.target_health.retain(|(lb_id, _, _), _| *lb_id != id);
    }

    pub(super) fn lb_for_action(&self, id: u64) -> Result<&LoadBalancerRecord, ApiError> {
        let lb = self.lb_record(id)?;
        self.ensure_unlocked(ResourceKind::LoadBalancer, id)?;
        Ok(lb)
    }

    pub(super) fn lb_action(&mut self, id: u64, command: &str, effect: Effect) -> u64 {
        self.start_action(command, vec![ResourceRef::load_balancer(id)], Some(effect))
    }
}
