//! Test support: every environment variable the `hcloud-ccm` binary reads at run time, for the
//! docs test `every_flag_and_variable_is_in_docs_reference` (`cli.rs`). Found two ways:
//!
//! - the provider's configuration ([`Config::from_env`], one `EnvReader` for every `HCLOUD_*`
//!   and `ROBOT_*` variable) runs with a lookup that records each name it asks for: once with
//!   nothing set, once with everything `true` and once with everything `x`, so both sides of
//!   every "is it set?" branch are taken;
//! - the non-test source of the workspace crates the binary is built from (`hcloud-ccm` and its
//!   `[dependencies]` that are workspace crates, transitively) is searched for `env::var`,
//!   `env::var_os`, `env::vars` and `env::vars_os`. A call with a string literal names its
//!   variable; any other use (a computed name, the function passed on, an import) must be one
//!   of [`INDIRECT`], whose names the first way finds.
//!
//! Non-test source: the files reached from `src/lib.rs` and `src/main.rs` through `mod` items
//! not marked `#[cfg(test)]`, without comments and without the items marked `#[cfg(test)]`.
//! Not seen: reads inside other crates (kube's `KUBECONFIG`, ...), build scripts (build time,
//! not run time), and a read through `use std::env::{var, ..}` (a grouped import).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use hcloud_provider::config::Config;

/// The uses of `std::env` reads without a literal name, as (file, argument): each one's names
/// must be found another way.
pub const INDIRECT: &[(&str, &str)] = &[
    // `Config::from_env(|k| std::env::var(k).ok(), ..)`: the names are those
    // `provider_variables` records.
    ("crates/hcloud-ccm/src/run.rs", "k"),
];

/// The repository's root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every name [`Config::from_env`] asks its lookup for.
pub fn provider_variables() -> BTreeSet<String> {
    let asked = RefCell::new(BTreeSet::new());
    for value in [None, Some("true"), Some("x")] {
        let get = |k: &str| {
            asked.borrow_mut().insert(k.to_owned());
            value.map(str::to_owned)
        };
        // Most of these environments are invalid; only the names asked for matter.
        let _ = Config::from_env(get, Vec::new());
    }
    asked.into_inner()
}

/// The workspace crates the binary is built from: `hcloud-ccm` and, transitively, the
/// `[dependencies]` (not dev- or build-dependencies) that are crates under `crates/`.
pub fn binary_crates(root: &Path) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec!["hcloud-ccm".to_owned()];
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let path = root.join("crates").join(&name).join("Cargo.toml");
        let manifest = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        todo.extend(
            dependencies(&manifest).into_iter().filter(|d| root.join("crates").join(d).join("Cargo.toml").is_file()),
        );
    }
    seen
}

/// The keys of a manifest's `[dependencies]` table (`name.workspace = true`, `name = ...`).
fn dependencies(manifest: &str) -> Vec<String> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
        } else if inside && !line.is_empty() && !line.starts_with('#') {
            out.extend(line.split(['=', '.']).next().map(|k| k.trim().to_owned()));
        }
    }
    out
}

/// What the source search found.
#[derive(Debug, Default)]
pub struct SourceReads {
    /// Variable → the files (relative to the root) that read it by a literal name.
    pub literal: BTreeMap<String, BTreeSet<String>>,
    /// (file, argument or the use itself) of every other read.
    pub indirect: BTreeSet<(String, String)>,
}

/// Searches the non-test source of `crates`.
pub fn source_reads(root: &Path, crates: &BTreeSet<String>) -> SourceReads {
    let mut reads = SourceReads::default();
    for name in crates {
        for file in non_test_files(&root.join("crates").join(name).join("src")) {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let rel = file.strip_prefix(root).unwrap_or(&file).to_string_lossy().into_owned();
            let (code, mask) = without_test_items(&text);
            for (literal, other) in env_reads(&code, &mask) {
                match literal {
                    Some(var) => {
                        reads.literal.entry(var).or_default().insert(rel.clone());
                    }
                    None => {
                        reads.indirect.insert((rel.clone(), other));
                    }
                }
            }
        }
    }
    reads
}

/// The files of a crate's module tree, from `src/lib.rs` and `src/main.rs` through `mod` items
/// not marked `#[cfg(test)]`.
fn non_test_files(src: &Path) -> Vec<PathBuf> {
    let mut todo: Vec<PathBuf> = ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).filter(|p| p.is_file()).collect();
    let mut files = Vec::new();
    while let Some(file) = todo.pop() {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (code, _) = without_test_items(&text);
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let base = if matches!(stem, "lib" | "main" | "mod") { dir.clone() } else { dir.join(stem) };
        for (name, path) in module_files(&code) {
            let found = match path {
                Some(p) => dir.join(p),
                None if base.join(format!("{name}.rs")).is_file() => base.join(format!("{name}.rs")),
                None => base.join(&name).join("mod.rs"),
            };
            assert!(found.is_file(), "{}: mod {name}: no file {}", file.display(), found.display());
            todo.push(found);
        }
        files.push(file);
    }
    files
}

