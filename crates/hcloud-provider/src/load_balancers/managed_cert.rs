//! Which managed certificate a Service's HTTPS ports use while its domains change, pure.
//!
//! The Service's managed certificates are those with its `hcloud-ccm/service-uid` label. One
//! whose domains are `http-managed-certificate-domains` is the one wanted; until it is issued
//! the HTTPS ports keep the issued one they have (never a window without a valid certificate);
//! once it is issued the others are retired (deleted after the Load Balancer stopped using
//! them). A failed issuance keeps the old certificate and is reported. The name asked for is
//! the Service's only if no certificate without its label holds it: such a name is refused
//! ([`NameTaken`]), never replaced by another; `<name>-2`, `-3`, ... are for the Service's own
//! certificate while its domains change.

use std::collections::BTreeSet;

use hcloud_api::models::{Certificate, CertificateId};

/// How far a managed certificate's issuance is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issuance {
    /// Issued (or no status: usable).
    Completed,
    /// Being issued.
    Pending,
    /// Failed.
    Failed,
}

/// The issuance state of `c`.
pub fn issuance(c: &Certificate) -> Issuance {
    match c.status.as_ref().map(|s| s.issuance.as_str()) {
        Some("pending") => Issuance::Pending,
        Some("failed") => Issuance::Failed,
        _ => Issuance::Completed,
    }
}

/// What to do about the Service's managed certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedPlan {
    /// The certificate the HTTPS ports use now; `None`: the one created by `create`.
    pub use_now: Option<CertificateId>,
    /// Create a certificate for the wanted domains with this name (free in the project).
    pub create: Option<String>,
    /// The wanted certificate, still being issued while the ports keep `use_now`: check again.
    pub awaited: Option<CertificateId>,
    /// The wanted certificate, whose issuance failed (reported; `use_now` is kept).
    pub failed: Option<CertificateId>,
    /// The Service's other certificates, to delete once the Load Balancer no longer uses them.
    pub retire: Vec<CertificateId>,
}

fn sorted(domains: &[String]) -> Vec<String> {
    let mut d = domains.to_vec();
    d.sort();
    d.dedup();
    d
}

/// The name the Service asks for is held by a certificate not labelled for it: refused (it is
/// someone else's, and a quietly different name is not what the Service asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameTaken {
    /// The name.
    pub name: String,
}

/// A name for a new certificate: `name`, or `name-2`, `name-3`, ... when taken (the old
/// certificate keeps its name until it is deleted).
fn free_name(name: &str, taken: &BTreeSet<&str>) -> String {
    if !taken.contains(name) {
        return name.to_owned();
    }
    (2u32..).map(|i| format!("{name}-{i}")).find(|n| !taken.contains(n.as_str())).unwrap_or_else(|| name.to_owned()) // unreachable: `taken` is finite
}

