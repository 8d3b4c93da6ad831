//! The crate's layering, read from its source: every dependency between
//! top-level modules points one way (no circle), the leaves — `clock`, and
//! `limits` above it — stand on nothing else in the crate, and inside each
//! module of [`UNTANGLED`] no files import each other in a circle.
//!
//! A module depends on another when any of its files, tests included,
//! names it by path in code: `use crate::x`, `crate::x::y`,
//! `use crate::{x, ..}`, or a `super::` path that leads to it. Comments
//! and string literals are not code and are skipped. A module's root file
//! (`mod.rs`) composes its children and is not counted as one of them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Edges that still close a circle between top-level modules: each is one
/// arrow pointing up. The test fails if one of them disappears, so the list
/// only ever shrinks.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

/// Modules that must depend on nothing in the crate but the ones listed.
const LEAVES: &[(&str, &[&str])] = &[("clock", &[]), ("limits", &["clock"])];

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

/// The module path of a file under `src/`: `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`.
fn module_path(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file.trim_start_matches("src/").split('/').map(str::to_owned).collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" {
            parts.push(stem.to_owned());
        }
    }
    parts
}

/// Every crate path `text` (the file `file`) names in code, each as its
/// segments from the crate root: `crate::x::y` and `super::` paths that
/// climb out to the root, with `{..}` groups expanded.
fn references(file: &str, text: &str) -> Vec<Vec<String>> {
    let code = strip(text);
    let tokens = tokenize(&code);
    let here = module_path(file);
    let mut inline: Vec<(usize, usize)> = Vec::new(); // (brace depth at open, ..)
    let mut depth = 0usize;
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        match token {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(open, _)| *open == depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).map(String::as_str) == Some("{") => inline.push((depth, i)),
            _ => {}
        }
        let after_dollar = i > 0 && tokens[i - 1] == "$";
        let after_path = i > 0 && tokens[i - 1] == "::";
        if token == "crate" && !after_dollar && !after_path && tokens.get(i + 1).map(String::as_str) == Some("::") {
            let (paths, next) = path_tree(&tokens, i + 2);
            found.extend(paths);
            i = next;
            continue;
        }
        if token == "super" && !after_path && tokens.get(i + 1).map(String::as_str) == Some("::") {
            let mut base: Vec<String> = here.clone();
            base.extend(std::iter::repeat_n(String::new(), inline.len()));
            let mut j = i;
            while tokens.get(j).map(String::as_str) == Some("super")
                && tokens.get(j + 1).map(String::as_str) == Some("::")
            {
                base.pop();
                j += 2;
            }
            let (paths, next) = path_tree(&tokens, j);
            // Within an inline module of this file, or into the file itself: not a dependency.
            if !base.iter().any(String::is_empty) {
                for path in paths {
                    let resolved: Vec<String> = base.iter().cloned().chain(path).collect();
                    if !resolved.starts_with(&here) {
                        found.push(resolved);
                    }
                }
            }
            i = next;
            continue;
        }
        i += 1;
    }
    found.retain(|path: &Vec<String>| path.first().is_some_and(|first| first != "*" && first != "self"));
    found
}

/// The paths of a path tree starting at `tokens[at]` (`a::b`, `a::{b, c::d}`),
/// and the index after it.
fn path_tree(tokens: &[String], at: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    let mut i = at;
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                let mut paths = Vec::new();
                i += 1;
                loop {
                    match tokens.get(i).map(String::as_str) {
                        Some("}") => return (paths, i + 1),
                        Some(",") => i += 1,
                        None => return (paths, i),
                        Some(_) => {
                            let (inner, next) = path_tree(tokens, i);
                            for path in inner {
                                paths.push(prefix.iter().cloned().chain(path).collect());
                            }
                            // Skip an `as name` rename.
                            i = if tokens.get(next).map(String::as_str) == Some("as") { next + 2 } else { next };
                        }
                    }
                }
            }
            Some(word) if is_word(word) || word == "*" => {
                prefix.push(word.to_owned());
                if tokens.get(i + 1).map(String::as_str) == Some("::") {
                    i += 2;
                } else {
                    return (vec![prefix], i + 1);
                }
            }
            _ => return (if prefix.is_empty() { Vec::new() } else { vec![prefix] }, i),
        }
    }
}

fn is_word(token: &str) -> bool {
    token.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Words, `::`, and single punctuation characters.
fn tokenize(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_owned());
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
            i += 1;
        }
    }
    tokens
}

/// `text` with comments, string literals and char literals blanked out.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut nesting = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    nesting += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    nesting -= 1;
                    i += 2;
                    if nesting == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !prev_is_word(&chars, i) {
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('"') if (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some(_) => j += 1,
                }
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let close = if next == Some('\\') {
                (i + 2..chars.len().min(i + 12)).find(|&k| chars[k] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.push_str("' '");
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_word(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// Every circle in `graph`: its strongly connected parts of more than one
/// node, each sorted.
/// Asserts `graph` has no circle; `explain` words the failure from the circles found (as `{:?}`).
fn assert_no_circle(graph: &Graph, explain: impl Fn(&str) -> String) {
    let circles = circles(graph);
    assert!(circles.is_empty(), "{}", explain(&format!("{circles:?}")));
}

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
