//! `/v1/images`: the catalogue's system images (the ones servers are created from).
//!
//! `GET /images` filters like the API: `type`, `status` and `architecture` (each repeatable,
//! unknown values are `invalid_input`), `name` (exact), `label_selector`, `bound_to`
//! (server ids; system images are bound to none) and `include_deprecated` (deprecated images
//! are left out unless it is `true`); it sorts by `sort` (`id`, `name`, `created`) and pages.
//! Snapshots, backups and app images do not exist in the fake, nor do the image actions,
//! `PUT` and `DELETE` (system images cannot be changed or deleted).

use axum::extract::{Path, RawQuery};
use axum::response::Response;
use http::StatusCode;

use super::extract::{list_body, parse_id, single_body};
use crate::catalog::catalog;
use crate::error::ApiError;
use crate::label_selector::LabelSelector;
use crate::pagination::PageRequest;
use crate::query::QueryParams;
use crate::sort::{ID_NAME_CREATED, SortRequest, SortValue};
use crate::wire::{Architecture, Image};

/// Values of a repeatable enumeration filter, each checked against `allowed`.
fn enum_values<'q>(q: &'q QueryParams, field: &str, allowed: &[&str]) -> Result<Vec<&'q str>, ApiError> {
    let values = q.get_all(field);
    match values.iter().find(|v| !allowed.contains(v)) {
        Some(v) => {
            Err(ApiError::invalid_input(field, format!("unknown {field} '{v}' (one of: {})", allowed.join(", "))))
        }
        None => Ok(values),
    }
}

/// The filters of `GET /images`.
struct ImageFilter<'q> {
    kinds: Vec<&'q str>,
    statuses: Vec<&'q str>,
    architectures: Vec<Architecture>,
    name: Option<&'q str>,
    label_selector: Option<LabelSelector>,
    bound_to: Vec<u64>,
    include_deprecated: bool,
}

impl<'q> ImageFilter<'q> {
    fn from_query(q: &'q QueryParams) -> Result<Self, ApiError> {
        let architectures = enum_values(q, "architecture", &["x86", "arm"])?
            .into_iter()
            .map(|a| if a == "arm" { Architecture::Arm } else { Architecture::X86 })
            .collect();
        let include_deprecated = match q.get("include_deprecated") {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ApiError::invalid_input("include_deprecated", format!("'{other}' is not a boolean")));
            }
        };
        Ok(Self {
            kinds: enum_values(q, "type", &["system", "app", "snapshot", "backup"])?,
            statuses: enum_values(q, "status", &["available", "creating", "unavailable"])?,
            architectures,
            name: q.get("name"),
            label_selector: q.label_selector()?,
            bound_to: q.ids("bound_to")?,
            include_deprecated,
        })
    }

    fn matches(&self, i: &Image) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&i.kind.as_str()))
            && (self.statuses.is_empty() || self.statuses.contains(&i.status.as_str()))
            && (self.architectures.is_empty() || self.architectures.contains(&i.architecture))
            && self.name.is_none_or(|n| i.name.as_deref() == Some(n))
            && self.label_selector.as_ref().is_none_or(|sel| sel.matches(&i.labels))
            && (self.bound_to.is_empty() || i.bound_to.is_some_and(|b| self.bound_to.contains(&b)))
            && (self.include_deprecated || i.deprecated.is_none())
    }
}

/// `GET /images`.
pub(crate) async fn list(RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let q = QueryParams::parse(q.as_deref());
    let page = PageRequest::from_query(&q)?;
    let sort = SortRequest::from_query(&q, ID_NAME_CREATED)?;
    let filter = ImageFilter::from_query(&q)?;
    let mut matching: Vec<&Image> = catalog().images.iter().filter(|i| filter.matches(i)).collect();
    sort.apply(&mut matching, |i, field| match field {
        "name" => SortValue::Text(i.name.as_deref()),
        "created" => SortValue::Text(Some(&i.created)),
        _ => SortValue::id(i.id),
    });
    let (slice, meta) = page.apply(&matching);
    Ok(list_body("images", slice, &meta))
}

/// `GET /images/{id}`.
pub(crate) async fn get(Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let image = catalog().image_by_id(id).ok_or_else(|| ApiError::not_found("image", id))?;
    Ok(single_body(StatusCode::OK, "image", image))
}
