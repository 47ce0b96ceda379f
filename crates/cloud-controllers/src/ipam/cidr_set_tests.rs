#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn net(s: &str) -> IpNet {
    s.parse().expect("cidr")
}

fn set(cluster: &str, mask: u8) -> CidrSet {
    CidrSet::new(net(cluster), mask).expect("valid set")
}

/// Upstream `TestCIDRSetFullyAllocated`: a /30 at /30 is one range; after it is taken nothing
/// is left, and a release makes it available again.
#[test]
fn fully_allocated_then_released() {
    let mut s = set("127.123.234.0/30", 30);
    assert_eq!(s.allocate_next(), Some(net("127.123.234.0/30")));
    assert_eq!(s.allocate_next(), None);
    s.release(net("127.123.234.0/30"));
    assert_eq!(s.allocate_next(), Some(net("127.123.234.0/30")));
    assert_eq!(s.allocate_next(), None);
}

/// Upstream `TestIndexToCIDRBlock` and `TestCIDRSet_RandomishAllocation`: ranges come in
/// order, every one of them once, in both families.
#[test]
fn hands_out_every_range_once_in_order() {
    let mut v4 = set("127.123.234.0/16", 24);
    let got: Vec<IpNet> = std::iter::from_fn(|| v4.allocate_next()).collect();
    assert_eq!(got.len(), 256);
    assert_eq!(got[0], net("127.123.0.0/24"));
    assert_eq!(got[255], net("127.123.255.0/24"));
    assert_eq!(v4.taken_count(), 256);

    let mut v6 = set("2001:db8:1::/48", 64);
    assert_eq!(v6.allocate_next(), Some(net("2001:db8:1::/64")));
    assert_eq!(v6.allocate_next(), Some(net("2001:db8:1:1::/64")));
    let mut hosts = set("10.0.0.0/30", 32);
    let all: Vec<IpNet> = std::iter::from_fn(|| hosts.allocate_next()).collect();
    assert_eq!(all, vec![net("10.0.0.0/32"), net("10.0.0.1/32"), net("10.0.0.2/32"), net("10.0.0.3/32")]);
}

/// Next-fit: a released range is not handed out again before the search wraps around
/// (upstream's `nextCandidate`), so a just-freed range is not reused at once.
#[test]
fn next_fit_wraps_around_before_reusing_a_released_range() {
    let mut s = set("10.0.0.0/22", 24);
    let first = s.allocate_next().unwrap();
    let second = s.allocate_next().unwrap();
    s.release(first);
    assert_eq!(s.allocate_next(), Some(net("10.0.2.0/24")));
    assert_eq!(s.allocate_next(), Some(net("10.0.3.0/24")));
    assert_eq!(s.allocate_next(), Some(first), "wrapped around to the released range");
    assert_eq!(s.allocate_next(), None);
    assert!(s.is_occupied(second));
}

/// Upstream `TestOccupy`: a CIDR larger than a range takes every range it covers; one
/// smaller takes the range holding it; one outside takes nothing.
#[test]
fn occupy_marks_what_a_cidr_covers() {
    let mut s = set("10.0.0.0/16", 24);
    assert!(s.occupy(net("10.0.0.0/22")));
    assert_eq!(s.taken_count(), 4);
    assert!(s.occupy(net("10.0.9.128/25")));
    assert!(s.is_occupied(net("10.0.9.0/24")));
    assert_eq!(s.taken_count(), 5);
    assert!(!s.occupy(net("10.1.0.0/24")), "outside the cluster CIDR");
    assert!(!s.occupy(net("fd00::/64")), "other family");
    // A CIDR larger than the cluster CIDR is clipped to it (a service range around it).
    let mut small = set("10.0.0.0/24", 26);
    assert!(small.occupy(net("10.0.0.0/8")));
    assert_eq!(small.allocate_next(), None);
    // Occupied ranges are skipped by allocation.
    assert_eq!(s.allocate_next(), Some(net("10.0.4.0/24")));
}

/// Intervals merge and split: occupying and releasing pieces keeps the count exact.
#[test]
fn release_splits_and_occupy_merges_intervals() {
    let mut s = set("10.0.0.0/16", 24);
    assert!(s.occupy(net("10.0.0.0/20")));
    assert_eq!(s.taken_count(), 16);
    s.release(net("10.0.5.0/24"));
    assert_eq!(s.taken_count(), 15);
    assert!(!s.is_occupied(net("10.0.5.0/24")));
    assert!(s.is_occupied(net("10.0.4.0/24")) && s.is_occupied(net("10.0.6.0/24")));
    assert!(s.occupy(net("10.0.5.0/24")));
    assert!(s.occupy(net("10.0.16.0/24")), "adjacent: merged");
    assert_eq!(s.taken_count(), 17);
    assert!(s.is_occupied(net("10.0.0.0/20")));
    s.release(net("10.0.0.0/16"));
    assert_eq!(s.taken_count(), 0);
}

/// Upstream `TestCIDRSetSubNetTooBig` and mask checks.
#[test]
fn masks_that_do_not_fit_are_refused() {
    assert_eq!(
        CidrSet::new(net("2001:db8::/48"), 65),
        Err(CidrSetError::TooManyRanges { cluster: net("2001:db8::/48"), node_mask: 65 })
    );
    assert!(CidrSet::new(net("2001:db8::/48"), 64).is_ok());
    assert!(matches!(CidrSet::new(net("10.0.0.0/16"), 8), Err(CidrSetError::MaskOutOfRange { max: 32, .. })));
    assert!(matches!(CidrSet::new(net("10.0.0.0/16"), 33), Err(CidrSetError::MaskOutOfRange { .. })));
    let e = CidrSet::new(net("2001:db8::/48"), 80).unwrap_err().to_string();
    assert!(e.contains("at most /64"), "{e}");
    // Host bits are dropped, and a whole IPv4 space cut into /32s needs no bitmap.
    let mut all = set("10.1.2.3/8", 32);
    assert_eq!(all.cluster(), net("10.0.0.0/8"));
    assert_eq!(all.allocate_next(), Some(net("10.0.0.0/32")));
}

/// `is_node_range`: of the node mask and inside the cluster CIDR.
#[test]
fn node_ranges_are_recognised() {
    let s = set("10.244.0.0/16", 24);
    assert!(s.is_node_range(net("10.244.7.0/24")));
    assert!(!s.is_node_range(net("10.244.7.0/25")));
    assert!(!s.is_node_range(net("10.245.7.0/24")));
    assert_eq!(s.node_mask(), 24);
}
