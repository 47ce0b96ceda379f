//! The node IPAM decisions (upstream `range_allocator.go`, plus a cloud allocator that carves
//! each node's IPv6 range from its instance's own prefix). Pure: nodes and the provider's
//! prefixes in; the ranges to write, the exact patch and the findings to report out.
//!
//! Every range a node holds is recorded with its holder, the cloud allocator's IPv6 ranges
//! included: a range another node holds is never handed out (a moved Primary IPv6 brings a
//! /64 whose range another Node still has), ranges that overlap are reported, and releasing a
//! node's range keeps every part of it another node (or the service range) still covers.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use super::cidr_set::{CidrSet, CidrSetError};
use super::holders::Holders;
use crate::route::plan::parse_cidr_sloppy;

/// One `--cluster-cidr` entry and its family's node mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterRange {
    /// The cluster CIDR.
    pub cidr: IpNet,
    /// `--node-cidr-mask-size-ipv4` or `-ipv6`.
    pub node_mask: u8,
}

/// Settings of the node IPAM controller (upstream flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIpamConfig {
    /// `--cluster-cidr` with the node masks, in flag order (the order of `spec.podCIDRs`).
    pub cluster_ranges: Vec<ClusterRange>,
    /// `--cidr-allocator-type=CloudAllocator`: each node's IPv6 range is carved at this mask
    /// from its instance's own IPv6 prefix, and written after the cluster ranges.
    pub node_prefix_ipv6_mask: Option<u8>,
    /// `--service-cluster-ip-range`: never handed out to a node.
    pub service_cidrs: Vec<IpNet>,
    /// Nodes assigned at once.
    pub workers: usize,
}

/// The block of an instance prefix a node's IPv6 pod range is: the second one. The first
/// holds the instance's own addresses (`<prefix>::1` and its neighbours).
const NODE_PREFIX_BLOCK: u128 = 1;

/// The node's IPv6 pod range in `prefix` at `mask` (the second block, see
/// [`NODE_PREFIX_BLOCK`]); `None` if `prefix` is not IPv6 or not shorter than `mask`.
pub fn carve(prefix: IpNet, mask: u8) -> Option<IpNet> {
    let IpNet::V6(p) = prefix.trunc() else { return None };
    if mask <= p.prefix_len() || mask > 128 {
        return None;
    }
    let offset = NODE_PREFIX_BLOCK.checked_shl(u32::from(128 - mask))?;
    let addr = u128::from(p.network()) + offset;
    IpNet::new(IpAddr::V6(Ipv6Addr::from(addr)), mask).ok()
}

/// The first IPv6 prefix of `prefixes` a range of `mask` can be carved from, and the range.
pub fn carve_from(prefixes: &[IpNet], mask: u8) -> Option<(IpNet, IpNet)> {
    prefixes.iter().find_map(|p| carve(*p, mask).map(|r| (*p, r)))
}

/// Why a node gets no ranges now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignError {
    /// Upstream `ErrCIDRRangeNoCIDRsRemaining`.
    #[error(
        "no remaining CIDRs in cluster CIDR {cluster}: every /{node_mask} range is taken (grow --cluster-cidr or use a longer node mask)"
    )]
    Exhausted {
        /// The exhausted cluster CIDR.
        cluster: IpNet,
        /// Its node mask.
        node_mask: u8,
    },
    /// The IPv6 range carved from the node's instance prefix is another node's: the prefix
    /// moved (a powered-off server's Primary IPv6 assigned to this node's server) while the
    /// other Node still has the range.
    #[error(
        "the IPv6 range {range} from the prefix of node {node}'s instance is held by node {holder} (pod CIDR {held}), so node {node} gets no pod CIDRs while node {holder} has it (two Nodes would share pod addresses); the prefix probably moved from node {holder}'s server to this one: delete Node {holder} if its server no longer has that prefix"
    )]
    Ipv6RangeInUse {
        /// The node.
        node: String,
        /// The range it would get.
        range: IpNet,
        /// The node holding it.
        holder: String,
        /// The holder's pod CIDR that covers it.
        held: IpNet,
    },
    /// The cloud allocator found no IPv6 prefix on the node's instance.
    #[error(
        "the cloud reports no IPv6 prefix of /{mask} or shorter for the instance of node {node}, so it gets no pod CIDRs until it has one (an IPv4-only spec.podCIDRs could never get IPv6 later)"
    )]
    NoIpv6Prefix {
        /// The node.
        node: String,
        /// The node mask a prefix must be shorter than.
        mask: u8,
    },
}

