//! Pure decisions of the route controller (upstream `reconcile`): nodes + the cloud's routes
//! in, the routes to delete and create and the `NetworkUnavailable` writes out. No I/O.
//!
//! Semantics of upstream's `controllers/route/route_controller.go`, with these additions
//! (each documented where it is decided):
//! - a route is matched to its node by `target_provider_id` first (compared in the
//!   provider's canonical form), then by `target_node` (routes survive node names that
//!   differ from instance names);
//! - a route whose reported `gateway` is no longer one of its node's addresses is replaced
//!   (`update`), like a route whose `TargetNodeAddresses` differ;
//! - a node's pod CIDRs are de-duplicated before planning (upstream would create the same
//!   route twice and fail the second time);
//! - whenever a route is replaced, deletions finish before creations start (upstream waits
//!   only if the provider opted in to address comparison, kubernetes/kubernetes#98359);
//! - a node the cloud-node controller has not initialized yet (it still carries the
//!   `node.cloudprovider.kubernetes.io/uninitialized` taint) is left for later: no route is
//!   created for it and none of its routes is deleted, and its condition is untouched.
//!   Upstream tries at once, with the addresses the node does not have yet, and publishes a
//!   `FailedToCreateRoute` warning for every new node.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use cloud_provider::helpers::address::parse_ip_sloppy;
use cloud_provider::{NodeAddress, Route};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, NodeCondition};

use super::metrics::SyncTrigger;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::node::plan::is_uninitialized;

/// What happens to one pod CIDR of a node (upstream `routeAction`; `remove` is never
/// planned upstream either).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteAction {
    /// A matching route exists.
    Keep,
    /// No route exists: create one.
    Add,
    /// A route exists but points at outdated addresses: delete it, then create one.
    Update,
}

/// Parses a CIDR like Go's `netutils.ParseCIDRSloppy` (IPv4 octets may have leading zeros).
/// Host bits are allowed and dropped, as Go's `ParseCIDR` does for the network it returns.
pub fn parse_cidr_sloppy(s: &str) -> Option<IpNet> {
    if let Ok(net) = s.parse::<IpNet>() {
        return Some(net.trunc());
    }
    let (ip, len) = s.split_once('/')?;
    if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ip = parse_ip_sloppy(ip)?;
    let len: u8 = len.parse().ok()?;
    IpNet::new(ip, len).ok().map(|n| n.trunc())
}

/// Upstream `isResponsibleForRoute`: the route's destination parses, and its first or last
/// address lies inside one of the cluster CIDRs. Routes outside are never touched.
pub fn is_responsible_for_route(cluster_cidrs: &[IpNet], route: &Route) -> bool {
    let Some(cidr) = parse_cidr_sloppy(&route.destination_cidr) else {
        return false;
    };
    let (first, last) = (cidr.network(), cidr.broadcast());
    cluster_cidrs.iter().any(|c| c.contains(&first) || c.contains(&last))
}

/// The node's `spec.podCIDRs`, de-duplicated in order (`spec.podCIDR` alone is ignored, as
/// upstream does).
pub fn pod_cidrs(node: &Node) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in node.spec.as_ref().and_then(|s| s.pod_cidrs.as_deref()).unwrap_or_default() {
        if !out.contains(c) {
            out.push(c.clone());
        }
    }
    out
}

fn status_addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| a.iter().map(NodeAddress::from).collect())
        .unwrap_or_default()
}

fn provider_id(node: &Node) -> &str {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default()
}

fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// Upstream `equalNodeAddrs`: same length, and every address of `a` is in `b`.
pub fn equal_node_addrs(a: &[NodeAddress], b: &[NodeAddress]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

/// True if `gateway` is one of `addresses` (compared as IPs where both parse).
fn gateway_is_node_address(gateway: &str, addresses: &[NodeAddress]) -> bool {
    let ip: Option<IpAddr> = parse_ip_sloppy(gateway);
    addresses.iter().any(|a| match (ip, parse_ip_sloppy(&a.address)) {
        (Some(g), Some(x)) => g == x,
        _ => a.address == gateway,
    })
}

/// Upstream `getRouteAction`, plus the gateway check: the first of the node's routes with
/// exactly this destination decides; it is kept if the provider did not opt in to address
/// comparison or the addresses are equal as sets, and its reported gateway (if any) is one
/// of the node's addresses.
pub fn route_action(routes: &[&Route], cidr: &str, node_addresses: &[NodeAddress]) -> RouteAction {
    for route in routes {
        if route.destination_cidr == cidr {
            let addresses_ok =
                !route.enable_node_addresses || equal_node_addrs(node_addresses, &route.target_node_addresses);
            let gateway_ok = route.gateway.as_deref().is_none_or(|g| gateway_is_node_address(g, node_addresses));
            return if addresses_ok && gateway_ok { RouteAction::Keep } else { RouteAction::Update };
        }
    }
    RouteAction::Add
}

/// A route to create for a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCreate {
    /// The node's UID (upstream's `nameHint`).
    pub name_hint: String,
    /// The route (target node, its provider ID and addresses, destination).
    pub route: Route,
}

