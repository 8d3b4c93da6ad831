//! The crate's layering, read from its source and checked against the layer
//! table of `docs/architecture.md` ("Layers"), so the page and the code
//! cannot drift apart:
//!
//! * the table places every top-level module of `src/` (the library's and
//!   the binary's) exactly once;
//! * a module depends only on modules of the layers below its own, and on
//!   those listed before it in its own layer's row: the rows are read
//!   bottom up and each row left to right, one order for the whole crate,
//!   so no two modules can depend on each other in a circle;
//! * the leaves stand on nothing else in the crate but what [`LEAVES`]
//!   allows each, and [`LEAVES`] names exactly the table's first row;
//! * inside every module, at every depth, no files or folders import each
//!   other in a circle.
//!
//! A module depends on another when any of its files, tests included,
//! names it by path in code: `use crate::x`, `crate::x::y`,
//! `use crate::{x, ..}`, `baton::x` (in the binary), or a `super::` path
//! that leads to it. Comments and string literals are not code and are
//! skipped. A module's root file (`mod.rs`, or `x.rs` beside `x/`)
//! composes its children and is not counted as one of them; but a name the
//! root imports from a child (`pub use child::Item`, or a private `use`,
//! which children see too) leads to that child, so a path through the root
//! still counts as the dependency it is.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

#[path = "layers/reading.rs"]
mod reading;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use reading::{imports, references};

/// The leaves, each with the only modules of the crate it may use: stricter
/// than the layer order, which would let a leaf use any leaf before it.
const LEAVES: &[(&str, &[&str])] =
    &[("clock", &[]), ("limits", &["clock"]), ("h1", &[]), ("egress", &["h1"]), ("secret", &[]), ("random_id", &[])];

/// Which children of one module each child names: a child's name, and the
/// children it depends on with one file and path that shows it.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

#[test]
fn the_layer_table_places_every_module_once() {
    let source = Crate::read();
    let table = Layers::read();
    let mut seen = BTreeSet::new();
    let twice: Vec<&String> = table.rows.iter().flat_map(|(_, modules)| modules).filter(|m| !seen.insert(*m)).collect();
    assert!(twice.is_empty(), "docs/architecture.md places these modules in more than one place: {twice:?}");
    let missing: Vec<&String> = source.modules.iter().filter(|m| !seen.contains(m)).collect();
    assert!(missing.is_empty(), "docs/architecture.md's layer table does not place these modules: {missing:?}");
    let unknown: Vec<&&String> = seen.iter().filter(|m| !source.modules.contains(**m)).collect();
    assert!(unknown.is_empty(), "docs/architecture.md's layer table names modules src/ does not have: {unknown:?}");
}

