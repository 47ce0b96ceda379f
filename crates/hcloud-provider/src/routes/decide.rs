//! Pure decisions of the Hetzner routes: the network's routes mapped to nodes, the checks a
//! new route must pass before any request, and what an upsert comes down to. No I/O.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use cloud_provider::{AddressType, CloudError, NodeAddress, Route};
use hcloud_api::models::{NetworkId, Route as NetworkRoute, Server, ServerId};
use ipnet::IpNet;

use crate::provider_id::CLOUD_PREFIX;

/// The route's name as the official CCM forms it: `<gateway>-<destination>`.
pub fn route_name(r: &NetworkRoute) -> String {
    format!("{}-{}", r.gateway, r.destination)
}

/// Servers by their primary private IP in `network`.
pub fn servers_by_private_ip(servers: &[Arc<Server>], network: NetworkId) -> HashMap<IpAddr, Arc<Server>> {
    servers.iter().filter_map(|s| s.private_ip_in(network).map(|ip| (ip, s.clone()))).collect()
}

/// True if `destination` lies (entirely) inside one of the cluster CIDRs.
pub fn inside_cluster(cluster_cidrs: &[IpNet], destination: &IpNet) -> bool {
    cluster_cidrs.iter().any(|c| c.contains(destination))
}

/// True if the route's first or last address lies inside a cluster CIDR: the controller's
/// `isResponsibleForRoute`, so blackholes the controller would delete are confirmed first.
pub fn touches_cluster(cluster_cidrs: &[IpNet], destination: &IpNet) -> bool {
    cluster_cidrs.iter().any(|c| c.contains(&destination.network()) || c.contains(&destination.broadcast()))
}

/// True if some route inside the cluster CIDR has a gateway no server in `by_ip` holds: a
/// blackhole the controller would delete, unless the gateway's server is found.
pub fn unknown_gateway_inside(
    routes: &[NetworkRoute],
    by_ip: &HashMap<IpAddr, Arc<Server>>,
    cluster_cidrs: &[IpNet],
) -> bool {
    routes.iter().any(|r| !by_ip.contains_key(&r.gateway) && touches_cluster(cluster_cidrs, &r.destination))
}

/// The servers to look up one by one before a route inside the cluster CIDR counts as a
/// blackhole: those the network says are attached (its own, current list) but the server
/// list lacks. A paginated list can miss a live server when another is deleted while its
/// pages are fetched; a server holding a gateway in the network is attached to it, so once
/// these are looked up every holder was seen. Empty if no gateway inside is unknown.
pub fn blackhole_candidates(
    routes: &[NetworkRoute],
    by_ip: &HashMap<IpAddr, Arc<Server>>,
    cluster_cidrs: &[IpNet],
    attached: &[ServerId],
    listed: &HashSet<ServerId>,
) -> Vec<ServerId> {
    if !unknown_gateway_inside(routes, by_ip, cluster_cidrs) {
        return Vec::new();
    }
    let mut out: Vec<ServerId> = attached.iter().filter(|id| !listed.contains(id)).copied().collect();
    out.dedup();
    out
}

/// The network's route as the controller sees it. The gateway's server (from `by_ip`) is
/// the target (its name, and `hcloud://<id>` so the controller matches it to the node by
/// provider ID); no server holds the gateway → a blackhole.
pub fn to_cloud_route(r: &NetworkRoute, by_ip: &HashMap<IpAddr, Arc<Server>>) -> Route {
    let server = by_ip.get(&r.gateway);
    Route {
        name: route_name(r),
        target_node: server.map(|s| s.name.clone()).unwrap_or_default(),
        target_provider_id: server.map(|s| format!("{CLOUD_PREFIX}{}", s.id)).unwrap_or_default(),
        enable_node_addresses: false,
        target_node_addresses: vec![NodeAddress::new(AddressType::InternalIp, r.gateway.to_string())],
        destination_cidr: r.destination.to_string(),
        gateway: Some(r.gateway.to_string()),
        blackhole: server.is_none(),
    }
}

