//! Pure mapping of a Robot server to Node metadata, as the official CCM does it
//! (`hcloud/instances_util.go`): instance type from `product`, zone and region from `dc`,
//! addresses in the official order with the kubelet's InternalIPs forwarded.

use std::net::{IpAddr, Ipv6Addr};

use cloud_provider::{AddressType, NodeAddress};
use hcloud_api::robot::RobotServer;
use ipnet::Ipv6Net;

use crate::config::AddressFamily;

/// The instance type: `product` with spaces replaced by `-` and every character outside
/// `[a-zA-Z0-9_.-]` removed (`Server Auction` → `Server-Auction`).
pub fn instance_type(product: &str) -> String {
    product.replace(' ', "-").chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')).collect()
}

/// Zone (lower-cased `dc`, e.g. `fsn1-dc14`) and region (the zone up to its first `-`).
pub fn zone_and_region(dc: &str) -> (String, String) {
    let zone = dc.to_lowercase();
    let region = zone.split('-').next().unwrap_or_default().to_owned();
    (zone, region)
}

/// The server's main IPv6 /64, routed to it: `server_ipv6_net` is its network address without
/// prefix length (`2a01:f48:111:4221::`), which Hetzner documents as the server's /64.
/// `Ok(None)` when the server has none (absent or empty); `Err` with the value when it is not an
/// IPv6 address.
pub fn ipv6_net(server: &RobotServer) -> Result<Option<Ipv6Net>, &str> {
    let Some(net) = server.server_ipv6_net.as_deref().filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    match net.parse::<Ipv6Addr>() {
        Ok(addr) => Ok(Ipv6Net::new(addr, 64).ok().map(|n| n.trunc())),
        Err(_) => Err(net),
    }
}

/// A forwarded InternalIP that was left out, for a `MisconfiguredInternalIP` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedInternalIp {
    /// The address as the kubelet reported it.
    pub address: String,
    /// Why it was left out.
    pub why: &'static str,
}

