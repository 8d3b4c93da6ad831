//! How the layering test reads Rust source: the crate paths a file names
//! in code, and the names it imports at its top level, with comments and
//! literals blanked out first.

/// Every crate path `text` (the file `file`) names in code, each as its
/// segments from the crate root: `crate::x::y`, `baton::x::y` (the binary's
/// modules name the library so; the library cannot name itself so) and
/// `super::` paths that climb out to the root, with `{..}` groups expanded.
pub fn references(file: &str, text: &str) -> Vec<Vec<String>> {
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
        let root = token == "crate" || token == "baton";
        if root && !after_dollar && !after_path && tokens.get(i + 1).map(String::as_str) == Some("::") {
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

/// The names `text` (the file `file`) binds at its top level with `use`,
/// public or not (its child modules see both), each with the crate path it
/// leads to: `use child::X`, `pub use self::child::{X, Y as Z}`,
/// `use crate::x::Y`. A path that starts elsewhere (another crate, `std`)
/// is kept as written; a glob binds the name `*`.
pub fn imports(file: &str, text: &str) -> Vec<(String, Vec<String>)> {
    let tokens = tokenize(&strip(text));
    let here = module_path(file);
    let mut found = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "{" => depth += 1,
            "}" => depth = depth.saturating_sub(1),
            "use" if depth == 0 => {
                let (bindings, next) = use_tree(&tokens, i + 1);
                for (path, name) in bindings {
                    found.push((name, absolute(&here, path)));
                }
                i = next;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// `path`, as written in the module `here`, from the crate root: `crate::`
/// and `super::` resolved, `self::` and a bare first segment taken as
/// `here`'s own.
fn absolute(here: &[String], path: Vec<String>) -> Vec<String> {
    let mut segments = path.into_iter().peekable();
    match segments.peek().map(String::as_str) {
        Some("crate") => segments.skip(1).collect(),
        Some("self") => here.iter().cloned().chain(segments.skip(1)).collect(),
        Some("super") => {
            let mut base = here.to_vec();
            while segments.peek().map(String::as_str) == Some("super") {
                base.pop();
                segments.next();
            }
            base.into_iter().chain(segments).collect()
        }
        _ => here.iter().cloned().chain(segments).collect(),
    }
}

/// The paths of a path tree starting at `tokens[at]` (`a::b`, `a::{b, c::d}`),
/// and the index after it.
fn path_tree(tokens: &[String], at: usize) -> (Vec<Vec<String>>, usize) {
    let (bindings, next) = use_tree(tokens, at);
    (bindings.into_iter().map(|(path, _)| path).collect(), next)
}

/// The paths of a use tree starting at `tokens[at]`, each with the name it
/// binds (its last segment, the segment before a `self`, or its `as`
/// rename), and the index after it.
fn use_tree(tokens: &[String], at: usize) -> (Vec<(Vec<String>, String)>, usize) {
    let mut prefix: Vec<String> = Vec::new();
    let mut i = at;
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                let mut bindings = Vec::new();
                i += 1;
                loop {
                    match tokens.get(i).map(String::as_str) {
                        Some("}") => return (bindings, i + 1),
                        Some(",") => i += 1,
                        None => return (bindings, i),
                        Some(_) => {
                            let (inner, next) = use_tree(tokens, i);
                            for (path, name) in inner {
                                let name = if name == "self" { prefix.last().cloned().unwrap_or(name) } else { name };
                                bindings.push((prefix.iter().cloned().chain(path).collect(), name));
                            }
                            i = next;
                        }
                    }
                }
            }
            Some(word) if is_word(word) || word == "*" => {
                prefix.push(word.to_owned());
                if tokens.get(i + 1).map(String::as_str) == Some("::") {
                    i += 2;
                    continue;
                }
                let (name, next) = match tokens.get(i + 1).map(String::as_str) {
                    Some("as") => (tokens.get(i + 2).cloned().unwrap_or_default(), i + 3),
                    _ => (word.to_owned(), i + 1),
                };
                return (vec![(prefix, name)], next);
            }
            _ => {
                let name = prefix.last().cloned().unwrap_or_default();
                return (if prefix.is_empty() { Vec::new() } else { vec![(prefix, name)] }, i);
            }
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

/// The module path of a file under `src/`: `src/a/b.rs` and `src/a/b/mod.rs`
/// are `a::b`; `src/lib.rs` and `src/main.rs` are the root.
pub fn module_path(file: &str) -> Vec<String> {
    if matches!(file, "src/lib.rs" | "src/main.rs") {
        return Vec::new();
    }
    let mut parts: Vec<String> = file.trim_start_matches("src/").split('/').map(str::to_owned).collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" {
            parts.push(stem.to_owned());
        }
    }
    parts
}