/// A pod CIDR the allocator does not manage, found on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    /// The node's `spec.podCIDRs` entry.
    pub cidr: String,
    /// Why it is not managed (a sentence fragment).
    pub why: String,
}

/// What a node's pod CIDR overlaps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverlapWith {
    /// A pod CIDR of another node.
    Node {
        /// The other node.
        node: String,
        /// Its pod CIDR.
        cidr: IpNet,
    },
    /// A `--service-cluster-ip-range` entry.
    ServiceRange(IpNet),
}

/// A node's pod CIDR that overlaps another node's or the service range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The node's pod CIDR.
    pub cidr: IpNet,
    /// What it overlaps.
    pub with: OverlapWith,
}

impl Overlap {
    /// The Warning's message about `node`.
    pub fn message(&self, node: &str) -> String {
        let cidr = self.cidr;
        match &self.with {
            OverlapWith::Node { node: other, cidr: theirs } => format!(
                "pod CIDR {cidr} of node {node} overlaps pod CIDR {theirs} of node {other}: pods of the two nodes can get \
                 the same addresses. No part of either range is handed out again while a node holds it; delete one of \
                 the Nodes so its kubelet registers it again and it gets a free range"
            ),
            OverlapWith::ServiceRange(service) => format!(
                "pod CIDR {cidr} of node {node} overlaps the service range {service} (--service-cluster-ip-range): pods \
                 can get Service addresses. The service range is never handed out; delete the Node so its kubelet \
                 registers it again and it gets a range outside the service range"
            ),
        }
    }
}

/// What the allocator makes of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// The node needs ranges.
    NeedsRanges,
    /// Ranges were assigned to this node and written; the write is on its way into the cache.
    Assigned,
    /// Ranges were assigned to this node, and whether the API server stored their write is
    /// not known (the answer was lost): the same write is to be sent again.
    Pending(Vec<IpNet>),
    /// The node holds its ranges (now recorded).
    Holds {
        /// Its IPv6 range, to be checked against the instance's prefix (cloud allocator).
        ipv6_from_prefix: Option<IpNet>,
        /// Entries the allocator does not manage (outside every cluster CIDR, or unparsable).
        foreign: Vec<Foreign>,
        /// Its ranges that overlap another node's or the service range.
        overlaps: Vec<Overlap>,
    },
}

/// The ranges a node holds: cluster ranges and the cloud allocator's IPv6 range.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    uid: String,
    cidrs: Vec<IpNet>,
    /// Seen on the node or written with a success; `false`: assigned, the write's outcome
    /// is not known yet.
    written: bool,
}

/// The ranges taken in every cluster CIDR and which node holds which.
#[derive(Debug, Clone)]
pub struct Allocations {
    sets: Vec<CidrSet>,
    node_prefix_ipv6_mask: Option<u8>,
    service_cidrs: Vec<IpNet>,
    held: HashMap<String, Held>,
    holders: Holders,
}

fn overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(b) || b.contains(a)
}

fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

fn uid(node: &Node) -> &str {
    node.metadata.uid.as_deref().unwrap_or_default()
}

/// The node's `spec.podCIDRs` as written.
pub fn node_pod_cidrs(node: &Node) -> &[String] {
    node.spec.as_ref().and_then(|s| s.pod_cidrs.as_deref()).unwrap_or_default()
}

impl Allocations {
    /// Empty sets for `config`, with the service ranges taken (upstream
    /// `filterOutServiceRange`).
    pub fn new(config: &NodeIpamConfig) -> Result<Allocations, CidrSetError> {
        let mut sets = Vec::with_capacity(config.cluster_ranges.len());
        for range in &config.cluster_ranges {
            let mut set = CidrSet::new(range.cidr, range.node_mask)?;
            for service in &config.service_cidrs {
                set.occupy(*service);
            }
            sets.push(set);
        }
        Ok(Allocations {
            sets,
            node_prefix_ipv6_mask: config.node_prefix_ipv6_mask,
            service_cidrs: config.service_cidrs.clone(),
            held: HashMap::new(),
            holders: Holders::default(),
        })
    }

