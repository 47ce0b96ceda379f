//! The file-level import graph of a crate, and the check that it is a DAG (no import cycles
//! between files).
//!
//! The modules are found as the compiler finds them: from the crate root (`lib.rs`, `main.rs`,
//! `bin/<name>.rs`, `bin/<name>/main.rs`) through every `mod name;` declaration, honouring
//! `#[path = "..."]` (so `#[path = "plan_tests.rs"] mod tests;` in `plan.rs` is the module
//! `plan::tests`, and its `super::` means `plan`). Each module file is a node. A file depends on
//! another when it names an item through a path that resolves into that file's module: `use`
//! trees and inline paths starting with `crate::`, `super::`, `self::` or the name of a child
//! module. Comments and string literals are ignored; `mod` declarations are not dependencies (a
//! parent declaring a child is not an import) and neither are method calls on a type whose
//! `impl` blocks are split over several files (they name no path). A path resolves to the
//! deepest module it names, so `crate::wire::Server` depends on `wire/mod.rs` (the re-export)
//! and `crate::wire::server::Server` on `wire/server.rs`.
//!
//! [`assert_module_graph_is_acyclic`] fails with each cycle as a list of files and one circle
//! through them, every step named by the path that made it (`options.rs → args/mod.rs
//! (args::LogFormat) → options.rs (crate::options::Options)`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use crate::error::HarnessError;

mod lex;
use lex::{lex, mod_declarations, paths};

/// A module's path inside its crate: the root is `[]`, `a/mod.rs` and `a.rs` are `[a]`.
type ModPath = Vec<String>;

/// The import graph of one crate (one root file and the module files it declares).
#[derive(Debug, Clone)]
pub struct ModuleGraph {
    /// The directory file names are shown relative to (the crate's `src`).
    src: PathBuf,
    /// The file of every module that has one.
    files: BTreeMap<ModPath, PathBuf>,
    /// For every module, the modules it imports from, each with the first path that did.
    edges: BTreeMap<ModPath, BTreeMap<ModPath, String>>,
}

impl ModuleGraph {
    /// Reads the crate whose root file is `root`; file names are shown relative to `src`.
    pub fn read(src: &Path, root: &Path) -> Result<Self, HarnessError> {
        let mut files = BTreeMap::new();
        let mut texts = BTreeMap::new();
        let mut pending = vec![(Vec::new(), root.to_path_buf(), true)];
        while let Some((module, file, mod_rs)) = pending.pop() {
            let text = std::fs::read_to_string(&file)
                .map_err(|source| HarnessError::Io { context: format!("reading {}", file.display()), source })?;
            let toks = lex(&text);
            let dir = match (file.parent(), file.file_stem()) {
                (Some(parent), _) if mod_rs => parent.to_path_buf(),
                (Some(parent), Some(stem)) => parent.join(stem),
                _ => PathBuf::new(),
            };
            for decl in mod_declarations(&toks) {
                let mut child = module.clone();
                child.extend(decl.inline.iter().cloned());
                child.push(decl.name.clone());
                let base = decl.inline.iter().fold(dir.clone(), |d, m| d.join(m));
                let (path, child_mod_rs) = match &decl.path {
                    // `#[path]` outside inline modules is relative to the declaring file's
                    // directory; rustc treats such a file like `mod.rs` for its own children.
                    Some(p) if decl.inline.is_empty() => (file.parent().unwrap_or(Path::new("")).join(p), true),
                    Some(p) => (base.join(p), true),
                    None if base.join(format!("{}.rs", decl.name)).is_file() => {
                        (base.join(format!("{}.rs", decl.name)), false)
                    }
                    None => (base.join(&decl.name).join("mod.rs"), true),
                };
                pending.push((child, path, child_mod_rs));
            }
            files.insert(module.clone(), file);
            texts.insert(module, toks);
        }
        let mut edges: BTreeMap<ModPath, BTreeMap<ModPath, String>> = BTreeMap::new();
        for (module, toks) in &texts {
            let out = edges.entry(module.clone()).or_default();
            for (path, inline) in paths(toks) {
                let mut current = module.clone();
                current.extend(inline);
                if let Some(target) = resolve(&files, &current, &path)
                    && &target != module
                {
                    out.entry(target).or_insert_with(|| path.join("::"));
                }
            }
        }
        Ok(Self { src: src.to_path_buf(), files, edges })
    }