/// The `mod name;` items of test-free code: (name, its `#[path]` if any).
fn module_files(code: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut path = None;
    for line in code.lines() {
        let mut rest = line.trim();
        while let Some(attr) = rest.strip_prefix("#[") {
            let Some(end) = attr.find(']') else { break };
            if let Some(p) = attr[..end].trim().strip_prefix("path") {
                path = p.trim().strip_prefix('=').map(|p| p.trim().trim_matches('"').to_owned());
            }
            rest = attr[end + 1..].trim();
        }
        if rest.is_empty() {
            continue;
        }
        let item = rest.strip_prefix("pub").map_or(rest, |r| r.trim_start());
        let item = match item.strip_prefix('(') {
            Some(r) => r.split_once(')').map_or(item, |(_, r)| r.trim_start()),
            None => item,
        };
        if let Some(name) = item.strip_prefix("mod ").and_then(|r| r.trim().strip_suffix(';')) {
            out.push((name.trim().to_owned(), path.take()));
        }
        path = None;
    }
    out
}

/// The code without comments and without the items marked `#[cfg(test)]`, and its mask: the
/// same with the contents of string and character literals blanked (same byte offsets).
fn without_test_items(text: &str) -> (String, String) {
    let (code, mask) = lex(text);
    let mut cuts = Vec::new();
    let mut from = 0;
    while let Some(at) = mask[from..].find("#[cfg(test)]").map(|i| i + from) {
        let end = item_end(&mask, at + "#[cfg(test)]".len());
        cuts.push((at, end));
        from = end;
    }
    let cut = |s: &str| {
        let mut out = String::with_capacity(s.len());
        let mut last = 0;
        for &(a, b) in &cuts {
            out.push_str(&s[last..a]);
            out.push_str(&" ".repeat(b - a));
            last = b;
        }
        out.push_str(&s[last..]);
        out
    };
    (cut(&code), cut(&mask))
}

/// Where the item starting at `from` ends: after its first `;` outside brackets, or after the
/// `}` closing its first `{`.
fn item_end(mask: &str, from: usize) -> usize {
    let mut depth = 0usize;
    for (i, c) in mask[from..].char_indices() {
        match c {
            '{' | '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return from + i + 1;
                }
            }
            ';' if depth == 0 => return from + i + 1,
            _ => {}
        }
    }
    mask.len()
}

/// The index of the bracket closing the one at `open` (the end of `mask` if none does).
fn closing(mask: &str, open: usize) -> usize {
    let mut depth = 0usize;
    for (i, c) in mask[open..].char_indices() {
        match c {
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return open + i;
                }
            }
            _ => {}
        }
    }
    mask.len()
}

