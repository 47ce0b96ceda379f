#![allow(clippy::unwrap_used, clippy::expect_used)]

use hcloud_api::models::{Deprecation, LoadBalancerType};
use k8s_openapi::jiff::Timestamp;

use super::*;

/// 2026-06-15T12:00:00Z.
fn now() -> Timestamp {
    "2026-06-15T12:00:00Z".parse().unwrap()
}

fn current(name: &str) -> LoadBalancerType {
    LoadBalancerType { name: name.into(), max_targets: 25, ..Default::default() }
}

fn deprecated(name: &str, unavailable_after: &str) -> LoadBalancerType {
    let deprecation = Some(Deprecation {
        announced: "2026-01-01T00:00:00+00:00".into(),
        unavailable_after: unavailable_after.into(),
    });
    LoadBalancerType { deprecation, ..current(name) }
}

/// lb11 current, lb21 deprecated until 2026-12-31, lb31 unavailable since 2026-06-01.
fn types() -> Vec<LoadBalancerType> {
    vec![
        current("lb11"),
        deprecated("lb21", "2026-12-31T00:00:00+00:00"),
        deprecated("lb31", "2026-06-01T00:00:00+00:00"),
    ]
}

fn names(warnings: &[Warning]) -> Vec<&str> {
    warnings.iter().map(|(reason, _)| *reason).collect()
}

const UNCONFIGURED_TEXT: &str = "Load Balancer Type unconfigured: this will be required in the future, set it with \
                                 the annotation \"load-balancer.hetzner.cloud/type\" or cluster-wide with the \
                                 environment variable \"HCLOUD_LOAD_BALANCERS_TYPE\"";

#[test]
fn availability_follows_unavailable_after() {
    assert_eq!(availability(&current("lb11"), now()), Availability::Current);
    assert_eq!(
        availability(&deprecated("lb21", "2026-12-31T00:00:00+00:00"), now()),
        Availability::Deprecated { until: "2026-12-31".into() }
    );
    // The day as written, in its own offset (hcloud-go formats the parsed time as it came).
    assert_eq!(
        availability(&deprecated("lb21", "2026-12-31T23:00:00-05:00"), now()),
        Availability::Deprecated { until: "2026-12-31".into() }
    );
    assert_eq!(availability(&deprecated("lb31", "2026-06-01T00:00:00+00:00"), now()), Availability::Unavailable);
    assert_eq!(
        availability(&deprecated("lb31", "2026-06-15T12:00:00Z"), now()),
        Availability::Deprecated { until: "2026-06-15".into() }
    );
    assert_eq!(
        availability(&deprecated("lb31", "soon"), now()),
        Availability::Deprecated { until: "soon".into() },
        "an unreadable date leaves it to the API"
    );
}

#[test]
fn a_new_load_balancer_without_a_configured_type_gets_lb11_and_the_unconfigured_warning() {
    let (t, warnings) = type_for_new(None, &types(), now()).unwrap();
    assert_eq!(t.name, "lb11");
    assert_eq!(warnings, vec![(UNCONFIGURED, UNCONFIGURED_TEXT.to_owned())]);
}

#[test]
fn a_new_load_balancer_of_a_deprecated_type_gets_hcloud_gos_warning() {
    let (t, warnings) = type_for_new(Some("lb21"), &types(), now()).unwrap();
    assert_eq!(t.name, "lb21");
    assert_eq!(
        warnings,
        vec![(
            DEPRECATED,
            "Load Balancer Type \"lb21\" is deprecated and will no longer be available for order as of 2026-12-31"
                .to_owned()
        )]
    );
    assert_eq!(type_for_new(Some("lb11"), &types(), now()).unwrap().1, vec![], "a current type: no warning");
}

#[test]
fn an_unavailable_type_is_refused_for_a_new_load_balancer_naming_the_setting_and_what_is_accepted() {
    let e = type_for_new(Some("lb31"), &types(), now()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "annotation load-balancer.hetzner.cloud/type (or HCLOUD_LOAD_BALANCERS_TYPE): \"lb31\" is invalid; Load \
         Balancer Type \"lb31\" is unavailable and can no longer be ordered; accepted: lb11, lb21"
    );
    let e = type_for_new(Some("lb12"), &types(), now()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "annotation load-balancer.hetzner.cloud/type (or HCLOUD_LOAD_BALANCERS_TYPE): \"lb12\" is invalid; \
         accepted: lb11, lb21"
    );
}

