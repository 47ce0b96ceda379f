//! The crate's module dependency graph is a DAG (no import cycles between files).
//!
//! Each file under `src/` (except the binary) is a node. A file depends on another when it
//! names an item through a path that resolves into that file's module: `use` trees and inline
//! paths starting with `crate::`, `super::`, `self::` or the name of a child module. Comments
//! and string literals are ignored; `mod` declarations are not dependencies (a parent
//! declaring a child is not an import) and neither are method calls on a type whose `impl`
//! blocks are split over several files (they name no path). A path resolves to the deepest
//! module it names, so `crate::wire::Server` depends on `wire/mod.rs` (the re-export) and
//! `crate::wire::server::Server` on `wire/server.rs`.
//!
//! The test fails with the cycle (as a list of files) if there is one, and prints the graph
//! by layer (`cargo test -p hcloud-fake --test module_graph -- --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

/// Module path of every source file: `lib.rs` is `[]`, `a/mod.rs` and `a.rs` are `[a]`.
fn module_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, prefix: &ModPath, out: &mut BTreeMap<ModPath, PathBuf>, root: bool) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if root && name == "bin" {
                    continue; // binaries use the crate by name, not through `crate::`
                }
                let mut m = prefix.clone();
                m.push(name);
                walk(&p, &m, out, false);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let m = match (stem, root) {
                    ("lib", true) | ("mod", false) => prefix.clone(),
                    _ => {
                        let mut m = prefix.clone();
                        m.push(stem.to_owned());
                        m
                    }
                };
                out.insert(m, p);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &Vec::new(), &mut out, true);
    out
}

