//! Kubernetes label selectors in their string form (apimachinery `labels.Parse`): equality-based
//! (`k=v`, `k==v`, `k!=v`) and set-based (`k in (a,b)`, `k notin (a,b)`, `k`, `!k`) requirements,
//! plus `k>n` / `k<n`, joined by commas. An empty selector selects everything.
//!
//! Matching follows apimachinery: `in`/`=` need the label with one of the values; `notin`/`!=`
//! also match objects without the label; `>`/`<` need the label with an integer value.

use std::collections::BTreeMap;
use std::fmt;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key` (the label exists).
    Exists(String),
    /// `!key` (the label does not exist).
    DoesNotExist(String),
    /// `key=v`, `key==v`, `key in (a,b)`.
    In(String, Vec<String>),
    /// `key!=v`, `key notin (a,b)`.
    NotIn(String, Vec<String>),
    /// `key>n`.
    GreaterThan(String, i64),
    /// `key<n`.
    LessThan(String, i64),
}

impl Requirement {
    /// The label key the requirement looks at.
    pub fn key(&self) -> &str {
        match self {
            Requirement::Exists(k)
            | Requirement::DoesNotExist(k)
            | Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::GreaterThan(k, _)
            | Requirement::LessThan(k, _) => k,
        }
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::In(k, values) => labels.get(k).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(k, values) => labels.get(k).is_none_or(|v| !values.contains(v)),
            Requirement::GreaterThan(k, n) => labels.get(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *n),
            Requirement::LessThan(k, n) => labels.get(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *n),
        }
    }
}

/// A parsed label selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// Why a selector string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(String);

impl LabelSelector {
    /// Parses `input` like apimachinery's `labels.Parse`.
    pub fn parse(input: &str) -> Result<LabelSelector, SelectorError> {
        let tokens = lex(input)?;
        Parser { tokens, pos: 0 }.selector()
    }

    /// Whether the selector selects everything (it has no requirements).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// The label keys the selector looks at, sorted, each once.
    pub fn keys(&self) -> Vec<String> {
        let keys: std::collections::BTreeSet<&str> = self.requirements.iter().map(Requirement::key).collect();
        keys.into_iter().map(str::to_owned).collect()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| match r {
                Requirement::Exists(k) => k.clone(),
                Requirement::DoesNotExist(k) => format!("!{k}"),
                Requirement::In(k, v) if v.len() == 1 => format!("{k}={}", v[0]),
                Requirement::In(k, v) => format!("{k} in ({})", v.join(",")),
                Requirement::NotIn(k, v) if v.len() == 1 => format!("{k}!={}", v[0]),
                Requirement::NotIn(k, v) => format!("{k} notin ({})", v.join(",")),
                Requirement::GreaterThan(k, n) => format!("{k}>{n}"),
                Requirement::LessThan(k, n) => format!("{k}<{n}"),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Comma,
    Open,
    Close,
    Eq,
    Neq,
    Not,
    Gt,
    Lt,
}

fn is_special(c: char) -> bool {
    matches!(c, ',' | '(' | ')' | '=' | '!' | '<' | '>') || c.is_whitespace()
}

fn lex(input: &str) -> Result<Vec<Token>, SelectorError> {
    let mut out = Vec::new();
    let mut chars = input.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        chars.next();
        let token = match c {
            ',' => Token::Comma,
            '(' => Token::Open,
            ')' => Token::Close,
            '<' => Token::Lt,
            '>' => Token::Gt,
            '=' => {
                if chars.peek() == Some(&'=') {
                    chars.next();
                }
                Token::Eq
            }
            '!' => {
                if chars.peek() == Some(&'=') {
                    chars.next();
                    Token::Neq
                } else {
                    Token::Not
                }
            }
            _ => {
                let mut ident = String::from(c);
                while let Some(&n) = chars.peek() {
                    if is_special(n) {
                        break;
                    }
                    ident.push(n);
                    chars.next();
                }
                Token::Ident(ident)
            }
        };
        out.push(token);
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn selector(mut self) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        if self.tokens.is_empty() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(self.requirement()?);
            match self.next() {
                None => break,
                Some(Token::Comma) if self.peek().is_some() => continue,
                Some(Token::Comma) => return Err(SelectorError("a selector must not end with ','".into())),
                Some(t) => return Err(SelectorError(format!("found {}, expected ','", describe(&t)))),
            }
        }
        Ok(LabelSelector { requirements })
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        match self.next() {
            Some(Token::Not) => match self.next() {
                Some(Token::Ident(k)) => Ok(Requirement::DoesNotExist(key(&k)?)),
                other => Err(SelectorError(format!("found {}, expected a label key after '!'", describe_opt(&other)))),
            },
            Some(Token::Ident(k)) => {
                let k = key(&k)?;
                match self.peek() {
                    None | Some(Token::Comma) => Ok(Requirement::Exists(k)),
                    Some(Token::Eq) => {
                        self.next();
                        Ok(Requirement::In(k, vec![self.single_value()?]))
                    }
                    Some(Token::Neq) => {
                        self.next();
                        Ok(Requirement::NotIn(k, vec![self.single_value()?]))
                    }
                    Some(Token::Gt) | Some(Token::Lt) => {
                        let greater = self.next() == Some(Token::Gt);
                        let n = match self.next() {
                            Some(Token::Ident(v)) => v.parse::<i64>().map_err(|_| {
                                SelectorError(format!("for '>' and '<' the value must be an integer, found {v:?}"))
                            })?,
                            other => {
                                return Err(SelectorError(format!(
                                    "found {}, expected an integer",
                                    describe_opt(&other)
                                )));
                            }
                        };
                        Ok(if greater { Requirement::GreaterThan(k, n) } else { Requirement::LessThan(k, n) })
                    }
                    Some(Token::Ident(op)) if op == "in" || op == "notin" => {
                        let notin = op == "notin";
                        self.next();
                        let values = self.value_set()?;
                        Ok(if notin { Requirement::NotIn(k, values) } else { Requirement::In(k, values) })
                    }
                    Some(t) => Err(SelectorError(format!(
                        "found {}, expected one of '=', '==', '!=', 'in', 'notin', '<', '>' or ','",
                        describe(t)
                    ))),
                }
            }
            other => Err(SelectorError(format!("found {}, expected a label key or '!'", describe_opt(&other)))),
        }
    }

    /// The value after `=`/`!=`; may be empty (`k=`).
    fn single_value(&mut self) -> Result<String, SelectorError> {
        match self.peek() {
            Some(Token::Ident(_)) => match self.next() {
                Some(Token::Ident(v)) => value(&v),
                _ => Ok(String::new()),
            },
            None | Some(Token::Comma) => Ok(String::new()),
            Some(t) => Err(SelectorError(format!("found {}, expected a label value", describe(t)))),
        }
    }

    /// `(a,b,...)`; values may be empty, the set may not.
    fn value_set(&mut self) -> Result<Vec<String>, SelectorError> {
        match self.next() {
            Some(Token::Open) => {}
            other => return Err(SelectorError(format!("found {}, expected '('", describe_opt(&other)))),
        }
        if self.peek() == Some(&Token::Close) {
            return Err(SelectorError("for 'in' and 'notin' the set of values must not be empty".into()));
        }
        let mut values = Vec::new();
        let mut expect_value = true;
        loop {
            match self.next() {
                Some(Token::Ident(v)) if expect_value => {
                    values.push(value(&v)?);
                    expect_value = false;
                }
                Some(Token::Comma) => {
                    if expect_value {
                        values.push(String::new());
                    }
                    expect_value = true;
                }
                Some(Token::Close) => {
                    if expect_value {
                        values.push(String::new());
                    }
                    return Ok(values);
                }
                other => {
                    return Err(SelectorError(format!("found {}, expected a value, ',' or ')'", describe_opt(&other))));
                }
            }
        }
    }
}

fn describe(t: &Token) -> String {
    match t {
        Token::Ident(s) => format!("{s:?}"),
        Token::Comma => "','".into(),
        Token::Open => "'('".into(),
        Token::Close => "')'".into(),
        Token::Eq => "'='".into(),
        Token::Neq => "'!='".into(),
        Token::Not => "'!'".into(),
        Token::Gt => "'>'".into(),
        Token::Lt => "'<'".into(),
    }
}

fn describe_opt(t: &Option<Token>) -> String {
    t.as_ref().map_or_else(|| "the end".to_owned(), describe)
}

/// A name segment (a label value, or a qualified name's part after the optional prefix): at
/// most 63 characters, alphanumerics at both ends, `-`, `_`, `.` inside.
pub fn is_name_segment(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A DNS subdomain (a qualified name's optional prefix): at most 253 characters, lower-case
/// labels.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

fn key(k: &str) -> Result<String, SelectorError> {
    let ok = match k.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_name_segment(name),
        None => is_name_segment(k),
    };
    if ok {
        Ok(k.to_owned())
    } else {
        Err(SelectorError(format!(
            "{k:?} is not a valid label key: an optional DNS subdomain prefix and '/', then at most 63 letters, \
             digits, '-', '_' or '.', starting and ending with a letter or digit"
        )))
    }
}

fn value(v: &str) -> Result<String, SelectorError> {
    if v.is_empty() || is_name_segment(v) {
        Ok(v.to_owned())
    } else {
        Err(SelectorError(format!(
            "{v:?} is not a valid label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with \
             a letter or digit"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn empty_selects_everything() {
        assert!(sel("").is_empty());
        assert!(sel("  ").matches(&labels(&[("a", "b")])));
        assert!(sel("").matches(&labels(&[])));
    }

    #[test]
    fn keys_are_every_key_looked_at_once() {
        let s = sel("zone!=b,env in (prod),!excluded,env notin (dev),n>1,role");
        assert_eq!(s.keys(), ["env", "excluded", "n", "role", "zone"]);
        assert!(sel("").keys().is_empty());
    }

    #[test]
    fn equality_based() {
        let s = sel("env=prod, tier == web,zone!=b");
        assert!(s.matches(&labels(&[("env", "prod"), ("tier", "web")])));
        assert!(s.matches(&labels(&[("env", "prod"), ("tier", "web"), ("zone", "a")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("tier", "web"), ("zone", "b")])));
        assert!(!s.matches(&labels(&[("env", "dev"), ("tier", "web")])));
        assert!(!s.matches(&labels(&[("tier", "web")])));
    }

    #[test]
    fn set_based_and_existence() {
        let s = sel("env in (prod, staging),tier notin (db),node-role.kubernetes.io/worker,!excluded");
        assert_eq!(s.requirements().len(), 4);
        let ok = labels(&[("env", "staging"), ("node-role.kubernetes.io/worker", "")]);
        assert!(s.matches(&ok));
        assert!(!s.matches(&labels(&[("env", "dev"), ("node-role.kubernetes.io/worker", "")])));
        assert!(!s.matches(&labels(&[("env", "prod")])), "worker label missing");
        assert!(!s.matches(&labels(&[("env", "prod"), ("node-role.kubernetes.io/worker", ""), ("excluded", "x")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("node-role.kubernetes.io/worker", ""), ("tier", "db")])));
    }

    #[test]
    fn empty_values_and_numbers() {
        assert!(sel("a=").matches(&labels(&[("a", "")])));
        assert!(!sel("a=").matches(&labels(&[("a", "x")])));
        assert!(sel("a in (x,)").matches(&labels(&[("a", "")])));
        let s = sel("gpus>1,size<10");
        assert!(s.matches(&labels(&[("gpus", "2"), ("size", "9")])));
        assert!(!s.matches(&labels(&[("gpus", "1"), ("size", "9")])));
        assert!(!s.matches(&labels(&[("gpus", "x"), ("size", "9")])));
        assert!(!s.matches(&labels(&[("size", "9")])));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        for (input, needle) in [
            ("a in ()", "must not be empty"),
            ("a in (b", "expected a value"),
            ("a=b,", "must not end"),
            ("a b", "expected one of"),
            ("-bad=x", "not a valid label key"),
            ("a=b c", "expected ','"),
            ("a>x", "integer"),
            ("a=-x", "not a valid label value"),
            ("!", "expected a label key"),
            ("=x", "expected a label key"),
        ] {
            let err = LabelSelector::parse(input).expect_err(input).to_string();
            assert!(err.contains(needle), "{input:?}: {err}");
        }
    }

    #[test]
    fn display_round_trips() {
        for s in ["a=b,c!=d", "a in (x,y),!b", "c,d>3"] {
            assert_eq!(sel(&sel(s).to_string()), sel(s));
        }
    }
}
