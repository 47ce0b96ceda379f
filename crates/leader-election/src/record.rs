//! The leader-election record inside a Lease's spec, and the records we write: pure
//! conversions, no I/O.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// The fields of `coordination.k8s.io/v1` `LeaseSpec` that leader election uses, as client-go's
/// `LeaderElectionRecord` holds them (absent numbers read as 0, absent holder as empty).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct LeaderRecord {
    /// `holderIdentity`; empty means nobody holds the lease.
    pub holder: String,
    /// `leaseDurationSeconds`: how long, from the holder's last renewal as observed locally, the
    /// others wait before taking the lease over (absent or negative: 0).
    pub lease_duration_seconds: i32,
    /// `acquireTime` (wall clock; informational).
    pub acquire_time: Option<Timestamp>,
    /// `renewTime` (wall clock; informational: never compared with the local clock).
    pub renew_time: Option<Timestamp>,
    /// `leaseTransitions`.
    pub transitions: i32,
}

impl LeaderRecord {
    /// The record in `lease` (missing fields read as client-go reads them).
    pub fn from_lease(lease: &Lease) -> LeaderRecord {
        let Some(spec) = &lease.spec else { return LeaderRecord::default() };
        LeaderRecord {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// Writes this record into `lease`'s spec, keeping the spec fields leader election does not
    /// own (`preferredHolder`, `strategy`) and all metadata (so a replace keeps labels,
    /// annotations and the `resourceVersion` precondition).
    pub fn write_into(&self, lease: &mut Lease) {
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.holder.clone());
        spec.lease_duration_seconds = Some(self.lease_duration_seconds);
        spec.acquire_time = self.acquire_time.map(MicroTime);
        spec.renew_time = self.renew_time.map(MicroTime);
        spec.lease_transitions = Some(self.transitions);
    }

    /// Whether someone holds the lease.
    pub fn is_held(&self) -> bool {
        !self.holder.is_empty()
    }

    /// The record for a Lease we create: we hold it, no transitions yet.
    pub fn created(me: &str, lease_duration_seconds: i32, now: Timestamp) -> LeaderRecord {
        LeaderRecord {
            holder: me.to_owned(),
            lease_duration_seconds,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 0,
        }
    }

    /// The record that makes us the holder of `self` (take-over, or re-acquiring our own lease,
    /// or renewing). As client-go: when the holder changes, `leaseTransitions` goes up by one
    /// and `acquireTime` is now; when we already hold it both are kept.
    pub fn held_by(&self, me: &str, lease_duration_seconds: i32, now: Timestamp) -> LeaderRecord {
        let ours = self.holder == me;
        LeaderRecord {
            holder: me.to_owned(),
            lease_duration_seconds,
            acquire_time: if ours { self.acquire_time.or(Some(now)) } else { Some(now) },
            renew_time: Some(now),
            transitions: if ours { self.transitions } else { self.transitions.saturating_add(1) },
        }
    }

    /// The record that gives the lease up (client-go's `ReleaseOnCancel`): empty holder,
    /// `leaseDurationSeconds` 1, acquire and renew time now, transitions kept.
    pub fn released(&self, now: Timestamp) -> LeaderRecord {
        LeaderRecord {
            holder: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: self.transitions,
        }
    }
}

/// A Lease as read from (or returned by) the API server: the full object (written back on a
/// replace), its record, and its `resourceVersion`.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    /// The object.
    pub lease: Lease,
    /// Its leader-election record.
    pub record: LeaderRecord,
    /// `metadata.resourceVersion` (empty if the server sent none, which it always does).
    pub resource_version: String,
}

impl Snapshot {
    /// A snapshot of `lease`.
    pub fn new(lease: Lease) -> Snapshot {
        let record = LeaderRecord::from_lease(&lease);
        let resource_version = lease.metadata.resource_version.clone().unwrap_or_default();
        Snapshot { lease, record, resource_version }
    }

