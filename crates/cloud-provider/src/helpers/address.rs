//! Node address helpers (upstream `node/helpers/address.go` and component-helpers
//! `ParseNodeIPAnnotation`).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use crate::types::{AddressType, NodeAddress};

/// Why a provided node IP was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeIpError {
    /// A value is not an IP address.
    #[error("failed to parse node IP {annotation:?}: could not parse {value:?}")]
    Unparsable {
        /// The whole annotation.
        annotation: String,
        /// The offending part.
        value: String,
    },
    /// More than two IPs, or two of the same family.
    #[error("failed to parse node IP {0:?}: must contain either a single IP or a dual-stack pair of IPs")]
    NotSingleOrDualStack(String),
    /// A dual-stack pair with `0.0.0.0` or `::`.
    #[error("failed to parse node IP {0:?}: dual-stack node IP cannot include '0.0.0.0' or '::'")]
    UnspecifiedInDualStack(String),
    /// No cloud address matches the IP.
    #[error("failed to get node address from cloud provider that matches ip: {0}")]
    NoMatchingCloudAddress(IpAddr),
}

/// Appends addresses that are not already present (same type and address).
pub fn add_to_node_addresses(addresses: &mut Vec<NodeAddress>, add: &[NodeAddress]) {
    for a in add {
        if !addresses.iter().any(|e| e.address == a.address && e.kind == a.kind) {
            addresses.push(a.clone());
        }
    }
}

/// Parses an IP like Go's `netutils.ParseIPSloppy`: IPv4 octets may have leading zeros
/// (read as decimal). IPv4-mapped IPv6 addresses compare equal to their IPv4 form.
pub fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (o, p) in octets.iter_mut().zip(parts) {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *o = p.parse().ok()?;
    }
    Some(IpAddr::V4(Ipv4Addr::from(octets)))
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// Parses the `alpha.kubernetes.io/provided-node-ip` annotation: one IP, or a comma-separated
/// dual-stack pair (one IPv4 and one IPv6, neither unspecified). Invalid values are errors.
pub fn parse_node_ip_annotation(annotation: &str) -> Result<Vec<IpAddr>, NodeIpError> {
    let mut ips = Vec::new();
    for part in annotation.split(',') {
        match parse_ip_sloppy(part) {
            Some(ip) => ips.push(ip),
            None => {
                return Err(NodeIpError::Unparsable { annotation: annotation.to_owned(), value: part.to_owned() });
            }
        }
    }
    if ips.len() > 2 || (ips.len() == 2 && ips[0].is_ipv6() == ips[1].is_ipv6()) {
        return Err(NodeIpError::NotSingleOrDualStack(annotation.to_owned()));
    }
    if ips.len() == 2 && ips.iter().any(IpAddr::is_unspecified) {
        return Err(NodeIpError::UnspecifiedInDualStack(annotation.to_owned()));
    }
    Ok(ips)
}

/// Filters the cloud's addresses by the provided node IP(s) (upstream
/// `GetNodeAddressesFromNodeIP`): every cloud address equal to a node IP comes first (in
/// annotation order) and makes its type "enforced"; then every cloud address of a type that
/// is not enforced, in cloud order. A node IP no cloud address matches is an error.
pub fn get_node_addresses_from_node_ip(
    provided_node_ip: &str,
    cloud_addresses: &[NodeAddress],
) -> Result<Vec<NodeAddress>, NodeIpError> {
    let node_ips = parse_node_ip_annotation(provided_node_ip)?;
    let mut out = Vec::new();
    let mut enforced: Vec<&AddressType> = Vec::new();
    for ip in node_ips {
        let mut matched = false;
        for a in cloud_addresses {
            if parse_ip_sloppy(&a.address) == Some(ip) {
                out.push(a.clone());
                enforced.push(&a.kind);
                matched = true;
            }
        }
        if !matched {
            return Err(NodeIpError::NoMatchingCloudAddress(ip));
        }
    }
    out.extend(cloud_addresses.iter().filter(|a| !enforced.contains(&&a.kind)).cloned());
    Ok(out)
}

/// Upstream's `nodeAddressesChangeDetected`: true if the lengths differ, or if some new
/// address differs from the last old address of the same type.
pub fn node_addresses_change_detected(old: &[NodeAddress], new: &[NodeAddress]) -> bool {
    if old.len() != new.len() {
        return true;
    }
    let by_type: HashMap<&AddressType, &str> = old.iter().map(|a| (&a.kind, a.address.as_str())).collect();
    new.iter().any(|a| by_type.get(&a.kind) != Some(&a.address.as_str()))
}

