//! Sorting of lists: the repeated `sort` parameter (`sort=name:desc&sort=id`), as the API
//! takes it.
//!
//! Each value is a field, optionally followed by `:asc` (the default) or `:desc`; the first
//! value is the primary key, later ones break ties, and what is still equal keeps the
//! list's natural order (by id). A field the endpoint does not sort by, or another
//! direction, is `invalid_input` naming `sort`.

use std::cmp::Ordering;

use crate::error::ApiError;
use crate::query::QueryParams;

/// The fields most lists sort by (`id`, `name`, `created`).
pub const ID_NAME_CREATED: &[&str] = &["id", "name", "created"];

/// A value to sort by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortValue<'a> {
    /// A number (ids, Unix timestamps).
    Int(i64),
    /// Text, compared byte-wise; `None` (a `null` name) sorts first.
    Text(Option<&'a str>),
}

impl SortValue<'_> {
    /// An id as a sort value (ids stay far below `i64::MAX`).
    pub fn id(id: u64) -> Self {
        Self::Int(i64::try_from(id).unwrap_or(i64::MAX))
    }
}

/// The requested order: fields with their direction (`true`: descending).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SortRequest(Vec<(String, bool)>);

impl SortRequest {
    /// Reads every `sort` value of the query; `allowed` are the fields the endpoint sorts by.
    pub fn from_query(q: &QueryParams, allowed: &[&str]) -> Result<Self, ApiError> {
        q.get_all("sort")
            .into_iter()
            .filter(|v| !v.is_empty())
            .map(|v| {
                let (field, desc) = match v.split_once(':') {
                    None => (v, false),
                    Some((f, "asc")) => (f, false),
                    Some((f, "desc")) => (f, true),
                    Some(_) => return Err(ApiError::invalid_input("sort", format!("invalid sort direction in '{v}'"))),
                };
                if allowed.contains(&field) {
                    Ok((field.to_owned(), desc))
                } else {
                    Err(ApiError::invalid_input(
                        "sort",
                        format!("cannot sort by '{field}' (allowed: {})", allowed.join(", ")),
                    ))
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Sorts `items` (stable); `value` gives an item's value of a field from the allowed list.
    pub fn apply<T>(&self, items: &mut [T], value: impl for<'a> Fn(&'a T, &str) -> SortValue<'a>) {
        if self.0.is_empty() {
            return;
        }
        items.sort_by(|a, b| {
            self.0
                .iter()
                .map(|(field, desc)| {
                    let o = value(a, field).cmp(&value(b, field));
                    if *desc { o.reverse() } else { o }
                })
                .find(|o| *o != Ordering::Equal)
                .unwrap_or(Ordering::Equal)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sort(raw: &str) -> Result<SortRequest, ApiError> {
        SortRequest::from_query(&QueryParams::parse(Some(raw)), ID_NAME_CREATED)
    }

    fn value<'a>(i: &'a (i64, &'static str, i64), f: &str) -> SortValue<'a> {
        match f {
            "id" => SortValue::Int(i.0),
            "name" => SortValue::Text(Some(i.1)),
            _ => SortValue::Int(i.2),
        }
    }

    #[test]
    fn keys_directions_and_ties() {
        let items = [(1, "b", 10), (2, "a", 10), (3, "b", 5)];
        let ids = |s: SortRequest| {
            let mut v = items.to_vec();
            s.apply(&mut v, value);
            v.iter().map(|i| i.0).collect::<Vec<_>>()
        };
        assert_eq!(ids(sort("sort=name:asc").unwrap()), vec![2, 1, 3]);
        assert_eq!(ids(sort("sort=name:desc&sort=id:desc").unwrap()), vec![3, 1, 2]);
        assert_eq!(ids(sort("sort=created&sort=name").unwrap()), vec![3, 2, 1]);
        assert_eq!(ids(sort("sort=id:desc").unwrap()), vec![3, 2, 1]);
        assert_eq!(ids(sort("").unwrap()), vec![1, 2, 3]);
    }

    #[test]
    fn rejects_unknown_fields_and_directions() {
        for bad in ["sort=size", "sort=name:up", "sort=id:asc:desc"] {
            assert_eq!(sort(bad).err().map(|e| e.code), Some("invalid_input".to_owned()), "{bad}");
        }
        assert!(SortValue::Text(None) < SortValue::Text(Some("")));
    }
}
