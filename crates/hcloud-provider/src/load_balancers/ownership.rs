//! Which targets and services of a Load Balancer hcloud-ccm manages (hcloud-ccm only, opt-in:
//! `keep-foreign` / `HCLOUD_LOAD_BALANCERS_KEEP_FOREIGN`), pure.
//!
//! Without the option every target and service the Service does not describe is removed (the
//! official CCM). With it, only those recorded as ours are: the record is a set of labels on
//! the Load Balancer itself (`hcloud-ccm.managed/port-<listen port>`,
//! `hcloud-ccm.managed/server-<id>`, `hcloud-ccm.managed/ip-<address>`, value `true`), read
//! with the Load Balancer (no request of its own) and written only when it changes: in the
//! create request, or in the `PUT` that adds new entries *before* the targets and services are
//! added, and the `PUT` that drops entries *after* the stale ones are removed, so a failure in
//! between never leaves one of ours unrecorded (it would be kept for ever). A target or
//! service present when the option is turned on and not described by the Service is foreign:
//! nothing is removed unless it is known to be ours.
//!
//! When the Service is deleted, a Load Balancer that still has foreign parts is kept
//! ([`plan_deletion`]): ours are removed, then the identity label and the record, so it is
//! nobody's and its foreign services and targets go on working; without foreign parts it is
//! deleted, as without the option.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use cloud_provider::helpers::go_syntax::parse_go_bool;
use hcloud_api::models::{Labels, LbTarget, LoadBalancer, TargetKind, TargetSpec, UpdateLoadBalancerRequest};

use super::annotations::{KEEP_FOREIGN, LABEL_SERVICE_UID};
use super::plan::LbOp;
use super::targets::TargetRef;

/// The label prefix of the record.
pub const RECORD_PREFIX: &str = "hcloud-ccm.managed/";

/// The value of every record label.
const RECORD_VALUE: &str = "true";

/// What hcloud-ccm manages on one Load Balancer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// Listen ports of the LB services.
    pub ports: BTreeSet<u16>,
    /// Targets hcloud-ccm added (`hcloud-ccm.managed/server-<id>` and `.../ip-<address>`
    /// labels); only these may be removed with `keep-foreign`.
    pub targets: BTreeSet<TargetRef>,
}

fn port_key(port: u16) -> String {
    format!("{RECORD_PREFIX}port-{port}")
}

/// A label name holds letters, digits, `-`, `_` and `.` and ends with a letter or digit: IPv6
/// addresses are written with all eight groups, `-` between them.
fn target_key(t: &TargetRef) -> String {
    match t {
        TargetRef::Server(id) => format!("{RECORD_PREFIX}server-{id}"),
        TargetRef::Ip(IpAddr::V4(ip)) => format!("{RECORD_PREFIX}ip-{ip}"),
        TargetRef::Ip(IpAddr::V6(ip)) => {
            let groups: Vec<String> = ip.segments().iter().map(|g| format!("{g:x}")).collect();
            format!("{RECORD_PREFIX}ip-{}", groups.join("-"))
        }
    }
}

fn parse_target(name: &str) -> Option<TargetRef> {
    if let Some(id) = name.strip_prefix("server-") {
        return id.parse::<i64>().ok().map(|id| TargetRef::Server(hcloud_api::models::ServerId(id)));
    }
    let ip = name.strip_prefix("ip-")?;
    if ip.contains('.') {
        return ip.parse().ok().map(TargetRef::Ip);
    }
    ip.replace('-', ":").parse().ok().map(TargetRef::Ip)
}

impl Record {
    /// The record the labels carry (labels it cannot read are ignored).
    pub fn from_labels(labels: &Labels) -> Record {
        let mut r = Record::default();
        for name in labels.keys().filter_map(|k| k.strip_prefix(RECORD_PREFIX)) {
            if let Some(p) = name.strip_prefix("port-").and_then(|p| p.parse().ok()) {
                r.ports.insert(p);
            } else if let Some(t) = parse_target(name) {
                r.targets.insert(t);
            }
        }
        r
    }

    /// `labels` with this record instead of the one they carry (other labels kept).
    pub fn into_labels(&self, labels: &Labels) -> Labels {
        let mut out: Labels =
            labels.iter().filter(|(k, _)| !k.starts_with(RECORD_PREFIX)).map(|(k, v)| (k.clone(), v.clone())).collect();
        for p in &self.ports {
            out.insert(port_key(*p), RECORD_VALUE.to_owned());
        }
        for t in &self.targets {
            out.insert(target_key(t), RECORD_VALUE.to_owned());
        }
        out
    }

    /// Both records' entries.
    pub fn union(&self, other: &Record) -> Record {
        Record {
            ports: self.ports.union(&other.ports).copied().collect(),
            targets: self.targets.union(&other.targets).copied().collect(),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use hcloud_api::models::ServerId;

    use super::*;

    #[test]
    fn the_record_round_trips_through_labels_and_keeps_other_labels() {
        let record = Record {
            ports: [80, 443].into(),
            targets: [
                TargetRef::Server(ServerId(42)),
                TargetRef::Ip("203.0.113.9".parse().expect("ip")),
                TargetRef::Ip("2001:db8::".parse().expect("ip")),
            ]
            .into(),
        };
        let mine: Labels = [("hcloud-ccm/service-uid".to_owned(), "u".to_owned())].into();
        let labels = record.into_labels(&mine);
        let keys: Vec<&str> = labels.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "hcloud-ccm.managed/ip-2001-db8-0-0-0-0-0-0",
                "hcloud-ccm.managed/ip-203.0.113.9",
                "hcloud-ccm.managed/port-443",
                "hcloud-ccm.managed/port-80",
                "hcloud-ccm.managed/server-42",
                "hcloud-ccm/service-uid",
            ]
        );
        assert_eq!(Record::from_labels(&labels), record);
        assert_eq!(Record::default().into_labels(&labels), mine, "an empty record drops every entry");
    }

    #[test]
    fn unreadable_record_labels_are_ignored() {
        let labels: Labels = [
            ("hcloud-ccm.managed/port-x".to_owned(), "true".to_owned()),
            ("hcloud-ccm.managed/server-".to_owned(), "true".to_owned()),
            ("hcloud-ccm.managed/ip-nope".to_owned(), "true".to_owned()),
            ("other/port-80".to_owned(), "true".to_owned()),
        ]
        .into();
        assert_eq!(Record::from_labels(&labels), Record::default());
    }
}