/// The source with comments removed and string/char literals emptied.
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (c.get(i + 1) == Some(&'"') || c.get(i + 1) == Some(&'#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // Raw string r"..." / r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if c.get(i + 1) == Some(&'\\') {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
            } else {
                out.push(c[i]);
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Sep,
    Other(char),
}

fn tokens(s: &str) -> Vec<Tok> {
    let c: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_alphabetic() || c[i] == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
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
                if toks.get(i) == Some(&Tok::Ident("as".into())) {
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
fn paths(src: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let toks = tokens(&strip(src));
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
                depth -= 1;
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            _ => {}
        }
        if toks[i] == Tok::Ident("mod".into())
            && let (Some(Tok::Ident(n)), Some(Tok::Other('{'))) = (toks.get(i + 1), toks.get(i + 2))
        {
            inline.push((n.clone(), depth));
            depth += 1;
            i += 3;
            continue;
        }
        if toks[i] == Tok::Ident("use".into()) {
            let mut found = Vec::new();
            i = use_tree(&toks, i + 1, Vec::new(), &mut found);
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

/// The module a path points into (the deepest module file it names), if any.
fn resolve(modules: &BTreeMap<ModPath, PathBuf>, current: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut base: ModPath;
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &path[1..];
        }
        Some("self") => {
            base = current.clone();
            rest = &path[1..];
        }
        Some("super") => {
            base = current.clone();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A child module of the current module (2018 paths), else an external crate.
            let mut child = current.clone();
            child.push(first.to_owned());
            if !modules.contains_key(&child) {
                return None;
            }
            base = current.clone();
        }
        None => return None,
    }
    let mut target = base.clone();
    for seg in rest {
        let mut next = target.clone();
        next.push(seg.clone());
        if modules.contains_key(&next) {
            target = next;
        } else {
            break;
        }
    }
    modules.contains_key(&target).then_some(target)
}

fn graph() -> (BTreeMap<ModPath, PathBuf>, BTreeMap<ModPath, BTreeSet<ModPath>>) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = module_files(&src);
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (m, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let set = edges.entry(m.clone()).or_default();
        for (p, inline) in paths(&text) {
            let mut current = m.clone();
            current.extend(inline);
            if let Some(t) = resolve(&modules, &current, &p)
                && &t != m
            {
                set.insert(t);
            }
        }
    }
    (modules, edges)
}

fn name(modules: &BTreeMap<ModPath, PathBuf>, m: &ModPath) -> String {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    modules[m].strip_prefix(&src).unwrap().display().to_string()
}

/// Strongly connected components with more than one node (Tarjan).
fn cycles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct T<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<ModPath, usize>,
        low: BTreeMap<ModPath, usize>,
        stack: Vec<ModPath>,
        on: BTreeSet<ModPath>,
        next: usize,
        out: Vec<Vec<ModPath>>,
    }
    fn visit(t: &mut T<'_>, v: &ModPath) {
        t.index.insert(v.clone(), t.next);
        t.low.insert(v.clone(), t.next);
        t.next += 1;
        t.stack.push(v.clone());
        t.on.insert(v.clone());
        for w in t.edges.get(v).cloned().unwrap_or_default() {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let l = t.low[&w].min(t.low[v]);
                t.low.insert(v.clone(), l);
            } else if t.on.contains(&w) {
                let l = t.index[&w].min(t.low[v]);
                t.low.insert(v.clone(), l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(&w);
                let done = &w == v;
                scc.push(w);
                if done {
                    break;
                }
            }
            if scc.len() > 1 {
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn the_checker_sees_paths_and_cycles() {
    // Negative controls, so a checker that sees nothing cannot pass the real test.
    let p = paths(
        "use crate::wire::{Server, request::{A, B}};\nfn f() { super::bump(x); let s = \"crate::x::y\"; }\n// crate::http::z\n#[cfg(test)]\nmod tests { use super::*; }",
    );
    let ps: Vec<String> = p
        .iter()
        .map(|(p, m)| {
            format!("{}{}", p.join("::"), if m.is_empty() { String::new() } else { format!(" in {}", m.join("::")) })
        })
        .collect();
    assert_eq!(
        ps,
        vec![
            "crate::wire::Server",
            "crate::wire::request::A",
            "crate::wire::request::B",
            "super::bump",
            "super in tests"
        ]
    );
    let mut e: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    let m = |s: &str| vec![s.to_owned()];
    e.entry(m("a")).or_default().insert(m("b"));
    e.entry(m("b")).or_default().insert(m("c"));
    e.entry(m("c")).or_default().insert(m("a"));
    e.entry(m("d")).or_default().insert(m("a"));
    assert_eq!(cycles(&e).len(), 1);
    assert_eq!(cycles(&e)[0].len(), 3);

    // The real graph has edges where they are known to exist.
    let (_, edges) = graph();
    let http = vec!["http".to_owned()];
    assert!(edges[&http].contains(&vec!["handle".to_owned()]), "http uses the handle");
    assert!(edges[&vec!["handle".to_owned()]].contains(&vec!["state".to_owned()]), "handle uses the state");
}

#[test]
fn module_graph_has_no_cycles() {
    let (modules, edges) = graph();
    let found = cycles(&edges);
    let described: Vec<String> = found
        .iter()
        .map(|scc| {
            let mut names: Vec<String> = scc.iter().map(|m| name(&modules, m)).collect();
            names.sort();
            format!("{} files: {}", names.len(), names.join(", "))
        })
        .collect();

    // Print the graph by layer: a file's layer is 1 + the highest layer it depends on.
    if found.is_empty() {
        let mut layer: BTreeMap<ModPath, usize> = BTreeMap::new();
        while layer.len() < edges.len() {
            for (m, deps) in &edges {
                if !layer.contains_key(m) && deps.iter().all(|d| layer.contains_key(d)) {
                    let l = deps.iter().map(|d| layer[d] + 1).max().unwrap_or(0);
                    layer.insert(m.clone(), l);
                }
            }
        }
        let top = layer.values().copied().max().unwrap_or(0);
        for l in 0..=top {
            let files: Vec<String> = layer.iter().filter(|(_, v)| **v == l).map(|(m, _)| name(&modules, m)).collect();
            println!("layer {l}: {}", files.join(", "));
        }
    }
    assert!(described.is_empty(), "import cycles between files:\n{}", described.join("\n"));
}
