//! Every crate of the workspace has an acyclic file import graph (see
//! [`test_harness::module_graph`] for what counts as an import). On failure the test names each
//! cycle as a list of files and one circle through them; with `--nocapture` it prints every
//! crate's graph by layer (`cargo test -p test-harness --test integration module_graph:: -- --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;

use test_harness::module_graph::{ModuleGraph, crate_sources, describe_cycles};

#[test]
fn every_crate_module_graph_has_no_cycles() {
    let crates_dir = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let sources = crate_sources(crates_dir).unwrap();
    // A listing that finds nothing cannot pass: the workspace has these crates at least.
    for name in ["cloud-controller-manager", "hcloud-api", "hcloud-fake", "hcloud-provider", "test-harness"] {
        assert!(sources.contains(&crates_dir.join(name).join("src")), "{name} not found in {sources:?}");
    }
    // A checker that sees no imports cannot pass either: edges known to exist are found.
    let fake = crates_dir.join("hcloud-fake/src");
    let graph = ModuleGraph::read(&fake, &fake.join("lib.rs")).unwrap();
    assert!(graph.depends_on("http/mod.rs", "handle.rs"), "hcloud-fake's http uses the handle");
    assert!(graph.depends_on("handle.rs", "state/mod.rs"), "hcloud-fake's handle uses the state");
    let mut problems = Vec::new();
    for src in &sources {
        let graphs = ModuleGraph::read_all(src).unwrap();
        assert!(!graphs.is_empty(), "{} has no crate root", src.display());
        let crate_name = src.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
        problems.extend(describe_cycles(&graphs).into_iter().map(|d| format!("{crate_name}: {d}")));
        for graph in &graphs {
            println!("{crate_name}:");
            for (l, files) in graph.layers().iter().enumerate() {
                println!("  layer {l}: {}", files.join(", "));
            }
        }
    }
    assert!(problems.is_empty(), "import cycles between files:\n{}", problems.join("\n"));
}