    /// The cluster CIDR sets, in flag order.
    pub fn sets(&self) -> &[CidrSet] {
        &self.sets
    }

    /// `node` holds `cidr`: recorded, and taken in its cluster CIDR (if any).
    fn take(&mut self, node: &str, cidr: IpNet) {
        self.holders.insert(cidr, node);
        for set in &mut self.sets {
            set.occupy(cidr);
        }
    }

    /// `node` no longer holds `cidr`: it is free again, except every part of it another
    /// node's range or the service range still covers.
    fn free(&mut self, node: &str, cidr: IpNet) {
        self.holders.remove(cidr, node);
        let still: Vec<IpNet> = self
            .holders
            .overlapping(cidr)
            .into_iter()
            .map(|(c, _)| c)
            .chain(self.service_cidrs.iter().copied().filter(|s| overlap(s, &cidr)))
            .collect();
        for set in &mut self.sets {
            set.release(cidr);
            for c in &still {
                set.occupy(*c);
            }
        }
    }

    fn release_held(&mut self, node: &str) {
        if let Some(held) = self.held.remove(node) {
            for cidr in held.cidrs {
                self.free(node, cidr);
            }
        }
    }

    /// The node is gone: its ranges are free again. True if it held any range.
    pub fn forget(&mut self, node: &str) -> bool {
        let held = self.held.get(node).is_some_and(|h| !h.cidrs.is_empty());
        self.release_held(node);
        held
    }

    /// Records what `node` holds (taking its ranges, upstream `occupyCIDRs`) and says whether
    /// it still needs ranges, and which of its ranges overlap another node's or the service
    /// range. A node with another UID than the one recorded under its name is a new node: the
    /// old one's ranges are released first.
    pub fn observe(&mut self, node: &Node) -> Observed {
        let (node_name, node_uid) = (name(node), uid(node));
        if self.held.get(node_name).is_some_and(|h| h.uid != node_uid) {
            self.release_held(node_name);
        }
        let written = node_pod_cidrs(node);
        if written.is_empty() {
            return match self.held.get(node_name) {
                None => Observed::NeedsRanges,
                Some(h) if h.written => Observed::Assigned,
                Some(h) => Observed::Pending(h.cidrs.clone()),
            };
        }
        let mut cidrs = Vec::new();
        let mut foreign = Vec::new();
        let mut ipv6_from_prefix = None;
        for entry in written {
            let Some(cidr) = parse_cidr_sloppy(entry) else {
                foreign.push(Foreign { cidr: entry.clone(), why: "is not a CIDR".to_owned() });
                continue;
            };
            let family_set = self.sets.iter_mut().find(|s| s.cluster().addr().is_ipv4() == cidr.addr().is_ipv4());
            match family_set {
                Some(set) if set.cluster().contains(&cidr) => cidrs.push(cidr),
                Some(set) => foreign
                    .push(Foreign { cidr: entry.clone(), why: format!("lies outside cluster CIDR {}", set.cluster()) }),
                None if cidr.addr().is_ipv6() && self.node_prefix_ipv6_mask.is_some() => {
                    ipv6_from_prefix = Some(cidr);
                    cidrs.push(cidr);
                }
                None => foreign.push(Foreign {
                    cidr: entry.clone(),
                    why: format!("is {} and no cluster CIDR of that family is configured", family(&cidr)),
                }),
            }
        }
        let mut overlaps = Vec::new();
        for cidr in &cidrs {
            for (theirs, other) in self.holders.overlapping(*cidr) {
                if other != node_name {
                    overlaps.push(Overlap {
                        cidr: *cidr,
                        with: OverlapWith::Node { node: other.to_owned(), cidr: theirs },
                    });
                }
            }
            for service in self.service_cidrs.iter().filter(|s| overlap(s, cidr)) {
                overlaps.push(Overlap { cidr: *cidr, with: OverlapWith::ServiceRange(*service) });
            }
        }
        // Ranges recorded earlier that the node no longer lists (it never can, podCIDRs are
        // immutable, but a cache can be behind, or a write whose outcome was unknown lost to
        // another writer's) are released.
        let stale: Vec<IpNet> = self
            .held
            .get(node_name)
            .map(|h| h.cidrs.iter().filter(|c| !cidrs.contains(c)).copied().collect())
            .unwrap_or_default();
        for cidr in stale {
            self.free(node_name, cidr);
        }
        for cidr in &cidrs {
            self.take(node_name, *cidr);
        }
        self.held.insert(node_name.to_owned(), Held { uid: node_uid.to_owned(), cidrs, written: true });
        Observed::Holds { ipv6_from_prefix, foreign, overlaps }
    }

