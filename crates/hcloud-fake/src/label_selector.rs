//! Label selectors as the Hetzner API understands them (Kubernetes-style).
//!
//! Grammar: requirements separated by commas (all must match); a comma inside parentheses
//! belongs to a value set. Requirements:
//!
//! | form | meaning |
//! |---|---|
//! | `k=v`, `k==v` | label `k` exists and equals `v` |
//! | `k!=v` | label `k` is absent or differs from `v` |
//! | `k in (a,b)` | label `k` exists and is one of the values |
//! | `k notin (a,b)` | label `k` is absent or none of the values |
//! | `k` | label `k` exists |
//! | `!k` | label `k` is absent |
//!
//! Keys are `[prefix/]name` (name: 1–63 alphanumerics with `-_.` inside; prefix a DNS
//! subdomain); values are 0–63 characters of the same alphabet. Whitespace around tokens is
//! ignored. An empty selector matches everything.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// A selector that failed to parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector: {0}")]
pub struct SelectorError(pub String);

/// One requirement of a [`LabelSelector`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `k=v` / `k==v`.
    Equals(String, String),
    /// `k!=v`.
    NotEquals(String, String),
    /// `k in (..)`.
    In(String, Vec<String>),
    /// `k notin (..)`.
    NotIn(String, Vec<String>),
    /// `k`.
    Exists(String),
    /// `!k`.
    NotExists(String),
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Equals(k, v) => labels.get(k) == Some(v),
            Self::NotEquals(k, v) => labels.get(k) != Some(v),
            Self::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Self::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Self::Exists(k) => labels.contains_key(k),
            Self::NotExists(k) => !labels.contains_key(k),
        }
    }
}

/// A parsed label selector: all requirements must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    source: String,
}

impl LabelSelector {
    /// Parses a selector (see the module docs for the grammar).
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let source = input.to_owned();
        if input.trim().is_empty() {
            return Ok(Self { requirements: Vec::new(), source });
        }
        let requirements = split_top_level(input)?.into_iter().map(parse_requirement).collect::<Result<Vec<_>, _>>()?;
        Ok(Self { requirements, source })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The parsed requirements.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(input: &str) -> Result<Vec<&str>, SelectorError> {
    let mut parts = Vec::new();
    let mut depth = 0_u32;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => {
                if depth > 0 {
                    return Err(SelectorError("nested parentheses".into()));
                }
                depth += 1;
            }
            ')' => {
                if depth == 0 {
                    return Err(SelectorError("unbalanced ')'".into()));
                }
                depth -= 1;
            }
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError("unbalanced '('".into()));
    }
    parts.push(&input[start..]);
    Ok(parts)
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// A label name or value segment: alphanumerics at both ends, `-_.` inside.
fn valid_segment(s: &str, allow_empty: bool) -> bool {
    if s.is_empty() {
        return allow_empty;
    }
    s.len() <= 63
        && s.starts_with(is_alnum)
        && s.ends_with(is_alnum)
        && s.chars().all(|c| is_alnum(c) || matches!(c, '-' | '_' | '.'))
}

fn valid_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(|p| {
                    !p.is_empty()
                        && p.starts_with(is_alnum)
                        && p.ends_with(is_alnum)
                        && p.chars().all(|c| is_alnum(c) || c == '-')
                })
                && valid_segment(name, false)
        }
        None => valid_segment(key, false),
    }
}

fn key(raw: &str) -> Result<String, SelectorError> {
    let k = raw.trim();
    if valid_key(k) { Ok(k.to_owned()) } else { Err(SelectorError(format!("invalid label key '{k}'"))) }
}

fn value(raw: &str) -> Result<String, SelectorError> {
    let v = raw.trim();
    if valid_segment(v, true) { Ok(v.to_owned()) } else { Err(SelectorError(format!("invalid label value '{v}'"))) }
}

