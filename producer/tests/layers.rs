//! The crate's modules stand in floors (lib.rs, "Layout"): no module imports,
//! through `crate::`, a module that imports it back, however far round; the
//! ground floor imports nothing of the crate. Read from the sources, so that
//! a new `use` that closes a cycle fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crate's top-level modules, each with the modules its files name
/// through `crate::` (in `use` lines and paths alike).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<PathBuf> = Vec::new();
    let mut folders = vec![src.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("a source folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let module_of = |path: &Path| -> String {
        let relative = path.strip_prefix(&src).expect("under src");
        let first = relative.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
        first.trim_end_matches(".rs").to_string()
    };
    let modules: BTreeSet<String> = files.iter().map(|p| module_of(p)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let me = module_of(file);
        if me == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("a source file");
        // Only the code: not the tests at the foot of a file, nor comments
        // (doc links name modules without importing them).
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let named = graph.entry(me.clone()).or_default();
        for (at, _) in code.match_indices("crate::") {
            let rest = &code[at + "crate::".len()..];
            // `crate::x::…`, or `crate::{x, y::…}`.
            let words: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group.split('}').next().unwrap_or_default().split(',').collect(),
                None => vec![rest],
            };
            for word in words {
                let name: String = word.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if modules.contains(&name) && name != me {
                    named.insert(name);
                }
            }
        }
    }
    graph
}

/// Depth first, with the path so far: a module met again on it is a cycle.
fn visit<'a>(
    m: &'a str,
    graph: &'a BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
) {
    if let Some(at) = path.iter().position(|p| *p == m) {
        panic!("an import cycle: {} -> {m}", path[at..].join(" -> "));
    }
    if !done.insert(m) {
        return;
    }
    path.push(m);
    for next in graph.get(m).into_iter().flatten() {
        visit(next, graph, path, done);
    }
    path.pop();
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = imports();
    assert!(graph.len() > 10, "read too few modules: {graph:?}");
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        visit(m, &graph, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_ground_floor_imports_nothing_of_the_crate() {
    let graph = imports();
    for ground in ["new_request", "retry", "keys", "lines", "json"] {
        let named = graph.get(ground).unwrap_or_else(|| panic!("no module {ground}"));
        assert!(named.is_empty(), "{ground} imports {named:?}");
    }
}