    /// Takes the node's ranges: one from each cluster CIDR (in flag order), then, with the
    /// cloud allocator, its IPv6 range from `prefixes` (the instance's own), unless another
    /// node holds it. Nothing is taken if any part fails. The ranges are the node's until
    /// [`Allocations::unassign`] or [`Allocations::forget`]; their write is pending until
    /// [`Allocations::written`].
    pub fn assign(&mut self, node: &Node, prefixes: &[IpNet]) -> Result<Vec<IpNet>, AssignError> {
        let node_name = name(node);
        // Whatever was recorded for the node before (nothing, when it needs ranges) is let go.
        self.release_held(node_name);
        let ipv6 = match self.node_prefix_ipv6_mask {
            None => None,
            Some(mask) => match carve_from(prefixes, mask) {
                Some((_, range)) => {
                    let holder = self.holders.overlapping(range).into_iter().find(|(_, n)| *n != node_name);
                    if let Some((held, holder)) = holder {
                        return Err(AssignError::Ipv6RangeInUse {
                            node: node_name.to_owned(),
                            range,
                            holder: holder.to_owned(),
                            held,
                        });
                    }
                    Some(range)
                }
                None => return Err(AssignError::NoIpv6Prefix { node: node_name.to_owned(), mask }),
            },
        };
        let mut taken = Vec::with_capacity(self.sets.len() + 1);
        for i in 0..self.sets.len() {
            match self.sets[i].allocate_next() {
                Some(cidr) => taken.push(cidr),
                None => {
                    for cidr in &taken {
                        for set in &mut self.sets {
                            set.release(*cidr);
                        }
                    }
                    let set = &self.sets[i];
                    return Err(AssignError::Exhausted { cluster: set.cluster(), node_mask: set.node_mask() });
                }
            }
        }
        taken.extend(ipv6);
        for cidr in &taken {
            self.take(node_name, *cidr);
        }
        self.held
            .insert(node_name.to_owned(), Held { uid: uid(node).to_owned(), cidrs: taken.clone(), written: false });
        Ok(taken)
    }

    /// The write of the node's assignment succeeded.
    pub fn written(&mut self, node: &str) {
        if let Some(h) = self.held.get_mut(node) {
            h.written = true;
        }
    }

    /// The write of an assignment was refused (the API server stored nothing): the node's
    /// ranges are free again.
    pub fn unassign(&mut self, node: &str) {
        self.release_held(node);
    }
}

fn family(cidr: &IpNet) -> &'static str {
    if cidr.addr().is_ipv4() { "IPv4" } else { "IPv6" }
}

/// Whether `range` (a node's IPv6 pod range from the cloud allocator) lies in one of the
/// instance's `prefixes`; `Some(message)` if not (the instance's prefix changed under the
/// node's immutable `spec.podCIDRs`).
pub fn check_in_prefixes(node: &str, range: IpNet, prefixes: &[IpNet]) -> Option<String> {
    if prefixes.iter().any(|p| p.contains(&range)) {
        return None;
    }
    let now = if prefixes.is_empty() {
        "has no IPv6 prefix now".to_owned()
    } else {
        format!("now has {}", prefixes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
    };
    Some(format!(
        "pod CIDR {range} of node {node} is not inside its instance's IPv6 prefix any more (the instance {now}); \
         spec.podCIDRs cannot change, so pods on this node are unreachable: delete the Node so its kubelet \
         registers it again and it gets a range from the current prefix"
    ))
}

/// The write that assigns `cidrs` (upstream `PatchNodeCIDRs`): `spec.podCIDR` is the first,
/// `spec.podCIDRs` all of them, as one JSON merge patch. No resourceVersion: the API server
/// refuses any change of pod CIDRs once they are set, so a racing writer cannot be
/// overwritten.
pub fn pod_cidrs_patch(cidrs: &[IpNet]) -> Value {
    let all: Vec<String> = cidrs.iter().map(ToString::to_string).collect();
    json!({ "spec": { "podCIDR": all.first(), "podCIDRs": all } })
}

#[cfg(test)]
#[path = "allocator_tests.rs"]
mod tests;