#[test]
fn an_unavailable_default_is_refused_saying_that_no_type_is_configured() {
    let types = vec![deprecated("lb11", "2026-06-01T00:00:00+00:00"), current("lb21")];
    let e = type_for_new(None, &types, now()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the default Load Balancer type (neither annotation load-balancer.hetzner.cloud/type nor \
         HCLOUD_LOAD_BALANCERS_TYPE is set): \"lb11\" is invalid; Load Balancer Type \"lb11\" is unavailable and can \
         no longer be ordered; set one of them; accepted: lb21"
    );
}

#[test]
fn an_existing_load_balancer_without_a_configured_type_keeps_its_type() {
    // The official CCM changes nothing when no type is configured (never back to lb11).
    let (change, warnings) = type_for_existing(None, &[], &current("lb21"), now()).unwrap();
    assert_eq!((change, warnings), (None, vec![(UNCONFIGURED, UNCONFIGURED_TEXT.to_owned())]));
    // Its own type deprecated, or unavailable: warned about, kept, the sync goes on.
    let (change, warnings) =
        type_for_existing(None, &[], &deprecated("lb11", "2026-06-01T00:00:00+00:00"), now()).unwrap();
    assert_eq!(change, None);
    assert_eq!(names(&warnings), vec![UNCONFIGURED, DEPRECATED]);
    assert_eq!(
        warnings[1].1,
        "Load Balancer Type \"lb11\" is unavailable and can no longer be ordered; the Load Balancer keeps it"
    );
}

#[test]
fn an_existing_load_balancer_changes_to_the_configured_type() {
    let (change, warnings) = type_for_existing(Some("lb21"), &types(), &current("lb11"), now()).unwrap();
    assert_eq!(change.map(|t| t.name), Some("lb21".to_owned()));
    assert_eq!(names(&warnings), vec![DEPRECATED], "a deprecated type can still be ordered");
    // Not to one that can no longer be ordered, nor to one that does not exist.
    let e = type_for_existing(Some("lb31"), &types(), &current("lb11"), now()).unwrap_err();
    assert!(e.to_string().contains("\"lb31\" is invalid; Load Balancer Type \"lb31\" is unavailable"), "{e}");
    assert!(type_for_existing(Some("lb12"), &types(), &current("lb11"), now()).is_err());
}

#[test]
fn an_existing_load_balancer_keeps_its_configured_type_when_it_can_no_longer_be_ordered() {
    let has = deprecated("lb31", "2026-06-01T00:00:00+00:00");
    let (change, warnings) = type_for_existing(Some("lb31"), &types(), &has, now()).unwrap();
    assert_eq!(change, None, "nothing is ordered");
    assert_eq!(
        warnings,
        vec![(
            DEPRECATED,
            "Load Balancer Type \"lb31\" is unavailable and can no longer be ordered; the Load Balancer keeps it"
                .to_owned()
        )]
    );
    // No longer listed: its own type is what there is to go by.
    let (change, warnings) = type_for_existing(Some("lb31"), &[current("lb11")], &has, now()).unwrap();
    assert_eq!((change, names(&warnings)), (None, vec![DEPRECATED]));
    // The list is newer than the Load Balancer's copy.
    let (_, warnings) = type_for_existing(Some("lb21"), &types(), &current("lb21"), now()).unwrap();
    assert_eq!(names(&warnings), vec![DEPRECATED]);
    assert_eq!(type_for_existing(Some("lb11"), &types(), &current("lb11"), now()).unwrap(), (None, vec![]));
}

#[test]
fn the_type_list_is_read_only_when_needed() {
    assert!(needs_type_list(Some("lb21"), true));
    assert!(needs_type_list(Some("lb21"), false));
    assert!(needs_type_list(None, false), "a new Load Balancer gets the default");
    assert!(!needs_type_list(None, true), "an existing one keeps its type: no request");
}