/// The Node's addresses: Hostname (the server name), the IPv6 `<net>1` before the IPv4 as
/// ExternalIP by address family, then (with `forward`) the kubelet's InternalIPs from
/// `existing`, except those of the wrong family in single-stack mode and those equal to an
/// ExternalIP (returned as skipped).
pub fn node_addresses(
    server: &RobotServer,
    family: AddressFamily,
    forward: bool,
    existing: &[NodeAddress],
) -> (Vec<NodeAddress>, Vec<SkippedInternalIp>) {
    let mut out = vec![NodeAddress::new(AddressType::Hostname, server.server_name.clone())];
    if matches!(family, AddressFamily::Ipv6 | AddressFamily::DualStack)
        && let Some(net) = server.server_ipv6_net.as_deref().filter(|n| !n.is_empty())
    {
        out.push(NodeAddress::new(AddressType::ExternalIp, format!("{net}1")));
    }
    if matches!(family, AddressFamily::Ipv4 | AddressFamily::DualStack)
        && let Some(ip) = server.server_ip
    {
        out.push(NodeAddress::new(AddressType::ExternalIp, ip.to_string()));
    }
    let mut skipped = Vec::new();
    if forward {
        for a in existing.iter().filter(|a| a.kind == AddressType::InternalIp) {
            let ip: Option<IpAddr> = a.address.parse().ok();
            let wrong_family = matches!(
                (family, ip),
                (AddressFamily::Ipv4, Some(IpAddr::V6(_))) | (AddressFamily::Ipv6, Some(IpAddr::V4(_)))
            );
            if wrong_family {
                skipped.push(SkippedInternalIp {
                    address: a.address.clone(),
                    why: "its IP family differs from HCLOUD_INSTANCES_ADDRESS_FAMILY",
                });
            } else if out.iter().any(|o| o.kind == AddressType::ExternalIp && o.address == a.address) {
                skipped.push(SkippedInternalIp { address: a.address.clone(), why: "it equals an ExternalIP" });
            } else if !out.contains(a) {
                out.push(a.clone());
            }
        }
    }
    (out, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> RobotServer {
        serde_json::from_value(serde_json::json!({
            "server_number": 321, "server_name": "bm-1", "server_ip": "123.123.123.123",
            "server_ipv6_net": "2a01:f48:111:4221::", "product": "Server Auction", "dc": "FSN1-DC14"
        }))
        .expect("server")
    }

    fn addrs(v: &[(AddressType, &str)]) -> Vec<NodeAddress> {
        v.iter().map(|(k, a)| NodeAddress::new(k.clone(), *a)).collect()
    }

    #[test]
    fn instance_types_are_sanitized() {
        for (product, ty) in [
            ("AX41", "AX41"),
            ("Server Auction", "Server-Auction"),
            ("EX44 (2x NVMe)", "EX44-2x-NVMe"),
            ("DS 3000/ä", "DS-3000"),
            ("a_b.c-d", "a_b.c-d"),
        ] {
            assert_eq!(instance_type(product), ty, "{product}");
        }
    }

    #[test]
    fn zone_and_region_from_dc() {
        assert_eq!(zone_and_region("FSN1-DC14"), ("fsn1-dc14".into(), "fsn1".into()));
        assert_eq!(zone_and_region("HEL1-DC2"), ("hel1-dc2".into(), "hel1".into()));
        assert_eq!(zone_and_region("nbg1"), ("nbg1".into(), "nbg1".into()));
    }

    #[test]
    fn addresses_in_the_official_order() {
        use AddressType::*;
        let s = server();
        assert_eq!(
            node_addresses(&s, AddressFamily::Ipv4, false, &[]).0,
            addrs(&[(Hostname, "bm-1"), (ExternalIp, "123.123.123.123")])
        );
        assert_eq!(
            node_addresses(&s, AddressFamily::Ipv6, false, &[]).0,
            addrs(&[(Hostname, "bm-1"), (ExternalIp, "2a01:f48:111:4221::1")])
        );
        assert_eq!(
            node_addresses(&s, AddressFamily::DualStack, false, &[]).0,
            addrs(&[(Hostname, "bm-1"), (ExternalIp, "2a01:f48:111:4221::1"), (ExternalIp, "123.123.123.123")]),
            "IPv6 before IPv4, as upstream"
        );
    }

    fn with_ipv6_net(net: Option<&str>) -> RobotServer {
        RobotServer { server_ipv6_net: net.map(str::to_owned), ..server() }
    }

    #[test]
    fn ipv6_net_is_the_main_slash_64() {
        let net = |s: &str| Ok(Some(s.parse::<Ipv6Net>().expect("net")));
        assert_eq!(ipv6_net(&server()), net("2a01:f48:111:4221::/64"));
        assert_eq!(ipv6_net(&with_ipv6_net(Some("2a01:4f8:0:86a1::"))), net("2a01:4f8:0:86a1::/64"));
        assert_eq!(
            ipv6_net(&with_ipv6_net(Some("2a01:4f8:0:86a1::2"))),
            net("2a01:4f8:0:86a1::/64"),
            "host bits dropped"
        );
        assert_eq!(ipv6_net(&with_ipv6_net(None)), Ok(None), "absent");
        assert_eq!(ipv6_net(&with_ipv6_net(Some(""))), Ok(None), "empty");
        for garbage in ["not-an-ip", "123.123.123.123", "2a01:f48:111:4221::/64", "2a01:::1"] {
            assert_eq!(ipv6_net(&with_ipv6_net(Some(garbage))), Err(garbage));
        }
    }

    #[test]
    fn internal_ips_are_forwarded_with_checks() {
        use AddressType::*;
        let s = server();
        let kubelet = addrs(&[
            (InternalIp, "10.1.0.5"),
            (InternalIp, "fd00::5"),
            (InternalIp, "123.123.123.123"),
            (ExternalIp, "9.9.9.9"),
            (Hostname, "bm-1"),
        ]);
        let (out, skipped) = node_addresses(&s, AddressFamily::Ipv4, true, &kubelet);
        assert_eq!(out, addrs(&[(Hostname, "bm-1"), (ExternalIp, "123.123.123.123"), (InternalIp, "10.1.0.5")]));
        assert_eq!(skipped.iter().map(|k| k.address.as_str()).collect::<Vec<_>>(), vec!["fd00::5", "123.123.123.123"]);
        let (out, skipped) = node_addresses(&s, AddressFamily::DualStack, true, &kubelet);
        assert_eq!(
            out,
            addrs(&[
                (Hostname, "bm-1"),
                (ExternalIp, "2a01:f48:111:4221::1"),
                (ExternalIp, "123.123.123.123"),
                (InternalIp, "10.1.0.5"),
                (InternalIp, "fd00::5")
            ])
        );
        assert_eq!(skipped.len(), 1, "only the one equal to an ExternalIP");
        let (out, skipped) = node_addresses(&s, AddressFamily::Ipv4, false, &kubelet);
        assert_eq!(out.len(), 2, "forwarding off");
        assert!(skipped.is_empty());
    }
}
