//! Networks: create/update/delete, rendering and listing; [`routes`], [`subnets`] (with the IP
//! range and protection) and [`private_ips`] (allocation of servers' and load balancers' IPs)
//! hold the rest, [`ranges`] the address helpers they share. While a change is being performed
//! on a network (any running action that involves it), its actions answer `409 conflict`, the
//! spec's word; a network locked by a test answers `423 locked`.

mod private_ips;
mod ranges;
mod routes;
mod subnets;

use self::ranges::{gateway_of, rfc1918};
use super::records::{Member, NetworkRecord, SubnetRecord};
use super::store::{State, bump, sort_records};
use super::validate::{parse_ipv4_net, validate_labels, validate_name};
use crate::control::{ResourceKind, ResourceRef, SeedNetwork};
use crate::error::ApiError;
use crate::label_selector::LabelSelector;
use crate::pagination::PageRequest;
use crate::sort::SortRequest;
use crate::time::{now_unix, rfc3339};
use crate::wire::request::{CreateNetworkRequest, SubnetRequest, UpdateNetworkRequest};
use crate::wire::{Labels, Meta, Network, Protection, Route, Subnet};

/// Filters of `GET /networks`.
#[derive(Debug, Default)]
pub(crate) struct NetworkFilter {
    pub name: Option<String>,
    pub label_selector: Option<LabelSelector>,
    /// Requested order (`id`, `name`, `created`).
    pub sort: SortRequest,
}

impl State {
    /// The network record or `not_found`.
    pub fn network_record(&self, id: u64) -> Result<&NetworkRecord, ApiError> {
        self.networks.get(&id).ok_or_else(|| ApiError::not_found("network", id))
    }

    /// `POST /networks`.
    pub fn create_network(&mut self, req: &CreateNetworkRequest) -> Result<u64, ApiError> {
        self.insert_network(
            &req.name,
            &req.ip_range,
            req.subnets.as_deref().unwrap_or_default(),
            req.routes.as_deref().unwrap_or_default(),
            req.labels.clone().unwrap_or_default(),
            false,
            req.expose_routes_to_vswitch.unwrap_or(false),
        )
    }

