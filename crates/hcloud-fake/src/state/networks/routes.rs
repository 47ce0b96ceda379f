//! Routes of a network.
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

use super::ranges::{gateway_of, overlaps, rfc1918};
use crate::control::ResourceRef;
use crate::error::ApiError;
use crate::state::effect::Effect;
use crate::state::records::{NetworkRecord, RouteRecord};
use crate::state::store::State;
use crate::state::validate::{parse_ipv4, parse_ipv4_net};
use crate::wire::Route;

const PUBLIC_GATEWAY: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 1);

impl State {
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
}

/// Validates a route against a network (see the module docs).
pub(super) fn validate_route(n: &NetworkRecord, req: &Route) -> Result<RouteRecord, ApiError> {
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
