//! Taint helpers (upstream `node/helpers/taints.go`). Taints match on key and effect; the
//! value is ignored, as in Kubernetes' `Taint.MatchTaint`.

use k8s_openapi::api::core::v1::Taint;

/// True if both taints have the same key and effect.
pub fn taint_matches(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

/// True if `taints` holds a taint matching `find`.
pub fn taint_exists(taints: &[Taint], find: &Taint) -> bool {
    taints.iter().any(|t| taint_matches(t, find))
}

/// True if `taints` holds a taint with this key (any value or effect).
pub fn taint_key_exists(taints: &[Taint], key: &str) -> bool {
    taints.iter().any(|t| t.key == key)
}

/// Removes every taint matching `delete`; returns the rest and whether anything was removed.
pub fn delete_taint(taints: &[Taint], delete: &Taint) -> (Vec<Taint>, bool) {
    let kept: Vec<Taint> = taints.iter().filter(|t| !taint_matches(t, delete)).cloned().collect();
    let deleted = kept.len() != taints.len();
    (kept, deleted)
}

/// Like [`delete_taint`], but returns the input unchanged when nothing matches.
pub fn remove_taint(taints: &[Taint], remove: &Taint) -> (Vec<Taint>, bool) {
    if taints.is_empty() || !taint_exists(taints, remove) {
        return (taints.to_vec(), false);
    }
    delete_taint(taints, remove)
}

/// Adds `taint`, or replaces a matching taint that differs; returns the new list and whether
/// it changed.
pub fn add_or_update_taint(taints: &[Taint], taint: &Taint) -> (Vec<Taint>, bool) {
    let mut out = Vec::with_capacity(taints.len() + 1);
    let mut updated = false;
    for t in taints {
        if taint_matches(taint, t) {
            if taint == t {
                return (taints.to_vec(), false);
            }
            out.push(taint.clone());
            updated = true;
        } else {
            out.push(t.clone());
        }
    }
    if !updated {
        out.push(taint.clone());
    }
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint { key: key.into(), value: value.map(Into::into), effect: effect.into(), time_added: None }
    }

    /// Upstream `TestTaintExists`.
    #[test]
    fn test_taint_exists() {
        let testing = vec![taint("foo_1", Some("bar_1"), "NoExecute"), taint("foo_2", Some("bar_2"), "NoSchedule")];
        let cases = [
            ("taint exists", taint("foo_1", Some("bar_1"), "NoExecute"), true),
            ("different key", taint("no_such_key", Some("bar_1"), "NoExecute"), false),
            ("different effect", taint("foo_1", Some("bar_1"), "NoSchedule"), false),
        ];
        for (name, find, expected) in cases {
            assert_eq!(taint_exists(&testing, &find), expected, "case {name:?}");
        }
    }

    /// Upstream `TestRemoveTaint`.
    #[test]
    fn test_remove_taint() {
        let cases = [
            (
                "remove taint unsuccessfully",
                vec![taint("foo", None, "NoSchedule")],
                taint("foo_1", None, "NoSchedule"),
                vec![taint("foo", None, "NoSchedule")],
                false,
            ),
            (
                "remove taint successfully",
                vec![taint("foo", None, "NoSchedule")],
                taint("foo", None, "NoSchedule"),
                vec![],
                true,
            ),
            ("remove taint from node with no taint", vec![], taint("foo", None, "NoSchedule"), vec![], false),
        ];
        for (name, taints, remove, expected, expected_result) in cases {
            let (got, result) = remove_taint(&taints, &remove);
            assert_eq!(result, expected_result, "case {name:?}");
            assert_eq!(got, expected, "case {name:?}");
        }
    }

    /// Upstream `TestDeleteTaint`.
    #[test]
    fn test_delete_taint() {
        let cases = [
            (
                "delete taint with different name",
                vec![taint("foo", None, "NoSchedule")],
                taint("foo_1", None, "NoSchedule"),
                vec![taint("foo", None, "NoSchedule")],
                false,
            ),
            (
                "delete taint with different effect",
                vec![taint("foo", None, "NoSchedule")],
                taint("foo", None, "NoExecute"),
                vec![taint("foo", None, "NoSchedule")],
                false,
            ),
            (
                "delete taint successfully",
                vec![taint("foo", None, "NoSchedule")],
                taint("foo", None, "NoSchedule"),
                vec![],
                true,
            ),
            ("delete taint from empty taint array", vec![], taint("foo", None, "NoSchedule"), vec![], false),
        ];
        for (name, taints, delete, expected, expected_result) in cases {
            let (got, result) = delete_taint(&taints, &delete);
            assert_eq!(result, expected_result, "case {name:?}");
            assert_eq!(got, expected, "case {name:?}");
        }
    }

    #[test]
    fn add_or_update() {
        let shutdown = taint("node.cloudprovider.kubernetes.io/shutdown", None, "NoSchedule");
        let (t, changed) = add_or_update_taint(&[], &shutdown);
        assert!(changed);
        assert_eq!(t, vec![shutdown.clone()]);
        let (t2, changed) = add_or_update_taint(&t, &shutdown);
        assert!(!changed, "identical taint is a no-op");
        assert_eq!(t2, t);
        let with_value = taint("node.cloudprovider.kubernetes.io/shutdown", Some("x"), "NoSchedule");
        let (t3, changed) = add_or_update_taint(&t, &with_value);
        assert!(changed, "a matching taint with another value is replaced");
        assert_eq!(t3, vec![with_value]);
    }
}
