//! Networks: create/delete, routes, private IP allocation, rendering and listing.
//!
//! Private IPs: the gateway of every subnet is the first host of the network's range (as in
//! the API). Allocation takes subnets (type `cloud` or `server`) in the resource's network
//! zone, in subnet order, and hands out the first free host skipping each subnet's network
//! address, its first host (`.1`), the gateway and the broadcast address. A requested IP is
//! honoured if it is such a free host, otherwise `ip_not_available`; with no suitable subnet
//! the answer is `no_subnet_available`.
//!
//! Routes, as the `route` schema describes them: the destination is a CIDR without host bits
//! in a private RFC 1918 range, or `0.0.0.0/0` (it need not lie inside the network's range:
//! pod CIDRs usually do not), and must not overlap a subnet, another route's destination or
//! `172.31.1.1`; the gateway must not be the first IP of the network's range, an IP behind a
//! vSwitch (in a `vswitch` subnet) or `172.31.1.1`. Nothing else is asked of the gateway: a
//! route whose gateway no server holds (a blackhole, e.g. after its server was deleted) is
//! valid, as in a real network. Violations are `invalid_input` naming `destination` or
//! `gateway`; more than 100 routes is `resource_limit_exceeded`; deleting a route that does
//! not exist is `not_found`. While a change is being performed on the network (any running
//! action that involves it), `add_route` and `delete_route` answer `409 conflict`, the
//! spec's word; a network locked by a test answers `423 locked`.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use super::effect::Effect;
use super::records::{Member, NetworkRecord, RouteRecord, SubnetRecord};
use super::store::{State, bump};
use super::validate::{parse_ipv4, parse_ipv4_net, validate_labels, validate_name};
use crate::catalog::NETWORK_ZONES;
use crate::control::{ResourceKind, ResourceRef, SeedNetwork};
use crate::error::ApiError;
use crate::label_selector::LabelSelector;
use crate::pagination::PageRequest;
use crate::time::{now_unix, rfc3339};
use crate::wire::request::{CreateNetworkRequest, SubnetRequest};
use crate::wire::{Labels, Meta, Network, Protection, Route, Subnet};

const PUBLIC_GATEWAY: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 1);

/// Filters of `GET /networks`.
#[derive(Debug, Default)]
pub(crate) struct NetworkFilter {
    pub name: Option<String>,
    pub label_selector: Option<LabelSelector>,
}

fn rfc1918(net: &Ipv4Net) -> bool {
    ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
        .iter()
        .filter_map(|s| s.parse::<Ipv4Net>().ok())
        .any(|r| r.contains(net))
}