/// What one node's routes come down to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeRoutes {
    /// The action per pod CIDR (empty: the node has routes but no pod CIDRs).
    pub actions: BTreeMap<String, RouteAction>,
    /// The routes to create, in pod CIDR order.
    pub creations: Vec<PlannedCreate>,
}

impl NodeRoutes {
    /// Upstream's `NetworkUnavailable` decision once the creations ran: `true` (routes
    /// created) if the node has pod CIDRs and none still needs a route.
    pub fn all_created(&self, failed: &[String]) -> bool {
        !self.actions.is_empty()
            && self.actions.iter().all(|(cidr, action)| *action == RouteAction::Keep || !failed.contains(cidr))
    }
}

/// The whole reconcile, decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutePlan {
    /// Routes to delete (all inside the cluster CIDRs).
    pub deletions: Vec<Route>,
    /// Per node (by name) that has pod CIDRs or routes: its actions and creations. Nodes
    /// absent here (no pod CIDRs, no routes) keep their `NetworkUnavailable` condition.
    pub nodes: BTreeMap<String, NodeRoutes>,
    /// Deletions must finish before creations start (a route is being replaced).
    pub deletions_first: bool,
}

impl RoutePlan {
    /// Number of routes to create.
    pub fn creations(&self) -> usize {
        self.nodes.values().map(|n| n.creations.len()).sum()
    }
}

/// A provider's [`Routes::canonical_provider_id`](cloud_provider::Routes::canonical_provider_id).
pub type CanonicalProviderId<'f> = &'f (dyn for<'a> Fn(&'a str) -> Cow<'a, str> + Sync);

/// What the route controller is responsible for.
#[derive(Debug, Clone, Copy)]
pub struct RouteScope<'a> {
    /// `--cluster-cidr`: routes are only deleted inside these.
    pub cluster_cidrs: &'a [IpNet],
    /// IPv6 pod CIDRs lie in each node's own prefix (node IPAM's cloud allocator): they need
    /// no route and count as done for `NetworkUnavailable`.
    pub node_local_ipv6: bool,
}

/// [`plan_routes_matching`] with provider IDs compared as they are written, every pod CIDR
/// routed.
pub fn plan_routes(nodes: &[Arc<Node>], routes: &[Route], cluster_cidrs: &[IpNet]) -> RoutePlan {
    plan_routes_matching(nodes, routes, RouteScope { cluster_cidrs, node_local_ipv6: false }, &|p| Cow::Borrowed(p))
}

/// Upstream `reconcile` without the I/O: which routes to delete and create. Provider IDs
/// are compared in the provider's canonical form (`canonical`), so a node whose
/// `spec.providerID` is written differently from the ID the cloud reports still owns its
/// routes (otherwise its route would be deleted and created again on every reconcile).
pub fn plan_routes_matching(
    nodes: &[Arc<Node>],
    routes: &[Route],
    scope: RouteScope<'_>,
    canonical: CanonicalProviderId<'_>,
) -> RoutePlan {
    let cluster_cidrs = scope.cluster_cidrs;
    let by_name: HashMap<&str, &Node> = nodes.iter().map(|n| (name(n), n.as_ref())).collect();
    let by_provider_id: HashMap<Cow<'_, str>, &str> =
        nodes.iter().filter(|n| !provider_id(n).is_empty()).map(|n| (canonical(provider_id(n)), name(n))).collect();

    // Index the routes by the node they belong to (`None`: no known owner).
    let owner = |route: &Route| -> Option<String> {
        let route_pid = canonical(&route.target_provider_id);
        if !route_pid.is_empty()
            && let Some(node) = by_provider_id.get(&route_pid)
        {
            return Some((*node).to_owned());
        }
        if route.target_node.is_empty() {
            return None;
        }
        // A route naming a node that is now another instance (both provider IDs known and
        // different) is not that node's route.
        if let Some(node) = by_name.get(route.target_node.as_str()) {
            let pid = provider_id(node);
            if !route_pid.is_empty() && !pid.is_empty() && canonical(pid) != route_pid {
                return None;
            }
        }
        Some(route.target_node.clone())
    };
    let owners: Vec<Option<String>> = routes.iter().map(owner).collect();
    let mut routes_of: HashMap<&str, Vec<&Route>> = HashMap::new();
    for (route, owner) in routes.iter().zip(&owners) {
        if let Some(o) = owner {
            routes_of.entry(o.as_str()).or_default().push(route);
        }
    }

    // Nodes still waiting for initialization: left for later.
    let pending: HashSet<&str> = nodes.iter().filter(|n| is_uninitialized(n)).map(|n| name(n)).collect();

    let mut plan = RoutePlan::default();
    // Every node that has routes appears, even without pod CIDRs (upstream's routeMap).
    for node_name in routes_of.keys() {
        if by_name.contains_key(node_name) && !pending.contains(node_name) {
            plan.nodes.entry((*node_name).to_owned()).or_default();
        }
    }
    for node in nodes {
        let mut cidrs = pod_cidrs(node);
        if scope.node_local_ipv6 {
            cidrs.retain(|c| parse_cidr_sloppy(c).is_none_or(|n| n.addr().is_ipv4()));
        }
        if cidrs.is_empty() || pending.contains(name(node)) {
            continue;
        }
        let node_name = name(node);
        let addresses = status_addresses(node);
        let own = routes_of.get(node_name).map(Vec::as_slice).unwrap_or_default();
        let entry = plan.nodes.entry(node_name.to_owned()).or_default();
        for cidr in cidrs {
            let action = route_action(own, &cidr, &addresses);
            if action != RouteAction::Keep {
                entry.creations.push(PlannedCreate {
                    name_hint: node.metadata.uid.clone().unwrap_or_default(),
                    route: Route {
                        target_node: node_name.to_owned(),
                        target_provider_id: provider_id(node).to_owned(),
                        target_node_addresses: addresses.clone(),
                        destination_cidr: cidr.clone(),
                        ..Route::default()
                    },
                });
            }
            if action == RouteAction::Update {
                plan.deletions_first = true;
            }
            entry.actions.insert(cidr, action);
        }
    }

    for (route, owner) in routes.iter().zip(&owners) {
        if !is_responsible_for_route(cluster_cidrs, route) || owner.as_deref().is_some_and(|o| pending.contains(o)) {
            continue;
        }
        let wanted = owner
            .as_deref()
            .filter(|o| by_name.contains_key(o))
            .and_then(|o| plan.nodes.get(o))
            .and_then(|n| n.actions.get(&route.destination_cidr));
        let delete = route.blackhole || !matches!(wanted, Some(RouteAction::Keep | RouteAction::Add));
        if delete {
            plan.deletions.push(route.clone());
        }
    }
    if routes.first().is_some_and(|r| r.enable_node_addresses) {
        plan.deletions_first = true;
    }
    plan
}