#[test]
fn every_module_stands_only_on_what_is_below_it() {
    let table = Layers::read();
    let graph = Crate::read().graph(&[]);
    let mut upward = Vec::new();
    for (from, deps) in &graph {
        for (to, shown_by) in deps {
            if let (Some(low), Some(high)) = (table.rank(to), table.rank(from))
                && low >= high
            {
                upward.push(format!(
                    "{from} ({}) -> {to} ({}), in {shown_by}",
                    table.layer_of(from).unwrap_or("?"),
                    table.layer_of(to).unwrap_or("?")
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "these dependencies point up or sideways against docs/architecture.md's layer table (rows bottom up, each row \
         left to right):\n  {}",
        upward.join("\n  ")
    );
}

#[test]
fn the_leaves_stand_on_nothing_else_in_the_crate() {
    let table = Layers::read();
    let leaves: BTreeSet<&str> = LEAVES.iter().map(|(leaf, _)| *leaf).collect();
    let row: BTreeSet<&str> =
        table.rows.first().map(|(_, modules)| modules.iter().map(String::as_str).collect()).unwrap_or_default();
    assert_eq!(leaves, row, "LEAVES names the modules of the layer table's first row");
    let source = Crate::read();
    let graph = source.graph(&[]);
    for (leaf, allowed) in LEAVES {
        assert!(source.modules.contains(*leaf), "no module {leaf} in src/");
        let extra: Vec<&String> = graph
            .get(*leaf)
            .into_iter()
            .flat_map(BTreeMap::keys)
            .filter(|dep| !allowed.contains(&dep.as_str()))
            .collect();
        assert!(extra.is_empty(), "{leaf} is a leaf and may only use {allowed:?}, but uses {extra:?}");
    }
}

#[test]
fn no_files_of_a_module_import_each_other_in_a_circle() {
    let source = Crate::read();
    let folders = source.folders();
    assert!(folders.len() > 20, "every folder of src/ is checked: {folders:?}");
    let mut tangled = Vec::new();
    for folder in &folders {
        let graph = source.graph(folder);
        for circle in circles(&graph) {
            let arrows: Vec<String> = circle
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|(to, _)| circle.contains(to))
                        .map(move |(to, shown_by)| format!("    {from} -> {to}, in {shown_by}"))
                })
                .collect();
            tangled.push(format!("src/{}: {circle:?}\n{}", folder.join("/"), arrows.join("\n")));
        }
    }
    assert!(tangled.is_empty(), "files of a module that import each other in a circle:\n{}", tangled.join("\n"));
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
    let binary = references("src/cli/serve.rs", "use baton::{AppState, config::Config};\nlet x = baton::core::go();");
    assert_eq!(
        binary,
        vec![vec!["AppState"], vec!["config", "Config"], vec!["core", "go"]],
        "the binary names the library as baton::"
    );
}

#[test]
fn the_reader_sees_what_a_root_imports() {
    let root = "pub use body::ResponseBody;\nuse pool::{Pool, self};\npub(crate) use self::way_out::{Egress as Out, Trust};\n\
                use crate::h1::Step;\nuse std::sync::Arc;\nfn f() { use connect::Io; }\nmod tests { use super::*; }";
    let found = imports("src/egress/mod.rs", root);
    let named = |name: &str| found.iter().find(|(bound, _)| bound == name).map(|(_, path)| path.join("::"));
    assert_eq!(named("ResponseBody").as_deref(), Some("egress::body::ResponseBody"));
    assert_eq!(named("Pool").as_deref(), Some("egress::pool::Pool"));
    assert_eq!(named("pool").as_deref(), Some("egress::pool::self"), "`self` in a group binds the module");
    assert_eq!(named("Out").as_deref(), Some("egress::way_out::Egress"), "a rename binds its new name");
    assert_eq!(named("Trust").as_deref(), Some("egress::way_out::Trust"));
    assert_eq!(named("Step").as_deref(), Some("h1::Step"));
    assert_eq!(named("Io"), None, "a `use` inside a function is not the module's");
    let crate_root = imports("src/lib.rs", "pub use http::{AppState, app};");
    assert_eq!(
        crate_root,
        vec![
            ("AppState".into(), vec!["http".into(), "AppState".into()]),
            ("app".into(), vec!["http".into(), "app".into()])
        ]
    );
}

#[test]
fn the_layer_table_is_read_in_order() {
    let table = Layers::read();
    assert!(table.rows.len() > 5, "the table has its rows: {:?}", table.rows);
    assert!(table.rank("clock") < table.rank("http"), "the first row is the bottom");
    let (first, _) = &table.rows[0];
    assert_eq!(first, "leaves");
}

/// The layer table of `docs/architecture.md`: each row's layer and its
/// modules, the bottom row first.
struct Layers {
    rows: Vec<(String, Vec<String>)>,
}

impl Layers {
    fn read() -> Layers {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
        let page = std::fs::read_to_string(&path).expect("docs/architecture.md");
        let section = page
            .split("\n## ")
            .find(|section| section.starts_with("Layers\n"))
            .expect("docs/architecture.md has a section ## Layers");
        let rows: Vec<(String, Vec<String>)> = section
            .lines()
            .filter(|line| line.starts_with('|'))
            .skip(2) // the header and the line under it
            .map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let layer = cells.get(1).copied().unwrap_or_default().to_owned();
                let modules = cells
                    .get(2)
                    .copied()
                    .unwrap_or_default()
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_owned)
                    .collect();
                (layer, modules)
            })
            .collect();
        Layers { rows }
    }

    /// Where `module` stands: its row, then its place in the row.
    fn rank(&self, module: &str) -> Option<(usize, usize)> {
        self.rows
            .iter()
            .enumerate()
            .find_map(|(row, (_, modules))| modules.iter().position(|m| m == module).map(|place| (row, place)))
    }

    fn layer_of(&self, module: &str) -> Option<&str> {
        self.rank(module).map(|(row, _)| self.rows[row].0.as_str())
    }
}

/// One source file: its path under `src/` without `.rs`, split at `/`
/// (`admission/gate/mod`), the crate paths it names, and the names it
/// imports at its top level.
struct File {
    parts: Vec<String>,
    references: Vec<Vec<String>>,
    imports: Vec<(String, Vec<String>)>,
}