    /// Every crate in `src`: the library (`lib.rs`), the binary (`main.rs`) and each binary under
    /// `bin/`; each is checked on its own (a binary reaches the library by name, not `crate::`).
    pub fn read_all(src: &Path) -> Result<Vec<Self>, HarnessError> {
        let mut roots: Vec<PathBuf> =
            ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).filter(|p| p.is_file()).collect();
        if let Ok(entries) = std::fs::read_dir(src.join("bin")) {
            let mut bins: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            bins.sort();
            for p in bins {
                if p.is_dir() && p.join("main.rs").is_file() {
                    roots.push(p.join("main.rs"));
                } else if p.extension().is_some_and(|e| e == "rs") {
                    roots.push(p);
                }
            }
        }
        roots.iter().map(|root| Self::read(src, root)).collect()
    }

    /// The file name shown for `module`, relative to the crate's `src`.
    fn name(&self, module: &ModPath) -> String {
        let file = &self.files[module];
        file.strip_prefix(&self.src).unwrap_or(file).display().to_string()
    }

    fn module(&self, file: &str) -> Option<&ModPath> {
        self.files.keys().find(|m| self.name(m) == file)
    }

    /// Whether file `from` imports from file `to` (names relative to `src`, like `http/mod.rs`).
    pub fn depends_on(&self, from: &str, to: &str) -> bool {
        match (self.module(from), self.module(to)) {
            (Some(f), Some(t)) => self.edges.get(f).is_some_and(|e| e.contains_key(t)),
            _ => false,
        }
    }

    /// Every file of the crate (relative to `src`).
    pub fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = self.files.keys().map(|m| self.name(m)).collect();
        names.sort();
        names
    }

    /// The import cycles: each strongly connected component of more than one file, described as
    /// its files (sorted) and one circle through them with the path behind every step.
    pub fn cycles(&self) -> Vec<Cycle> {
        strongly_connected(&self.edges)
            .into_iter()
            .map(|scc| {
                let mut files: Vec<String> = scc.iter().map(|m| self.name(m)).collect();
                files.sort();
                let members: BTreeSet<&ModPath> = scc.iter().collect();
                let mut imports: Vec<String> = scc
                    .iter()
                    .flat_map(|from| {
                        let to = self.edges.get(from).into_iter().flatten().filter(|(t, _)| members.contains(t));
                        to.map(|(t, via)| format!("{} → {} ({via})", self.name(from), self.name(t)))
                    })
                    .collect();
                imports.sort();
                Cycle { files, circle: self.circle(&scc), imports }
            })
            .collect()
    }

    /// The shortest circle from the first module of `scc` back to itself, inside `scc`.
    fn circle(&self, scc: &[ModPath]) -> String {
        let members: BTreeSet<&ModPath> = scc.iter().collect();
        let Some(start) = scc.iter().min() else { return String::new() };
        let mut previous: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        let mut last = None;
        'search: while let Some(m) = queue.pop_front() {
            for next in self.edges.get(m).into_iter().flat_map(BTreeMap::keys) {
                if next == start {
                    last = Some(m);
                    break 'search;
                }
                if members.contains(next) && !previous.contains_key(next) {
                    previous.insert(next, m);
                    queue.push_back(next);
                }
            }
        }
        let mut chain = vec![start];
        let mut at = last;
        while let Some(m) = at {
            chain.push(m);
            at = if m == start { None } else { previous.get(m).copied() };
        }
        chain.reverse(); // start, ..., last, start
        let mut out = self.name(start);
        for pair in chain.windows(2) {
            let via = self.edges.get(pair[0]).and_then(|e| e.get(pair[1])).map_or("", String::as_str);
            out.push_str(&format!(" → {} ({via})", self.name(pair[1])));
        }
        out
    }

    /// The files by layer when the graph is acyclic: a file's layer is 1 + the highest layer of
    /// the files it imports from.
    pub fn layers(&self) -> Vec<Vec<String>> {
        let mut layer: BTreeMap<&ModPath, usize> = BTreeMap::new();
        loop {
            let before = layer.len();
            for (m, deps) in &self.edges {
                if !layer.contains_key(m) && deps.keys().all(|d| layer.contains_key(d)) {
                    let l = deps.keys().map(|d| layer[d] + 1).max().unwrap_or(0);
                    layer.insert(m, l);
                }
            }
            if layer.len() == before {
                break;
            }
        }
        let top = layer.values().copied().max().unwrap_or(0);
        (0..=top)
            .map(|l| {
                let mut files: Vec<String> =
                    layer.iter().filter(|(_, v)| **v == l).map(|(m, _)| self.name(m)).collect();
                files.sort();
                files
            })
            .collect()
    }
}

