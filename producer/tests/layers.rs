//! The crate's modules stand in floors (lib.rs, "Layout"): no module
//! imports, through `crate::` or `super::`, a module that imports it back,
//! however far round; the ground floor imports nothing of the crate. Read
//! from the sources, so that a new `use` (or a path in code) that closes a
//! cycle fails here. Needs no database.
//!
//! Every file is a module (`client/enqueue.rs` is `client::enqueue`); a path
//! through a name the crate root re-exports (`crate::Client`) counts as a
//! path to the module that defines it (`client`), so a re-export hides no
//! edge; names the root re-exports from `seatq-core` are outside the crate.
//! Cycles are looked for between files and between top-level modules (the
//! files of `client/` as one).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path from the crate root, `""` for the root itself.
type Module = String;

/// Which modules each module names.
type Graph = BTreeMap<Module, BTreeSet<Module>>;

/// The modules that import nothing of the crate. (`sql` stands above
/// `availability` and `venue`, whose types some of its statements read.)
const GROUND_FLOOR: &[&str] = &["new_request", "retry", "keys", "lines", "json", "availability"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src`, with the module it is.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut found = BTreeMap::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("a source folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(src).expect("under src").with_extension("");
                let mut parts: Vec<String> =
                    relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                    parts.pop();
                }
                found.insert(parts.join("::"), path);
            }
        }
    }
    found
}

/// The code of a file: not its tests (at the foot of the file), nor
/// comments (a doc link names a module without importing it).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a source file");
    text.split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .map(|line| line.split_once("//").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths of a use tree (or of a path in code) starting at `text`:
/// `a::b`, `a::{b, c::{d, e}}`, `{a, b}`; each as its segments. Stops at
/// whatever cannot go on a path (`(`, `;`, a space, ...).
fn paths(text: &str) -> Vec<Vec<String>> {
    fn tree(chars: &[char], at: &mut usize) -> Vec<Vec<String>> {
        let skip = |at: &mut usize| {
            while *at < chars.len() && chars[*at].is_whitespace() {
                *at += 1;
            }
        };
        skip(at);
        if chars.get(*at) == Some(&'{') {
            *at += 1;
            let mut all = Vec::new();
            loop {
                skip(at);
                match chars.get(*at) {
                    None => return all,
                    Some('}') => {
                        *at += 1;
                        return all;
                    }
                    Some(',') => *at += 1,
                    Some(_) => {
                        let before = *at;
                        all.extend(tree(chars, at));
                        if *at == before {
                            *at += 1;
                        }
                    }
                }
            }
        }
        let start = *at;
        while *at < chars.len() && (chars[*at].is_alphanumeric() || chars[*at] == '_') {
            *at += 1;
        }
        let word: String = chars[start..*at].iter().collect();
        if word.is_empty() {
            return vec![Vec::new()];
        }
        if chars.get(*at) == Some(&':') && chars.get(*at + 1) == Some(&':') {
            *at += 2;
            return tree(chars, at)
                .into_iter()
                .map(|mut rest| {
                    rest.insert(0, word.clone());
                    rest
                })
                .collect();
        }
        // `x as y` names x.
        let mut after = *at;
        while after < chars.len() && chars[after].is_whitespace() {
            after += 1;
        }
        if chars[after..].starts_with(&['a', 's']) && chars.get(after + 2).is_some_and(|c| c.is_whitespace()) {
            *at = after + 2;
            skip(at);
            while *at < chars.len() && (chars[*at].is_alphanumeric() || chars[*at] == '_') {
                *at += 1;
            }
        }
        vec![vec![word]]
    }
    let chars: Vec<char> = text.chars().collect();
    tree(&chars, &mut 0)
}

/// The names the crate root re-exports from its own modules
/// (`pub use crate::{...}`), each with its full path.
fn reexports(root: &str) -> BTreeMap<String, Vec<String>> {
    let mut names = BTreeMap::new();
    for (at, _) in root.match_indices("pub use crate::") {
        for path in paths(&root[at + "pub use crate::".len()..]) {
            if let Some(last) = path.last() {
                names.insert(last.clone(), path);
            }
        }
    }
    names
}

/// Which modules each file names, through `crate::` or `super::`.
fn imports(src: &Path) -> Graph {
    let modules = modules(src);
    let root = modules.get("").map(|p| code(p)).unwrap_or_default();
    let reexported = reexports(&root);
    // The module a path leads into: its longest prefix that is a module.
    let module_of = |path: &[String]| -> Module {
        (0..=path.len()).rev().map(|n| path[..n].join("::")).find(|m| modules.contains_key(m)).unwrap_or_default()
    };
    let mut graph = Graph::new();
    for (me, file) in &modules {
        if me.is_empty() {
            continue;
        }
        let named = graph.entry(me.clone()).or_default();
        let text = code(file);
        let parent: Vec<String> = {
            let mut p: Vec<String> = me.split("::").map(String::from).collect();
            p.pop();
            p
        };
        for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
            for (at, _) in text.match_indices(prefix) {
                // `self::super::x` and `crate::x` alike; not `foo_crate::x`.
                let before = text[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                for path in paths(&text[at + prefix.len()..]) {
                    let mut full = base.clone();
                    match path.first().and_then(|first| reexported.get(first)) {
                        Some(origin) if base.is_empty() => {
                            full.extend(origin.iter().cloned().chain(path[1..].to_vec()))
                        }
                        _ => full.extend(path),
                    }
                    let module = module_of(&full);
                    if !module.is_empty() && &module != me {
                        named.insert(module);
                    }
                }
            }
        }
    }
    graph
}

/// The graph with each module's files as one (`client::enqueue` is `client`).
fn top_level(graph: &Graph) -> Graph {
    let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
    let mut merged = Graph::new();
    for (m, named) in graph {
        let entry = merged.entry(top(m)).or_default();
        entry.extend(named.iter().map(|n| top(n)).filter(|n| *n != top(m)));
    }
    merged
}

/// A cycle of `graph`, if it has one, as the modules round it.
fn cycle(graph: &Graph) -> Option<Vec<String>> {
    /// Depth first, with the path so far: a module met again on it closes a cycle.
    fn visit<'a>(
        m: &'a str,
        graph: &'a Graph,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| *p == m) {
            return Some(path[at..].iter().chain([&m]).map(|s| s.to_string()).collect());
        }
        if !done.insert(m) {
            return None;
        }
        path.push(m);
        for next in graph.get(m).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = imports(&src());
    assert!(graph.len() > 20, "read too few modules: {graph:?}");
    assert!(graph["client::batches"].contains("batch"), "an edge missed: {graph:?}");
    if let Some(found) = cycle(&graph) {
        panic!("an import cycle between files: {}", found.join(" -> "));
    }
    if let Some(found) = cycle(&top_level(&graph)) {
        panic!("an import cycle between modules: {}", found.join(" -> "));
    }
}

#[test]
fn the_ground_floor_imports_nothing_of_the_crate() {
    let graph = top_level(&imports(&src()));
    for ground in GROUND_FLOOR {
        let named = graph.get(*ground).unwrap_or_else(|| panic!("no module {ground}"));
        assert!(named.is_empty(), "{ground} imports {named:?}");
    }
}

#[test]
fn the_check_finds_what_it_should() {
    let parsed = paths("{a, b::{c, d as e}, f::g};");
    assert_eq!(parsed, [vec!["a"], vec!["b", "c"], vec!["b", "d"], vec!["f", "g"]]);
    assert_eq!(paths("x::y::Z::new(1)"), [vec!["x", "y", "Z", "new"]]);
    let graph: Graph = [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"])]
        .into_iter()
        .map(|(m, named)| (m.to_string(), named.into_iter().map(String::from).collect()))
        .collect();
    assert_eq!(cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    let merged = top_level(&[("x::y".to_string(), ["x".to_string(), "z".to_string()].into())].into());
    assert_eq!(merged["x"], ["z".to_string()].into());
}