/// The plan for the Service whose managed certificates are `ours` (by label), wanting
/// `domains` under `name`; `taken` are the names of every certificate in the project. A new
/// certificate is needed and `name` is held by one that is not `ours`: [`NameTaken`].
pub fn plan_managed(
    ours: &[&Certificate],
    domains: &[String],
    name: &str,
    taken: &BTreeSet<&str>,
) -> Result<ManagedPlan, NameTaken> {
    let want = sorted(domains);
    // The newest issued certificate for other domains: what the ports keep meanwhile.
    let keep = ours
        .iter()
        .filter(|c| sorted(&c.domain_names) != want && issuance(c) == Issuance::Completed)
        .max_by_key(|c| c.id)
        .map(|c| c.id);
    // The wanted one: an issued one first, then the newest.
    let wanted = ours
        .iter()
        .filter(|c| sorted(&c.domain_names) == want)
        .max_by_key(|c| (issuance(c) == Issuance::Completed, c.id));
    let mut plan = ManagedPlan { use_now: keep, create: None, awaited: None, failed: None, retire: Vec::new() };
    match wanted {
        None if taken.contains(name) && !ours.iter().any(|c| c.name == name) => {
            return Err(NameTaken { name: name.to_owned() });
        }
        None => plan.create = Some(free_name(name, taken)),
        Some(w) => match issuance(w) {
            Issuance::Completed => {
                plan.use_now = Some(w.id);
                plan.retire = ours.iter().map(|c| c.id).filter(|id| *id != w.id).collect();
                plan.retire.sort();
            }
            // Nothing issued to keep: the ports use it right away (as when it is first created).
            Issuance::Pending if keep.is_none() => plan.use_now = Some(w.id),
            Issuance::Pending => plan.awaited = Some(w.id),
            Issuance::Failed => {
                plan.use_now = Some(keep.unwrap_or(w.id));
                plan.failed = Some(w.id);
            }
        },
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use hcloud_api::models::CertificateStatus;
    use serde_json::json;

    use super::*;

    fn cert(id: i64, name: &str, domains: &[&str], issuance: &str) -> Certificate {
        let mut c: Certificate = serde_json::from_value(json!({
            "id": id, "name": name, "type": "managed", "domain_names": domains, "labels": {}
        }))
        .expect("certificate");
        c.status = Some(CertificateStatus { issuance: issuance.into(), ..Default::default() });
        c
    }

    fn plan(ours: &[Certificate], domains: &[&str]) -> ManagedPlan {
        let refs: Vec<&Certificate> = ours.iter().collect();
        let taken: BTreeSet<&str> = ours.iter().map(|c| c.name.as_str()).collect();
        let domains: Vec<String> = domains.iter().map(|d| (*d).to_owned()).collect();
        plan_managed(&refs, &domains, "ccm-managed-certificate-u", &taken).expect("the name is ours or free")
    }

    const NAME: &str = "ccm-managed-certificate-u";

    #[test]
    fn unchanged_domains_plan_nothing() {
        let old = cert(1, NAME, &["a.example.com", "b.example.com"], "completed");
        assert_eq!(
            plan(&[old], &["b.example.com", "a.example.com"]),
            ManagedPlan { use_now: Some(CertificateId(1)), create: None, awaited: None, failed: None, retire: vec![] }
        );
    }

    #[test]
    fn changed_domains_create_a_new_certificate_under_a_free_name_and_keep_the_old_one() {
        let old = cert(1, NAME, &["a.example.com"], "completed");
        assert_eq!(
            plan(&[old], &["shop.example.com"]),
            ManagedPlan {
                use_now: Some(CertificateId(1)),
                create: Some(format!("{NAME}-2")),
                awaited: None,
                failed: None,
                retire: vec![]
            }
        );
    }

    #[test]
    fn the_old_certificate_is_kept_while_the_new_one_is_pending_and_retired_once_issued() {
        let old = cert(1, NAME, &["a.example.com"], "completed");
        let pending = cert(2, &format!("{NAME}-2"), &["shop.example.com"], "pending");
        assert_eq!(
            plan(&[old.clone(), pending], &["shop.example.com"]),
            ManagedPlan {
                use_now: Some(CertificateId(1)),
                create: None,
                awaited: Some(CertificateId(2)),
                failed: None,
                retire: vec![]
            }
        );
        let issued = cert(2, &format!("{NAME}-2"), &["shop.example.com"], "completed");
        assert_eq!(
            plan(&[old, issued], &["shop.example.com"]),
            ManagedPlan {
                use_now: Some(CertificateId(2)),
                create: None,
                awaited: None,
                failed: None,
                retire: vec![CertificateId(1)]
            }
        );
    }

    #[test]
    fn a_failed_issuance_keeps_the_old_certificate_and_is_reported() {
        let old = cert(1, NAME, &["a.example.com"], "completed");
        let failed = cert(2, &format!("{NAME}-2"), &["shop.example.com"], "failed");
        assert_eq!(
            plan(&[old.clone(), failed.clone()], &["shop.example.com"]),
            ManagedPlan {
                use_now: Some(CertificateId(1)),
                create: None,
                awaited: None,
                failed: Some(CertificateId(2)),
                retire: vec![]
            }
        );
        // Back to the old domains: the old certificate again, the failed one retired.
        assert_eq!(
            plan(&[old, failed], &["a.example.com"]),
            ManagedPlan {
                use_now: Some(CertificateId(1)),
                create: None,
                awaited: None,
                failed: None,
                retire: vec![CertificateId(2)]
            }
        );
    }

    #[test]
    fn without_an_issued_certificate_the_new_one_is_used_at_once() {
        assert_eq!(
            plan(&[], &["shop.example.com"]),
            ManagedPlan { use_now: None, create: Some(NAME.to_owned()), awaited: None, failed: None, retire: vec![] }
        );
        let pending = cert(2, NAME, &["shop.example.com"], "pending");
        assert_eq!(plan(&[pending], &["shop.example.com"]).use_now, Some(CertificateId(2)));
    }

    /// Issue 27 item 4: the name asked for, held by a certificate without the Service's label,
    /// is refused, never replaced by `<name>-2`; the Service's own old certificate holding it
    /// is what `-2` is for.
    #[test]
    fn a_name_held_by_a_certificate_not_labelled_for_the_service_is_refused() {
        let foreign = cert(9, NAME, &["other.example.com"], "completed");
        let taken: BTreeSet<&str> = [NAME].into();
        let domains = vec!["shop.example.com".to_owned()];
        assert_eq!(plan_managed(&[], &domains, NAME, &taken), Err(NameTaken { name: NAME.to_owned() }));
        // The Service's own certificate is issued for these domains: nothing to create, no conflict.
        let mine = cert(2, &format!("{NAME}-2"), &["shop.example.com"], "completed");
        let taken: BTreeSet<&str> = [NAME, mine.name.as_str()].into();
        assert_eq!(plan_managed(&[&mine], &domains, NAME, &taken).map(|p| p.use_now), Ok(Some(CertificateId(2))));
        // New domains while the name is someone else's: refused too.
        let other = vec!["new.example.com".to_owned()];
        assert_eq!(plan_managed(&[&mine], &other, NAME, &taken), Err(NameTaken { name: NAME.to_owned() }));
        // Held by a foreign certificate under a rotation name: skipped.
        let old = cert(1, NAME, &["a.example.com"], "completed");
        let taken: BTreeSet<&str> = [NAME, foreign.name.as_str(), "ccm-managed-certificate-u-2"].into();
        assert_eq!(plan_managed(&[&old], &domains, NAME, &taken).map(|p| p.create), Ok(Some(format!("{NAME}-3"))));
    }
}
