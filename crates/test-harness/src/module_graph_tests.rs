#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn render(found: &[(Vec<String>, Vec<String>)]) -> Vec<String> {
    found
        .iter()
        .map(|(p, m)| {
            format!("{}{}", p.join("::"), if m.is_empty() { String::new() } else { format!(" in {}", m.join("::")) })
        })
        .collect()
}

#[test]
fn the_checker_sees_paths_and_not_comments_or_strings() {
    // Negative controls, so a checker that sees nothing cannot pass the real test.
    let found = paths(&lex(
        "use crate::wire::{Server, request::{A, B}};\nfn f() { super::bump(x); let s = \"crate::x::y\"; let r = r#\"crate::r::s\"#; let b = b\"crate::q\"; }\n// crate::http::z\n/* crate::c::d */\n#[cfg(test)]\nmod tests { use super::*; }",
    ));
    assert_eq!(
        render(&found),
        vec![
            "crate::wire::Server",
            "crate::wire::request::A",
            "crate::wire::request::B",
            "super::bump",
            "super in tests"
        ]
    );
}

#[test]
fn mod_declarations_carry_their_path_attribute_and_inline_parents() {
    let decls = mod_declarations(&lex(
        "mod a;\npub(crate) mod b;\n#[cfg(test)]\n#[path = \"c_tests.rs\"]\nmod tests;\nmod inline { mod d; }\nmod after;",
    ));
    let shown: Vec<String> = decls.iter().map(|d| format!("{:?} {} {:?}", d.inline, d.name, d.path)).collect();
    assert_eq!(
        shown,
        vec!["[] a None", "[] b None", "[] tests Some(\"c_tests.rs\")", "[\"inline\"] d None", "[] after None"]
    );
}

#[test]
fn tarjan_finds_each_cycle_once() {
    let mut e: BTreeMap<ModPath, BTreeMap<ModPath, ()>> = BTreeMap::new();
    let m = |s: &str| vec![s.to_owned()];
    e.entry(m("a")).or_default().insert(m("b"), ());
    e.entry(m("b")).or_default().insert(m("c"), ());
    e.entry(m("c")).or_default().insert(m("a"), ());
    e.entry(m("d")).or_default().insert(m("a"), ());
    let found = strongly_connected(&e);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].len(), 3);
}

#[test]
fn a_cycle_in_a_synthetic_crate_fails_with_its_files_and_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    write(
        &src,
        &[
            ("lib.rs", "mod options;\nmod args;\nmod leaf;\n"),
            ("options.rs", "use crate::args::LogFormat;\npub struct Options;\n"),
            (
                "args/mod.rs",
                "mod values;\npub use values::LogFormat;\npub fn f() -> crate::options::Options { todo!() }\n",
            ),
            ("args/values.rs", "pub enum LogFormat {}\nuse crate::leaf::X;\n"),
            ("leaf.rs", "pub struct X;\n// crate::options::Options in a comment is no import\n"),
        ],
    );
    let graphs = ModuleGraph::read_all(&src).unwrap();
    assert_eq!(graphs.len(), 1);
    let g = &graphs[0];
    assert_eq!(g.files(), vec!["args/mod.rs", "args/values.rs", "leaf.rs", "lib.rs", "options.rs"]);
    // `args::LogFormat` resolves to the re-export in args/mod.rs, not to values.rs.
    assert!(g.depends_on("options.rs", "args/mod.rs"));
    assert!(!g.depends_on("options.rs", "args/values.rs"));
    assert!(!g.depends_on("leaf.rs", "options.rs"), "comments are not imports");
    assert!(!g.depends_on("lib.rs", "options.rs"), "`mod` declarations are not imports");
    assert_eq!(
        g.cycles(),
        vec![Cycle {
            files: vec!["args/mod.rs".into(), "options.rs".into()],
            circle: "args/mod.rs → options.rs (crate::options::Options) → args/mod.rs (crate::args::LogFormat)".into(),
            imports: vec![
                "args/mod.rs → options.rs (crate::options::Options)".into(),
                "options.rs → args/mod.rs (crate::args::LogFormat)".into(),
            ],
        }]
    );
    let failure = std::panic::catch_unwind(|| assert_module_graph_is_acyclic(&src)).unwrap_err();
    let message = failure.downcast_ref::<String>().unwrap();
    assert!(message.contains("2 files: args/mod.rs, options.rs; circle: args/mod.rs → options.rs"), "{message}");

    // Cut the circle: the crate passes.
    write(&src, &[("args/mod.rs", "mod values;\npub use values::LogFormat;\n")]);
    assert_module_graph_is_acyclic(&src);
    let g = &ModuleGraph::read_all(&src).unwrap()[0];
    assert_eq!(
        g.layers(),
        vec![vec!["leaf.rs", "lib.rs"], vec!["args/values.rs"], vec!["args/mod.rs"], vec!["options.rs"]]
    );
}

#[test]
fn path_attributes_place_a_module_where_the_compiler_does() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    write(
        &src,
        &[
            ("main.rs", "mod lb;\nfn main() {}\n"),
            ("lb/mod.rs", "mod plan;\npub struct Spec;\n"),
            // plan.rs's tests live next to it; their `super` is `plan`, not `lb`.
            ("lb/plan.rs", "pub fn plan() {}\n#[cfg(test)]\n#[path = \"plan_tests.rs\"]\nmod tests;\n"),
            ("lb/plan_tests.rs", "use super::plan;\nuse super::super::Spec;\n"),
            ("bin/tool/main.rs", "mod helper;\nfn main() { helper::go() }\n"),
            ("bin/tool/helper.rs", "pub fn go() { crate::main() }\n"),
        ],
    );
    let graphs = ModuleGraph::read_all(&src).unwrap();
    assert_eq!(graphs.len(), 2, "main.rs and bin/tool/main.rs are crates of their own");
    assert_eq!(graphs[0].files(), vec!["lb/mod.rs", "lb/plan.rs", "lb/plan_tests.rs", "main.rs"]);
    assert!(graphs[0].depends_on("lb/plan_tests.rs", "lb/plan.rs"));
    assert!(graphs[0].depends_on("lb/plan_tests.rs", "lb/mod.rs"));
    assert!(!graphs[0].depends_on("lb/plan.rs", "lb/plan_tests.rs"));
    assert_eq!(graphs[1].files(), vec!["bin/tool/helper.rs", "bin/tool/main.rs"]);
    assert!(graphs[1].depends_on("bin/tool/main.rs", "bin/tool/helper.rs"));
    // helper → tool (crate::main) and tool → helper: a cycle inside the binary.
    assert_eq!(graphs[1].cycles().len(), 1);
}