/// The gateway of a network: the first host of its range.
pub(crate) fn gateway_of(range: &Ipv4Net) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(range.network()).saturating_add(1))
}

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(b) || b.contains(a)
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
        for s in subnets {
            if !matches!(s.kind.as_str(), "cloud" | "server" | "vswitch") {
                return Err(ApiError::invalid_input("subnets", format!("unknown subnet type '{}'", s.kind)));
            }
            if !NETWORK_ZONES.contains(&s.network_zone.as_str()) {
                return Err(ApiError::invalid_input("subnets", format!("unknown network zone '{}'", s.network_zone)));
            }
            if s.kind == "vswitch" && s.vswitch_id.is_none() {
                return Err(ApiError::invalid_input("subnets", "vswitch subnets need a vswitch_id"));
            }
            let Some(sub_range) = s.ip_range.as_deref() else {
                return Err(ApiError::invalid_input("subnets", "ip_range is required"));
            };
            let sub = parse_ipv4_net("subnets", sub_range)?;
            if !range.contains(&sub) || sub.prefix_len() > 30 {
                return Err(ApiError::invalid_input(
                    "subnets",
                    format!("subnet {sub} must be a /30 or larger inside {range}"),
                ));
            }
            if subnet_records.iter().any(|o| overlaps(&o.ip_range, &sub)) {
                return Err(ApiError::invalid_input("subnets", format!("subnet {sub} overlaps another subnet")));
            }
            subnet_records.push(SubnetRecord {
                kind: s.kind.clone(),
                ip_range: sub,
                zone: s.network_zone.clone(),
                vswitch_id: s.vswitch_id,
            });
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
            let route = validate_route(&record, r)?;
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

    /// `conflict` while any running action involves the network; `locked` if a test locked it.
    fn ensure_network_idle(&self, id: u64) -> Result<(), ApiError> {
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

    /// `add_route`: validated now, added when the action finishes.
    pub fn add_route(&mut self, id: u64, req: &Route) -> Result<u64, ApiError> {
        self.network_record(id)?;
        self.ensure_network_idle(id)?;
        let n = self.network_record(id)?;
        let route = validate_route(n, req)?;
        if n.routes.len() >= self.max_routes {
            return Err(ApiError::limit(format!("network {id} already has {} routes", self.max_routes)));
        }
        Ok(self.start_action(
            "add_route",
            vec![ResourceRef::network(id)],
            Some(Effect::AddRoute { network: id, route }),
        ))
    }

    /// `delete_route`: the exact route must exist.
    pub fn delete_route(&mut self, id: u64, req: &Route) -> Result<u64, ApiError> {
        self.network_record(id)?;
        self.ensure_network_idle(id)?;
        let n = self.network_record(id)?;
        let destination = parse_ipv4_net("destination", &req.destination)?;
        let gateway = parse_ipv4("gateway", &req.gateway)?;
        let route = RouteRecord { destination, gateway };
        if !n.routes.contains(&route) {
            return Err(ApiError::new(
                "not_found",
                format!("route {destination} via {gateway} not found in network {id}"),
            ));
        }
        Ok(self.start_action(
            "delete_route",
            vec![ResourceRef::network(id)],
            Some(Effect::DeleteRoute { network: id, route }),
        ))
    }

    /// Removes a route at once, as if someone deleted it outside the API's client under
    /// test (no action, no lock); `not_found` if the network has no route to `destination`.
    pub fn remove_route_now(&mut self, id: u64, destination: &str) -> Result<(), ApiError> {
        let destination = parse_ipv4_net("destination", destination)?;
        let n = self.networks.get_mut(&id).ok_or_else(|| ApiError::not_found("network", id))?;
        let before = n.routes.len();
        n.routes.retain(|r| r.destination != destination);
        if n.routes.len() == before {
            return Err(ApiError::new("not_found", format!("no route to {destination} in network {id}")));
        }
        Ok(())
    }

    fn candidate_subnets(&self, network: u64, zone: &str, ip_range: Option<Ipv4Net>) -> Result<Vec<Ipv4Net>, ApiError> {
        let n = self.network_record(network)?;
        let subnets: Vec<Ipv4Net> = n
            .subnets
            .iter()
            .filter(|s| s.zone == zone && s.kind != "vswitch")
            .filter(|s| ip_range.is_none_or(|r| r == s.ip_range))
            .map(|s| s.ip_range)
            .collect();
        if subnets.is_empty() {
            return Err(ApiError::new(
                "no_subnet_available",
                format!("network {network} has no subnet in network zone {zone}"),
            ));
        }
        Ok(subnets)
    }

    fn usable(n: &NetworkRecord, subnet: &Ipv4Net, ip: Ipv4Addr) -> bool {
        let x = u32::from(ip);
        let first = u32::from(subnet.network());
        let last = u32::from(subnet.broadcast());
        subnet.contains(&ip)
            && x > first.saturating_add(1)
            && x < last
            && ip != gateway_of(&n.ip_range)
            && !n.members.contains_key(&ip)
    }

    /// Checks that `ip` is free in a suitable subnet (`ip_not_available` otherwise).
    pub(crate) fn check_private_ip(
        &self,
        network: u64,
        zone: &str,
        ip: Ipv4Addr,
        ip_range: Option<Ipv4Net>,
    ) -> Result<(), ApiError> {
        let subnets = self.candidate_subnets(network, zone, ip_range)?;
        let n = self.network_record(network)?;
        if subnets.iter().any(|s| Self::usable(n, s, ip)) {
            Ok(())
        } else {
            Err(ApiError::new("ip_not_available", format!("{ip} is not available in network {network}")))
        }
    }

    /// The requested IP if free, else the next free one (see the module docs).
    pub(crate) fn pick_private_ip(
        &self,
        network: u64,
        zone: &str,
        requested: Option<Ipv4Addr>,
        ip_range: Option<Ipv4Net>,
    ) -> Result<Ipv4Addr, ApiError> {
        if let Some(ip) = requested {
            self.check_private_ip(network, zone, ip, ip_range)?;
            return Ok(ip);
        }
        let subnets = self.candidate_subnets(network, zone, ip_range)?;
        let n = self.network_record(network)?;
        for s in &subnets {
            let first = u32::from(s.network()).saturating_add(2);
            let last = u32::from(s.broadcast());
            for x in first..last {
                let ip = Ipv4Addr::from(x);
                if Self::usable(n, s, ip) {
                    return Ok(ip);
                }
            }
        }
        Err(ApiError::new("no_subnet_available", format!("no free IP left in network {network} for zone {zone}")))
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
        let matching: Vec<&NetworkRecord> = self
            .networks
            .values()
            .filter(|n| filter.name.as_ref().is_none_or(|name| &n.name == name))
            .filter(|n| filter.label_selector.as_ref().is_none_or(|sel| sel.matches(&n.labels)))
            .collect();
        let (slice, meta) = page.apply(&matching);
        (slice.iter().map(|n| self.render_network(n)).collect(), meta)
    }
}

/// Validates a route against a network (see the module docs).
fn validate_route(n: &NetworkRecord, req: &Route) -> Result<RouteRecord, ApiError> {
    let destination = parse_ipv4_net("destination", &req.destination)?;
    let default_route = destination.prefix_len() == 0;
    if !default_route && !rfc1918(&destination) {
        return Err(ApiError::invalid_input(
            "destination",
            format!("destination {destination} must be a private RFC 1918 range or 0.0.0.0/0"),
        ));
    }
    if !default_route {
        if destination.contains(&PUBLIC_GATEWAY) {
            return Err(ApiError::invalid_input(
                "destination",
                format!("destination {destination} overlaps {PUBLIC_GATEWAY}, the public network's gateway"),
            ));
        }
        if let Some(s) = n.subnets.iter().find(|s| overlaps(&s.ip_range, &destination)) {
            return Err(ApiError::invalid_input(
                "destination",
                format!("destination {destination} overlaps subnet {}", s.ip_range),
            ));
        }
    }
    if let Some(r) = n.routes.iter().find(|r| {
        r.destination == destination
            || (!default_route && r.destination.prefix_len() > 0 && overlaps(&r.destination, &destination))
    }) {
        return Err(ApiError::invalid_input(
            "destination",
            format!("destination {destination} overlaps the destination of route {} via {}", r.destination, r.gateway),
        ));
    }
    let gateway = parse_ipv4("gateway", &req.gateway)?;
    if gateway == gateway_of(&n.ip_range) || gateway == PUBLIC_GATEWAY {
        return Err(ApiError::invalid_input("gateway", format!("{gateway} cannot be used as a gateway")));
    }
    if let Some(s) = n.subnets.iter().find(|s| s.kind == "vswitch" && s.ip_range.contains(&gateway)) {
        return Err(ApiError::invalid_input(
            "gateway",
            format!("gateway {gateway} is behind a vSwitch (subnet {})", s.ip_range),
        ));
    }
    Ok(RouteRecord { destination, gateway })
}
