//! Which Services share a Load Balancer (`sharing-key`), pure: the group of a key (its
//! namespace, or across the namespaces the operator lists), and the labels that find the
//! group's Load Balancer and record its members. [`super::sharing`] plans with them.

use std::collections::BTreeSet;
use std::fmt;

use cloud_provider::helpers::label_selector::is_name_segment;
use hcloud_api::models::LoadBalancer;

/// The cluster a shared Load Balancer belongs to (`--cluster-name`).
pub const LABEL_CLUSTER: &str = "hcloud-ccm/sharing-cluster";
/// The namespace of its group, or [`ACROSS_NAMESPACES`].
pub const LABEL_NAMESPACE: &str = "hcloud-ccm/sharing-namespace";
/// The sharing key of its group.
pub const LABEL_KEY: &str = "hcloud-ccm/sharing-key";
/// Which Nodes its targets are: a fingerprint of the node selector and `use-private-ip`.
pub const LABEL_TARGETS: &str = "hcloud-ccm.sharing/targets";
/// `hcloud-ccm.sharing/member-<Service UID>` = the Service's name.
pub const MEMBER_PREFIX: &str = "hcloud-ccm.sharing/member-";
/// `hcloud-ccm.sharing/port-<listen port>` = the owning Service's UID.
pub const PORT_PREFIX: &str = "hcloud-ccm.sharing/port-";
/// The namespace label's value of a group shared across namespaces (no namespace name has a
/// dot).
pub const ACROSS_NAMESPACES: &str = "across.namespaces";

/// Which namespaces share keys with each other (`HCLOUD_LOAD_BALANCERS_SHARING_NAMESPACES`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SharingNamespaces {
    /// None: a key is shared within its namespace only (the default).
    #[default]
    None,
    /// These namespaces share one pool of keys.
    Listed(BTreeSet<String>),
    /// Every namespace (`*`).
    All,
}

impl SharingNamespaces {
    /// From the variable's value: namespaces separated by commas, or `*`. Empty entries are
    /// skipped; an entry that is not a namespace name is an error naming it.
    pub fn parse(value: &str) -> Result<SharingNamespaces, String> {
        let entries: Vec<&str> = value.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
        if entries == ["*"] {
            return Ok(SharingNamespaces::All);
        }
        let bad: Vec<&str> = entries.iter().copied().filter(|e| !is_namespace(e)).collect();
        if !bad.is_empty() {
            return Err(format!(
                "{} is not a namespace name; accepted: namespace names separated by commas, or * for all",
                bad.join(", ")
            ));
        }
        Ok(if entries.is_empty() {
            SharingNamespaces::None
        } else {
            SharingNamespaces::Listed(entries.into_iter().map(str::to_owned).collect())
        })
    }

    fn includes(&self, namespace: &str) -> bool {
        match self {
            SharingNamespaces::None => false,
            SharingNamespaces::Listed(l) => l.contains(namespace),
            SharingNamespaces::All => true,
        }
    }
}

/// An RFC 1123 label, as namespace names are.
fn is_namespace(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// The Services that share one Load Balancer: one key, in one namespace or across the allowed
/// ones.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Group {
    /// The namespace, or [`ACROSS_NAMESPACES`].
    pub scope: String,
    /// The sharing key.
    pub key: String,
}

impl Group {
    /// The group of a Service in `namespace` with `key`, under `allowed`. `Err` says what a
    /// key accepts.
    pub fn of(namespace: &str, key: &str, allowed: &SharingNamespaces) -> Result<Group, &'static str> {
        if !is_name_segment(key) {
            return Err(
                "accepted: 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
            );
        }
        let scope = if allowed.includes(namespace) { ACROSS_NAMESPACES } else { namespace };
        Ok(Group { scope: scope.to_owned(), key: key.to_owned() })
    }

    /// The labels that find the group's Load Balancer in `cluster`.
    pub fn labels(&self, cluster: &str) -> [(&'static str, String); 3] {
        [(LABEL_CLUSTER, cluster.to_owned()), (LABEL_NAMESPACE, self.scope.clone()), (LABEL_KEY, self.key.clone())]
    }

    /// Whether `lb` is this group's Load Balancer in `cluster`.
    pub fn owns(&self, lb: &LoadBalancer, cluster: &str) -> bool {
        self.labels(cluster).iter().all(|(k, v)| lb.labels.get(*k) == Some(v))
    }

    /// The name of a new Load Balancer without a `name` annotation: readable, and unique per
    /// cluster, scope and key (a short hash), within Hetzner's 63 characters.
    pub fn default_name(&self, cluster: &str) -> String {
        let hash = fnv32(&format!("{cluster}\n{}\n{}", self.scope, self.key));
        let scope = if self.scope == ACROSS_NAMESPACES { "shared" } else { self.scope.as_str() };
        let mut readable = format!("{scope}-{}", self.key);
        readable.truncate(63 - 9);
        format!("{}-{hash:08x}", readable.trim_end_matches(['-', '.', '_']))
    }
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.scope == ACROSS_NAMESPACES {
            write!(f, "sharing key {} (across namespaces)", self.key)
        } else {
            write!(f, "sharing key {} in namespace {}", self.key, self.scope)
        }
    }
}

/// FNV-1a, 32 bits: stable across builds, unlike `std`'s hasher.
pub(super) fn fnv32(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}
