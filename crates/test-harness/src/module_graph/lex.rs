//! The tokens of a Rust source file as far as the module graph needs them: identifiers, `::`,
//! string literals (for `#[path]`), comments dropped; and what they declare (`mod` lines) and
//! name (`use` trees and inline paths).

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    /// `::`
    Sep,
    /// A string literal's text (escapes left as written).
    Str(String),
    Other(char),
}

/// The source as tokens, without comments; char literals become `Other('\'')`.
pub(super) fn lex(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied();
        if c[i] == '/' && at(i + 1) == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == Some('*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == Some('/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c[i].is_alphabetic() || c[i] == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr") && matches!(at(i), Some('"' | '#'));
            if raw {
                // Raw string r"..." / r#"..."#.
                let mut j = i;
                let mut hashes = 0;
                while at(j) == Some('#') {
                    hashes += 1;
                    j += 1;
                }
                if at(j) != Some('"') {
                    out.push(Tok::Ident(word));
                    continue;
                }
                j += 1;
                let body = j;
                while j < c.len() && !(c[j] == '"' && (0..hashes).all(|k| at(j + 1 + k) == Some('#'))) {
                    j += 1;
                }
                out.push(Tok::Str(c[body..j.min(c.len())].iter().collect()));
                i = j + 1 + hashes;
            } else if matches!(word.as_str(), "b" | "c") && at(i) == Some('"') {
                // A byte or C string: lexed as a string below.
            } else {
                out.push(Tok::Ident(word));
            }
        } else if c[i] == '"' {
            i += 1;
            let body = i;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            out.push(Tok::Str(c[body..i.min(c.len())].iter().collect()));
            i += 1;
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if at(i + 1) == Some('\\') {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                out.push(Tok::Other('\''));
                i = j + 1;
            } else if at(i + 2) == Some('\'') {
                out.push(Tok::Other('\''));
                i += 3;
            } else {
                out.push(Tok::Other('\''));
                i += 1;
            }
        } else if c[i] == ':' && at(i + 1) == Some(':') {
            out.push(Tok::Sep);
            i += 2;
        } else if c[i].is_whitespace() {
            i += 1;
        } else {
            out.push(Tok::Other(c[i]));
            i += 1;
        }
    }
    out
}

/// A `mod name;` declaration (a module in its own file).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ModDecl {
    /// The inline modules it is declared in (`mod a { mod b; }` gives `[a]`).
    pub(super) inline: Vec<String>,
    /// The declared module's name.
    pub(super) name: String,
    /// The `#[path = "..."]` attribute's value.
    pub(super) path: Option<String>,
}

fn ident(t: Option<&Tok>, word: &str) -> bool {
    matches!(t, Some(Tok::Ident(w)) if w == word)
}

/// Every `mod name;` with the inline modules around it and its `#[path]`, if any.
pub(super) fn mod_declarations(toks: &[Tok]) -> Vec<ModDecl> {
    let mut out = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut path_attr: Option<String> = None;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Other('{') => {
                depth += 1;
                path_attr = None;
            }
            Tok::Other('}') => {
                depth = depth.saturating_sub(1);
                path_attr = None;
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Other(';') => path_attr = None,
            Tok::Other('#') if toks.get(i + 1) == Some(&Tok::Other('[')) && ident(toks.get(i + 2), "path") => {
                if let (Some(Tok::Other('=')), Some(Tok::Str(p))) = (toks.get(i + 3), toks.get(i + 4)) {
                    path_attr = Some(p.clone());
                }
            }
            Tok::Ident(w) if w == "mod" => {
                if let Some(Tok::Ident(name)) = toks.get(i + 1) {
                    match toks.get(i + 2) {
                        Some(Tok::Other(';')) => out.push(ModDecl {
                            inline: inline.iter().map(|(n, _)| n.clone()).collect(),
                            name: name.clone(),
                            path: path_attr.take(),
                        }),
                        Some(Tok::Other('{')) => {
                            inline.push((name.clone(), depth));
                            depth += 1;
                            path_attr = None;
                            i += 3;
                            continue;
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Expands a `use` tree starting at `toks[i]` into paths; returns the index after it.
fn use_tree(toks: &[Tok], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    loop {
        match toks.get(i) {
            Some(Tok::Ident(id)) => {
                path.push(id.clone());
                i += 1;
                if toks.get(i) == Some(&Tok::Sep) {
                    i += 1;
                    continue;
                }
                if ident(toks.get(i), "as") {
                    i += 2;
                }
                out.push(path);
                return i;
            }
            Some(Tok::Other('*')) => {
                out.push(path);
                return i + 1;
            }
            Some(Tok::Other('{')) => {
                i += 1;
                loop {
                    match toks.get(i) {
                        Some(Tok::Other('}')) => return i + 1,
                        Some(Tok::Other(',')) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, path.clone(), out),
                    }
                }
            }
            _ => {
                if !path.is_empty() {
                    out.push(path);
                }
                return i;
            }
        }
    }
}

/// Every path the file names (use trees and inline `a::b::c` paths), with the inline
/// modules (`mod tests { .. }`) it appears in.
pub(super) fn paths(toks: &[Tok]) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    // Inline modules we are in: (name, brace depth at which it closes).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let names = |inline: &Vec<(String, usize)>| inline.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    while i < toks.len() {
        match &toks[i] {
            Tok::Other('{') => depth += 1,
            Tok::Other('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            _ => {}
        }
        if ident(toks.get(i), "mod")
            && let (Some(Tok::Ident(n)), Some(Tok::Other('{'))) = (toks.get(i + 1), toks.get(i + 2))
        {
            inline.push((n.clone(), depth));
            depth += 1;
            i += 3;
            continue;
        }
        if ident(toks.get(i), "use") {
            let mut found = Vec::new();
            i = use_tree(toks, i + 1, Vec::new(), &mut found);
            out.extend(found.into_iter().map(|p| (p, names(&inline))));
            continue;
        }
        let starts = matches!(&toks[i], Tok::Ident(_))
            && toks.get(i + 1) == Some(&Tok::Sep)
            && (i == 0 || toks[i - 1] != Tok::Sep);
        if starts {
            let mut p = Vec::new();
            while let Some(Tok::Ident(id)) = toks.get(i) {
                p.push(id.clone());
                if toks.get(i + 1) == Some(&Tok::Sep) {
                    i += 2;
                } else {
                    i += 1;
                    break;
                }
            }
            out.push((p, names(&inline)));
            continue;
        }
        i += 1;
    }
    out
}