/// One import cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// Every file of the strongly connected component, sorted.
    pub files: Vec<String>,
    /// One circle through them, e.g. `a.rs → b.rs (crate::b::X) → a.rs (crate::a::Y)`.
    pub circle: String,
    /// Every import between the files, e.g. `a.rs → b.rs (crate::b::X)`, sorted: the edges
    /// one of which has to go.
    pub imports: Vec<String>,
}

/// Panics, naming every cycle, unless every crate in `src` (a crate's `src` directory) has an
/// acyclic file import graph.
pub fn assert_module_graph_is_acyclic(src: &Path) {
    let problems = match ModuleGraph::read_all(src) {
        Ok(graphs) => describe_cycles(&graphs),
        Err(e) => vec![e.to_string()],
    };
    assert!(problems.is_empty(), "import cycles between files of {}:\n{}", src.display(), problems.join("\n"));
}

/// Per cycle: `N files: a.rs, b.rs; circle: a.rs → b.rs (…) → a.rs (…)`, then every import
/// between those files on a line of its own.
pub fn describe_cycles(graphs: &[ModuleGraph]) -> Vec<String> {
    graphs
        .iter()
        .flat_map(ModuleGraph::cycles)
        .map(|c| {
            let imports = c.imports.iter().map(|i| format!("\n    {i}")).collect::<String>();
            format!(
                "{} files: {}; circle: {}; imports between them:{imports}",
                c.files.len(),
                c.files.join(", "),
                c.circle
            )
        })
        .collect()
}

/// The `src` directory of every crate under `crates_dir` (each subdirectory with a `Cargo.toml`).
pub fn crate_sources(crates_dir: &Path) -> Result<Vec<PathBuf>, HarnessError> {
    let entries = std::fs::read_dir(crates_dir)
        .map_err(|source| HarnessError::Io { context: format!("listing {}", crates_dir.display()), source })?;
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file() && p.join("src").is_dir())
        .map(|p| p.join("src"))
        .collect();
    out.sort();
    Ok(out)
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
    for seg in rest {
        base.push(seg.clone());
        if !modules.contains_key(&base) {
            base.pop();
            break;
        }
    }
    // Inside an inline module without a file (`mod tests { .. }`), the file is its parent's.
    while !modules.contains_key(&base) {
        base.pop()?;
    }
    Some(base)
}

/// Strongly connected components with more than one node (Tarjan).
fn strongly_connected<V>(edges: &BTreeMap<ModPath, BTreeMap<ModPath, V>>) -> Vec<Vec<ModPath>> {
    struct T<'a, V> {
        edges: &'a BTreeMap<ModPath, BTreeMap<ModPath, V>>,
        index: BTreeMap<ModPath, usize>,
        low: BTreeMap<ModPath, usize>,
        stack: Vec<ModPath>,
        on: BTreeSet<ModPath>,
        next: usize,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<V>(t: &mut T<'_, V>, v: &ModPath) {
        t.index.insert(v.clone(), t.next);
        t.low.insert(v.clone(), t.next);
        t.next += 1;
        t.stack.push(v.clone());
        t.on.insert(v.clone());
        let successors: Vec<ModPath> = t.edges.get(v).map(|e| e.keys().cloned().collect()).unwrap_or_default();
        for w in successors {
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
            while let Some(w) = t.stack.pop() {
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

#[cfg(test)]
#[path = "module_graph_tests.rs"]
mod tests;
