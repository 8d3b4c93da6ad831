//! The crate's layering, read from its source: every dependency between
//! top-level modules points one way (no circle), the leaves — `clock`, `h1`,
//! `limits` above `clock`, and the provider client `egress` above `h1` —
//! stand on nothing else in the crate, and inside each
//! module of [`UNTANGLED`] no files import each other in a circle.
//!
//! A module depends on another when any of its files, tests included,
//! names it by path in code: `use crate::x`, `crate::x::y`,
//! `use crate::{x, ..}`, or a `super::` path that leads to it. Comments
//! and string literals are not code and are skipped. A module's root file
//! (`mod.rs`) composes its children and is not counted as one of them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

#[path = "layers/reading.rs"]
mod reading;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use reading::references;

/// Edges that still close a circle between top-level modules: each is one
/// arrow pointing up. The test fails if one of them disappears, so the list
/// only ever shrinks.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

/// Modules that must depend on nothing in the crate but the ones listed.
const LEAVES: &[(&str, &[&str])] =
    &[("clock", &[]), ("limits", &["clock"]), ("h1", &[]), ("egress", &["h1"]), ("secret", &[])];

/// Modules whose files (or folders) must not import each other in a circle.
const UNTANGLED: &[&str] = &["admission", "clock", "config", "limits", "request", "resilience", "state"];

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn no_circle_between_top_level_modules() {
    let crate_graph = Crate::read();
    let mut graph = crate_graph.top_level();
    let mut stale = Vec::new();
    for (from, to) in KNOWN_UPWARD {
        let removed = graph.get_mut(*from).is_some_and(|deps| deps.remove(*to));
        if !removed {
            stale.push(format!("{from} -> {to}"));
        }
    }
    assert!(stale.is_empty(), "these known upward arrows are gone; take them off KNOWN_UPWARD: {stale:?}");
    assert_no_circle(&graph, |circles| {
        format!("top-level modules that depend on each other in a circle: {circles}\nthe graph:\n{}", show(&graph))
    });
}

#[test]
fn the_leaves_stand_on_nothing_else_in_the_crate() {
    let graph = Crate::read().top_level();
    for (leaf, allowed) in LEAVES {
        assert!(graph.contains_key(*leaf) || Crate::read().modules.contains(*leaf), "no module {leaf} in src/");
        let deps = graph.get(*leaf).cloned().unwrap_or_default();
        let extra: Vec<&String> = deps.iter().filter(|dep| !allowed.contains(&dep.as_str())).collect();
        assert!(extra.is_empty(), "{leaf} is a leaf and may only use {allowed:?}, but uses {extra:?}");
    }
}

#[test]
fn no_circle_between_the_files_of_an_untangled_module() {
    let source = Crate::read();
    for module in UNTANGLED {
        let graph = source.inside(module);
        assert_no_circle(&graph, |circles| {
            format!("files of {module} that import each other in a circle: {circles}\n{}", show(&graph))
        });
    }
}

#[test]
fn the_reader_sees_what_it_must() {
    let refs = references("src/limits/x.rs", "use crate::admission::Skip;\nfn f() { crate::state::Store::new(); }");
    assert_eq!(refs, vec![vec!["admission", "Skip"], vec!["state", "Store", "new"]]);
    let grouped = references("src/limits/x.rs", "use crate::{clock::later, config::{self, Config}};");
    assert_eq!(grouped, vec![vec!["clock", "later"], vec!["config", "self"], vec!["config", "Config"]]);
    let hidden = references("src/limits/x.rs", "// use crate::core;\n/* crate::http */ let s = \"crate::ops\";");
    assert!(hidden.is_empty(), "comments and strings are not code: {hidden:?}");
    let climbing = references("src/limits/gcra.rs", "use super::super::admission::Skip;\nmod tests { use super::*; }");
    assert_eq!(climbing, vec![vec!["admission", "Skip"]], "super:: out of the module is a crate path");
    let sibling = references("src/admission/shared.rs", "use super::gate::RequestGate;\nuse super::{Skip, Ticket};");
    assert_eq!(
        sibling,
        vec![vec!["admission", "gate", "RequestGate"], vec!["admission", "Skip"], vec!["admission", "Ticket"]],
        "super:: to a sibling is that sibling"
    );
    let lifetimes = references("src/limits/x.rs", "fn f<'a>(x: &'a str) -> char { let c = '\"'; crate::core::go(x) }");
    assert_eq!(lifetimes, vec![vec!["core", "go"]], "a lifetime or a char literal hides nothing");
}