/// The crate's source: its top-level modules and their files, and the
/// crate roots' own imports.
struct Crate {
    modules: BTreeSet<String>,
    files: Vec<File>,
    root_imports: Vec<(String, Vec<String>)>,
}

impl Crate {
    fn read() -> Crate {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut modules = BTreeSet::new();
        let mut root_imports = Vec::new();
        for root in ["lib.rs", "main.rs"] {
            let text = std::fs::read_to_string(src.join(root)).expect("src/lib.rs and src/main.rs");
            modules.extend(
                text.lines()
                    .filter_map(|line| {
                        line.trim().strip_prefix("pub mod ").or_else(|| line.trim().strip_prefix("mod "))
                    })
                    .filter_map(|rest| rest.strip_suffix(';'))
                    .map(str::to_owned),
            );
            root_imports.extend(imports(&format!("src/{root}"), &text));
        }
        assert!(
            modules.len() > 5 && modules.contains("cli"),
            "src/lib.rs and src/main.rs declare the modules: {modules:?}"
        );
        let mut files = Vec::new();
        for module in &modules {
            let mut paths = Vec::new();
            collect(&src.join(module), &mut paths);
            paths.push(src.join(format!("{module}.rs")));
            for path in paths.into_iter().filter(|path| path.is_file()) {
                let relative = path.strip_prefix(&src).expect("under src").to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&path).expect("readable source");
                let file = format!("src/{relative}");
                files.push(File {
                    parts: relative.trim_end_matches(".rs").split('/').map(str::to_owned).collect(),
                    references: references(&file, &text),
                    imports: imports(&file, &text),
                });
            }
        }
        Crate { modules, files, root_imports }
    }

    /// Every module with children: the crate itself (`[]`) and each folder of `src/`.
    fn folders(&self) -> BTreeSet<Vec<String>> {
        self.files.iter().flat_map(|file| (0..file.parts.len()).map(|depth| file.parts[..depth].to_vec())).collect()
    }

    /// Which children of `folder` (its files and folders; the top-level
    /// modules for the crate, `[]`) each one names, directly or through a
    /// name the folder's root imports from another child.
    fn graph(&self, folder: &[String]) -> Graph {
        let depth = folder.len();
        let within = |parts: &[String]| parts.len() > depth && parts[..depth] == *folder;
        let children: BTreeSet<&String> = self
            .files
            .iter()
            .filter(|file| within(&file.parts))
            .map(|file| &file.parts[depth])
            .filter(|child| *child != "mod")
            .collect();
        let root_imports = if folder.is_empty() {
            &self.root_imports
        } else {
            let root = self.files.iter().find(|file| {
                file.parts == folder
                    || (file.parts.len() == depth + 1 && within(&file.parts) && file.parts[depth] == "mod")
            });
            &root.unwrap_or_else(|| panic!("src/{} has no mod.rs and no .rs beside it", folder.join("/"))).imports
        };
        assert!(
            root_imports
                .iter()
                .all(|(name, path)| name != "*" || !path.get(depth).is_some_and(|child| children.contains(child))),
            "the root of src/{} imports a child's names with a glob, which hides which child a name comes from",
            folder.join("/")
        );
        let child_of = |path: &[String]| -> Option<String> {
            if !within(path) {
                return None;
            }
            let next = &path[depth];
            if children.contains(next) {
                return Some(next.clone());
            }
            root_imports
                .iter()
                .find(|(name, _)| name == next)
                .and_then(|(_, imported)| {
                    imported.get(depth).filter(|child| within(imported) && children.contains(child))
                })
                .cloned()
        };
        let mut graph = Graph::new();
        for file in self.files.iter().filter(|file| within(&file.parts) && file.parts[depth] != "mod") {
            let from = &file.parts[depth];
            let deps = graph.entry(from.clone()).or_default();
            for path in &file.references {
                if let Some(to) = child_of(path).filter(|to| to != from) {
                    deps.entry(to).or_insert_with(|| format!("src/{}.rs: {}", file.parts.join("/"), path.join("::")));
                }
            }
        }
        graph
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

/// Every circle in `graph`: its strongly connected parts of more than one
/// node, each sorted.
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = graph.keys().chain(graph.values().flat_map(BTreeMap::keys)).collect();
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(node) = todo.pop() {
            for next in graph.get(&node).into_iter().flat_map(BTreeMap::keys) {
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
