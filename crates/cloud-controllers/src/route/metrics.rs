//! Upstream's route controller metric (`controllers/route/metrics.go`, k8s.io/cloud-provider
//! 1.37) under the same name, labels and values:
//! `route_controller_route_sync_total{outcome, trigger}`, one count per reconcile.
//!
//! - `trigger`: `node_change` for a reconcile a node brought (added, deleted, pod CIDRs,
//!   addresses or provider ID changed; the first reconcile, which covers the nodes the informer
//!   listed, like upstream's Add events), `periodic` for the others (informer resync, the
//!   safety resync, every reconcile of the periodic mode). A retry keeps the trigger of the
//!   reconcile it retries, as upstream requeues the same work-queue key.
//! - `outcome`: `error` if the reconcile failed (listing the routes failed), `changed` if at
//!   least one route was created or deleted, `noop` otherwise. As upstream, a reconcile whose
//!   creations or deletions failed is not an `error` (the failures are Warning events on the
//!   nodes); it is `changed` if some other operation succeeded.

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use sync_lock::Unpoison as _;

/// Why a reconcile ran (upstream's work-queue keys `node_change` and `periodic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncTrigger {
    /// A node was added or deleted, or its pod CIDRs, addresses or provider ID changed.
    NodeChange,
    /// A resync or the period.
    Periodic,
}

impl SyncTrigger {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncTrigger::NodeChange => "node_change",
            SyncTrigger::Periodic => "periodic",
        }
    }

    /// The trigger of one reconcile covering both: a node change wins (upstream would have run
    /// a `node_change` reconcile for it).
    pub fn merge(self, other: SyncTrigger) -> SyncTrigger {
        if self == SyncTrigger::NodeChange || other == SyncTrigger::NodeChange {
            SyncTrigger::NodeChange
        } else {
            SyncTrigger::Periodic
        }
    }
}

/// How a reconcile ended (upstream `recordRouteSync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncOutcome {
    /// At least one route was created or deleted.
    Changed,
    /// Nothing changed.
    Noop,
    /// The reconcile failed (the routes could not be listed).
    Error,
}

impl SyncOutcome {
    /// The outcome of a reconcile that created `created` and deleted `deleted` routes (upstream
    /// `recordRouteSync`: changed if any succeeded, even when other operations failed).
    pub fn of(created: usize, deleted: usize) -> SyncOutcome {
        if created + deleted > 0 { SyncOutcome::Changed } else { SyncOutcome::Noop }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncOutcome::Changed => "changed",
            SyncOutcome::Noop => "noop",
            SyncOutcome::Error => "error",
        }
    }
}

/// `route_sync_total` labels, in upstream's order.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SyncLabels {
    outcome: &'static str,
    trigger: &'static str,
}

/// The route controller's metrics. Cheap to clone; clones share the values.
#[derive(Debug, Clone, Default)]
pub struct RouteMetrics {
    syncs: Family<SyncLabels, Counter>,
}

impl RouteMetrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "route_controller_route_sync",
            "A metric counting the number of route reconciles with the cloud provider, labeled by the trigger \
             (periodic or node_change) and the outcome (error if the reconcile failed, changed if at least one \
             route was created or deleted, otherwise noop).",
            self.syncs.clone(),
        );
    }

    /// Counts one reconcile.
    pub fn record(&self, outcome: SyncOutcome, trigger: SyncTrigger) {
        self.syncs.get_or_create(&SyncLabels { outcome: outcome.as_str(), trigger: trigger.as_str() }).inc();
    }

    /// The count of reconciles with these labels so far.
    pub fn count(&self, outcome: SyncOutcome, trigger: SyncTrigger) -> u64 {
        self.syncs.get_or_create(&SyncLabels { outcome: outcome.as_str(), trigger: trigger.as_str() }).get()
    }
}

/// The trigger of the next reconcile, noted by the informer handler and taken when a
/// reconcile starts. Cheap to clone; clones share the note.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingTrigger(Arc<Mutex<Option<SyncTrigger>>>);

impl PendingTrigger {
    /// Something asks for a reconcile for `trigger`.
    pub(crate) fn note(&self, trigger: SyncTrigger) {
        let mut pending = self.0.lock_unpoisoned();
        *pending = Some(pending.map_or(trigger, |p| p.merge(trigger)));
    }

    /// The trigger of the reconcile starting now: every reconcile of the periodic mode
    /// (`watch` false) is `periodic`; in watch mode, what was noted, else (the safety resync)
    /// `periodic`.
    pub(crate) fn take(&self, watch: bool) -> SyncTrigger {
        let noted = self.0.lock_unpoisoned().take();
        if watch { noted.unwrap_or(SyncTrigger::Periodic) } else { SyncTrigger::Periodic }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    const WATCH: bool = true;
    const PERIODIC: bool = false;

    #[test]
    fn name_labels_and_values_match_upstream() {
        let m = RouteMetrics::default();
        let mut registry = Registry::default();
        m.register(&mut registry);
        m.record(SyncOutcome::Changed, SyncTrigger::NodeChange);
        m.record(SyncOutcome::Noop, SyncTrigger::Periodic);
        m.record(SyncOutcome::Noop, SyncTrigger::Periodic);
        m.record(SyncOutcome::Error, SyncTrigger::Periodic);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for needle in [
            "# TYPE route_controller_route_sync counter",
            "route_controller_route_sync_total{outcome=\"changed\",trigger=\"node_change\"} 1",
            "route_controller_route_sync_total{outcome=\"noop\",trigger=\"periodic\"} 2",
            "route_controller_route_sync_total{outcome=\"error\",trigger=\"periodic\"} 1",
        ] {
            assert!(text.contains(needle), "{needle} missing in\n{text}");
        }
    }

    /// Upstream `recordRouteSync`: changed if any route was created or deleted, even when
    /// other operations failed; noop otherwise.
    #[test]
    fn the_outcome_counts_successful_operations_only() {
        assert_eq!(SyncOutcome::of(0, 0), SyncOutcome::Noop);
        assert_eq!(SyncOutcome::of(1, 0), SyncOutcome::Changed);
        assert_eq!(SyncOutcome::of(0, 2), SyncOutcome::Changed);
    }

    #[test]
    fn a_node_change_wins_and_the_periodic_mode_is_always_periodic() {
        let pending = PendingTrigger::default();
        assert_eq!(pending.take(WATCH), SyncTrigger::Periodic, "nothing noted: the safety resync");
        pending.note(SyncTrigger::NodeChange);
        pending.note(SyncTrigger::Periodic);
        assert_eq!(pending.take(WATCH), SyncTrigger::NodeChange);
        assert_eq!(pending.take(WATCH), SyncTrigger::Periodic, "taken once");
        pending.note(SyncTrigger::Periodic);
        assert_eq!(pending.take(WATCH), SyncTrigger::Periodic);
        pending.note(SyncTrigger::NodeChange);
        assert_eq!(pending.take(PERIODIC), SyncTrigger::Periodic);
    }
}