/// The crate's source: its top-level modules and, for each file, the crate
/// paths it names.
struct Crate {
    modules: BTreeSet<String>,
    files: Vec<(PathBuf, Vec<Vec<String>>)>,
}

impl Crate {
    fn read() -> Crate {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let lib = std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
        let modules: BTreeSet<String> = lib
            .lines()
            .filter_map(|line| line.trim().strip_prefix("pub mod ").or_else(|| line.trim().strip_prefix("mod ")))
            .filter_map(|rest| rest.strip_suffix(';'))
            .map(str::to_owned)
            .collect();
        assert!(modules.len() > 5, "src/lib.rs declares the modules: {modules:?}");
        let mut files = Vec::new();
        for module in &modules {
            let mut paths = Vec::new();
            collect(&src.join(module), &mut paths);
            paths.push(src.join(format!("{module}.rs")));
            for path in paths.into_iter().filter(|path| path.is_file()) {
                let relative = path.strip_prefix(&src).expect("under src").to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&path).expect("readable source");
                files.push((PathBuf::from(relative.clone()), references(&format!("src/{relative}"), &text)));
            }
        }
        Crate { modules, files }
    }

    /// Which top-level modules each one names.
    fn top_level(&self) -> Graph {
        let mut graph = Graph::new();
        for (path, refs) in &self.files {
            let from = first_component(path);
            let deps = graph.entry(from.clone()).or_default();
            for target in refs.iter().filter_map(|path| path.first()) {
                if *target != from && self.modules.contains(target) {
                    deps.insert(target.clone());
                }
            }
        }
        graph
    }

    /// Which children of `module` (its files and folders) each one names.
    fn inside(&self, module: &str) -> Graph {
        let mut graph = Graph::new();
        for (path, refs) in &self.files {
            let parts: Vec<String> = components(path);
            if parts.first().map(String::as_str) != Some(module) || parts.len() < 2 {
                continue;
            }
            let from = parts[1].clone();
            if from == "mod" {
                // The module's root composes its children; it is not one of them.
                continue;
            }
            let deps = graph.entry(from.clone()).or_default();
            for reference in refs {
                if reference.first().map(String::as_str) == Some(module)
                    && let Some(child) = reference.get(1)
                    && *child != from
                    && self.has_child(module, child)
                {
                    deps.insert(child.clone());
                }
            }
        }
        graph
    }

    fn has_child(&self, module: &str, child: &str) -> bool {
        self.files.iter().any(|(path, _)| {
            let parts = components(path);
            parts.len() >= 2 && parts[0] == module && parts[1] == child && child != "mod"
        })
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// `admission/gate/mod.rs` → `["admission", "gate", "mod"]`, without `.rs`.
fn components(path: &Path) -> Vec<String> {
    path.iter().map(|part| part.to_string_lossy().trim_end_matches(".rs").to_owned()).collect()
}

fn first_component(path: &Path) -> String {
    components(path).into_iter().next().unwrap_or_default()
}

/// Asserts `graph` has no circle; `explain` words the failure from the circles found (as `{:?}`).
fn assert_no_circle(graph: &Graph, explain: impl Fn(&str) -> String) {
    let circles = circles(graph);
    assert!(circles.is_empty(), "{}", explain(&format!("{circles:?}")));
}

/// Every circle in `graph`: its strongly connected parts of more than one
/// node, each sorted.
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = graph.keys().chain(graph.values().flatten()).collect();
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(node) = todo.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> = nodes.iter().map(|node| (*node, reach(node))).collect();
    let mut found: Vec<Vec<String>> = Vec::new();
    for node in &nodes {
        let part: Vec<String> = nodes
            .iter()
            .filter(|other| {
                *other == node || (reachable[*node].contains(**other) && reachable[**other].contains(*node))
            })
            .map(|other| (*other).clone())
            .collect();
        if part.len() > 1 && !found.contains(&part) {
            found.push(part);
        }
    }
    found
}

fn show(graph: &Graph) -> String {
    graph.iter().map(|(from, to)| format!("  {from} -> {to:?}\n")).collect()
}
