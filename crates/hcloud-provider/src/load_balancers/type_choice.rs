//! Which Load Balancer type a sync creates with or changes to, and what it warns about, pure:
//! the official CCM's `LoadBalancerTypeUnconfigured` and `LoadBalancerTypeDeprecated` Warnings
//! (the latter in the words of hcloud-go's `deprecationutil`).
//!
//! - A configured type (annotation `load-balancer.hetzner.cloud/type`, else
//!   `HCLOUD_LOAD_BALANCERS_TYPE`) must be in the type list; a deprecated one gets the
//!   `LoadBalancerTypeDeprecated` Warning at each sync. Past its `unavailable_after` it can no
//!   longer be ordered: creating a Load Balancer with it, or changing one to it, is refused before
//!   anything is sent. A Load Balancer that has it already keeps it and is synced as usual, with
//!   the Warning (the official CCM fails every sync of such a Service, so its targets no longer
//!   follow the Nodes); so is one whose type the list no longer shows.
//! - No type configured: the `LoadBalancerTypeUnconfigured` Warning at each sync (the official
//!   CCM's; it says the setting will be required). A new Load Balancer gets `lb11`, checked like a
//!   configured type; an existing one keeps its type, never changed back to the default, and the
//!   Deprecated Warning is about its own type (the official CCM checks `lb11` there, and fails
//!   every such sync once `lb11` is unavailable).

use hcloud_api::models::LoadBalancerType;
use k8s_openapi::jiff::Timestamp;

use super::annotations::{self as a, Invalid};

/// The type a Load Balancer is created with when none is configured (official CCM).
pub const DEFAULT_TYPE: &str = "lb11";

/// The reason of the Warning for a Service without a configured type.
pub const UNCONFIGURED: &str = "LoadBalancerTypeUnconfigured";

/// The reason of the Warning for a deprecated type.
pub const DEPRECATED: &str = "LoadBalancerTypeDeprecated";

/// Whether a type can be ordered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// Not deprecated.
    Current,
    /// Deprecated, orderable until the day `until` (`YYYY-MM-DD`, of `unavailable_after`).
    Deprecated {
        /// The day it can no longer be ordered from.
        until: String,
    },
    /// Deprecated and past its `unavailable_after`: it can no longer be ordered.
    Unavailable,
}

/// Whether `t` can be ordered at `now`. An `unavailable_after` that does not parse leaves it
/// orderable (the API decides).
pub fn availability(t: &LoadBalancerType, now: Timestamp) -> Availability {
    let Some(dep) = &t.deprecation else {
        return Availability::Current;
    };
    match dep.unavailable_after.parse::<Timestamp>() {
        Ok(at) if now > at => Availability::Unavailable,
        // The date as written (RFC 3339: in its own offset), as hcloud-go formats it.
        Ok(_) => Availability::Deprecated { until: dep.unavailable_after.chars().take(10).collect() },
        Err(_) => Availability::Deprecated { until: dep.unavailable_after.clone() },
    }
}

/// hcloud-go's message for a type that is not current (`deprecationutil.LoadBalancerTypeMessage`).
fn deprecation_message(name: &str, availability: &Availability) -> Option<String> {
    match availability {
        Availability::Current => None,
        Availability::Deprecated { until } => Some(format!(
            "Load Balancer Type \"{name}\" is deprecated and will no longer be available for order as of {until}"
        )),
        Availability::Unavailable => Some(unavailable(name)),
    }
}

fn unavailable(name: &str) -> String {
    format!("Load Balancer Type \"{name}\" is unavailable and can no longer be ordered")
}

/// The official CCM's `LoadBalancerTypeUnconfigured` message.
pub fn unconfigured_message() -> String {
    format!(
        "Load Balancer Type unconfigured: this will be required in the future, set it with the annotation \"{}\" or \
         cluster-wide with the environment variable \"HCLOUD_LOAD_BALANCERS_TYPE\"",
        a::TYPE
    )
}