/// A create's destination, checked before any request: an IPv4 CIDR inside the cluster
/// CIDRs. A refusal ([`CloudError::Refused`]) lasts until the node's pod CIDR or the cluster
/// CIDR changes, so the controller does not retry it with backoff. Hetzner Cloud networks route IPv4 only (official CCM #1280); a route outside the
/// cluster CIDRs would never be cleaned up (routes outside are never touched), so it is
/// refused with `ClusterCIDRMisconfigured` instead of leaking towards the network's limit.
pub fn check_destination(route: &Route, cluster_cidrs: &[IpNet]) -> Result<IpNet, CloudError> {
    let node = &route.target_node;
    let destination: IpNet = route.destination_cidr.parse::<IpNet>().map(|n| n.trunc()).map_err(|_| {
        CloudError::refused(
            "InvalidRouteDestination",
            format!("route for node {node}: destination {:?} is not a CIDR", route.destination_cidr),
        )
    })?;
    if destination.addr().is_ipv6() {
        return Err(CloudError::refused(
            "IPv6RouteNotSupported",
            format!(
                "route for node {node}: destination {destination} is IPv6, and Hetzner Cloud networks route IPv4 \
                 only; IPv6 pod CIDRs need no route (use a CNI that routes them itself)"
            ),
        ));
    }
    if !inside_cluster(cluster_cidrs, &destination) {
        let clusters: Vec<String> = cluster_cidrs.iter().map(ToString::to_string).collect();
        return Err(CloudError::refused(
            "ClusterCIDRMisconfigured",
            format!(
                "route CIDR {destination} of node {node} is not contained within cluster CIDR {}: check \
                 --cluster-cidr against the pod CIDRs; routes outside the cluster CIDR are neither created nor \
                 deleted",
                if clusters.is_empty() { "(none configured)".to_owned() } else { clusters.join(",") }
            ),
        ));
    }
    Ok(destination)
}

/// The gateway must be one of the node's InternalIPs (what the route controller passed as
/// the target's addresses), so traffic goes where the node says it lives.
pub fn check_gateway(route: &Route, gateway: IpAddr, server: &Server, network_name: &str) -> Result<(), CloudError> {
    let listed = route
        .target_node_addresses
        .iter()
        .filter(|a| a.kind == AddressType::InternalIp)
        .any(|a| a.address.parse::<IpAddr>().is_ok_and(|ip| ip == gateway));
    if listed {
        return Ok(());
    }
    let internal: Vec<&str> = route
        .target_node_addresses
        .iter()
        .filter(|a| a.kind == AddressType::InternalIp)
        .map(|a| a.address.as_str())
        .collect();
    Err(CloudError::transient(
        "RouteGatewayNotNodeAddress",
        format!(
            "route for node {}: server {} ({}) has IP {gateway} in network {network_name}, but the node's \
             InternalIPs are [{}]; retried once the node's addresses are updated",
            route.target_node,
            server.name,
            server.id,
            internal.join(", ")
        ),
        None,
    ))
}

/// What creating a route comes down to, given the network's routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upsert {
    /// The route exists with this gateway.
    Exists,
    /// No route to the destination: add it.
    Add,
    /// A route to the destination goes elsewhere: delete it, then add.
    Replace(NetworkRoute),
}

/// Upsert by destination (destinations are unique in a network).
pub fn upsert(routes: &[NetworkRoute], destination: IpNet, gateway: IpAddr) -> Upsert {
    match routes.iter().find(|r| r.destination == destination) {
        Some(r) if r.gateway == gateway => Upsert::Exists,
        Some(r) => Upsert::Replace(*r),
        None => Upsert::Add,
    }
}

/// How long route actions of this network take, learned from the ones seen, so the wait
/// for an action polls once at the expected end (the network takes one change at a time,
/// so every poll is on the critical path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionTiming {
    expected: Duration,
}

impl ActionTiming {
    /// Shortest first poll.
    pub const MIN: Duration = Duration::from_millis(50);
    /// Longest first poll.
    pub const MAX: Duration = Duration::from_secs(5);

    /// A first guess.
    pub fn new(initial: Duration) -> Self {
        ActionTiming { expected: initial.clamp(Self::MIN, Self::MAX) }
    }

