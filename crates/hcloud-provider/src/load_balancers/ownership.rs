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
//! ([`plan_deletion`](super::release_plan::plan_deletion)): ours are removed, then the identity label and the record, so it is
//! nobody's and its foreign services and targets go on working; without foreign parts it is
//! deleted, as without the option.

use std::collections::BTreeSet;
use std::net::IpAddr;

use hcloud_api::models::Labels;

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