/// Comments replaced by spaces (newlines kept); and a mask that also blanks the contents of
/// string and character literals. Both have `text`'s byte offsets.
fn lex(text: &str) -> (String, String) {
    let b = text.as_bytes();
    let mut code = b.to_vec();
    let mut mask = b.to_vec();
    let blank = |v: &mut Vec<u8>, from: usize, to: usize| {
        for x in &mut v[from..to] {
            if *x != b'\n' {
                *x = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| i + p);
                blank(&mut code, i, end);
                blank(&mut mask, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (1, i + 2);
                while j < b.len() && depth > 0 {
                    if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                        depth += 1;
                        j += 2;
                    } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                blank(&mut code, i, j);
                blank(&mut mask, i, j);
                i = j;
            }
            b'r' if !ident_before(b, i) && matches!(b.get(i + 1), Some(b'"' | b'#')) => {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let open = i + 1 + hashes;
                let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                let end = b[open + 1..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |p| open + 1 + p);
                blank(&mut mask, open + 1, end);
                i = (end + close.len()).min(b.len());
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = j.min(b.len());
                blank(&mut mask, i + 1, end);
                i = end + 1;
            }
            b'\'' => {
                // A character literal ('x', '\n', '\'', 'é'), or a lifetime or label ('a).
                let end = if b.get(i + 1) == Some(&b'\\') {
                    b.get(i + 3..).and_then(|r| r.iter().position(|&c| c == b'\'')).map(|p| i + 3 + p)
                } else {
                    text[i + 1..].chars().next().map(|c| i + 1 + c.len_utf8()).filter(|&e| b.get(e) == Some(&b'\''))
                };
                match end {
                    Some(end) => {
                        blank(&mut mask, i + 1, end);
                        i = end + 1;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    // Blanked ranges start and end at ASCII delimiters, so they hold whole characters: both
    // stay UTF-8, byte for byte as long as `text`.
    (String::from_utf8_lossy(&code).into_owned(), String::from_utf8_lossy(&mask).into_owned())
}

/// Whether the byte before `i` continues an identifier (so `r` there is not a raw string's).
fn ident_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The reads of `std::env` in test-free `code` (with its `mask`): `(Some(name), _)` for a call
/// with a string literal, `(None, what)` for anything else.
fn env_reads(code: &str, mask: &str) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = mask[from..].find("env::var").map(|i| i + from) {
        let after = at + "env::var".len();
        from = after;
        let rest = &mask[after..];
        let open = ["(", "_os(", "s(", "s_os("].iter().find(|p| rest.starts_with(**p)).map(|p| after + p.len());
        let Some(open) = open else {
            out.push((None, "a use of std::env::var without a call".to_owned()));
            continue;
        };
        let close = closing(mask, open - 1);
        let argument = code[open..close].trim();
        let literal = argument
            .strip_prefix('"')
            .and_then(|a| a.strip_suffix('"'))
            .filter(|a| !a.contains(['"', '\\']))
            .map(str::to_owned);
        out.push(match literal {
            Some(name) => (Some(name), String::new()),
            None => (None, argument.to_owned()),
        });
    }
    out
}

/// Every variable the binary reads, with where it was found.
pub fn variables() -> BTreeMap<String, String> {
    let root = workspace_root();
    let crates = binary_crates(&root);
    let reads = source_reads(&root, &crates);
    let expected: BTreeSet<(String, String)> =
        INDIRECT.iter().map(|(f, a)| ((*f).to_owned(), (*a).to_owned())).collect();
    assert_eq!(
        reads.indirect, expected,
        "reads of std::env without a literal name in the non-test source of {crates:?}: each must be in INDIRECT \
         (env_reads.rs) with the way its names are found, and INDIRECT must hold no other"
    );
    let mut all: BTreeMap<String, String> = provider_variables()
        .into_iter()
        .map(|v| (v, "asked by hcloud_provider::config::Config::from_env".to_owned()))
        .collect();
    for (var, files) in reads.literal {
        all.entry(var).or_insert_with(|| format!("read in {files:?}"));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_test_items_and_literals_are_told_apart() {
        let text = r#####"
// std::env::var("IN_A_COMMENT")
/* std::env::var("IN_A_BLOCK") /* nested */ std::env::var("STILL_IN_IT") */
fn live() -> Option<String> {
    let _ = "std::env::var(\"IN_A_STRING\") { ";
    let _ = r#"} std::env::var("IN_A_RAW_STRING")"#;
    let _ = ('{', '\'', 'é');
    std::env::var("LIVE").ok()
}
#[cfg(test)]
mod tests {
    fn t() { let _ = "}"; std::env::var("IN_A_TEST_MODULE"); }
}
#[cfg(test)]
fn helper() -> bool { std::env::var_os("IN_A_TEST_FN").is_some() }
fn also_live<'a>(k: &'a str) -> bool { std::env::var_os("LIVE_OS").is_some() && std::env::var(k).is_ok() }
fn listed() -> Vec<(String, String)> { std::env::vars().collect() }
fn passed_on() { let _ = ["A"].map(std::env::var); }
"#####;
        let (code, mask) = without_test_items(text);
        assert_eq!(code.len(), text.len());
        let reads = env_reads(&code, &mask);
        let literal: Vec<&str> = reads.iter().filter_map(|(l, _)| l.as_deref()).collect();
        assert_eq!(literal, ["LIVE", "LIVE_OS"]);
        let other: Vec<&str> = reads.iter().filter(|(l, _)| l.is_none()).map(|(_, o)| o.as_str()).collect();
        assert_eq!(other, ["k", "", "a use of std::env::var without a call"]);
    }

    #[test]
    fn mod_items_outside_tests_are_followed() {
        let code = "mod a;\npub(crate) mod b;\n#[cfg(test)]\nmod c;\n#[path = \"d_impl.rs\"]\npub mod d;\nmod e {\n}\n";
        let (code, _) = without_test_items(code);
        assert_eq!(
            module_files(&code),
            [("a".to_owned(), None), ("b".to_owned(), None), ("d".to_owned(), Some("d_impl.rs".to_owned()))]
        );
    }

    #[test]
    fn dependencies_are_the_dependencies_table_only() {
        let manifest = "[package]\nname = \"x\"\n\n[dependencies]\na.workspace = true\nb = { workspace = true }\n# c\n\
                        \n[dev-dependencies]\nd.workspace = true\n";
        assert_eq!(dependencies(manifest), ["a", "b"]);
    }

    #[test]
    fn the_binary_is_built_from_the_framework_crates() {
        let crates = binary_crates(&workspace_root());
        for c in ["hcloud-ccm", "hcloud-provider", "cloud-controller-manager", "controller-runtime", "leader-election"]
        {
            assert!(crates.contains(c), "{c} in {crates:?}");
        }
        for c in ["test-harness", "hcloud-fake", "sandbox"] {
            assert!(!crates.contains(c), "{c} (a dev-dependency or tool) in {crates:?}");
        }
    }
}
