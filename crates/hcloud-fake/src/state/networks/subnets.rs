//! Subnets, the IP range and the protection of a network.
//!
//! A subnet (at creation or with `add_subnet`) is of type `cloud`, `server` (deprecated, same
//! as `cloud`) or `vswitch`, in a known network zone; `vswitch_id` is required for `vswitch`
//! subnets and refused for the others. Its range lies inside the network's range, is a /30 or
//! larger and overlaps no other subnet and no route's destination (a `vswitch` subnet also
//! holds no route's gateway); without a range the first free /24 of the network is taken, as
//! the API does. `delete_subnet` needs the exact range (`not_found` otherwise) and a subnet
//! nobody holds an IP in: the API answers `service_error` "network has attached resources"
//! (the code and message hcloud's Terraform provider matches on).
//!
//! `change_ip_range` only extends: the new range starts at the same address with a shorter
//! (or the same) prefix, stays in RFC 1918 and is at least a /24; anything else is
//! `invalid_input` naming `ip_range`. All changes happen when their action finishes, and
//! answer `conflict` while another change is being performed on the network.

use ipnet::Ipv4Net;

use super::ranges::{overlaps, rfc1918};
use crate::catalog::NETWORK_ZONES;
use crate::control::ResourceRef;
use crate::error::ApiError;
use crate::state::effect::Effect;
use crate::state::records::{NetworkRecord, RouteRecord, SubnetRecord};
use crate::state::store::State;
use crate::state::validate::parse_ipv4_net;
use crate::wire::request::SubnetRequest;

/// Validates a subnet for a network with `range`, `subnets` and `routes`; `field` is the field
/// errors name (`subnets` in a create request, the subnet's own field in `add_subnet`).
pub(super) fn new_subnet(
    range: Ipv4Net,
    subnets: &[SubnetRecord],
    routes: &[RouteRecord],
    req: &SubnetRequest,
    field: Option<&str>,
) -> Result<SubnetRecord, ApiError> {
    let name = |own: &str| field.unwrap_or(own).to_owned();
    if !matches!(req.kind.as_str(), "cloud" | "server" | "vswitch") {
        return Err(ApiError::invalid_input(&name("type"), format!("unknown subnet type '{}'", req.kind)));
    }
    if !NETWORK_ZONES.contains(&req.network_zone.as_str()) {
        return Err(ApiError::invalid_input(
            &name("network_zone"),
            format!("unknown network zone '{}'", req.network_zone),
        ));
    }
    match (req.kind.as_str(), req.vswitch_id) {
        ("vswitch", None) => {
            return Err(ApiError::invalid_input(&name("vswitch_id"), "vswitch subnets need a vswitch_id"));
        }
        ("cloud" | "server", Some(_)) => {
            return Err(ApiError::invalid_input(&name("vswitch_id"), "only vswitch subnets take a vswitch_id"));
        }
        _ => {}
    }
    let free = |sub: &Ipv4Net| {
        !subnets.iter().any(|o| overlaps(&o.ip_range, sub)) && !routes.iter().any(|r| overlaps(&r.destination, sub))
    };
    let sub = match req.ip_range.as_deref() {
        Some(s) => parse_ipv4_net(&name("ip_range"), s)?,
        None => first_free_24(range, &free)
            .ok_or_else(|| ApiError::invalid_input(&name("ip_range"), format!("no free /24 left in {range}")))?,
    };
    if !range.contains(&sub) || sub.prefix_len() > 30 {
        return Err(ApiError::invalid_input(
            &name("ip_range"),
            format!("subnet {sub} must be a /30 or larger inside {range}"),
        ));
    }
    if !free(&sub) {
        return Err(ApiError::invalid_input(
            &name("ip_range"),
            format!("subnet {sub} overlaps another subnet or a route's destination"),
        ));
    }
    if req.kind == "vswitch"
        && let Some(r) = routes.iter().find(|r| sub.contains(&r.gateway))
    {
        return Err(ApiError::invalid_input(
            &name("ip_range"),
            format!("vswitch subnet {sub} holds the gateway {} of a route", r.gateway),
        ));
    }
    Ok(SubnetRecord {
        kind: req.kind.clone(),
        ip_range: sub,
        zone: req.network_zone.clone(),
        vswitch_id: req.vswitch_id,
    })
}

/// The first /24 of `range` that `free` accepts.
fn first_free_24(range: Ipv4Net, free: &dyn Fn(&Ipv4Net) -> bool) -> Option<Ipv4Net> {
    range.subnets(24).ok()?.find(|s| free(s))
}

impl State {
    /// `add_subnet`: validated now, added when the action finishes.
    pub fn add_subnet(&mut self, id: u64, req: &SubnetRequest) -> Result<u64, ApiError> {
        self.network_record(id)?;
        self.ensure_network_idle(id)?;
        let n = self.network_record(id)?;
        let subnet = new_subnet(n.ip_range, &n.subnets, &n.routes, req, None)?;
        Ok(self.start_action(
            "add_subnet",
            vec![ResourceRef::network(id)],
            Some(Effect::AddSubnet { network: id, subnet }),
        ))
    }