/// The `NodeNetworkUnavailable` condition type.
pub const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";

/// The condition upstream's `updateNetworkingCondition` writes: `False`/`RouteCreated` once
/// every route of the node exists, `True`/`NoRouteCreated` otherwise.
pub fn network_condition(routes_created: bool) -> (&'static str, &'static str, &'static str) {
    if routes_created {
        ("False", "RouteCreated", "RouteController created a route")
    } else {
        ("True", "NoRouteCreated", "RouteController failed to create a route")
    }
}

/// The status write for the node's `NetworkUnavailable` condition, or `None` if the node
/// already has a condition with the same status **and** reason (upstream, since
/// kubernetes/kubernetes#136561: a `False` set by a CNI with another reason is rewritten).
///
/// The write is a JSON merge patch of the status subresource that replaces the condition
/// list (the other conditions unchanged) and carries the `resourceVersion` it was computed
/// from, so a concurrent status change fails with 409 and the write is re-planned from a
/// fresh read. `lastHeartbeatTime` is `now`; `lastTransitionTime` is `now` when the status
/// changes and kept otherwise (upstream resets it on every write).
pub fn condition_patch(node: &Node, routes_created: bool, now: &Time) -> Option<Value> {
    let (status, reason, message) = network_condition(routes_created);
    let conditions = node.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let existing = conditions.iter().find(|c| c.type_ == NETWORK_UNAVAILABLE);
    if existing.is_some_and(|c| c.status == status && c.reason.as_deref() == Some(reason)) {
        return None;
    }
    let transition = match existing {
        Some(c) if c.status == status => c.last_transition_time.clone().unwrap_or_else(|| now.clone()),
        _ => now.clone(),
    };
    let condition = NodeCondition {
        type_: NETWORK_UNAVAILABLE.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(transition),
    };
    let position = conditions.iter().position(|c| c.type_ == NETWORK_UNAVAILABLE);
    let mut list: Vec<NodeCondition> = conditions.into_iter().filter(|c| c.type_ != NETWORK_UNAVAILABLE).collect();
    match position {
        Some(i) => list.insert(i.min(list.len()), condition),
        None => list.push(condition),
    }
    let mut patch = json!({ "status": { "conditions": list } });
    if let Some(rv) = node.metadata.resource_version.as_deref().filter(|rv| !rv.is_empty()) {
        patch["metadata"] = json!({ "resourceVersion": rv });
    }
    Some(patch)
}

/// Upstream `handleNodeUpdate` (watch-based mode): the reconcile a node update asks for, if
/// any. A change of the pod CIDRs or the addresses is a `node_change`; otherwise an informer
/// resync (same `resourceVersion`) is a `periodic` one. A provider ID change is a
/// `node_change` too here, since routes are matched to nodes by provider ID.
pub fn update_trigger(old: &Node, new: &Node) -> Option<SyncTrigger> {
    let pod_cidrs = |n: &Node| n.spec.as_ref().and_then(|s| s.pod_cidrs.clone());
    let addresses = |n: &Node| n.status.as_ref().and_then(|s| s.addresses.clone());
    if pod_cidrs(old) != pod_cidrs(new) || addresses(old) != addresses(new) || provider_id(old) != provider_id(new) {
        return Some(SyncTrigger::NodeChange);
    }
    (old.metadata.resource_version == new.metadata.resource_version).then_some(SyncTrigger::Periodic)
}
