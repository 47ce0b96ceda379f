//! The node IPAM flags: upstream's `--cidr-allocator-type` and kube-controller-manager's
//! `--node-cidr-mask-size*` and `--service-cluster-ip-range`, read by `node-ipam-controller`.

use clap::Args;
use cloud_controllers::ipam::{Allocations, ClusterRange, NodeIpamConfig};
use cloud_controllers::route::plan::parse_cidr_sloppy;
use ipnet::IpNet;

/// Upstream's range allocator: every range from `--cluster-cidr`.
pub const RANGE_ALLOCATOR: &str = "RangeAllocator";
/// IPv4 from `--cluster-cidr`, IPv6 from each node's own instance prefix.
pub const CLOUD_ALLOCATOR: &str = "CloudAllocator";

/// kube-controller-manager's default node masks.
const DEFAULT_MASK_IPV4: u8 = 24;
const DEFAULT_MASK_IPV6_RANGE: u8 = 64;
/// The cloud allocator's default: a /80 of the node's /64 leaves 2^48 pod addresses and
/// 65535 other blocks (the node's own addresses among them) outside the pod range.
pub const DEFAULT_MASK_IPV6_CLOUD: u8 = 80;
/// Masks the cloud allocator accepts: longer than a /64 (the first block holds the node's
/// own addresses) and at most /120 (256 pod addresses).
const CLOUD_MASKS: std::ops::RangeInclusive<u8> = 65..=120;
/// kube-controller-manager's `cidrUpdateWorkers`.
const WORKERS: usize = 30;

/// Node IPAM flags.
#[derive(Debug, Clone, Args)]
pub struct NodeIpamArgs {
    /// Allocator of node-ipam-controller (enabled with --controllers=*,node-ipam-controller and
    /// --allocate-node-cidrs=true): RangeAllocator (every pod range from --cluster-cidr, as
    /// kube-controller-manager) or CloudAllocator (IPv4 from --cluster-cidr, IPv6 carved from
    /// each node's server /64).
    #[arg(long, default_value = RANGE_ALLOCATOR)]
    pub cidr_allocator_type: String,

    /// Node pod range mask of a single-stack cluster (kube-controller-manager's; not with a
    /// dual-stack --cluster-cidr nor with the per-family flags).
    #[arg(long, allow_negative_numbers = true)]
    pub node_cidr_mask_size: Option<i64>,

    /// Node pod range mask for IPv4 (default 24).
    #[arg(long, allow_negative_numbers = true)]
    pub node_cidr_mask_size_ipv4: Option<i64>,

    /// Node pod range mask for IPv6 (default 64 with RangeAllocator; 80 with CloudAllocator,
    /// which accepts 65-120).
    #[arg(long, allow_negative_numbers = true)]
    pub node_cidr_mask_size_ipv6: Option<i64>,

    /// The Services' cluster IP range (one, or an IPv4 and an IPv6 CIDR): never handed out as
    /// a pod range.
    #[arg(long, default_value = "")]
    pub service_cluster_ip_range: String,
}

/// What node IPAM resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeIpam {
    /// Not running; IPv6 pod CIDRs are routed like IPv4 ones.
    Off,
    /// Running with this configuration.
    On(NodeIpamConfig),
}

impl NodeIpam {
    /// Whether IPv6 pod ranges come from the nodes' own prefixes (so they need no route).
    pub(crate) fn node_local_ipv6(&self) -> bool {
        matches!(self, NodeIpam::On(c) if c.node_prefix_ipv6_mask.is_some())
    }
}

fn mask(flag: &str, value: Option<i64>, errors: &mut Vec<String>) -> Option<u8> {
    let v = value?;
    match u8::try_from(v) {
        Ok(m) if m <= 128 => Some(m),
        _ => {
            errors.push(format!("--{flag}: {v} is not a prefix length (0-32 for IPv4, 0-128 for IPv6)"));
            None
        }
    }
}

impl NodeIpamArgs {
    fn mask_flags_given(&self) -> bool {
        self.node_cidr_mask_size.is_some()
            || self.node_cidr_mask_size_ipv4.is_some()
            || self.node_cidr_mask_size_ipv6.is_some()
    }

