//! Lists: one page, or every page.
//!
//! A list answer must carry its list under its key (`servers`, `load_balancers`, ...): an
//! answer without it is a decode error, never an empty list — callers act on lists ("remove
//! every target not in it", "delete every Node whose server is not in it"), so an empty list
//! made up from a malformed answer would be destructive. For the same reason a full page
//! without pagination metadata is an error: whether more pages follow is unknown.

use std::fmt;
use std::marker::PhantomData;

use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::client::{Client, LIST_ALL_CONCURRENCY, LIST_ALL_PER_PAGE, Target};
use crate::error::Error;
use crate::models::{Meta, Pagination};

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The entries.
    pub items: Vec<T>,
    /// Pagination metadata, if the API sent it.
    pub pagination: Option<Pagination>,
}

impl Client {
    /// Fetches one page of a list; `key` is the list's field, e.g. `servers`.
    pub(crate) async fn page<T: DeserializeOwned>(
        &self,
        target: &Target,
        key: &str,
        filters: &[(&str, String)],
        page: u32,
        per_page: u32,
    ) -> Result<Page<T>, Error> {
        let mut query = filters.to_vec();
        query.push(("page", page.to_string()));
        query.push(("per_page", per_page.to_string()));
        let answer = self.send::<()>(Method::GET, target, &query, None).await?;
        decode_page(&answer.body, key)
            .map_err(|message| Error::Decode { request: format!("GET {}", target.path), message })
    }

    /// Fetches every page of a list with `per_page=50`. After the first page tells how many
    /// pages there are, the rest are fetched a few at a time.
    pub(crate) async fn all<T: DeserializeOwned>(
        &self,
        target: &Target,
        key: &str,
        filters: &[(&str, String)],
    ) -> Result<Vec<T>, Error> {
        use futures::{StreamExt, TryStreamExt};
        let first = self.page::<T>(target, key, filters, 1, LIST_ALL_PER_PAGE).await?;
        let truncated = |page: u32| Error::Decode {
            request: format!("GET {}", target.path),
            message: format!(
                "page {page} of `{key}` is full ({LIST_ALL_PER_PAGE} entries) but has no pagination metadata, so \
                 whether more entries follow is unknown"
            ),
        };
        let mut items = first.items;
        let Some(p) = first.pagination else {
            if items.len() >= LIST_ALL_PER_PAGE as usize {
                return Err(truncated(1));
            }
            return Ok(items);
        };
        match p.last_page {
            Some(last) if last > 1 => {
                let pages: Vec<Page<T>> = futures::stream::iter(2..=last)
                    .map(|n| self.page::<T>(target, key, filters, n, LIST_ALL_PER_PAGE))
                    .buffered(LIST_ALL_CONCURRENCY)
                    .try_collect()
                    .await?;
                for page in pages {
                    items.extend(page.items);
                }
            }
            Some(_) => {}
            None => {
                // No last_page: follow next_page one by one.
                let mut next = p.next_page;
                let mut current = p.page;
                while let Some(n) = next.filter(|n| *n > current) {
                    let page = self.page::<T>(target, key, filters, n, LIST_ALL_PER_PAGE).await?;
                    let full = page.items.len() >= LIST_ALL_PER_PAGE as usize;
                    items.extend(page.items);
                    current = n;
                    next = match page.pagination {
                        Some(p) => p.next_page,
                        None if full => return Err(truncated(n)),
                        None => None,
                    };
                }
            }
        }
        Ok(items)
    }
}

/// Decodes a list page; the error says what is wrong with the body.
pub(crate) fn decode_page<T: DeserializeOwned>(body: &[u8], key: &str) -> Result<Page<T>, String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde::de::DeserializeSeed::deserialize(PageSeed::<T> { key, marker: PhantomData }, &mut de)
        .and_then(|page| de.end().map(|()| page))
        .map_err(|e| format!("list `{key}`: {e}"))
}

/// Decodes a list page in one pass: the list under `key` straight into `Vec<T>`, `meta`
/// into [`Meta`], everything else skipped (no intermediate JSON tree).
struct PageSeed<'k, T> {
    key: &'k str,
    marker: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> serde::de::DeserializeSeed<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Page<T>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> serde::de::Visitor<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list response with `{}` and `meta`", self.key)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Page<T>, A::Error> {
        let mut items = None;
        let mut meta = Meta::default();
        while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if k == self.key {
                // `null` is as bad as a missing key: it is not an empty list.
                items = map.next_value::<Option<Vec<T>>>()?;
            } else if k == "meta" {
                meta = map.next_value::<Option<Meta>>()?.unwrap_or_default();
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        let items = items.ok_or_else(|| {
            <A::Error as serde::de::Error>::custom(format_args!(
                "the answer has no list `{}` (an absent list is not an empty one)",
                self.key
            ))
        })?;
        Ok(Page { items, pagination: meta.pagination })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_without_its_key_is_an_error_not_an_empty_list() {
        let ok = decode_page::<i64>(br#"{"servers":[],"meta":{"pagination":{"page":1}}}"#, "servers").expect("ok");
        assert!(ok.items.is_empty());
        for body in [&br#"{"meta":{}}"#[..], br#"{"servers":null}"#, br#"{}"#, br#"{"load_balancers":[1]}"#] {
            let err = decode_page::<i64>(body, "servers").unwrap_err();
            assert!(err.contains("no list `servers`"), "{err}");
        }
    }
}
