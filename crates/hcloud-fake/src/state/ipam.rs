//! Public address pools: IPv4 from 198.18.0.0/15, IPv6 /64 networks from 2001:db8::/32.
//!
//! Addresses are handed out in order and never reused after release, so a stale address
//! in a client is not silently re-pointed to a new resource. Fixed addresses (seeding) are
//! reserved and skipped by the allocator.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::Ipv6Net;

use crate::error::ApiError;

const V4_BASE: u32 = u32::from_be_bytes([198, 18, 0, 0]);
const V4_SIZE: u32 = 1 << 17;

/// The public address pools.
#[derive(Debug, Default)]
pub(crate) struct PublicIps {
    next_v4: u32,
    next_v6: u32,
    used_v4: HashSet<Ipv4Addr>,
    used_v6: HashSet<Ipv6Net>,
}

impl PublicIps {
    /// The next free IPv4 (skipping `.0` and `.255`).
    pub fn allocate_v4(&mut self) -> Result<Ipv4Addr, ApiError> {
        while self.next_v4 < V4_SIZE {
            let ip = Ipv4Addr::from(V4_BASE + self.next_v4);
            self.next_v4 += 1;
            let last = ip.octets()[3];
            if last == 0 || last == 255 || self.used_v4.contains(&ip) {
                continue;
            }
            self.used_v4.insert(ip);
            return Ok(ip);
        }
        Err(ApiError::new("resource_unavailable", "no public IPv4 addresses left"))
    }

    /// The next free /64.
    pub fn allocate_v6(&mut self) -> Result<Ipv6Net, ApiError> {
        loop {
            self.next_v6 = self
                .next_v6
                .checked_add(1)
                .ok_or_else(|| ApiError::new("resource_unavailable", "no public IPv6 networks left"))?;
            let n = self.next_v6;
            let addr = Ipv6Addr::new(
                0x2001,
                0x0db8,
                u16::try_from(n >> 16).unwrap_or(u16::MAX),
                u16::try_from(n & 0xffff).unwrap_or(u16::MAX),
                0,
                0,
                0,
                0,
            );
            let Ok(net) = Ipv6Net::new(addr, 64) else {
                continue;
            };
            if self.used_v6.insert(net) {
                return Ok(net);
            }
        }
    }

    /// Reserves a fixed IPv4; `ip_not_available` if taken.
    pub fn reserve_v4(&mut self, ip: Ipv4Addr) -> Result<(), ApiError> {
        if self.used_v4.insert(ip) {
            Ok(())
        } else {
            Err(ApiError::new("ip_not_available", format!("{ip} is already in use")))
        }
    }

    /// Reserves a fixed IPv6 network; `ip_not_available` if taken.
    pub fn reserve_v6(&mut self, net: Ipv6Net) -> Result<(), ApiError> {
        if self.used_v6.insert(net.trunc()) {
            Ok(())
        } else {
            Err(ApiError::new("ip_not_available", format!("{net} is already in use")))
        }
    }

    /// Whether an IPv4 belongs to a fake resource.
    pub fn is_used_v4(&self, ip: Ipv4Addr) -> bool {
        self.used_v4.contains(&ip)
    }

    /// Releases an IPv4 (it is not handed out again by the allocator).
    pub fn release_v4(&mut self, ip: Ipv4Addr) {
        self.used_v4.remove(&ip);
    }

    /// Releases an IPv6 network.
    pub fn release_v6(&mut self, net: Ipv6Net) {
        self.used_v6.remove(&net);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_in_order_and_skips_reserved() {
        let mut p = PublicIps::default();
        assert_eq!(p.allocate_v4().ok(), Some(Ipv4Addr::new(198, 18, 0, 1)));
        assert!(p.reserve_v4(Ipv4Addr::new(198, 18, 0, 2)).is_ok());
        assert_eq!(p.allocate_v4().ok(), Some(Ipv4Addr::new(198, 18, 0, 3)));
        assert!(p.reserve_v4(Ipv4Addr::new(198, 18, 0, 3)).is_err());
        for _ in 0..300 {
            let ip = p.allocate_v4().ok();
            assert!(ip.is_some_and(|ip| ip.octets()[3] != 0 && ip.octets()[3] != 255));
        }
        let n = p.allocate_v6().ok().map(|n| n.to_string());
        assert_eq!(n.as_deref(), Some("2001:db8:0:1::/64"));
    }
}