    /// `delete_subnet`: the exact range, nobody holding an IP in it.
    pub fn delete_subnet(&mut self, id: u64, ip_range: &str) -> Result<u64, ApiError> {
        self.network_record(id)?;
        self.ensure_network_idle(id)?;
        let n = self.network_record(id)?;
        let range = parse_ipv4_net("ip_range", ip_range)?;
        if !n.subnets.iter().any(|s| s.ip_range == range) {
            return Err(ApiError::new("not_found", format!("subnet {range} not found in network {id}")));
        }
        if !unused(n, &range) {
            return Err(ApiError::new("service_error", "network has attached resources"));
        }
        Ok(self.start_action(
            "delete_subnet",
            vec![ResourceRef::network(id)],
            Some(Effect::DeleteSubnet { network: id, ip_range: range }),
        ))
    }

    /// `change_ip_range`: only extends the range (see the module docs).
    pub fn change_ip_range(&mut self, id: u64, ip_range: &str) -> Result<u64, ApiError> {
        self.network_record(id)?;
        self.ensure_network_idle(id)?;
        let n = self.network_record(id)?;
        let range = parse_ipv4_net("ip_range", ip_range)?;
        if !rfc1918(&range) || range.prefix_len() > 24 {
            return Err(ApiError::invalid_input("ip_range", "must be a private RFC 1918 range of at least /24"));
        }
        if range.network() != n.ip_range.network() || range.prefix_len() > n.ip_range.prefix_len() {
            return Err(ApiError::invalid_input(
                "ip_range",
                format!("{range} does not extend {}: only the netmask may shrink", n.ip_range),
            ));
        }
        Ok(self.start_action(
            "change_ip_range",
            vec![ResourceRef::network(id)],
            Some(Effect::NetworkIpRange { network: id, ip_range: range }),
        ))
    }

    /// `change_protection` of a network (an absent `delete` keeps the setting).
    pub fn change_network_protection(&mut self, id: u64, delete: Option<bool>) -> Result<u64, ApiError> {
        let current = self.network_record(id)?.protection.delete;
        self.ensure_network_idle(id)?;
        let delete = delete.unwrap_or(current);
        Ok(self.start_action(
            "change_protection",
            vec![ResourceRef::network(id)],
            Some(Effect::NetworkProtection { network: id, delete }),
        ))
    }
}

/// Whether nobody (server, alias IP, load balancer, running attach) holds an IP in `range`.
fn unused(n: &NetworkRecord, range: &Ipv4Net) -> bool {
    !n.members.keys().any(|ip| range.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::records::Member;

    fn req(kind: &str, range: Option<&str>, zone: &str, vswitch: Option<u64>) -> SubnetRequest {
        SubnetRequest {
            kind: kind.to_owned(),
            ip_range: range.map(str::to_owned),
            network_zone: zone.to_owned(),
            vswitch_id: vswitch,
        }
    }

    #[test]
    fn subnets_are_validated_and_allocated() {
        let range: Ipv4Net = "10.0.0.0/16".parse().unwrap();
        let taken = new_subnet(range, &[], &[], &req("cloud", None, "eu-central", None), None).unwrap();
        assert_eq!(taken.ip_range.to_string(), "10.0.0.0/24");
        let route = RouteRecord { destination: "10.0.1.0/24".parse().unwrap(), gateway: "10.0.0.5".parse().unwrap() };
        let next =
            new_subnet(range, std::slice::from_ref(&taken), &[route], &req("cloud", None, "eu-central", None), None);
        assert_eq!(next.unwrap().ip_range.to_string(), "10.0.2.0/24");
        let field = |r: Result<SubnetRecord, ApiError>| r.err().map(|e| e.details["fields"][0]["name"].clone());
        let cases = [
            (req("moon", Some("10.0.5.0/24"), "eu-central", None), "type"),
            (req("cloud", Some("10.0.5.0/24"), "mars", None), "network_zone"),
            (req("vswitch", Some("10.0.5.0/24"), "eu-central", None), "vswitch_id"),
            (req("cloud", Some("10.0.5.0/24"), "eu-central", Some(7)), "vswitch_id"),
            (req("cloud", Some("10.1.0.0/24"), "eu-central", None), "ip_range"),
            (req("cloud", Some("10.0.0.0/31"), "eu-central", None), "ip_range"),
            (req("cloud", Some("10.0.0.128/25"), "eu-central", None), "ip_range"),
            (req("vswitch", Some("10.0.1.0/24"), "eu-central", Some(7)), "ip_range"),
        ];
        let route = RouteRecord { destination: "10.0.9.0/24".parse().unwrap(), gateway: "10.0.1.5".parse().unwrap() };
        for (r, expected) in cases {
            let got = field(new_subnet(range, std::slice::from_ref(&taken), &[route], &r, None));
            assert_eq!(got, Some(serde_json::json!(expected)), "{r:?}");
        }
        let got = field(new_subnet(range, &[], &[], &req("moon", None, "eu-central", None), Some("subnets")));
        assert_eq!(got, Some(serde_json::json!("subnets")));
        let n = NetworkRecord {
            id: 1,
            name: "n".into(),
            ip_range: range,
            subnets: vec![taken],
            routes: Vec::new(),
            labels: Default::default(),
            protection: Default::default(),
            created: 0,
            expose_routes_to_vswitch: false,
            members: [("10.0.0.2".parse().unwrap(), Member::Server(1))].into_iter().collect(),
        };
        assert!(!unused(&n, &"10.0.0.0/24".parse().unwrap()));
        assert!(unused(&n, &"10.0.2.0/24".parse().unwrap()));
    }
}