    /// Whether `other` shows the same record at the same version (no change observed).
    pub fn same_as(&self, other: &Snapshot) -> bool {
        self.record == other.record && self.resource_version == other.resource_version
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use pretty_assertions::assert_eq;
    use std::collections::BTreeMap;

    fn ts(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("valid timestamp")
    }

    #[test]
    fn missing_fields_read_as_client_go_reads_them() {
        assert_eq!(LeaderRecord::from_lease(&Lease::default()), LeaderRecord::default());
        let lease = Lease { spec: Some(LeaseSpec::default()), ..Lease::default() };
        let record = LeaderRecord::from_lease(&lease);
        assert_eq!(record, LeaderRecord::default());
        assert!(!record.is_held());
    }

    #[test]
    fn write_into_keeps_foreign_fields_and_metadata() {
        let mut lease = Lease {
            metadata: ObjectMeta {
                name: Some("lock".to_owned()),
                resource_version: Some("42".to_owned()),
                annotations: Some(BTreeMap::from([("a".to_owned(), "b".to_owned())])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec { preferred_holder: Some("p".to_owned()), ..LeaseSpec::default() }),
        };
        let record = LeaderRecord::created("me", 15, ts(1_000));
        record.write_into(&mut lease);
        assert_eq!(LeaderRecord::from_lease(&lease), record);
        assert_eq!(lease.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(lease.metadata.annotations.as_ref().and_then(|a| a.get("a")).map(String::as_str), Some("b"));
        assert_eq!(lease.spec.as_ref().and_then(|s| s.preferred_holder.as_deref()), Some("p"));
        let snapshot = Snapshot::new(lease);
        assert_eq!(snapshot.resource_version, "42");
        assert_eq!(snapshot.record, record);
    }

    #[test]
    fn created_record_holds_with_zero_transitions() {
        assert_eq!(
            LeaderRecord::created("me", 15, ts(10)),
            LeaderRecord {
                holder: "me".to_owned(),
                lease_duration_seconds: 15,
                acquire_time: Some(ts(10)),
                renew_time: Some(ts(10)),
                transitions: 0,
            }
        );
    }

    #[test]
    fn taking_over_from_another_holder_counts_a_transition() {
        let theirs = LeaderRecord {
            holder: "other".to_owned(),
            lease_duration_seconds: 30,
            acquire_time: Some(ts(1)),
            renew_time: Some(ts(5)),
            transitions: 4,
        };
        assert_eq!(
            theirs.held_by("me", 15, ts(100)),
            LeaderRecord {
                holder: "me".to_owned(),
                lease_duration_seconds: 15,
                acquire_time: Some(ts(100)),
                renew_time: Some(ts(100)),
                transitions: 5,
            }
        );
    }

    #[test]
    fn acquiring_a_released_lease_counts_a_transition() {
        let mine = LeaderRecord::created("old", 15, ts(1));
        let released = mine.released(ts(50));
        assert_eq!(
            released,
            LeaderRecord {
                holder: String::new(),
                lease_duration_seconds: 1,
                acquire_time: Some(ts(50)),
                renew_time: Some(ts(50)),
                transitions: 0,
            }
        );
        assert!(!released.is_held());
        assert_eq!(released.held_by("new", 15, ts(51)).transitions, 1);
    }

    #[test]
    fn renewing_our_own_record_keeps_acquire_time_and_transitions() {
        let mine = LeaderRecord { transitions: 7, ..LeaderRecord::created("me", 15, ts(1)) };
        let renewed = mine.held_by("me", 15, ts(9));
        assert_eq!(renewed, LeaderRecord { renew_time: Some(ts(9)), ..mine });
    }

    #[test]
    fn transitions_saturate() {
        let theirs = LeaderRecord { holder: "x".to_owned(), transitions: i32::MAX, ..LeaderRecord::default() };
        assert_eq!(theirs.held_by("me", 15, ts(1)).transitions, i32::MAX);
    }

    #[test]
    fn same_as_compares_record_and_version() {
        let mut lease = Lease::default();
        lease.metadata.resource_version = Some("1".to_owned());
        LeaderRecord::created("me", 15, ts(1)).write_into(&mut lease);
        let a = Snapshot::new(lease.clone());
        assert!(a.same_as(&Snapshot::new(lease.clone())));
        let mut touched = lease.clone();
        touched.metadata.resource_version = Some("2".to_owned());
        assert!(!a.same_as(&Snapshot::new(touched)));
        let mut renewed = lease;
        LeaderRecord::created("me", 15, ts(2)).write_into(&mut renewed);
        assert!(!a.same_as(&Snapshot::new(renewed)));
    }
}
