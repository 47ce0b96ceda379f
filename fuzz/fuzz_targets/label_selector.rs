//! Label selectors: the Kubernetes one (`node-selector` annotation, cloud-provider's
//! `LabelSelector`) and the Hetzner API's (the fake's `label_selector` query parameter).
//!
//! Properties: a parsed Kubernetes selector prints as a string that parses back to the same
//! selector; a parsed Hetzner selector's requirements written out canonically parse back to the
//! same requirements; where both parsers accept a string they select the same label sets.

#![no_main]

use std::collections::BTreeMap;

use cloud_provider::helpers::label_selector::{LabelSelector as K8sSelector, Requirement as K};
use hcloud_fake::label_selector::{LabelSelector as ApiSelector, Requirement as A};
use libfuzzer_sys::fuzz_target;

fn canonical(requirements: &[A]) -> String {
    let parts: Vec<String> = requirements
        .iter()
        .map(|r| match r {
            A::Equals(k, v) => format!("{k}={v}"),
            A::NotEquals(k, v) => format!("{k}!={v}"),
            A::In(k, vs) => format!("{k} in ({})", vs.join(",")),
            A::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            A::Exists(k) => k.clone(),
            A::NotExists(k) => format!("!{k}"),
        })
        .collect();
    parts.join(",")
}

/// Label sets that exercise every requirement: nothing, each key with each value a
/// requirement names, and each key with a value none names.
fn label_sets(k8s: &K8sSelector) -> Vec<BTreeMap<String, String>> {
    let mut keys = Vec::new();
    let mut values = vec!["zz-none-of-them".to_owned(), "7".to_owned()];
    for r in k8s.requirements() {
        match r {
            K::Exists(k) | K::DoesNotExist(k) => keys.push(k.clone()),
            K::In(k, vs) | K::NotIn(k, vs) => {
                keys.push(k.clone());
                values.extend(vs.iter().cloned());
            }
            K::GreaterThan(k, n) | K::LessThan(k, n) => {
                keys.push(k.clone());
                values.push(n.to_string());
            }
        }
    }
    keys.truncate(4);
    values.truncate(6);
    let mut sets = vec![BTreeMap::new()];
    for value in &values {
        sets.push(keys.iter().map(|k| (k.clone(), value.clone())).collect());
        for (i, k) in keys.iter().enumerate() {
            let mut one = BTreeMap::new();
            one.insert(k.clone(), value.clone());
            sets.push(one);
            // Every key but one.
            sets.push(
                keys.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, k)| (k.clone(), value.clone())).collect(),
            );
        }
    }
    sets
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };

    let k8s = K8sSelector::parse(s);
    if let Ok(sel) = &k8s {
        let printed = sel.to_string();
        match K8sSelector::parse(&printed) {
            Ok(again) => assert_eq!(&again, sel, "{s:?} printed as {printed:?}"),
            Err(e) => panic!("{s:?} printed as {printed:?}, which does not parse: {e}"),
        }
    }

    let api = ApiSelector::parse(s);
    if let Ok(sel) = &api {
        let printed = canonical(sel.requirements());
        match ApiSelector::parse(&printed) {
            Ok(again) => assert_eq!(again.requirements(), sel.requirements(), "{s:?} written as {printed:?}"),
            Err(e) => panic!("{s:?} written as {printed:?}, which does not parse: {e}"),
        }
    }

    if let (Ok(k8s), Ok(api)) = (&k8s, &api) {
        for labels in label_sets(k8s) {
            assert_eq!(k8s.matches(&labels), api.matches(&labels), "{s:?} on {labels:?}");
        }
    }
});