    /// When to poll first.
    pub fn first_poll(&self) -> Duration {
        self.expected
    }

    /// How long to wait between polls after a first poll found the action still running:
    /// short, so a guess slightly too early costs little.
    pub fn next_polls(&self) -> Duration {
        (self.expected / 4).max(Self::MIN)
    }

    /// Learns from an action that finished `took` after it was started, its first poll
    /// having been at `first_poll`: done at the first poll → try a little earlier next time;
    /// later → the time it took (an upper bound).
    pub fn observe(&mut self, first_poll: Duration, took: Duration) {
        let at_first_poll = took < first_poll + self.next_polls() / 2;
        let next = if at_first_poll { first_poll.mul_f64(0.9) } else { took };
        self.expected = next.clamp(Self::MIN, Self::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    fn net(s: &str) -> IpNet {
        s.parse().expect("net")
    }

    fn nr(destination: &str, gateway: &str) -> NetworkRoute {
        NetworkRoute { destination: net(destination), gateway: ip(gateway) }
    }

    fn server(id: i64, name: &str, network: i64, private_ip: &str) -> Arc<Server> {
        let json = serde_json::json!({
            "id": id, "name": name, "status": "running",
            "public_net": {"ipv4": null, "ipv6": null},
            "private_net": [{"network": network, "ip": private_ip, "alias_ips": []}],
            "server_type": {"name": "cpx22"}, "location": {"name": "nbg1", "network_zone": "eu-central"},
            "labels": {}
        });
        Arc::new(serde_json::from_value(json).expect("a server"))
    }

    fn node_route(node: &str, cidr: &str, internal: &[&str]) -> Route {
        Route {
            target_node: node.to_owned(),
            destination_cidr: cidr.to_owned(),
            target_node_addresses: internal.iter().map(|a| NodeAddress::new(AddressType::InternalIp, *a)).collect(),
            ..Route::default()
        }
    }

    #[test]
    fn network_routes_map_to_servers_by_gateway_or_are_blackholes() {
        let servers = vec![server(7, "node-a", 1, "10.0.0.7"), server(8, "other-net", 2, "10.0.0.8")];
        let by_ip = servers_by_private_ip(&servers, NetworkId(1));
        let r = to_cloud_route(&nr("10.244.1.0/24", "10.0.0.7"), &by_ip);
        assert_eq!(r.name, "10.0.0.7-10.244.1.0/24");
        assert_eq!((r.target_node.as_str(), r.target_provider_id.as_str()), ("node-a", "hcloud://7"));
        assert_eq!(r.gateway.as_deref(), Some("10.0.0.7"));
        assert!(!r.blackhole && !r.enable_node_addresses);
        // 10.0.0.8 is a server's IP in another network: not this network's target.
        let b = to_cloud_route(&nr("10.244.2.0/24", "10.0.0.8"), &by_ip);
        assert!(b.blackhole && b.target_node.is_empty() && b.target_provider_id.is_empty());
        assert_eq!(b.gateway.as_deref(), Some("10.0.0.8"));
    }

    #[test]
    fn only_attached_servers_the_list_lacks_are_looked_up_and_only_for_unknown_gateways_inside() {
        let clusters = [net("10.244.0.0/16")];
        let by_ip = servers_by_private_ip(&[server(7, "node-a", 1, "10.0.0.7")], NetworkId(1));
        let listed: HashSet<ServerId> = [ServerId(7), ServerId(8)].into();
        let attached = [ServerId(7), ServerId(8), ServerId(9), ServerId(10)];
        let known = [nr("10.244.1.0/24", "10.0.0.7"), nr("192.168.0.0/24", "10.0.0.99")];
        assert!(!unknown_gateway_inside(&known, &by_ip, &clusters), "the unknown one is outside");
        assert_eq!(blackhole_candidates(&known, &by_ip, &clusters, &attached, &listed), Vec::<ServerId>::new());
        let unknown = [nr("10.244.1.0/24", "10.0.0.7"), nr("10.244.2.0/24", "10.0.0.9")];
        assert!(unknown_gateway_inside(&unknown, &by_ip, &clusters));
        assert_eq!(
            blackhole_candidates(&unknown, &by_ip, &clusters, &attached, &listed),
            vec![ServerId(9), ServerId(10)],
            "attached, not listed"
        );
        assert_eq!(blackhole_candidates(&unknown, &by_ip, &clusters, &attached[..2], &listed), vec![]);
    }

    #[test]
    fn destinations_are_checked_before_any_request() {
        let clusters = [net("10.244.0.0/16")];
        assert_eq!(
            check_destination(&node_route("n", "10.244.3.0/24", &[]), &clusters).ok(),
            Some(net("10.244.3.0/24"))
        );
        let cases = [
            ("fd00:10:244::/64", "IPv6RouteNotSupported", "is IPv6"),
            ("10.245.0.0/24", "ClusterCIDRMisconfigured", "not contained within cluster CIDR 10.244.0.0/16"),
            // Wider than the cluster CIDR: not contained either.
            ("10.0.0.0/8", "ClusterCIDRMisconfigured", "not contained"),
            ("banana", "InvalidRouteDestination", "not a CIDR"),
        ];
        for (cidr, reason, needle) in cases {
            let e = check_destination(&node_route("n", cidr, &[]), &clusters).unwrap_err();
            assert_eq!(e.reason(), reason, "{cidr}");
            assert!(e.to_string().contains(needle), "{cidr}: {e}");
            assert!(e.awaits_input_change(), "{cidr}: refused until the node's pod CIDR (or --cluster-cidr) changes");
        }
        let e = check_destination(&node_route("n", "10.244.3.0/24", &[]), &[]).unwrap_err();
        assert!(e.to_string().contains("(none configured)"), "{e}");
    }

    #[test]
    fn the_gateway_must_be_one_of_the_nodes_internal_ips() {
        let s = server(7, "node-a", 1, "10.0.0.7");
        assert!(
            check_gateway(&node_route("node-a", "10.244.3.0/24", &["10.0.0.7"]), ip("10.0.0.7"), &s, "k8s").is_ok()
        );
        let mut r = node_route("node-a", "10.244.3.0/24", &["10.0.0.9"]);
        r.target_node_addresses.push(NodeAddress::new(AddressType::ExternalIp, "10.0.0.7"));
        let e = check_gateway(&r, ip("10.0.0.7"), &s, "k8s").unwrap_err();
        assert!(e.to_string().contains("InternalIPs are [10.0.0.9]"), "{e}");
    }

    #[test]
    fn upserts_go_by_destination() {
        let routes = [nr("10.244.1.0/24", "10.0.0.7")];
        assert_eq!(upsert(&routes, net("10.244.1.0/24"), ip("10.0.0.7")), Upsert::Exists);
        assert_eq!(upsert(&routes, net("10.244.1.0/24"), ip("10.0.0.9")), Upsert::Replace(routes[0]));
        assert_eq!(upsert(&routes, net("10.244.2.0/24"), ip("10.0.0.7")), Upsert::Add);
    }

    #[test]
    fn blackholes_touching_the_cluster_are_the_controllers() {
        let clusters = [net("10.244.0.0/16")];
        assert!(touches_cluster(&clusters, &net("10.244.9.0/24")));
        assert!(touches_cluster(&clusters, &net("10.244.0.0/15")), "first address inside");
        assert!(!touches_cluster(&clusters, &net("192.168.0.0/24")));
    }

    #[test]
    fn action_timing_converges_on_one_poll_per_action() {
        let actual = Duration::from_millis(500);
        let mut t = ActionTiming::new(Duration::from_millis(100));
        let mut polls_total = 0;
        for round in 0..40 {
            // Simulate the waiter: first poll at first_poll, then every next_polls.
            let (first, step) = (t.first_poll(), t.next_polls());
            let (mut at, mut polls) = (first, 1);
            while at < actual {
                at += step;
                polls += 1;
            }
            if round >= 20 {
                polls_total += polls;
                assert!(at <= actual + actual / 4 + ActionTiming::MIN, "round {round}: done {at:?} for {actual:?}");
            }
            t.observe(first, at);
        }
        assert!(polls_total <= 30, "about one poll per action once learned: {polls_total} polls in 20 actions");
    }
}