    /// Resolves the flags. `enabled`: `--controllers` names node-ipam-controller; `allocate`:
    /// `--allocate-node-cidrs`; `cluster_cidrs`: the parsed `--cluster-cidr`.
    pub(crate) fn validate(
        &self,
        enabled: bool,
        allocate: bool,
        cluster_cidrs: &[IpNet],
        errors: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) -> NodeIpam {
        let service_cidrs = self.service_cidrs(errors);
        let cloud = match self.cidr_allocator_type.as_str() {
            RANGE_ALLOCATOR => false,
            CLOUD_ALLOCATOR => true,
            other if enabled && allocate => {
                errors.push(format!(
                    "--cidr-allocator-type: {other:?} is not supported; accepted: {RANGE_ALLOCATOR} (every pod range \
                     from --cluster-cidr), {CLOUD_ALLOCATOR} (IPv4 from --cluster-cidr, IPv6 from each node's server)"
                ));
                return NodeIpam::Off;
            }
            _ => false,
        };
        if !enabled {
            if self.cidr_allocator_type != RANGE_ALLOCATOR || self.mask_flags_given() {
                warnings.push(
                    "--cidr-allocator-type and --node-cidr-mask-size* have no effect: node-ipam-controller is not \
                     enabled (pod CIDRs come from kube-controller-manager; to allocate them here use \
                     --controllers=*,node-ipam-controller with --allocate-node-cidrs=true and run \
                     kube-controller-manager with --allocate-node-cidrs=false)"
                        .to_owned(),
                );
            }
            return NodeIpam::Off;
        }
        if !allocate {
            warnings.push(
                "node-ipam-controller not started: --allocate-node-cidrs=false (upstream starts it only with true)"
                    .to_owned(),
            );
            return NodeIpam::Off;
        }
        let before = errors.len();
        let (v4, v6) = self.masks(cluster_cidrs, cloud, errors);
        if cloud {
            if cluster_cidrs.iter().any(|c| c.addr().is_ipv6()) {
                errors.push(format!(
                    "--cluster-cidr: with --cidr-allocator-type={CLOUD_ALLOCATOR} IPv6 pod ranges come from each node's \
                     own prefix; give only the IPv4 cluster CIDR (dual-stack) or none (IPv6-only)"
                ));
            }
            if !CLOUD_MASKS.contains(&v6) {
                errors.push(format!(
                    "--node-cidr-mask-size-ipv6: /{v6} does not fit {CLOUD_ALLOCATOR}: the range is carved from a \
                     node's /64 and must leave its first block (the node's own addresses) out, so 65-120 are \
                     accepted (default {DEFAULT_MASK_IPV6_CLOUD})"
                ));
            }
        } else if cluster_cidrs.is_empty() {
            errors.push(format!(
                "--cluster-cidr: required by node-ipam-controller with --cidr-allocator-type={RANGE_ALLOCATOR}: the \
                 cluster's pod network, e.g. 10.244.0.0/16 (dual-stack: one IPv4 and one IPv6 CIDR)"
            ));
        }
        let cluster_ranges: Vec<ClusterRange> = cluster_cidrs
            .iter()
            .map(|c| ClusterRange { cidr: *c, node_mask: if c.addr().is_ipv4() { v4 } else { v6 } })
            .collect();
        let config = NodeIpamConfig {
            cluster_ranges,
            node_prefix_ipv6_mask: cloud.then_some(v6),
            service_cidrs,
            workers: WORKERS,
        };
        if let Err(e) = Allocations::new(&config) {
            errors.push(format!("--node-cidr-mask-size*: {e}"));
        }
        if errors.len() > before { NodeIpam::Off } else { NodeIpam::On(config) }
    }

    /// kube-controller-manager's `setNodeCIDRMaskSizes`.
    fn masks(&self, cluster_cidrs: &[IpNet], cloud: bool, errors: &mut Vec<String>) -> (u8, u8) {
        let single = mask("node-cidr-mask-size", self.node_cidr_mask_size, errors);
        let v4 = mask("node-cidr-mask-size-ipv4", self.node_cidr_mask_size_ipv4, errors);
        let v6 = mask("node-cidr-mask-size-ipv6", self.node_cidr_mask_size_ipv6, errors);
        let default_v6 = if cloud { DEFAULT_MASK_IPV6_CLOUD } else { DEFAULT_MASK_IPV6_RANGE };
        let Some(single) = single else {
            return (v4.unwrap_or(DEFAULT_MASK_IPV4), v6.unwrap_or(default_v6));
        };
        if cluster_cidrs.len() > 1 || (cloud && !cluster_cidrs.is_empty()) {
            errors.push(
                "--node-cidr-mask-size: not allowed in a dual-stack cluster; use --node-cidr-mask-size-ipv4 and \
                 --node-cidr-mask-size-ipv6"
                    .to_owned(),
            );
        } else if v4.is_some() || v6.is_some() {
            errors.push(
                "--node-cidr-mask-size: not allowed with --node-cidr-mask-size-ipv4 or --node-cidr-mask-size-ipv6"
                    .to_owned(),
            );
        }
        (single, single)
    }

    /// `--service-cluster-ip-range`: at most two CIDRs, one per family.
    fn service_cidrs(&self, errors: &mut Vec<String>) -> Vec<IpNet> {
        let mut out = Vec::new();
        for item in self.service_cluster_ip_range.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match parse_cidr_sloppy(item) {
                Some(c) => out.push(c),
                None => errors.push(format!(
                    "--service-cluster-ip-range: {item:?} is not a CIDR (expected e.g. 10.96.0.0/12, or an IPv4 and an \
                     IPv6 CIDR, comma-separated)"
                )),
            }
        }
        if out.len() > 2 || (out.len() == 2 && out[0].addr().is_ipv4() == out[1].addr().is_ipv4()) {
            errors.push("--service-cluster-ip-range: at most two CIDRs, one IPv4 and one IPv6".to_owned());
        }
        out
    }
}

#[cfg(test)]
#[path = "ipam_tests.rs"]
mod tests;
