#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::NodeSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use controller_runtime::merge_patch::apply_merge_patch_to;

fn net(s: &str) -> IpNet {
    s.parse().expect("cidr")
}

fn node(name: &str, uid: &str, pod_cidrs: &[&str]) -> Node {
    Node {
        metadata: ObjectMeta { name: Some(name.to_owned()), uid: Some(uid.to_owned()), ..Default::default() },
        spec: Some(NodeSpec {
            pod_cidr: pod_cidrs.first().map(|c| (*c).to_owned()),
            pod_cidrs: (!pod_cidrs.is_empty()).then(|| pod_cidrs.iter().map(|c| (*c).to_owned()).collect()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn range(cidr: &str, node_mask: u8) -> ClusterRange {
    ClusterRange { cidr: net(cidr), node_mask }
}

fn config(ranges: Vec<ClusterRange>, v6_mask: Option<u8>) -> NodeIpamConfig {
    NodeIpamConfig { cluster_ranges: ranges, node_prefix_ipv6_mask: v6_mask, service_cidrs: vec![], workers: 1 }
}

const SERVER_NET: &str = "2a01:4f9:c012:fa81::/64";

/// The IPv6 range is the second block of the instance's /64 at the mask: it never holds the
/// instance's own `<prefix>::1` or its neighbours.
#[test]
fn the_ipv6_range_is_the_second_block_of_the_prefix() {
    assert_eq!(carve(net(SERVER_NET), 80), Some(net("2a01:4f9:c012:fa81:1::/80")));
    assert_eq!(carve(net(SERVER_NET), 112), Some(net("2a01:4f9:c012:fa81::1:0/112")));
    assert_eq!(carve(net(SERVER_NET), 65), Some(net("2a01:4f9:c012:fa81:8000::/65")));
    assert_eq!(carve(net("2a01:4f8:111:4221::5/64"), 80), Some(net("2a01:4f8:111:4221:1::/80")), "host bits");
    for mask in [65, 80, 96, 112, 120] {
        let r = carve(net(SERVER_NET), mask).unwrap();
        assert!(!r.contains(&"2a01:4f9:c012:fa81::1".parse::<IpAddr>().unwrap()), "/{mask}");
        assert!(!r.contains(&"2a01:4f9:c012:fa81::ff".parse::<IpAddr>().unwrap()), "/{mask}");
        assert!(net(SERVER_NET).contains(&r), "/{mask}");
    }
    assert_eq!(carve(net(SERVER_NET), 64), None, "the whole /64 would hold the server's address");
    assert_eq!(carve(net("10.0.0.0/8"), 16), None, "IPv4 prefixes are not carved");
    // The first IPv6 prefix that fits wins.
    let prefixes = [net("10.0.0.0/24"), net("2001:db8::/96"), net(SERVER_NET)];
    assert_eq!(carve_from(&prefixes, 80), Some((net(SERVER_NET), net("2a01:4f9:c012:fa81:1::/80"))));
}

/// Dual-stack with the cloud allocator: IPv4 from the cluster CIDR first, then IPv6 from the
/// instance; the patch is exactly the write the API server gets.
#[test]
fn dual_stack_cloud_ranges_are_ipv4_first() {
    let mut a = Allocations::new(&config(vec![range("10.244.0.0/16", 24)], Some(80))).unwrap();
    let n = node("n1", "u1", &[]);
    assert_eq!(a.observe(&n), Observed::NeedsRanges);
    let cidrs = a.assign(&n, &[net(SERVER_NET)]).unwrap();
    assert_eq!(cidrs, vec![net("10.244.0.0/24"), net("2a01:4f9:c012:fa81:1::/80")]);
    let patch = pod_cidrs_patch(&cidrs);
    assert_eq!(
        patch,
        json!({"spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24", "2a01:4f9:c012:fa81:1::/80"]}})
    );
    let written = apply_merge_patch_to(&n, &patch).expect("applies");
    assert_eq!(node_pod_cidrs(&written), ["10.244.0.0/24", "2a01:4f9:c012:fa81:1::/80"]);
    assert_eq!(written.spec.as_ref().and_then(|s| s.pod_cidr.as_deref()), Some("10.244.0.0/24"));
    // Until the write is answered the same write is to be sent again; once written, until it
    // reaches the cache, the node is not assigned twice.
    assert_eq!(a.observe(&n), Observed::Pending(cidrs.clone()));
    a.written("n1");
    assert_eq!(a.observe(&n), Observed::Assigned);
    assert_eq!(
        a.observe(&written),
        Observed::Holds { ipv6_from_prefix: Some(net("2a01:4f9:c012:fa81:1::/80")), foreign: vec![], overlaps: vec![] }
    );
}

/// IPv6-only with the cloud allocator: no cluster CIDR, the range alone.
#[test]
fn ipv6_only_cloud_ranges_need_no_cluster_cidr() {
    let mut a = Allocations::new(&config(vec![], Some(80))).unwrap();
    let n = node("n1", "u1", &[]);
    assert_eq!(a.assign(&n, &[net(SERVER_NET)]).unwrap(), vec![net("2a01:4f9:c012:fa81:1::/80")]);
    a.written("n1");
    assert_eq!(a.observe(&n), Observed::Assigned);
}

/// A server without IPv6 gets nothing at all, and nothing is taken from the cluster CIDR:
/// the lookup comes first, so a failure leaks nothing.
#[test]
fn no_ipv6_prefix_takes_nothing() {
    let mut a = Allocations::new(&config(vec![range("10.244.0.0/16", 24)], Some(80))).unwrap();
    let n = node("n1", "u1", &[]);
    let err = a.assign(&n, &[net("10.0.0.5/32")]).unwrap_err();
    assert_eq!(err, AssignError::NoIpv6Prefix { node: "n1".to_owned(), mask: 80 });
    assert!(err.to_string().contains("no IPv6 prefix of /80 or shorter for the instance of node n1"), "{err}");
    assert_eq!(a.sets()[0].taken_count(), 0);
    assert_eq!(a.observe(&n), Observed::NeedsRanges);
}

/// Upstream's range allocator: dual-stack from two cluster CIDRs in flag order; exhaustion
/// of either takes nothing and names the CIDR; a release makes the range available again.
#[test]
fn range_allocator_exhaustion_and_release() {
    let mut a = Allocations::new(&config(vec![range("fd00:10::/120", 121), range("10.0.0.0/30", 31)], None)).unwrap();
    let n1 = node("n1", "u1", &[]);
    let n2 = node("n2", "u2", &[]);
    let n3 = node("n3", "u3", &[]);
    assert_eq!(a.assign(&n1, &[]).unwrap(), vec![net("fd00:10::/121"), net("10.0.0.0/31")]);
    assert_eq!(a.assign(&n2, &[]).unwrap(), vec![net("fd00:10::80/121"), net("10.0.0.2/31")]);
    let err = a.assign(&n3, &[]).unwrap_err();
    assert_eq!(err, AssignError::Exhausted { cluster: net("fd00:10::/120"), node_mask: 121 });
    assert!(err.to_string().contains("no remaining CIDRs in cluster CIDR fd00:10::/120"), "{err}");
    a.forget("n1");
    assert_eq!(a.assign(&n3, &[]).unwrap(), vec![net("fd00:10::/121"), net("10.0.0.0/31")]);
    // The IPv6 set had room, the IPv4 one not: the IPv6 range taken first is given back.
    let mut b = Allocations::new(&config(vec![range("fd00:10::/120", 121), range("10.0.0.0/31", 31)], None)).unwrap();
    b.assign(&n1, &[]).unwrap();
    assert!(matches!(b.assign(&n2, &[]), Err(AssignError::Exhausted { node_mask: 31, .. })));
    assert_eq!(b.sets()[0].taken_count(), 1);
}

/// Restart: the ranges the nodes hold are taken before anything is handed out, so none is
/// handed out twice; a failed write gives the range back.
#[test]
fn a_rebuilt_allocator_never_hands_out_a_held_range() {
    let mut a = Allocations::new(&config(vec![range("10.0.0.0/29", 30)], None)).unwrap();
    for n in [node("a", "1", &["10.0.0.0/30"]), node("b", "2", &["10.0.0.4/30"])] {
        assert!(matches!(a.observe(&n), Observed::Holds { .. }));
    }
    let c = node("c", "3", &[]);
    assert!(matches!(a.assign(&c, &[]), Err(AssignError::Exhausted { .. })));
    a.forget("b");
    assert_eq!(a.assign(&c, &[]).unwrap(), vec![net("10.0.0.4/30")]);
    a.unassign("c");
    assert_eq!(a.sets()[0].taken_count(), 1);
}

/// A new Node under an old name (another UID) frees the old one's range first.
#[test]
fn a_recreated_node_releases_the_old_range() {
    let mut a = Allocations::new(&config(vec![range("10.0.0.0/30", 30)], None)).unwrap();
    assert!(matches!(a.observe(&node("a", "old", &["10.0.0.0/30"])), Observed::Holds { .. }));
    let again = node("a", "new", &[]);
    assert_eq!(a.observe(&again), Observed::NeedsRanges);
    assert_eq!(a.assign(&again, &[]).unwrap(), vec![net("10.0.0.0/30")]);
}

/// Entries the allocator does not manage are reported and not taken; the service range is
/// never handed out.
#[test]
fn foreign_ranges_and_the_service_range() {
    let mut cfg = config(vec![range("10.96.0.0/22", 24)], None);
    cfg.service_cidrs = vec![net("10.96.0.0/24"), net("10.200.0.0/16")];
    let mut a = Allocations::new(&cfg).unwrap();
    let seen = a.observe(&node("x", "1", &["10.97.0.0/24", "fd00::/64", "bogus"]));
    let Observed::Holds { ipv6_from_prefix: None, foreign, overlaps } = seen else { panic!("{seen:?}") };
    assert_eq!(overlaps, []);
    let whys: Vec<(&str, &str)> = foreign.iter().map(|f| (f.cidr.as_str(), f.why.as_str())).collect();
    assert_eq!(
        whys,
        [
            ("10.97.0.0/24", "lies outside cluster CIDR 10.96.0.0/22"),
            ("fd00::/64", "is IPv6 and no cluster CIDR of that family is configured"),
            ("bogus", "is not a CIDR"),
        ]
    );
    let n = node("n", "2", &[]);
    assert_eq!(a.assign(&n, &[]).unwrap(), vec![net("10.96.1.0/24")], "the service range is skipped");
}

/// A node's IPv6 range must stay inside its instance's prefix; otherwise the message says
/// what changed and what to do.
#[test]
fn a_changed_prefix_is_reported() {
    let r = net("2a01:4f9:c012:fa81:1::/80");
    assert_eq!(check_in_prefixes("n", r, &[net(SERVER_NET)]), None);
    let msg = check_in_prefixes("n", r, &[net("2a01:4f9:c012:beef::/64")]).unwrap();
    assert!(msg.contains("pod CIDR 2a01:4f9:c012:fa81:1::/80 of node n is not inside"), "{msg}");
    assert!(msg.contains("now has 2a01:4f9:c012:beef::/64") && msg.contains("delete the Node"), "{msg}");
    assert!(check_in_prefixes("n", r, &[]).unwrap().contains("has no IPv6 prefix now"));
}

/// The cloud allocator's IPv6 range is held like a cluster range: a server that got the
/// Primary IPv6 (so the /64) of another Node's server gets nothing while that Node holds its
/// range, whether the Node's range was observed or just assigned.
#[test]
fn an_ipv6_range_another_node_holds_is_refused() {
    let mut a = Allocations::new(&config(vec![range("10.244.0.0/16", 24)], Some(80))).unwrap();
    let first = node("a", "1", &["10.244.0.0/24", "2a01:4f9:c012:fa81:1::/80"]);
    assert!(matches!(a.observe(&first), Observed::Holds { .. }));
    let second = node("b", "2", &[]);
    let got = a.assign(&second, &[net(SERVER_NET)]);
    assert!(got.is_err(), "node b must not get node a's range: {got:?}");
    let err = got.unwrap_err();
    assert_eq!(
        err,
        AssignError::Ipv6RangeInUse {
            node: "b".to_owned(),
            range: net("2a01:4f9:c012:fa81:1::/80"),
            holder: "a".to_owned(),
            held: net("2a01:4f9:c012:fa81:1::/80"),
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("2a01:4f9:c012:fa81:1::/80 from the prefix of node b's instance is held by node a"), "{msg}");
    assert!(msg.contains("delete Node a if its server no longer has that prefix"), "{msg}");
    assert_eq!(a.sets()[0].taken_count(), 1, "nothing taken for node b");
    assert_eq!(a.observe(&second), Observed::NeedsRanges);
    // Node a is gone: node b gets the range.
    assert!(a.forget("a"), "a held ranges: waiting nodes are woken");
    assert_eq!(a.assign(&second, &[net(SERVER_NET)]).unwrap()[1], net("2a01:4f9:c012:fa81:1::/80"));
    // Assigned, not yet observed: held as well.
    let mut fresh = Allocations::new(&config(vec![], Some(80))).unwrap();
    fresh.assign(&node("c", "3", &[]), &[net(SERVER_NET)]).unwrap();
    let got = fresh.assign(&node("d", "4", &[]), &[net(SERVER_NET)]);
    assert!(got.is_err(), "node d must not get node c's range: {got:?}");
    assert!(matches!(got, Err(AssignError::Ipv6RangeInUse { holder, .. }) if holder == "c"));
    // A node observed with such a range (written before, or by someone else) is reported.
    let seen = fresh.observe(&node("e", "5", &["2a01:4f9:c012:fa81:1::/80"]));
    let Observed::Holds { overlaps, .. } = seen else { panic!("{seen:?}") };
    assert_eq!(
        overlaps,
        [Overlap {
            cidr: net("2a01:4f9:c012:fa81:1::/80"),
            with: OverlapWith::Node { node: "c".to_owned(), cidr: net("2a01:4f9:c012:fa81:1::/80") },
        }]
    );
}

/// A range two Nodes hold (equal, or one inside the other after a mask change) or one that
/// also holds the service range stays taken when one of them is released.
#[test]
fn releasing_a_range_another_node_holds_keeps_it_taken() {
    // Two Nodes with the same range.
    let mut a = Allocations::new(&config(vec![range("10.0.0.0/23", 24)], None)).unwrap();
    a.observe(&node("a", "1", &["10.0.0.0/24"]));
    a.observe(&node("b", "2", &["10.0.0.0/24"]));
    a.forget("a");
    assert!(a.sets()[0].is_occupied(net("10.0.0.0/24")), "node b still holds 10.0.0.0/24");
    // After a mask change from /23 to /24: the old /23 covers a /24 another Node holds.
    let mut m = Allocations::new(&config(vec![range("10.0.0.0/22", 24)], None)).unwrap();
    m.observe(&node("old", "1", &["10.0.0.0/23"]));
    m.observe(&node("new", "2", &["10.0.1.0/24"]));
    m.forget("old");
    assert!(m.sets()[0].is_occupied(net("10.0.1.0/24")), "node new still holds 10.0.1.0/24");
    assert!(!m.sets()[0].is_occupied(net("10.0.0.0/24")), "the rest of the old /23 is free");
    // A Node's range over the service range: the service range stays taken.
    let mut cfg = config(vec![range("10.96.0.0/22", 24)], None);
    cfg.service_cidrs = vec![net("10.96.0.0/24")];
    let mut s = Allocations::new(&cfg).unwrap();
    s.observe(&node("x", "1", &["10.96.0.0/23"]));
    s.forget("x");
    assert!(s.sets()[0].is_occupied(net("10.96.0.0/24")), "the service range is never handed out");
    assert!(!s.sets()[0].is_occupied(net("10.96.1.0/24")));
    // Released in any order, two Nodes sharing a range free it once both are gone.
    a.forget("b");
    assert!(!a.sets()[0].is_occupied(net("10.0.0.0/24")));
}

/// Overlaps are found when a node is observed: with each other node's range (equal, larger
/// or smaller) and with the service range; the message names both and says what to do.
#[test]
fn overlapping_ranges_are_reported() {
    let mut cfg = config(vec![range("10.0.0.0/22", 24)], None);
    cfg.service_cidrs = vec![net("10.0.3.0/24")];
    let mut a = Allocations::new(&cfg).unwrap();
    let holds = |o: Observed| match o {
        Observed::Holds { overlaps, .. } => overlaps,
        other => panic!("{other:?}"),
    };
    assert_eq!(holds(a.observe(&node("x", "1", &["10.0.0.0/24"]))), []);
    let with_x = Overlap {
        cidr: net("10.0.0.0/23"),
        with: OverlapWith::Node { node: "x".to_owned(), cidr: net("10.0.0.0/24") },
    };
    assert_eq!(holds(a.observe(&node("y", "2", &["10.0.0.0/23"]))), std::slice::from_ref(&with_x));
    // Observed again (a resync): the same finding, the other way round for x.
    assert_eq!(holds(a.observe(&node("y", "2", &["10.0.0.0/23"]))), std::slice::from_ref(&with_x));
    let with_y = Overlap {
        cidr: net("10.0.0.0/24"),
        with: OverlapWith::Node { node: "y".to_owned(), cidr: net("10.0.0.0/23") },
    };
    assert_eq!(holds(a.observe(&node("x", "1", &["10.0.0.0/24"]))), [with_y]);
    let service = Overlap { cidr: net("10.0.3.0/24"), with: OverlapWith::ServiceRange(net("10.0.3.0/24")) };
    assert_eq!(holds(a.observe(&node("s", "3", &["10.0.3.0/24"]))), std::slice::from_ref(&service));
    let msg = with_x.message("y");
    assert!(msg.starts_with("pod CIDR 10.0.0.0/23 of node y overlaps pod CIDR 10.0.0.0/24 of node x:"), "{msg}");
    assert!(msg.contains("delete one of the Nodes"), "{msg}");
    let msg = service.message("s");
    assert!(msg.contains("of node s overlaps the service range 10.0.3.0/24 (--service-cluster-ip-range)"), "{msg}");
}

/// A write whose outcome is unknown keeps the node's ranges: the node is pending (the same
/// write is sent again) until the write succeeds or is refused.
#[test]
fn a_pending_write_keeps_its_ranges() {
    let mut a = Allocations::new(&config(vec![range("10.0.0.0/24", 24)], Some(80))).unwrap();
    let n = node("n", "1", &[]);
    let cidrs = a.assign(&n, &[net(SERVER_NET)]).unwrap();
    assert_eq!(a.observe(&n), Observed::Pending(cidrs.clone()));
    assert!(matches!(a.assign(&node("m", "2", &[]), &[net("2001:db8::/64")]), Err(AssignError::Exhausted { .. })));
    a.written("n");
    assert_eq!(a.observe(&n), Observed::Assigned);
    // Refused: free again, IPv6 range included.
    a.unassign("n");
    assert_eq!(a.observe(&n), Observed::NeedsRanges);
    assert_eq!(a.sets()[0].taken_count(), 0);
    let other = a.assign(&node("o", "3", &[]), &[net(SERVER_NET)]).unwrap();
    assert_eq!(other, cidrs);
    // Someone else wrote other pod CIDRs for a pending node: ours are released.
    let p = node("p", "4", &[]);
    a.unassign("o");
    a.assign(&p, &[net(SERVER_NET)]).unwrap();
    let seen = a.observe(&node("p", "4", &["10.9.9.0/24"]));
    assert!(matches!(seen, Observed::Holds { .. }), "{seen:?}");
    assert_eq!(a.sets()[0].taken_count(), 0, "10.0.0.0/24 is free again");
}
