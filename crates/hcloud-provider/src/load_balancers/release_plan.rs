//! What deleting a Service does to its Load Balancer with `keep-foreign` (pure): delete it, or,
//! when it has services or targets hcloud-ccm did not add, release it (remove only ours and the
//! identity label) and say so in a Normal event. `deletion.rs` carries the plan out.

use std::collections::BTreeMap;

use cloud_provider::helpers::go_syntax::parse_go_bool;
use hcloud_api::models::{LbTarget, LoadBalancer, TargetKind, TargetSpec, UpdateLoadBalancerRequest};

use super::annotations::{KEEP_FOREIGN, LABEL_SERVICE_UID};
use super::ownership::Record;
use super::plan::LbOp;
use super::targets::TargetRef;

/// Whether `keep-foreign` is on for a Service being deleted, from its `annotations` (the
/// annotation wins) and the cluster's `default` (`HCLOUD_LOAD_BALANCERS_KEEP_FOREIGN`). Only
/// this annotation is read: deletion works whatever the others say. An unreadable value counts
/// as on, since what is deleted cannot come back and what is kept can still be deleted by hand.
pub fn keep_foreign_on_delete(annotations: Option<&BTreeMap<String, String>>, default: bool) -> bool {
    match annotations.and_then(|m| m.get(KEEP_FOREIGN)) {
        Some(v) => parse_go_bool(v).unwrap_or(true),
        None => default,
    }
}

/// What deleting its Service does to a Load Balancer.
#[derive(Debug, Clone, PartialEq)]
pub enum Deletion {
    /// Delete it: `keep-foreign` is off (the official CCM), or nothing on it is foreign.
    Delete,
    /// Keep it for the foreign parts on it.
    Release(Release),
}

/// A Load Balancer kept at its Service's deletion for its foreign services and targets.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    /// Our services, then our targets removed, then one `PUT` dropping the identity label and
    /// the record (last: a failure before leaves it ours, and the deletion is retried).
    pub ops: Vec<LbOp>,
    /// Listen ports of our services (removed).
    pub our_ports: Vec<u16>,
    /// How many of our targets are removed.
    pub our_targets: usize,
    /// Listen ports of the foreign services (kept).
    pub foreign_ports: Vec<u16>,
    /// How many foreign targets are kept (label-selector targets among them: never ours).
    pub foreign_targets: usize,
}

/// A target as `remove_target` takes it and its record entry, if it can be ours.
fn recordable(t: &LbTarget) -> Option<(TargetRef, TargetSpec)> {
    match t.kind {
        TargetKind::Server => t
            .server
            .map(|s| (TargetRef::Server(s.id), TargetSpec::Server { id: s.id, use_private_ip: t.use_private_ip })),
        TargetKind::Ip => t.ip.as_ref().map(|ip| (TargetRef::Ip(ip.ip), TargetSpec::Ip(ip.ip))),
        _ => None,
    }
}

/// What deleting the Service does to `lb`, its Load Balancer, with `keep_foreign` as
/// [`keep_foreign_on_delete`] says: with the option, the services and targets `lb`'s record does
/// not list are foreign, and a Load Balancer with any is released instead of deleted.
pub fn plan_deletion(lb: &LoadBalancer, keep_foreign: bool) -> Deletion {
    if !keep_foreign {
        return Deletion::Delete;
    }
    let record = Record::from_labels(&lb.labels);
    let (mut our_ports, mut foreign_ports): (Vec<u16>, Vec<u16>) =
        lb.services.iter().map(|s| s.listen_port).partition(|p| record.ports.contains(p));
    our_ports.sort_unstable();
    foreign_ports.sort_unstable();
    let mut our_targets = Vec::new();
    let mut foreign_targets = 0;
    for t in &lb.targets {
        match recordable(t) {
            Some((r, spec)) if record.targets.contains(&r) => our_targets.push(spec),
            _ => foreign_targets += 1,
        }
    }
    if foreign_ports.is_empty() && foreign_targets == 0 {
        return Deletion::Delete;
    }
    let mut labels = Record::default().into_labels(&lb.labels);
    labels.remove(LABEL_SERVICE_UID);
    let mut ops: Vec<LbOp> = our_ports.iter().map(|p| LbOp::DeleteService(*p)).collect();
    let our_target_count = our_targets.len();
    ops.extend(our_targets.into_iter().map(LbOp::RemoveTarget));
    ops.push(LbOp::Update(UpdateLoadBalancerRequest { name: None, labels: Some(labels) }));
    Deletion::Release(Release { ops, our_ports, our_targets: our_target_count, foreign_ports, foreign_targets })
}

/// `1 service (port 80)`, `2 services (ports 80, 443)` and `1 target`, `2 targets`, joined.
fn parts(ports: &[u16], targets: usize) -> String {
    let list = ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
    let mut out = Vec::new();
    match ports.len() {
        0 => {}
        1 => out.push(format!("1 service (port {list})")),
        n => out.push(format!("{n} services (ports {list})")),
    }
    match targets {
        0 => {}
        1 => out.push("1 target".to_owned()),
        n => out.push(format!("{n} targets")),
    }
    out.join(" and ")
}

impl Release {
    /// The Normal event on the Service once `lb` is released.
    pub fn message(&self, lb: &LoadBalancer) -> String {
        let ours = parts(&self.our_ports, self.our_targets);
        let removed = if ours.is_empty() { String::new() } else { format!("this Service's {ours} and ") };
        format!(
            "Load Balancer {} ({}) is kept, not deleted: it has {} that hcloud-ccm did not add (keep-foreign); \
             removed {removed}the label {LABEL_SERVICE_UID}; delete the Load Balancer yourself when it is no longer \
             needed",
            lb.name,
            lb.id,
            parts(&self.foreign_ports, self.foreign_targets)
        )
    }
}
