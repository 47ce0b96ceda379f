//! One cluster CIDR cut into equal node ranges, and which of them are taken (upstream
//! `nodeipam/ipam/cidrset`). Pure: no I/O, no clock.
//!
//! Taken ranges are kept as a map of disjoint index intervals, not a bitmap, so a large IPv4
//! cluster CIDR cut into small ranges costs memory for what is taken only.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Upstream `clusterSubnetMaxDiff`: an IPv6 cluster CIDR is cut into at most 2^16 ranges.
pub const IPV6_MAX_MASK_DIFF: u8 = 16;

/// Why a cluster CIDR cannot be cut at a node mask.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrSetError {
    /// The node mask is shorter than the cluster CIDR's, or longer than the family allows.
    #[error("node mask /{node_mask} does not fit cluster CIDR {cluster} (it must be from /{} to /{max})", cluster.prefix_len())]
    MaskOutOfRange {
        /// The cluster CIDR.
        cluster: IpNet,
        /// The requested node mask.
        node_mask: u8,
        /// The longest mask of the family.
        max: u8,
    },
    /// Upstream `ErrCIDRSetSubNetTooBig`: more than 2^16 IPv6 ranges.
    #[error(
        "node mask /{node_mask} cuts IPv6 cluster CIDR {cluster} into more than 2^{IPV6_MAX_MASK_DIFF} ranges (the node CIDR size is too big); use a node mask of at most /{}",
        cluster.prefix_len() + IPV6_MAX_MASK_DIFF
    )]
    TooManyRanges {
        /// The cluster CIDR.
        cluster: IpNet,
        /// The requested node mask.
        node_mask: u8,
    },
}

/// A cluster CIDR, its node mask and the ranges taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CidrSet {
    cluster: IpNet,
    node_mask: u8,
    /// Number of node ranges in the cluster CIDR.
    count: u128,
    /// Where the next search starts (upstream's next-fit `nextCandidate`).
    next: u128,
    /// Taken index intervals: start → end (inclusive), disjoint and not adjacent.
    taken: BTreeMap<u128, u128>,
}

