//! Address range helpers of networks (no state): RFC 1918, gateways, overlaps.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// Whether `net` lies in a private RFC 1918 range.
pub(super) fn rfc1918(net: &Ipv4Net) -> bool {
    ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
        .iter()
        .filter_map(|s| s.parse::<Ipv4Net>().ok())
        .any(|r| r.contains(net))
}

/// The gateway of a network: the first host of its range.
pub(super) fn gateway_of(range: &Ipv4Net) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(range.network()).saturating_add(1))
}

/// Whether one of the two contains the other.
pub(super) fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(b) || b.contains(a)
}
