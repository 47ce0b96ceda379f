//! IPs and CIDRs from outside: the `private-subnet-ip-range` annotation and
//! `HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE` (`parse_cidr`), `loadBalancerSourceRanges`
//! and its annotation (`parse_ip_nets`), and a Node's `alpha.kubernetes.io/provided-node-ip`
//! annotation (`parse_node_ip_annotation`, `parse_ip_sloppy`).
//!
//! Properties: a parsed network is its own network address and prints as a CIDR that parses
//! back to it; a parsed set of source ranges printed and parsed again is the same set; node IPs
//! printed and parsed again are the same IPs.

#![no_main]

use cloud_provider::helpers::address::{parse_ip_sloppy, parse_node_ip_annotation};
use cloud_provider::helpers::service::parse_ip_nets;
use hcloud_provider::load_balancers::annotations::parse_cidr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };

    if let Some(net) = parse_cidr(s) {
        assert_eq!(net, net.trunc(), "{s:?}");
        assert_eq!(parse_cidr(&net.to_string()), Some(net), "{s:?} printed as {net}");
    }

    if let Ok(set) = parse_ip_nets(s.split(',')) {
        let printed: Vec<String> = set.iter().map(ToString::to_string).collect();
        let again = parse_ip_nets(printed.iter().map(String::as_str));
        assert_eq!(again.as_ref(), Ok(&set), "{s:?} printed as {printed:?}");
    }

    if let Some(ip) = parse_ip_sloppy(s) {
        assert_eq!(parse_ip_sloppy(&ip.to_string()), Some(ip), "{s:?} printed as {ip}");
    }

    if let Ok(ips) = parse_node_ip_annotation(s) {
        assert!(!ips.is_empty() && ips.len() <= 2, "{s:?}: {ips:?}");
        let printed: Vec<String> = ips.iter().map(ToString::to_string).collect();
        assert_eq!(parse_node_ip_annotation(&printed.join(",")).ok(), Some(ips), "{s:?}");
    }
});
