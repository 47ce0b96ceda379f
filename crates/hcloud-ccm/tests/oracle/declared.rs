//! The differences between the two CCMs that `docs/migration.md` declares ("What differs",
//! "Checked against the official CCM"), each with a matcher here. A run passes when every
//! difference it finds is explained by a declared one and every difference declared for that
//! run shows up; the table and this list must name the same ids. So the table cannot drift
//! from what the CCMs do.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use super::snapshot::Difference;

/// One declared difference.
pub struct Declared {
    /// Its id, the first column of its row in `docs/migration.md`.
    pub id: &'static str,
    /// The runs (test names) in which it must show up.
    pub runs: &'static [&'static str],
    /// Whether it explains a difference.
    pub explains: fn(&Difference) -> bool,
}

/// Whether `path` matches `pattern`, where a `*` segment matches any one segment.
pub fn path_matches(pattern: &str, path: &str) -> bool {
    let (p, q): (Vec<&str>, Vec<&str>) = (pattern.split('/').collect(), path.split('/').collect());
    p.len() == q.len() && p.iter().zip(&q).all(|(a, b)| *a == "*" || a == b)
}

/// `Some(v)` as a string.
pub fn str_of(v: &Option<Value>) -> Option<&str> {
    v.as_ref().and_then(Value::as_str)
}

const KNOWN: &[&str] = &["where_the_two_differ_on_purpose"];

/// The declared differences (see `docs/migration.md`, "Checked against the official CCM").
pub const DECLARED: &[Declared] = &[
    Declared {
        id: "lb-name-of-another-services-lb",
        runs: KNOWN,
        // The official CCM points the owner's Load Balancer at the intruder's node ports and
        // reports it in the intruder's status; hcloud-ccm refuses (no status, a Warning).
        explains: |d| {
            d.path.starts_with("/services/intruder/")
                || (d.path.starts_with("/load_balancers/shared-lb/services/")
                    && str_of(&d.official).is_some_and(|v| v.starts_with("<nodePort:intruder:")))
        },
    },
    Declared {
        id: "managed-certificate-domains-change",
        runs: KNOWN,
        // The official CCM keeps the certificate for the old domains; hcloud-ccm issues one for
        // the new domains (`<name>-2`), switches the ports to it and deletes the old one.
        explains: |d| {
            d.path.starts_with("/certificates/ccm-managed-certificate-<uid:managed>/")
                || d.path.starts_with("/certificates/ccm-managed-certificate-<uid:managed>-2/")
                || path_matches("/load_balancers/a<uid:managed>/services/*/http/certificates/*", &d.path)
        },
    },
    Declared {
        id: "node-selector-relabel",
        runs: KNOWN,
        // A Node relabelled to match `node-selector`: hcloud-ccm adds the target at once; the
        // official CCM only at its next unrelated sync.
        explains: |d| d.path.starts_with("/load_balancers/a<uid:selected>/targets/") && d.official.is_none(),
    },
    Declared {
        id: "route-outside-cluster-cidr",
        runs: KNOWN,
        // A pod CIDR outside --cluster-cidr: the official CCM creates a route (and never deletes
        // it); hcloud-ccm refuses with a ClusterCIDRMisconfigured Warning.
        explains: |d| {
            path_matches("/networks/k8s/routes/*", &d.path)
                && str_of(&d.official).is_some_and(|r| r.starts_with("10.99.0.0/24 "))
                && d.ours.is_none()
        },
    },
];

/// The ids of the table "Checked against the official CCM" in `docs/migration.md`.
pub fn documented_ids() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/migration.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let section = text
        .split("\n### ")
        .find(|s| s.starts_with("Checked against the official CCM"))
        .unwrap_or_else(|| panic!("{} has no section \"Checked against the official CCM\"", path.display()));
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(id, _)| id.to_owned()))
        .collect()
}

/// Checks one run's differences (`(step, differences)` pairs): every one explained, every
/// difference declared for `run` seen. Returns the problems, empty when the run passes.
pub fn check(run: &str, steps: &[(String, Vec<Difference>)]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for (step, diffs) in steps {
        for d in diffs {
            match DECLARED.iter().find(|decl| (decl.explains)(d)) {
                Some(decl) => {
                    seen.insert(decl.id);
                }
                None => problems.push(format!("[{step}] undeclared difference: {d}")),
            }
        }
    }
    for decl in DECLARED.iter().filter(|d| d.runs.contains(&run)) {
        if !seen.contains(decl.id) {
            problems.push(format!("declared difference `{}` did not show up in run {run}", decl.id));
        }
    }
    problems
}
