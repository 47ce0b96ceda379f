//! Which node holds which pod range, found by overlap. Pure.
//!
//! Pod ranges are prefixes, so two overlap exactly when one contains the other: the ranges
//! overlapping a prefix are its supernets (one lookup per shorter length) and the ranges that
//! start inside it (one ordered scan). Every lookup costs O(prefix length + log n + hits), so
//! observing every Node of a large cluster stays cheap.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::cidr_set::to_u128;

/// (is IPv6, first address, prefix length): ranges ordered by family, then start, then size.
type Key = (bool, u128, u8);

fn key(cidr: IpNet) -> Key {
    let cidr = cidr.trunc();
    (cidr.addr().is_ipv6(), to_u128(cidr.network()), cidr.prefix_len())
}

/// The prefix of `len` bits holding `start` (host bits dropped).
fn supernet((v6, start, _): Key, len: u8) -> Key {
    let width: u32 = if v6 { 128 } else { 32 };
    let host_bits = width - u32::from(len);
    // host_bits <= 128; a shift by 128 is what `checked_shl` refuses: then every bit is a host bit.
    let mask = u128::MAX.checked_shl(host_bits).unwrap_or(0);
    (v6, start & mask, len)
}

fn cidr((v6, start, len): Key) -> IpNet {
    let addr = if v6 {
        IpAddr::V6(Ipv6Addr::from(start))
    } else {
        // Keys of IPv4 ranges come from IPv4 addresses: `start` fits in 32 bits.
        IpAddr::V4(Ipv4Addr::from(u32::try_from(start).unwrap_or(u32::MAX)))
    };
    // The length came from a valid prefix of this family.
    IpNet::new(addr, len).unwrap_or_else(|_| IpNet::from(addr))
}

/// The last address of a range.
fn last((v6, start, len): Key) -> u128 {
    let width: u32 = if v6 { 128 } else { 32 };
    let host_bits = width - u32::from(len);
    start | u128::MAX.checked_shl(host_bits).map_or(u128::MAX, |m| !m)
}

/// Every range some node holds, with its holders.
#[derive(Debug, Clone, Default)]
pub(super) struct Holders {
    by_range: BTreeMap<Key, BTreeSet<String>>,
}

impl Holders {
    /// `node` holds `range`.
    pub(super) fn insert(&mut self, range: IpNet, node: &str) {
        self.by_range.entry(key(range)).or_default().insert(node.to_owned());
    }

    /// `node` no longer holds `range`.
    pub(super) fn remove(&mut self, range: IpNet, node: &str) {
        let k = key(range);
        if let Some(nodes) = self.by_range.get_mut(&k) {
            nodes.remove(node);
            if nodes.is_empty() {
                self.by_range.remove(&k);
            }
        }
    }

    /// Every held range that overlaps `range` (contains it, equals it or lies inside it), with
    /// its holder, in address order.
    pub(super) fn overlapping(&self, range: IpNet) -> Vec<(IpNet, &str)> {
        let k = key(range);
        let mut out = Vec::new();
        for len in 0..k.2 {
            if let Some(nodes) = self.by_range.get(&supernet(k, len)) {
                out.extend(nodes.iter().map(|n| (cidr(supernet(k, len)), n.as_str())));
            }
        }
        // A range starting inside `range` with a shorter prefix would start at `range`'s first
        // address (it is aligned to its size) and is a supernet, found above.
        for (held, nodes) in self.by_range.range(k..=(k.0, last(k), u8::MAX)) {
            out.extend(nodes.iter().map(|n| (cidr(*held), n.as_str())));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn finds_supernets_equals_and_subnets_of_the_same_family_only() {
        let mut h = Holders::default();
        h.insert(net("10.0.0.0/23"), "old-mask");
        h.insert(net("10.0.0.0/24"), "a");
        h.insert(net("10.0.0.0/24"), "b");
        h.insert(net("10.0.1.0/24"), "c");
        h.insert(net("10.0.2.0/24"), "d");
        h.insert(net("0.0.0.0/0"), "everything");
        h.insert(net("::/0"), "every-v6");
        h.insert(net("2001:db8:0:1:1::/80"), "v6");
        fn names(h: &Holders, r: &str) -> Vec<String> {
            h.overlapping(net(r)).iter().map(|(c, n)| format!("{c} {n}")).collect()
        }
        assert_eq!(
            names(&h, "10.0.0.0/24"),
            ["0.0.0.0/0 everything", "10.0.0.0/23 old-mask", "10.0.0.0/24 a", "10.0.0.0/24 b"]
        );
        assert_eq!(
            names(&h, "10.0.0.0/23"),
            ["0.0.0.0/0 everything", "10.0.0.0/23 old-mask", "10.0.0.0/24 a", "10.0.0.0/24 b", "10.0.1.0/24 c"]
        );
        assert_eq!(names(&h, "10.0.3.0/24"), ["0.0.0.0/0 everything"]);
        assert_eq!(
            names(&h, "10.0.0.7/32"),
            ["0.0.0.0/0 everything", "10.0.0.0/23 old-mask", "10.0.0.0/24 a", "10.0.0.0/24 b"]
        );
        assert_eq!(names(&h, "2001:db8:0:1::/64"), ["::/0 every-v6", "2001:db8:0:1:1::/80 v6"]);
        assert_eq!(names(&h, "2001:db8:0:1:1::/80"), ["::/0 every-v6", "2001:db8:0:1:1::/80 v6"]);
        assert_eq!(names(&h, "2001:db8:0:2:1::/80"), ["::/0 every-v6"]);
        h.remove(net("10.0.0.0/24"), "a");
        h.remove(net("0.0.0.0/0"), "everything");
        h.remove(net("10.0.0.0/24"), "nobody");
        assert_eq!(names(&h, "10.0.0.0/24"), ["10.0.0.0/23 old-mask", "10.0.0.0/24 b"]);
        h.remove(net("10.0.0.0/24"), "b");
        assert_eq!(names(&h, "10.0.0.128/25"), ["10.0.0.0/23 old-mask"]);
    }
}