    /// Seeds a network.
    pub fn seed_network(&mut self, seed: &SeedNetwork) -> Result<u64, ApiError> {
        let subnets: Vec<SubnetRequest> = seed
            .subnets
            .iter()
            .map(|s| SubnetRequest {
                kind: s.kind.clone(),
                ip_range: Some(s.ip_range.clone()),
                network_zone: s.network_zone.clone(),
                vswitch_id: None,
            })
            .collect();
        self.insert_network(
            &seed.name,
            &seed.ip_range,
            &subnets,
            &seed.routes,
            seed.labels.clone(),
            seed.protection_delete,
            false,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_network(
        &mut self,
        name: &str,
        ip_range: &str,
        subnets: &[SubnetRequest],
        routes: &[Route],
        labels: Labels,
        protection_delete: bool,
        expose_routes_to_vswitch: bool,
    ) -> Result<u64, ApiError> {
        validate_name(name)?;
        if self.networks.values().any(|n| n.name == name) {
            return Err(ApiError::uniqueness("name"));
        }
        let range = parse_ipv4_net("ip_range", ip_range)?;
        if !rfc1918(&range) || range.prefix_len() > 24 {
            return Err(ApiError::invalid_input("ip_range", "must be a private RFC 1918 range of at least /24"));
        }
        validate_labels(&labels)?;
        let mut subnet_records: Vec<SubnetRecord> = Vec::new();
        for req in subnets {
            let subnet = subnets::new_subnet(range, &subnet_records, &[], req, Some("subnets"))?;
            subnet_records.push(subnet);
        }
        let mut record = NetworkRecord {
            id: 0,
            name: name.to_owned(),
            ip_range: range,
            subnets: subnet_records,
            routes: Vec::new(),
            labels,
            protection: Protection { delete: protection_delete },
            created: now_unix(),
            expose_routes_to_vswitch,
            members: Default::default(),
        };
        let max_routes = self.max_routes;
        if routes.len() > max_routes {
            return Err(ApiError::limit(format!("a network can have at most {max_routes} routes")));
        }
        for r in routes {
            let route = routes::validate_route(&record, r)?;
            record.routes.push(route);
        }
        let id = bump(&mut self.ids.network);
        record.id = id;
        self.networks.insert(id, record);
        Ok(id)
    }

    /// `DELETE /networks/{id}`: attached servers and load balancers are detached.
    pub fn delete_network(&mut self, id: u64) -> Result<(), ApiError> {
        let n = self.network_record(id)?;
        let protected = n.protection.delete;
        self.ensure_unlocked(ResourceKind::Network, id)?;
        if protected {
            return Err(ApiError::protected("network", id));
        }
        self.networks.remove(&id);
        for s in self.servers.values_mut() {
            s.private_net.retain(|p| p.network != id);
        }
        for lb in self.load_balancers.values_mut() {
            lb.private_net.retain(|(n, _)| *n != id);
        }
        Ok(())
    }

    /// `PUT /networks/{id}`: name, labels (they replace) and `expose_routes_to_vswitch`.
    pub fn update_network(&mut self, id: u64, req: &UpdateNetworkRequest) -> Result<(), ApiError> {
        self.network_record(id)?;
        self.ensure_unlocked(ResourceKind::Network, id)?;
        if let Some(name) = &req.name {
            validate_name(name)?;
            if self.networks.values().any(|n| &n.name == name && n.id != id) {
                return Err(ApiError::uniqueness("name"));
            }
        }
        if let Some(labels) = &req.labels {
            validate_labels(labels)?;
        }
        if let Some(n) = self.networks.get_mut(&id) {
            if let Some(name) = &req.name {
                n.name.clone_from(name);
            }
            if let Some(labels) = &req.labels {
                n.labels.clone_from(labels);
            }
            if let Some(expose) = req.expose_routes_to_vswitch {
                n.expose_routes_to_vswitch = expose;
            }
        }
        Ok(())
    }

    /// `conflict` while any running action involves the network; `locked` if a test locked it.
    pub(super) fn ensure_network_idle(&self, id: u64) -> Result<(), ApiError> {
        if self.is_manually_locked(ResourceRef::network(id)) {
            return Err(ApiError::locked("network", id));
        }
        let busy = self
            .running
            .iter()
            .filter_map(|a| self.actions.get(a))
            .find(|a| a.resources.iter().any(|r| r.kind == ResourceKind::Network && r.id == id));
        match busy {
            Some(a) => Err(ApiError::new(
                "conflict",
                format!("a change is being performed on network {id} (action {} {})", a.id, a.command),
            )),
            None => Ok(()),
        }
    }

    /// The network as served.
    pub fn render_network(&self, n: &NetworkRecord) -> Network {
        let gateway = gateway_of(&n.ip_range).to_string();
        let mut servers: Vec<u64> = n
            .members
            .values()
            .filter_map(|m| match m {
                Member::Server(id) => Some(*id),
                _ => None,
            })
            .collect();
        servers.sort_unstable();
        servers.dedup();
        let mut load_balancers: Vec<u64> = n
            .members
            .values()
            .filter_map(|m| match m {
                Member::LoadBalancer(id) => Some(*id),
                _ => None,
            })
            .collect();
        load_balancers.sort_unstable();
        load_balancers.dedup();
        Network {
            id: n.id,
            name: n.name.clone(),
            ip_range: n.ip_range.to_string(),
            subnets: n
                .subnets
                .iter()
                .map(|s| Subnet {
                    kind: s.kind.clone(),
                    ip_range: s.ip_range.to_string(),
                    network_zone: s.zone.clone(),
                    gateway: gateway.clone(),
                    vswitch_id: s.vswitch_id,
                })
                .collect(),
            routes: n
                .routes
                .iter()
                .map(|r| Route { destination: r.destination.to_string(), gateway: r.gateway.to_string() })
                .collect(),
            servers,
            load_balancers,
            protection: n.protection,
            labels: n.labels.clone(),
            created: rfc3339(n.created),
            expose_routes_to_vswitch: n.expose_routes_to_vswitch,
        }
    }

    /// A network as served.
    pub fn network(&self, id: u64) -> Option<Network> {
        self.networks.get(&id).map(|n| self.render_network(n))
    }

    /// `GET /networks`.
    pub fn list_networks(&self, filter: &NetworkFilter, page: PageRequest) -> (Vec<Network>, Meta) {
        let mut matching: Vec<&NetworkRecord> = self
            .networks
            .values()
            .filter(|n| filter.name.as_ref().is_none_or(|name| &n.name == name))
            .filter(|n| filter.label_selector.as_ref().is_none_or(|sel| sel.matches(&n.labels)))
            .collect();
        sort_records(&filter.sort, &mut matching, |n| (n.id, &n.name, n.created));
        let (slice, meta) = page.apply(&matching);
        (slice.iter().map(|n| self.render_network(n)).collect(), meta)
    }
}
