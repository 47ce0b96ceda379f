//! Query-string parsing with repeated keys (`id=1&id=2`), which the API uses for lists.

use crate::error::ApiError;
use crate::label_selector::LabelSelector;

/// Decoded query parameters in order of appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryParams(Vec<(String, String)>);

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes one component (`+` is a space).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl QueryParams {
    /// Parses a raw query string (without `?`).
    pub fn parse(raw: Option<&str>) -> Self {
        let Some(raw) = raw else {
            return Self::default();
        };
        Self(
            raw.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (decode(k), decode(v)),
                    None => (decode(p), String::new()),
                })
                .collect(),
        )
    }

    /// First value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// All values of `name` (also accepts the `name[]` form).
    pub fn get_all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name || k.strip_suffix("[]") == Some(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The `label_selector` parameter, parsed; `invalid_input` naming the field on error.
    pub fn label_selector(&self) -> Result<Option<LabelSelector>, ApiError> {
        match self.get("label_selector") {
            None => Ok(None),
            Some(s) => {
                LabelSelector::parse(s).map(Some).map_err(|e| ApiError::invalid_input("label_selector", e.to_string()))
            }
        }
    }

    /// Numeric ids in the repeated parameter `name`; `invalid_input` on a non-number.
    pub fn ids(&self, name: &str) -> Result<Vec<u64>, ApiError> {
        self.get_all(name)
            .into_iter()
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().parse::<u64>().map_err(|_| ApiError::invalid_input(name, format!("'{v}' is not an id"))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_repeated_and_encoded() {
        let q = QueryParams::parse(Some("id=1&id=2&label_selector=a%3Db%2Cc+in+(x)&x"));
        assert_eq!(q.get_all("id"), vec!["1", "2"]);
        assert_eq!(q.get("label_selector"), Some("a=b,c in (x)"));
        assert_eq!(q.get("x"), Some(""));
        assert_eq!(q.ids("id"), Ok(vec![1, 2]));
        assert_eq!(QueryParams::parse(Some("a=%zz%4")).get("a"), Some("%zz%4"));
    }
}