pub(super) fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl CidrSet {
    /// Cuts `cluster` (host bits dropped) into ranges of `/node_mask`.
    pub fn new(cluster: IpNet, node_mask: u8) -> Result<CidrSet, CidrSetError> {
        let cluster = cluster.trunc();
        let max = cluster.max_prefix_len();
        if node_mask < cluster.prefix_len() || node_mask > max {
            return Err(CidrSetError::MaskOutOfRange { cluster, node_mask, max });
        }
        let diff = node_mask - cluster.prefix_len();
        if cluster.addr().is_ipv6() && diff > IPV6_MAX_MASK_DIFF {
            return Err(CidrSetError::TooManyRanges { cluster, node_mask });
        }
        // diff <= 32 for IPv4 and <= 16 for IPv6: the shift cannot overflow.
        Ok(CidrSet { cluster, node_mask, count: 1u128 << diff, next: 0, taken: BTreeMap::new() })
    }

    /// The cluster CIDR.
    pub fn cluster(&self) -> IpNet {
        self.cluster
    }

    /// The node mask.
    pub fn node_mask(&self) -> u8 {
        self.node_mask
    }

    /// How many ranges are taken.
    pub fn taken_count(&self) -> u128 {
        self.taken.iter().map(|(s, e)| e - s + 1).sum()
    }

    /// Bits below the node mask.
    fn host_bits(&self) -> u32 {
        u32::from(self.cluster.max_prefix_len() - self.node_mask)
    }

    fn range_at(&self, index: u128) -> IpNet {
        // index < count, so the address stays inside the cluster CIDR and fits its family.
        let base = to_u128(self.cluster.network()) + (index << self.host_bits());
        let addr = match self.cluster {
            IpNet::V4(_) => IpAddr::V4(Ipv4Addr::from(u32::try_from(base).unwrap_or(u32::MAX))),
            IpNet::V6(_) => IpAddr::V6(Ipv6Addr::from(base)),
        };
        // The mask is at most the family's maximum (checked in `new`).
        IpNet::new(addr, self.node_mask).unwrap_or(self.cluster)
    }

    /// The indices of the ranges `cidr` overlaps, or `None` if it lies outside the cluster
    /// CIDR or is of the other family (upstream `getBeginningAndEndIndices`).
    fn indices(&self, cidr: IpNet) -> Option<(u128, u128)> {
        let cidr = cidr.trunc();
        if cidr.addr().is_ipv4() != self.cluster.addr().is_ipv4() {
            return None;
        }
        let base = to_u128(self.cluster.network());
        let shift = self.host_bits();
        if cidr.prefix_len() >= self.node_mask {
            // Inside one range.
            if !self.cluster.contains(&cidr.network()) {
                return None;
            }
            let i = (to_u128(cidr.network()) - base) >> shift;
            return Some((i, i));
        }
        // Larger than a range: every range it covers, clipped to the cluster CIDR.
        let (first, last) = (to_u128(cidr.network()), to_u128(cidr.broadcast()));
        let (lo, hi) = (base, to_u128(self.cluster.broadcast()));
        if last < lo || first > hi {
            return None;
        }
        Some(((first.max(lo) - base) >> shift, (last.min(hi) - base) >> shift))
    }

    fn mark(&mut self, start: u128, end: u128) {
        let (mut start, mut end) = (start, end);
        // Merge with every interval that overlaps or touches [start, end].
        let touching: Vec<(u128, u128)> = self
            .taken
            .range(..=end.saturating_add(1))
            .rev()
            .take_while(|(_, e)| e.saturating_add(1) >= start)
            .map(|(s, e)| (*s, *e))
            .collect();
        for (s, e) in touching {
            self.taken.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.taken.insert(start, end);
    }

    fn unmark(&mut self, start: u128, end: u128) {
        let overlapping: Vec<(u128, u128)> =
            self.taken.range(..=end).rev().take_while(|(_, e)| **e >= start).map(|(s, e)| (*s, *e)).collect();
        for (s, e) in overlapping {
            self.taken.remove(&s);
            if s < start {
                self.taken.insert(s, start - 1);
            }
            if e > end {
                self.taken.insert(end + 1, e);
            }
        }
    }

    /// The first free index at or after `index` (taken intervals never touch, so the one
    /// after an interval's end is free); may be `count` or beyond.
    fn first_free_from(&self, index: u128) -> u128 {
        match self.taken.range(..=index).next_back() {
            Some((_, end)) if *end >= index => end + 1,
            _ => index,
        }
    }

    /// Takes the next free range, searching from where the last search ended and wrapping
    /// around once (upstream's next-fit `AllocateNext`); `None` when every range is taken.
    pub fn allocate_next(&mut self) -> Option<IpNet> {
        let from = self.next % self.count;
        let after = self.first_free_from(from);
        let candidate = if after < self.count {
            after
        } else {
            let wrapped = self.first_free_from(0);
            if wrapped >= from {
                return None;
            }
            wrapped
        };
        self.mark(candidate, candidate);
        self.next = (candidate + 1) % self.count;
        Some(self.range_at(candidate))
    }

    /// Marks every range `cidr` overlaps as taken (upstream `Occupy`); `false` (and nothing
    /// marked) if it lies outside the cluster CIDR.
    pub fn occupy(&mut self, cidr: IpNet) -> bool {
        match self.indices(cidr) {
            Some((start, end)) => {
                self.mark(start, end);
                true
            }
            None => false,
        }
    }

    /// Frees every range `cidr` overlaps (upstream `Release`); a CIDR outside is ignored.
    pub fn release(&mut self, cidr: IpNet) {
        if let Some((start, end)) = self.indices(cidr) {
            self.unmark(start, end);
        }
    }

    /// Whether `cidr` is one of this set's node ranges (inside the cluster CIDR, of the node
    /// mask).
    pub fn is_node_range(&self, cidr: IpNet) -> bool {
        cidr.prefix_len() == self.node_mask && self.cluster.contains(&cidr)
    }

    /// Whether the range holding `cidr` is taken.
    pub fn is_occupied(&self, cidr: IpNet) -> bool {
        self.indices(cidr).is_some_and(|(s, e)| self.first_free_from(s) > e)
    }
}

#[cfg(test)]
#[path = "cidr_set_tests.rs"]
mod tests;