fn parse_requirement(term: &str) -> Result<Requirement, SelectorError> {
    let t = term.trim();
    if t.is_empty() {
        return Err(SelectorError("empty requirement".into()));
    }
    if let Some(rest) = t.strip_prefix('!') {
        if rest.contains(['=', '(', ')', ' ']) {
            return Err(SelectorError(format!("invalid requirement '{t}'")));
        }
        return Ok(Requirement::NotExists(key(rest)?));
    }
    if let Some((k, v)) = t.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k)?, value(v)?));
    }
    if let Some((k, v)) = t.split_once("==") {
        return Ok(Requirement::Equals(key(k)?, value(v)?));
    }
    if let Some((k, v)) = t.split_once('=') {
        return Ok(Requirement::Equals(key(k)?, value(v)?));
    }
    if let Some(open) = t.find('(') {
        let head = &t[..open];
        let set = t[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| SelectorError(format!("expected ')' at the end of '{t}'")))?;
        let mut words = head.split_whitespace();
        let (Some(k), Some(op), None) = (words.next(), words.next(), words.next()) else {
            return Err(SelectorError(format!("expected 'key in (...)' in '{t}'")));
        };
        let values = set
            .split(',')
            .map(|v| {
                let v = value(v)?;
                if v.is_empty() { Err(SelectorError(format!("empty value in set of '{t}'"))) } else { Ok(v) }
            })
            .collect::<Result<Vec<_>, _>>()?;
        return match op {
            "in" => Ok(Requirement::In(key(k)?, values)),
            "notin" => Ok(Requirement::NotIn(key(k)?, values)),
            other => Err(SelectorError(format!("unknown operator '{other}'"))),
        };
    }
    if t.contains(char::is_whitespace) || t.contains(')') {
        return Err(SelectorError(format!("invalid requirement '{t}'")));
    }
    Ok(Requirement::Exists(key(t)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn sel(s: &str) -> LabelSelector {
        match LabelSelector::parse(s) {
            Ok(sel) => sel,
            Err(e) => panic!("{s:?} should parse: {e}"),
        }
    }

    #[test]
    fn equality_operators() {
        let l = labels(&[("env", "prod"), ("tier", "web")]);
        assert!(sel("env=prod").matches(&l));
        assert!(sel("env==prod").matches(&l));
        assert!(!sel("env=dev").matches(&l));
        assert!(sel("env!=dev").matches(&l));
        assert!(!sel("env!=prod").matches(&l));
        // `!=` matches when the key is absent.
        assert!(sel("missing!=x").matches(&l));
        assert!(!sel("missing=x").matches(&l));
    }

    #[test]
    fn set_operators() {
        let l = labels(&[("env", "prod")]);
        assert!(sel("env in (prod, staging)").matches(&l));
        assert!(sel("env in(prod)").matches(&l));
        assert!(!sel("env in (dev,staging)").matches(&l));
        assert!(sel("env notin (dev,staging)").matches(&l));
        assert!(!sel("env notin (prod)").matches(&l));
        assert!(sel("other notin (a)").matches(&l));
        assert!(!sel("other in (a)").matches(&l));
    }

    #[test]
    fn existence_operators() {
        let l = labels(&[("hcloud-ccm/service-uid", "abc")]);
        assert!(sel("hcloud-ccm/service-uid").matches(&l));
        assert!(!sel("!hcloud-ccm/service-uid").matches(&l));
        assert!(sel("!other").matches(&l));
        assert!(!sel("other").matches(&l));
    }

    #[test]
    fn commas_are_and_except_inside_sets() {
        let l = labels(&[("a", "1"), ("b", "2")]);
        assert!(sel("a=1,b=2").matches(&l));
        assert!(sel(" a = 1 , b in (2,3) ").matches(&l));
        assert!(!sel("a=1,b=3").matches(&l));
        assert_eq!(sel("a in (1,2),b").requirements().len(), 2);
        assert_eq!(sel("a in (1,2),b").requirements()[0], Requirement::In("a".into(), vec!["1".into(), "2".into()]));
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(sel("").matches(&labels(&[])));
        assert!(sel("  ").matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn empty_value_is_allowed_for_equality() {
        assert!(sel("a=").matches(&labels(&[("a", "")])));
    }

    #[test]
    fn invalid_selectors_are_rejected() {
        for bad in [
            "=v",
            "a in (1) x",
            "a=b=c",
            "a in 1,2",
            "a in (1,2",
            "a in 1,2)",
            "a in ()",
            "a in (1,,2)",
            "a between (1)",
            "a,",
            ",a",
            "a b",
            "!a=b",
            "-a=b",
            "a=b c",
            "a in ((1))",
            "k=v!",
            "a/b/c=1",
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad:?} should fail");
        }
    }
}
