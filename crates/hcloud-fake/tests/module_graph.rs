//! The crate's module dependency graph is a DAG (no import cycles between files); the checker
//! and what it counts as an import are in [`test_harness::module_graph`], which
//! `test-harness`'s `module_graph` test runs over every crate of the workspace. This test keeps
//! the fake's own check and the edges known to exist in it (so a checker that sees nothing
//! cannot pass).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;

use test_harness::module_graph::{ModuleGraph, assert_module_graph_is_acyclic};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_checker_sees_the_fakes_known_edges() {
    let graph = ModuleGraph::read(&src(), &src().join("lib.rs")).unwrap();
    assert!(graph.depends_on("http/mod.rs", "handle.rs"), "http uses the handle");
    assert!(graph.depends_on("handle.rs", "state/mod.rs"), "handle uses the state");
}

#[test]
fn module_graph_has_no_cycles() {
    assert_module_graph_is_acyclic(&src());
}
