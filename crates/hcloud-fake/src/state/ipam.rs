//! Public address pools: IPv4 from 198.18.0.0/15, IPv6 /64 networks from 2001:db8::/32, and
//! with the opt-in data plane the Load Balancers' IPv4 from its configured addresses
//! ([`DataPlanePool`]).
//!
//! Released addresses are handed out again, oldest release first, before fresh ones, as the
//! API reuses them: a client holding a stale address may meet it on a new resource. Fresh
//! addresses come in order. Fixed addresses (seeding) are reserved and skipped.

use std::collections::{HashSet, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::Ipv6Net;

use crate::data_plane::config::DataPlaneConfig;
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
    released_v4: VecDeque<Ipv4Addr>,
    released_v6: VecDeque<Ipv6Net>,
}

/// How many fresh addresses of each pool one project has before the next project's slice:
/// projects take their addresses from slices of their own, so two projects never hand out the
/// same address (unless one outgrows its slice).
const PROJECT_V4_SLICE: u32 = V4_SIZE / 8;
const PROJECT_V6_SLICE: u32 = 1 << 20;

impl PublicIps {
    /// The pools of the `project`-th project (0: the default one, as `default()`).
    pub fn of_project(project: u64) -> Self {
        let slice = u32::try_from(project).unwrap_or(u32::MAX);
        Self {
            next_v4: slice.saturating_mul(PROJECT_V4_SLICE).min(V4_SIZE),
            next_v6: slice.saturating_mul(PROJECT_V6_SLICE),
            ..Self::default()
        }
    }

    /// The oldest released IPv4, else the next fresh one (skipping `.0` and `.255`).
    pub fn allocate_v4(&mut self) -> Result<Ipv4Addr, ApiError> {
        while let Some(ip) = self.released_v4.pop_front() {
            if self.used_v4.insert(ip) {
                return Ok(ip);
            }
        }
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

    /// The oldest released /64, else the next fresh one.
    pub fn allocate_v6(&mut self) -> Result<Ipv6Net, ApiError> {
        while let Some(net) = self.released_v6.pop_front() {
            if self.used_v6.insert(net) {
                return Ok(net);
            }
        }
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

    /// Releases an IPv4; it is handed out again later.
    pub fn release_v4(&mut self, ip: Ipv4Addr) {
        if self.used_v4.remove(&ip) {
            self.released_v4.push_back(ip);
        }
    }

    /// Frees an IPv4 reserved with [`PublicIps::reserve_v4`] without handing it out again
    /// (an address of another pool).
    pub fn unreserve_v4(&mut self, ip: Ipv4Addr) {
        self.used_v4.remove(&ip);
    }

    /// Releases an IPv6 network; it is handed out again later.
    pub fn release_v6(&mut self, net: Ipv6Net) {
        if self.used_v6.remove(&net) {
            self.released_v6.push_back(net);
        }
    }
}

/// The Load Balancers' public IPv4 addresses when the data plane is on: the configured range
/// or list, in order, released addresses first (oldest release first), as [`PublicIps`] does.
#[derive(Debug)]
pub(crate) struct DataPlanePool {
    config: DataPlaneConfig,
    next: u64,
    used: HashSet<Ipv4Addr>,
    released: VecDeque<Ipv4Addr>,
}

impl DataPlanePool {
    /// A pool over the data plane's addresses.
    pub fn new(config: DataPlaneConfig) -> Self {
        Self { config, next: 0, used: HashSet::new(), released: VecDeque::new() }
    }

    /// Whether `ip` belongs to this pool.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.config.contains(ip)
    }

    /// The next free address that `taken` does not claim (e.g. a server's fixed address).
    pub fn allocate(&mut self, taken: impl Fn(Ipv4Addr) -> bool) -> Result<Ipv4Addr, ApiError> {
        while let Some(ip) = self.released.pop_front() {
            if !taken(ip) && self.used.insert(ip) {
                return Ok(ip);
            }
        }
        while let Some(ip) = self.config.nth_address(self.next) {
            self.next += 1;
            if !taken(ip) && self.used.insert(ip) {
                return Ok(ip);
            }
        }
        Err(ApiError::new(
            "resource_unavailable",
            format!("no Load Balancer addresses left in the data plane's {}", self.config),
        ))
    }

    /// Releases an address; it is handed out again later.
    pub fn release(&mut self, ip: Ipv4Addr) {
        if self.used.remove(&ip) {
            self.released.push_back(ip);
        }
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

    #[test]
    fn released_addresses_come_back_first() {
        let mut p = PublicIps::default();
        let a = p.allocate_v4().ok();
        let b = p.allocate_v4().ok();
        let net = p.allocate_v6().ok();
        p.release_v4(Ipv4Addr::new(198, 18, 0, 2));
        p.release_v4(Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!((a, b), (Some(Ipv4Addr::new(198, 18, 0, 1)), Some(Ipv4Addr::new(198, 18, 0, 2))));
        assert_eq!(p.allocate_v4().ok(), b, "oldest release first");
        assert_eq!(p.allocate_v4().ok(), a);
        assert_eq!(p.allocate_v4().ok(), Some(Ipv4Addr::new(198, 18, 0, 3)), "then fresh ones");
        if let Some(n) = net {
            p.release_v6(n);
        }
        assert_eq!(p.allocate_v6().ok(), net);
        // A released address taken by a fixed reservation is not handed out twice.
        p.release_v4(Ipv4Addr::new(198, 18, 0, 3));
        assert!(p.reserve_v4(Ipv4Addr::new(198, 18, 0, 3)).is_ok());
        assert_eq!(p.allocate_v4().ok(), Some(Ipv4Addr::new(198, 18, 0, 4)));
    }

    #[test]
    fn data_plane_pool_hands_out_its_addresses() {
        let config = DataPlaneConfig::parse("127.10.0.0/30").unwrap_or_else(|e| panic!("{e}"));
        let mut p = DataPlanePool::new(config);
        let taken = |ip: Ipv4Addr| ip == Ipv4Addr::new(127, 10, 0, 1);
        assert_eq!(p.allocate(taken).ok(), Some(Ipv4Addr::new(127, 10, 0, 2)), "a taken address is skipped");
        assert_eq!(p.allocate(taken).map_err(|e| e.code), Err("resource_unavailable".to_owned()));
        p.release(Ipv4Addr::new(127, 10, 0, 2));
        assert_eq!(p.allocate(|_| false).ok(), Some(Ipv4Addr::new(127, 10, 0, 2)));
        assert!(p.contains(Ipv4Addr::new(127, 10, 0, 1)));
        assert!(!p.contains(Ipv4Addr::new(198, 18, 0, 1)));
    }
}
