//! Pagination: `page` (default 1) and `per_page` (default 25, capped at 50).

use crate::error::ApiError;
use crate::query::QueryParams;
use crate::wire::{Meta, Pagination};

/// Default entries per page.
pub const DEFAULT_PER_PAGE: u64 = 25;
/// Largest accepted `per_page`; larger values are capped.
pub const MAX_PER_PAGE: u64 = 50;

/// A requested page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    /// 1-based page number.
    pub page: u64,
    /// Entries per page (1..=50).
    pub per_page: u64,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self { page: 1, per_page: DEFAULT_PER_PAGE }
    }
}

fn positive(q: &QueryParams, name: &str, default: u64) -> Result<u64, ApiError> {
    match q.get(name) {
        None | Some("") => Ok(default),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(ApiError::invalid_input(name, format!("'{v}' is not a positive integer"))),
        },
    }
}

impl PageRequest {
    /// Reads `page` and `per_page` from the query.
    pub fn from_query(q: &QueryParams) -> Result<Self, ApiError> {
        Ok(Self {
            page: positive(q, "page", 1)?,
            per_page: positive(q, "per_page", DEFAULT_PER_PAGE)?.min(MAX_PER_PAGE),
        })
    }

    /// The page's slice of `items` and the `meta` describing it.
    pub fn apply<'a, T>(&self, items: &'a [T]) -> (&'a [T], Meta) {
        let total = items.len() as u64;
        let last_page = total.div_ceil(self.per_page).max(1);
        let start = (self.page - 1).saturating_mul(self.per_page);
        let slice = match usize::try_from(start) {
            Ok(s) if s < items.len() => {
                let end = s.saturating_add(usize::try_from(self.per_page).unwrap_or(usize::MAX));
                &items[s..end.min(items.len())]
            }
            _ => &items[0..0],
        };
        let meta = Meta {
            pagination: Pagination {
                page: self.page,
                per_page: self.per_page,
                previous_page: (self.page > 1).then(|| (self.page - 1).min(last_page)),
                next_page: (self.page < last_page).then_some(self.page + 1),
                last_page: Some(last_page),
                total_entries: Some(total),
            },
        };
        (slice, meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(page: u64, per_page: u64) -> PageRequest {
        PageRequest { page, per_page }
    }

    #[test]
    fn first_middle_last() {
        let items: Vec<u32> = (0..120).collect();
        let (s, m) = page(1, 50).apply(&items);
        assert_eq!(s.len(), 50);
        assert_eq!(m.pagination.previous_page, None);
        assert_eq!(m.pagination.next_page, Some(2));
        assert_eq!(m.pagination.last_page, Some(3));
        let (s, m) = page(2, 50).apply(&items);
        assert_eq!(s[0], 50);
        assert_eq!(m.pagination.previous_page, Some(1));
        assert_eq!(m.pagination.next_page, Some(3));
        let (s, m) = page(3, 50).apply(&items);
        assert_eq!(s.len(), 20);
        assert_eq!(m.pagination.next_page, None);
        assert_eq!(m.pagination.total_entries, Some(120));
        let (s, _) = page(9, 50).apply(&items);
        assert!(s.is_empty());
    }

    #[test]
    fn caps_per_page_and_rejects_zero() {
        let q = QueryParams::parse(Some("per_page=500"));
        assert_eq!(PageRequest::from_query(&q).map(|p| p.per_page), Ok(50));
        let q = QueryParams::parse(Some("page=0"));
        assert!(PageRequest::from_query(&q).is_err());
        let q = QueryParams::parse(None);
        assert_eq!(PageRequest::from_query(&q), Ok(PageRequest::default()));
    }

    #[test]
    fn empty_list_has_one_page() {
        let items: Vec<u32> = Vec::new();
        let (_, m) = page(1, 25).apply(&items);
        assert_eq!(m.pagination.last_page, Some(1));
        assert_eq!(m.pagination.next_page, None);
    }
}