/// A Warning for the Service: reason and message.
pub type Warning = (&'static str, String);

/// The setting a configured type comes from.
fn configured_setting() -> String {
    format!("annotation {} (or HCLOUD_LOAD_BALANCERS_TYPE)", a::TYPE)
}

/// The names of the types that can be ordered at `now`.
fn accepted(types: &[LoadBalancerType], now: Timestamp) -> String {
    let names: Vec<&str> =
        types.iter().filter(|t| availability(t, now) != Availability::Unavailable).map(|t| t.name.as_str()).collect();
    format!("accepted: {}", names.join(", "))
}

/// `name` from `types`, orderable at `now`, with its Deprecated Warning if it is deprecated;
/// `setting` and `hint` for the refusal.
fn orderable(
    name: &str,
    types: &[LoadBalancerType],
    now: Timestamp,
    setting: impl FnOnce() -> String,
    hint: &str,
) -> Result<(LoadBalancerType, Vec<Warning>), Invalid> {
    let Some(t) = types.iter().find(|t| t.name == name) else {
        return Err(Invalid::new(setting(), name, format!("{hint}{}", accepted(types, now))));
    };
    match availability(t, now) {
        Availability::Unavailable => {
            Err(Invalid::new(setting(), name, format!("{}; {hint}{}", unavailable(name), accepted(types, now))))
        }
        avail => {
            let warnings = deprecation_message(name, &avail).map(|m| (DEPRECATED, m)).into_iter().collect();
            Ok((t.clone(), warnings))
        }
    }
}

/// The type of a new Load Balancer: `configured`, else [`DEFAULT_TYPE`] (with the
/// Unconfigured Warning), from the type list `types`; refused when it does not exist or can no
/// longer be ordered at `now`.
pub fn type_for_new(
    configured: Option<&str>,
    types: &[LoadBalancerType],
    now: Timestamp,
) -> Result<(LoadBalancerType, Vec<Warning>), Invalid> {
    match configured {
        Some(name) => orderable(name, types, now, configured_setting, ""),
        None => {
            let setting = || {
                format!(
                    "the default Load Balancer type (neither annotation {} nor HCLOUD_LOAD_BALANCERS_TYPE is set)",
                    a::TYPE
                )
            };
            let (t, mut warnings) = orderable(DEFAULT_TYPE, types, now, setting, "set one of them; ")?;
            warnings.insert(0, (UNCONFIGURED, unconfigured_message()));
            Ok((t, warnings))
        }
    }
}

/// The type an existing Load Balancer of type `current` changes to (`None`: it keeps its type),
/// from the type list `types` (needed only when a type is configured). A configured type the
/// Load Balancer has already is not ordered: it is kept even when it can no longer be ordered
/// or is no longer listed.
pub fn type_for_existing(
    configured: Option<&str>,
    types: &[LoadBalancerType],
    current: &LoadBalancerType,
    now: Timestamp,
) -> Result<(Option<LoadBalancerType>, Vec<Warning>), Invalid> {
    let kept = |t: &LoadBalancerType| {
        let warning = match availability(t, now) {
            Availability::Unavailable => Some(format!("{}; the Load Balancer keeps it", unavailable(&t.name))),
            avail => deprecation_message(&t.name, &avail),
        };
        warning.map(|m| (DEPRECATED, m)).into_iter().collect::<Vec<_>>()
    };
    match configured {
        None => {
            let mut warnings = vec![(UNCONFIGURED, unconfigured_message())];
            warnings.extend(kept(current));
            Ok((None, warnings))
        }
        Some(name) if name == current.name => {
            let listed = types.iter().find(|t| t.name == name).unwrap_or(current);
            Ok((None, kept(listed)))
        }
        Some(name) => orderable(name, types, now, configured_setting, "").map(|(t, w)| (Some(t), w)),
    }
}

/// Whether the type list is needed to decide: for a configured type, and for a new Load
/// Balancer.
pub fn needs_type_list(configured: Option<&str>, existing: bool) -> bool {
    configured.is_some() || !existing
}

#[cfg(test)]
#[path = "type_choice_tests.rs"]
mod tests;