/// Order-sensitive comparison used to decide whether `status.addresses` must be rewritten.
///
/// Upstream's map-by-type check reports a change on every pass for dual-stack nodes with two
/// addresses of one type (kubernetes/kubernetes#73410); comparing the lists directly avoids
/// those useless writes while still catching every real difference.
pub fn node_addresses_differ(old: &[NodeAddress], new: &[NodeAddress]) -> bool {
    old != new
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddressType::*;

    const HOST: &str = "hostname";

    fn a(kind: AddressType, address: &str) -> NodeAddress {
        NodeAddress::new(kind, address)
    }

    /// Upstream `TestAddToNodeAddresses`.
    #[test]
    fn test_add_to_node_addresses() {
        struct Case {
            name: &'static str,
            existing: Vec<NodeAddress>,
            to_add: Vec<NodeAddress>,
            expected: Vec<NodeAddress>,
        }
        let cases = vec![
            Case {
                name: "add no addresses to empty node addresses",
                existing: vec![],
                to_add: vec![],
                expected: vec![],
            },
            Case {
                name: "add new node addresses to empty existing addresses",
                existing: vec![],
                to_add: vec![a(ExternalIp, "1.1.1.1"), a(Hostname, "localhost")],
                expected: vec![a(ExternalIp, "1.1.1.1"), a(Hostname, "localhost")],
            },
            Case {
                name: "add a duplicate node address",
                existing: vec![],
                to_add: vec![a(ExternalIp, "1.1.1.1"), a(ExternalIp, "1.1.1.1")],
                expected: vec![a(ExternalIp, "1.1.1.1")],
            },
            Case {
                name: "add 1 new and 1 duplicate address",
                existing: vec![a(ExternalIp, "1.1.1.1"), a(InternalIp, "10.1.1.1")],
                to_add: vec![a(ExternalIp, "1.1.1.1"), a(Hostname, "localhost")],
                expected: vec![a(ExternalIp, "1.1.1.1"), a(InternalIp, "10.1.1.1"), a(Hostname, "localhost")],
            },
        ];
        for mut c in cases {
            add_to_node_addresses(&mut c.existing, &c.to_add);
            assert_eq!(c.existing, c.expected, "case {:?}", c.name);
        }
    }

    /// Upstream `TestGetNodeAddressesFromNodeIP`.
    #[test]
    fn test_get_node_addresses_from_node_ip() {
        struct Case {
            name: &'static str,
            node_ip: &'static str,
            addresses: Vec<NodeAddress>,
            expected: Option<Vec<NodeAddress>>,
        }
        let cases = vec![
            Case {
                name: "A single InternalIP",
                node_ip: "10.1.1.1",
                addresses: vec![a(InternalIp, "10.1.1.1"), a(Hostname, HOST)],
                expected: Some(vec![a(InternalIp, "10.1.1.1"), a(Hostname, HOST)]),
            },
            Case {
                name: "NodeIP is external",
                node_ip: "55.55.55.55",
                addresses: vec![a(InternalIp, "10.1.1.1"), a(ExternalIp, "55.55.55.55"), a(Hostname, HOST)],
                expected: Some(vec![a(ExternalIp, "55.55.55.55"), a(InternalIp, "10.1.1.1"), a(Hostname, HOST)]),
            },
            Case {
                name: "InternalIP and ExternalIP are the same",
                node_ip: "55.55.55.55",
                addresses: vec![
                    a(InternalIp, "44.44.44.44"),
                    a(ExternalIp, "44.44.44.44"),
                    a(InternalIp, "55.55.55.55"),
                    a(ExternalIp, "55.55.55.55"),
                    a(Hostname, HOST),
                ],
                expected: Some(vec![a(InternalIp, "55.55.55.55"), a(ExternalIp, "55.55.55.55"), a(Hostname, HOST)]),
            },
            Case {
                name: "An Internal/ExternalIP, an Internal/ExternalDNS",
                node_ip: "10.1.1.1",
                addresses: vec![
                    a(InternalIp, "10.1.1.1"),
                    a(ExternalIp, "55.55.55.55"),
                    a(InternalDns, "ip-10-1-1-1.us-west-2.compute.internal"),
                    a(ExternalDns, "ec2-55-55-55-55.us-west-2.compute.amazonaws.com"),
                    a(Hostname, HOST),
                ],
                expected: Some(vec![
                    a(InternalIp, "10.1.1.1"),
                    a(ExternalIp, "55.55.55.55"),
                    a(InternalDns, "ip-10-1-1-1.us-west-2.compute.internal"),
                    a(ExternalDns, "ec2-55-55-55-55.us-west-2.compute.amazonaws.com"),
                    a(Hostname, HOST),
                ]),
            },
            Case {
                name: "An Internal with multiple internal IPs",
                node_ip: "10.1.1.1",
                addresses: vec![
                    a(InternalIp, "10.1.1.1"),
                    a(InternalIp, "10.2.2.2"),
                    a(InternalIp, "10.3.3.3"),
                    a(ExternalIp, "55.55.55.55"),
                    a(Hostname, HOST),
                ],
                expected: Some(vec![a(InternalIp, "10.1.1.1"), a(ExternalIp, "55.55.55.55"), a(Hostname, HOST)]),
            },
            Case {
                name: "An InternalIP that isn't valid: should error",
                node_ip: "10.2.2.2",
                addresses: vec![a(InternalIp, "10.1.1.1"), a(ExternalIp, "55.55.55.55"), a(Hostname, HOST)],
                expected: None,
            },
            Case {
                name: "Dual-stack cloud, with nodeIP, different IPv6 formats",
                node_ip: "2600:1f14:1d4:d101::ba3d",
                addresses: vec![
                    a(InternalIp, "10.1.1.1"),
                    a(InternalIp, "2600:1f14:1d4:d101:0:0:0:ba3d"),
                    a(Hostname, HOST),
                ],
                expected: Some(vec![a(InternalIp, "2600:1f14:1d4:d101:0:0:0:ba3d"), a(Hostname, HOST)]),
            },
            Case {
                name: "Single-stack cloud, dual-stack request",
                node_ip: "10.1.1.1,fc01:1234::5678",
                addresses: vec![a(InternalIp, "10.1.1.1"), a(Hostname, HOST)],
                expected: None,
            },
            Case {
                name: "Dual-stack cloud, IPv4 first, IPv4-primary request",
                node_ip: "10.1.1.1,fc01:1234::5678",
                addresses: vec![a(InternalIp, "10.1.1.1"), a(InternalIp, "fc01:1234::5678"), a(Hostname, HOST)],
                expected: Some(vec![a(InternalIp, "10.1.1.1"), a(InternalIp, "fc01:1234::5678"), a(Hostname, HOST)]),
            },
            Case {
                name: "Dual-stack cloud, IPv6 first, IPv4-primary request",
                node_ip: "10.1.1.1,fc01:1234::5678",
                addresses: vec![a(InternalIp, "fc01:1234::5678"), a(InternalIp, "10.1.1.1"), a(Hostname, HOST)],
                expected: Some(vec![a(InternalIp, "10.1.1.1"), a(InternalIp, "fc01:1234::5678"), a(Hostname, HOST)]),
            },
            Case {
                name: "Dual-stack cloud, dual-stack request, multiple IPs",
                node_ip: "10.1.1.1,fc01:1234::5678",
                addresses: vec![
                    a(InternalIp, "10.1.1.1"),
                    a(InternalIp, "10.1.1.2"),
                    a(InternalIp, "fc01:1234::1234"),
                    a(InternalIp, "fc01:1234::5678"),
                    a(Hostname, HOST),
                ],
                expected: Some(vec![a(InternalIp, "10.1.1.1"), a(InternalIp, "fc01:1234::5678"), a(Hostname, HOST)]),
            },
            Case {
                name: "Dual-stack cloud, dual-stack request, extra ExternalIP",
                node_ip: "10.1.1.1,fc01:1234::5678",
                addresses: vec![
                    a(InternalIp, "10.1.1.1"),
                    a(ExternalIp, "55.55.55.55"),
                    a(InternalIp, "fc01:1234::1234"),
                    a(InternalIp, "fc01:1234::5678"),
                    a(Hostname, HOST),
                ],
                expected: Some(vec![
                    a(InternalIp, "10.1.1.1"),
                    a(InternalIp, "fc01:1234::5678"),
                    a(ExternalIp, "55.55.55.55"),
                    a(Hostname, HOST),
                ]),
            },
            Case {
                name: "Dual-stack cloud, dual-stack request, multiple ExternalIPs",
                node_ip: "fc01:1234::5678,10.1.1.1",
                addresses: vec![
                    a(InternalIp, "10.1.1.1"),
                    a(ExternalIp, "55.55.55.55"),
                    a(InternalIp, "fc01:1234::5678"),
                    a(ExternalIp, "2001:db1::1"),
                    a(Hostname, HOST),
                ],
                expected: Some(vec![
                    a(InternalIp, "fc01:1234::5678"),
                    a(InternalIp, "10.1.1.1"),
                    a(ExternalIp, "55.55.55.55"),
                    a(ExternalIp, "2001:db1::1"),
                    a(Hostname, HOST),
                ]),
            },
            Case {
                name: "Dual-stack cloud, dual-stack request, mixed InternalIP/ExternalIP match",
                node_ip: "55.55.55.55,fc01:1234::5678",
                addresses: vec![
                    a(InternalIp, "10.1.1.1"),
                    a(ExternalIp, "55.55.55.55"),
                    a(InternalIp, "fc01:1234::5678"),
                    a(ExternalIp, "2001:db1::1"),
                    a(Hostname, HOST),
                ],
                expected: Some(vec![a(ExternalIp, "55.55.55.55"), a(InternalIp, "fc01:1234::5678"), a(Hostname, HOST)]),
            },
        ];
        assert_eq!(cases.len(), 14, "every upstream case is here");
        for c in cases {
            let got = get_node_addresses_from_node_ip(c.node_ip, &c.addresses);
            match (&c.expected, &got) {
                (Some(want), Ok(got)) => assert_eq!(got, want, "case {:?}", c.name),
                (None, Err(_)) => {}
                _ => panic!("case {:?}: expected {:?}, got {:?}", c.name, c.expected, got),
            }
        }
    }

    /// Upstream `TestNodeAddressesChangeDetected` (its 5 assertions, same data).
    #[test]
    fn test_node_addresses_change_detected() {
        let set = |v: &[(AddressType, &str)]| v.iter().map(|(k, ad)| a(k.clone(), ad)).collect::<Vec<_>>();
        let host = (Hostname, "hostname.zone.region.aws.test");
        assert!(
            !node_addresses_change_detected(
                &set(&[(InternalIp, "10.0.0.1"), (ExternalIp, "132.143.154.163")]),
                &set(&[(InternalIp, "10.0.0.1"), (ExternalIp, "132.143.154.163")])
            ),
            "identical sets are unchanged"
        );
        assert!(
            node_addresses_change_detected(
                &set(&[(InternalIp, "10.0.0.1"), (ExternalIp, "132.143.154.164")]),
                &set(&[(InternalIp, "10.0.0.1"), (ExternalIp, "132.143.154.163")])
            ),
            "ExternalIP differs"
        );
        assert!(
            node_addresses_change_detected(
                &set(&[(InternalIp, "10.0.0.1"), (ExternalIp, "132.143.154.164"), host.clone()]),
                &set(&[(InternalIp, "10.0.0.1"), (ExternalIp, "132.143.154.164")])
            ),
            "extra Hostname in old"
        );
        assert!(
            node_addresses_change_detected(
                &set(&[(InternalIp, "10.0.0.1"), (ExternalIp, "132.143.154.164")]),
                &set(&[(InternalIp, "10.0.0.1"), (ExternalIp, "132.143.154.164"), host])
            ),
            "extra Hostname in new"
        );
        assert!(
            node_addresses_change_detected(
                &set(&[(ExternalIp, "10.0.0.1"), (InternalIp, "132.143.154.163")]),
                &set(&[(InternalIp, "10.0.0.1"), (ExternalIp, "132.143.154.163")])
            ),
            "Internal/External swapped"
        );
    }

    #[test]
    fn differ_is_stable_for_dual_stack_internal_ips() {
        let dual = vec![a(InternalIp, "10.0.0.2"), a(InternalIp, "fd00::2"), a(Hostname, "n")];
        // Upstream's map-by-type check flags this as changed on every pass (#73410).
        assert!(node_addresses_change_detected(&dual, &dual));
        assert!(!node_addresses_differ(&dual, &dual));
        assert!(node_addresses_differ(&dual, &dual[..2]));
    }

    #[test]
    fn provided_node_ip_parsing() {
        assert_eq!(parse_node_ip_annotation("10.0.0.1"), Ok(vec![IpAddr::from([10, 0, 0, 1])]));
        assert_eq!(parse_node_ip_annotation("010.000.000.001"), Ok(vec![IpAddr::from([10, 0, 0, 1])]));
        assert!(matches!(parse_node_ip_annotation("invalid-ip"), Err(NodeIpError::Unparsable { .. })));
        assert!(matches!(parse_node_ip_annotation("10.0.0.1, 10.0.0.2"), Err(NodeIpError::Unparsable { .. })));
        assert!(matches!(parse_node_ip_annotation("10.0.0.1,10.0.0.2"), Err(NodeIpError::NotSingleOrDualStack(_))));
        assert!(matches!(parse_node_ip_annotation("0.0.0.0,fc00::1"), Err(NodeIpError::UnspecifiedInDualStack(_))));
        assert!(matches!(parse_node_ip_annotation(""), Err(NodeIpError::Unparsable { .. })));
        // IPv4-mapped IPv6 equals its IPv4 form, like Go's net.IP.Equal.
        assert_eq!(parse_ip_sloppy("::ffff:10.0.0.1"), Some(IpAddr::from([10, 0, 0, 1])));
    }
}
