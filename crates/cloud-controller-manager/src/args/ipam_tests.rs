//! The node IPAM flags: when node-ipam-controller runs, and what its flags resolve to.

use clap::Parser;
use cloud_controllers::ipam::{ClusterRange, NodeIpamConfig};
use ipnet::IpNet;

use crate::args::ManagerArgs;
use crate::options::Options;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
}

fn validate(extra: &[&str]) -> Result<Options, Vec<String>> {
    let mut argv = vec!["ccm", "--cloud-provider=fake", "--allow-untagged-cloud"];
    argv.extend_from_slice(extra);
    Cli::try_parse_from(argv).expect("parses").manager.validate("fake")
}

fn net(s: &str) -> IpNet {
    s.parse().expect("cidr")
}

const ON: [&str; 2] = ["--controllers=*,nodeipam", "--allocate-node-cidrs=true"];

fn with_on(extra: &[&str]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = ON.to_vec();
    v.extend(extra.iter().map(|s| -> &'static str { Box::leak(s.to_string().into_boxed_str()) }));
    v
}

/// Off by default, and off with only the official CCM's usual flags (kube-controller-manager
/// allocates then); a no-effect flag is named in a warning.
#[test]
fn node_ipam_runs_only_when_named_and_allocating() {
    let o = validate(&["--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16"]).expect("valid");
    assert_eq!(o.node_ipam, None);
    assert!(!o.controllers.contains(crate::controller_set::NODE_IPAM));
    assert!(o.warnings.iter().all(|w| !w.contains("node-ipam")), "{:?}", o.warnings);
    let o = validate(&["--cidr-allocator-type=CloudAllocator"]).expect("valid");
    assert!(
        o.warnings.iter().any(|w| w.contains("have no effect: node-ipam-controller is not enabled")),
        "{:?}",
        o.warnings
    );
    let o = validate(&["--controllers=*,node-ipam-controller", "--cluster-cidr=10.244.0.0/16"]).expect("valid");
    assert_eq!(o.node_ipam, None);
    assert!(o.warnings.iter().any(|w| w.contains("not started: --allocate-node-cidrs=false")), "{:?}", o.warnings);
}

/// kube-controller-manager's defaults: /24 for IPv4 and /64 for IPv6 from the cluster CIDRs,
/// in flag order, the service range kept out.
#[test]
fn range_allocator_follows_kube_controller_manager() {
    let o = validate(&with_on(&[
        "--cluster-cidr=fd00:10:244::/56,10.244.0.0/16",
        "--service-cluster-ip-range=10.96.0.0/12",
        "--configure-cloud-routes=false",
    ]))
    .expect("valid");
    assert_eq!(
        o.node_ipam,
        Some(NodeIpamConfig {
            cluster_ranges: vec![
                ClusterRange { cidr: net("fd00:10:244::/56"), node_mask: 64 },
                ClusterRange { cidr: net("10.244.0.0/16"), node_mask: 24 },
            ],
            node_prefix_ipv6_mask: None,
            service_cidrs: vec![net("10.96.0.0/12")],
            workers: 30,
        })
    );
    let o = validate(&with_on(&["--cluster-cidr=10.0.0.0/8", "--node-cidr-mask-size=26"])).expect("valid");
    assert_eq!(o.node_ipam.expect("on").cluster_ranges, vec![ClusterRange { cidr: net("10.0.0.0/8"), node_mask: 26 }]);
    let o = o.routes.expect("routes as before");
    assert!(!o.node_local_ipv6);
}

/// The cloud allocator: IPv4 from the cluster CIDR, IPv6 at /80 by default; IPv6-only needs no
/// cluster CIDR and then no route controller; the route controller skips IPv6 in dual-stack.
#[test]
fn cloud_allocator_dual_stack_and_ipv6_only() {
    let o =
        validate(&with_on(&["--cidr-allocator-type=CloudAllocator", "--cluster-cidr=10.244.0.0/16"])).expect("valid");
    let ipam = o.node_ipam.expect("on");
    assert_eq!(ipam.node_prefix_ipv6_mask, Some(80));
    assert_eq!(ipam.cluster_ranges, vec![ClusterRange { cidr: net("10.244.0.0/16"), node_mask: 24 }]);
    assert!(o.routes.expect("routes").node_local_ipv6);

    let o = validate(&with_on(&["--cidr-allocator-type=CloudAllocator", "--node-cidr-mask-size-ipv6=112"]))
        .expect("IPv6-only needs no --cluster-cidr");
    let ipam = o.node_ipam.expect("on");
    assert_eq!((ipam.cluster_ranges.len(), ipam.node_prefix_ipv6_mask), (0, Some(112)));
    assert!(o.routes.is_none());
    assert!(o.warnings.iter().any(|w| w.contains("node-route-controller not started")), "{:?}", o.warnings);
}

/// Every refusal names the flag and what is accepted.
#[test]
fn bad_ipam_flags_are_refused_with_what_is_accepted() {
    let cases: [(&[&str], &str); 8] = [
        (
            &["--cidr-allocator-type=IPAMFromCloud"],
            "--cidr-allocator-type: \"IPAMFromCloud\" is not supported; accepted: RangeAllocator",
        ),
        (&["--configure-cloud-routes=false"], "--cluster-cidr: required by node-ipam-controller"),
        (
            &["--cidr-allocator-type=CloudAllocator", "--cluster-cidr=10.0.0.0/8,fd00::/48"],
            "give only the IPv4 cluster CIDR",
        ),
        (
            &["--cidr-allocator-type=CloudAllocator", "--node-cidr-mask-size-ipv6=64"],
            "65-120 are accepted (default 80)",
        ),
        (&["--cluster-cidr=fd00::/48", "--node-cidr-mask-size-ipv6=80"], "more than 2^16 ranges"),
        (&["--cluster-cidr=10.0.0.0/8,fd00::/48", "--node-cidr-mask-size=24"], "not allowed in a dual-stack cluster"),
        (
            &["--cluster-cidr=10.0.0.0/8", "--node-cidr-mask-size-ipv4=200"],
            "--node-cidr-mask-size-ipv4: 200 is not a prefix length",
        ),
        (
            &["--cluster-cidr=10.0.0.0/8", "--service-cluster-ip-range=nope"],
            "--service-cluster-ip-range: \"nope\" is not a CIDR",
        ),
    ];
    for (flags, needle) in cases {
        let errors = validate(&with_on(flags)).expect_err(needle);
        assert!(errors.iter().any(|e| e.contains(needle)), "{flags:?}: {errors:?}");
    }
}
