//! Private IPs of servers and load balancers in a network's subnets.
//!
//! Private IPs: the gateway of every subnet is the first host of the network's range (as in
//! the API). Allocation takes subnets (type `cloud` or `server`) in the resource's network
//! zone, in subnet order, and hands out the first free host skipping each subnet's network
//! address, its first host (`.1`), the gateway and the broadcast address. A requested IP is
//! honoured if it is such a free host, otherwise `ip_not_available`; with no suitable subnet
//! the answer is `no_subnet_available`.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use super::ranges::gateway_of;
use crate::error::ApiError;
use crate::state::records::NetworkRecord;
use crate::state::store::State;

impl State {
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
}
