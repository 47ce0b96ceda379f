//! Load Balancer types as served: the catalogue's, with the deprecations a test set
//! (`PUT /_fake/load_balancer_types/{id_or_name}/deprecation`, [`crate::FakeHandle::set_load_balancer_type_deprecation`])
//! applied. Like a server type's, a deprecated type carries `deprecation {announced,
//! unavailable_after}` and `deprecated` (the announcement time); it can be ordered until
//! `unavailable_after`. After that, creating a Load Balancer with it or changing one to it answers
//! `invalid_input` on `load_balancer_type` (the API does not document its answer: the fake's
//! choice). It is still listed and served: Load Balancers of that type keep showing it.

use jiff::Timestamp;

use crate::catalog::catalog;
use crate::error::ApiError;
use crate::state::store::State;
use crate::time::now_unix;
use crate::wire::request::IdOrName;
use crate::wire::{DeprecationInfo, LoadBalancerType};

/// The unix seconds of an RFC 3339 time in `field`, or `invalid_input` naming it.
fn parse_time(field: &str, value: &str) -> Result<i64, ApiError> {
    value
        .parse::<Timestamp>()
        .map(|t| t.as_second())
        .map_err(|e| ApiError::invalid_input(field, format!("'{value}' is not an RFC 3339 time: {e}")))
}

impl State {
    /// Every Load Balancer type as served, sorted by id.
    pub fn load_balancer_types(&self) -> Vec<LoadBalancerType> {
        catalog().load_balancer_types.iter().map(|t| self.load_balancer_type_view(t)).collect()
    }

    /// `t` as served: with the deprecation a test set for it, if any.
    pub fn load_balancer_type_view(&self, t: &LoadBalancerType) -> LoadBalancerType {
        let mut t = t.clone();
        if let Some(dep) = self.lb_type_deprecations.get(&t.id) {
            t.deprecated = dep.as_ref().map(|d| d.announced.clone());
            t.deprecation = dep.clone();
        }
        t
    }

    /// Deprecates the type `r` from now on (`Some`), or makes it a current type (`None`).
    pub fn set_lb_type_deprecation(&mut self, r: &IdOrName, dep: Option<DeprecationInfo>) -> Result<(), ApiError> {
        let t = catalog().load_balancer_type(r).ok_or_else(|| {
            ApiError::invalid_input("load_balancer_type", format!("unknown load balancer type '{}'", r.describe()))
        })?;
        if let Some(d) = &dep {
            parse_time("announced", &d.announced)?;
            parse_time("unavailable_after", &d.unavailable_after)?;
        }
        self.lb_type_deprecations.insert(t.id, dep);
        Ok(())
    }

    /// The type `r` for a new Load Balancer or a type change: `invalid_input` on
    /// `load_balancer_type` if it does not exist or can no longer be ordered.
    pub(super) fn orderable_lb_type(&self, r: &IdOrName) -> Result<&'static LoadBalancerType, ApiError> {
        let t = catalog().load_balancer_type(r).ok_or_else(|| {
            ApiError::invalid_input("load_balancer_type", format!("unknown load balancer type '{}'", r.describe()))
        })?;
        let served = self.load_balancer_type_view(t);
        if let Some(dep) = &served.deprecation
            && parse_time("unavailable_after", &dep.unavailable_after).is_ok_and(|at| now_unix() > at)
        {
            return Err(ApiError::invalid_input(
                "load_balancer_type",
                format!("load balancer type '{}' is unavailable since {}", t.name, dep.unavailable_after),
            ));
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::time::rfc3339;

    fn state() -> State {
        State::new(Duration::ZERO, Duration::from_secs(3600))
    }

    fn dep(announced: i64, unavailable_after: i64) -> DeprecationInfo {
        DeprecationInfo { announced: rfc3339(announced), unavailable_after: rfc3339(unavailable_after) }
    }

    fn served<'a>(types: &'a [LoadBalancerType], name: &str) -> &'a LoadBalancerType {
        types.iter().find(|t| t.name == name).expect("listed")
    }

    #[test]
    fn a_deprecation_is_served_and_can_be_taken_back() {
        let mut s = state();
        let d = dep(now_unix() - 60, now_unix() + 86_400);
        s.set_lb_type_deprecation(&IdOrName::Name("lb21".into()), Some(d.clone())).expect("set");
        let types = s.load_balancer_types();
        let lb21 = served(&types, "lb21");
        assert_eq!((lb21.deprecation.as_ref(), lb21.deprecated.as_ref()), (Some(&d), Some(&d.announced)));
        assert_eq!(served(&types, "lb11").deprecation, None, "only that one");
        assert_eq!(s.orderable_lb_type(&IdOrName::Name("lb21".into())).map(|t| t.id), Ok(202), "still orderable");

        // The catalogue's deprecated type made current, lb21 current again.
        s.set_lb_type_deprecation(&IdOrName::Name("lb-legacy".into()), None).expect("undeprecate");
        s.set_lb_type_deprecation(&IdOrName::Id(202), None).expect("undeprecate");
        let types = s.load_balancer_types();
        assert!(types.iter().all(|t| t.deprecation.is_none() && t.deprecated.is_none()), "{types:?}");
    }

    #[test]
    fn a_type_past_unavailable_after_is_listed_but_cannot_be_ordered() {
        let mut s = state();
        let d = dep(now_unix() - 86_400, now_unix() - 60);
        s.set_lb_type_deprecation(&IdOrName::Name("lb11".into()), Some(d.clone())).expect("set");
        assert_eq!(served(&s.load_balancer_types(), "lb11").deprecation, Some(d.clone()));
        let e = s.orderable_lb_type(&IdOrName::Name("lb11".into())).expect_err("unavailable");
        assert_eq!(e.code, "invalid_input");
        assert_eq!(
            e.details["fields"][0]["messages"][0],
            format!("load balancer type 'lb11' is unavailable since {}", d.unavailable_after)
        );
        assert_eq!(
            s.orderable_lb_type(&IdOrName::Name("lb12".into())).map_err(|e| e.code),
            Err("invalid_input".to_owned())
        );
    }

    #[test]
    fn bad_input_is_refused_naming_the_field() {
        let mut s = state();
        let bad = DeprecationInfo { announced: "yesterday".into(), unavailable_after: rfc3339(0) };
        let e = s.set_lb_type_deprecation(&IdOrName::Name("lb11".into()), Some(bad)).expect_err("bad time");
        assert_eq!(
            (e.code.as_str(), &e.details["fields"][0]["name"]),
            ("invalid_input", &serde_json::json!("announced"))
        );
        let e = s.set_lb_type_deprecation(&IdOrName::Name("lb99".into()), None).expect_err("unknown type");
        assert_eq!(e.details["fields"][0]["name"], "load_balancer_type");
        assert!(s.lb_type_deprecations.is_empty(), "nothing was set");
    }
}
