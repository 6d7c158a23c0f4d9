//! docs/development.md's layout, checked against the tree: every file and
//! folder its layout block names exists, and every source file of the
//! crates in [`EVERY_FILE_NAMED`] is named there. Needs no database.
//!
//! The block is read as it is written: an entry at the left margin is a path
//! from the root of the workspace (a folder ends with `/`); an entry indented
//! by two spaces is a path inside the folder above it; text two spaces or
//! more after an entry describes it, and a line indented further goes on
//! describing. `a, b` names two entries, `link -> target` a symbolic link.
//! Paths a description mentions (`src/batch.rs`, `docs/http.md`,
//! `tests/common`) and the migrations the `migrations/` entry lists
//! (`0001_queue`) must exist too, inside the entry's folder or from the root.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Crates every `.rs` file under whose `src/` the layout must name (or a
/// folder it is in), but `lib.rs` and `main.rs`. Only the worker for now:
/// other crates' files are being moved while this is written, and the check
/// that each path named exists already catches a layout left behind by a
/// move; add a crate here once its layout is settled.
const EVERY_FILE_NAMED: &[&str] = &["worker"];

/// File endings that make a word of a description a path to check.
const EXTENSIONS: &[&str] = &["rs", "md", "toml", "sql", "sh", "csv", "json", "lock"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A path the layout names, from the root of the workspace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Named {
    /// Line in the document, from 1.
    line: usize,
    path: String,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// An entry: a file, or a folder if it ends with `/`.
    Entry,
    /// A symbolic link (`link -> target`), which must resolve.
    Link,
    /// Mentioned in a description: inside the entry's folder, or from the root.
    Mentioned,
}

/// The lines of the first fenced block after `## Layout`, with their line
/// numbers in the document.
fn layout_block(doc: &str) -> Vec<(usize, &str)> {
    let mut lines = doc.lines().enumerate().map(|(i, l)| (i + 1, l));
    lines.by_ref().find(|(_, l)| l.trim() == "## Layout").expect("docs/development.md has a `## Layout` section");
    lines.by_ref().find(|(_, l)| l.starts_with("```")).expect("the layout section has a fenced block");
    lines.take_while(|(_, l)| !l.starts_with("```")).collect()
}

/// The entry column of a line and the description after it (two spaces or
/// more apart).
fn split_entry(text: &str) -> (&str, &str) {
    match text.find("  ") {
        Some(at) => (&text[..at], text[at..].trim()),
        None => (text.trim_end(), ""),
    }
}

/// Whether `word` reads as a migration's name (`0001_queue`).
fn is_migration(word: &str) -> bool {
    let (number, name) = word.split_at(word.len().min(5));
    number.len() == 5
        && number[..4].bytes().all(|b| b.is_ascii_digit())
        && number.ends_with('_')
        && !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The words of a description that name paths: a file with one of
/// [`EXTENSIONS`], or `a/b` whose first part is a folder there is
/// (`tests/common`, not `HTTP/1`); and under `migrations/`, migrations.
fn mentioned(description: &str, folder: &str, root: &Path) -> Vec<String> {
    let mut paths = Vec::new();
    for word in description.split_whitespace() {
        let word = word.trim_matches(|c: char| "`()[]{}<>,;:'\"".contains(c));
        if word.is_empty()
            || word.starts_with(['/', '.', '-'])
            || !word.chars().all(|c| c.is_ascii_alphanumeric() || "_-./*".contains(c))
        {
            continue;
        }
        if folder == "migrations/" && is_migration(word) {
            paths.push(format!("{word}.sql"));
            continue;
        }
        let has_extension =
            word.rsplit_once('.').is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext));
        let under_a_folder = word.split_once('/').is_some_and(|(first, _)| {
            !first.is_empty() && (root.join(folder).join(first).is_dir() || root.join(first).is_dir())
        });
        if has_extension || under_a_folder {
            paths.push(word.to_string());
        }
    }
    paths
}

/// Every path the layout block names, in order. `root` is consulted only to
/// tell a path in a description from a word with a slash.
fn named_paths(block: &[(usize, &str)], root: &Path) -> Result<Vec<Named>, String> {
    let mut named = Vec::new();
    // The folder indented entries are in ("" at the root).
    let mut folder = String::new();
    for &(line, text) in block {
        if text.trim().is_empty() {
            continue;
        }
        let indent = text.len() - text.trim_start().len();
        let (entries, description) = match indent {
            0 | 2 => split_entry(text.trim_start()),
            _ => ("", text.trim()),
        };
        if indent == 0 {
            folder = match entries.ends_with('/') {
                true => entries.to_string(),
                false => String::new(),
            };
        } else if indent == 2 && folder.is_empty() {
            return Err(format!("line {line}: an indented entry under no folder: {text:?}"));
        }
        let base = if indent == 0 { String::new() } else { folder.clone() };
        for entry in entries.split(", ").filter(|e| !e.is_empty()) {
            match entry.split_once(" -> ") {
                // The link must resolve; where to is the link's business.
                Some((link, _target)) => named.push(Named { line, path: format!("{base}{link}"), kind: Kind::Link }),
                None => named.push(Named { line, path: format!("{base}{entry}"), kind: Kind::Entry }),
            }
        }
        for path in mentioned(description, &folder, root) {
            named.push(Named { line, path: format!("{folder}\n{path}"), kind: Kind::Mentioned });
        }
    }
    Ok(named)
}

/// Where a named path is, if it exists: a mentioned one (`folder\npath`)
/// inside its entry's folder, else from the root.
fn resolve(root: &Path, named: &Named) -> Option<PathBuf> {
    match named.kind {
        Kind::Entry => {
            let path = root.join(named.path.trim_end_matches('/'));
            let found = if named.path.ends_with('/') { path.is_dir() } else { path.is_file() };
            found.then_some(path)
        }
        Kind::Link => {
            let path = root.join(&named.path);
            let is_link = path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink());
            (is_link && path.exists()).then_some(path)
        }
        Kind::Mentioned => {
            let (folder, path) = named.path.split_once('\n').unwrap_or(("", &named.path));
            [root.join(folder).join(path), root.join(path)].into_iter().find(|p| p.exists())
        }
    }
}

/// Every `.rs` file under `dir`, from `root`.
fn rust_files(root: &Path, dir: &Path, found: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(root, &path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(root).expect("under the root");
            found.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn the_layout_names_only_what_exists_and_every_file_of_the_checked_crates() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("docs/development.md")).expect("docs/development.md");
    let block = layout_block(&doc);
    let named = named_paths(&block, &root).unwrap_or_else(|e| panic!("docs/development.md's layout: {e}"));
    assert!(named.len() > 50, "the layout block names only {} paths: is it still read right?", named.len());

    let mut problems = Vec::new();
    for n in &named {
        if resolve(&root, n).is_none() {
            let shown = n.path.replace('\n', "");
            problems.push(format!("line {}: {shown} ({:?}) is not in the tree", n.line, n.kind));
        }
    }

    let entries: BTreeSet<&str> = named.iter().filter(|n| n.kind == Kind::Entry).map(|n| n.path.as_str()).collect();
    let folders: Vec<&str> = entries.iter().copied().filter(|p| p.ends_with('/')).collect();
    for krate in EVERY_FILE_NAMED {
        let mut files = Vec::new();
        rust_files(&root, &root.join(krate).join("src"), &mut files);
        files.sort();
        for file in files {
            let own = [format!("{krate}/src/lib.rs"), format!("{krate}/src/main.rs")];
            let in_a_named_folder = folders.iter().any(|f| f.len() > krate.len() + 1 && file.starts_with(f));
            if !own.contains(&file) && !entries.contains(file.as_str()) && !in_a_named_folder {
                problems.push(format!("{file} is not in the layout"));
            }
        }
    }
    assert!(problems.is_empty(), "docs/development.md's layout and the tree disagree:\n  {}", problems.join("\n  "));
}

#[test]
fn reads_the_forms_the_layout_is_written_in() {
    let root = root();
    let block = "\
Cargo.toml            the workspace
core/                 crate: see src/lib.rs
  src/request.rs        the requests          src/limits.rs   limits
  migrations -> ../migrations
  src/sql/              statements over HTTP/1,
                        going on: tests/common, /metrics
migrations/           0001_queue, 0002_validation (docs/sql.md)
server/
  templates/, assets/   pages
";
    let lines: Vec<(usize, &str)> = block.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
    let named = named_paths(&lines, &root).expect("parsed");
    let shown: Vec<(usize, String, Kind)> = named.iter().map(|n| (n.line, n.path.replace('\n', "|"), n.kind)).collect();
    let expected = [
        (1, "Cargo.toml", Kind::Entry),
        (2, "core/", Kind::Entry),
        (2, "core/|src/lib.rs", Kind::Mentioned),
        (3, "core/src/request.rs", Kind::Entry),
        (3, "core/|src/limits.rs", Kind::Mentioned),
        (4, "core/migrations", Kind::Link),
        (5, "core/src/sql/", Kind::Entry),
        (6, "core/|tests/common", Kind::Mentioned),
        (7, "migrations/", Kind::Entry),
        (7, "migrations/|0001_queue.sql", Kind::Mentioned),
        (7, "migrations/|0002_validation.sql", Kind::Mentioned),
        (7, "migrations/|docs/sql.md", Kind::Mentioned),
        (8, "server/", Kind::Entry),
        (9, "server/templates/", Kind::Entry),
        (9, "server/assets/", Kind::Entry),
    ];
    let expected: Vec<(usize, String, Kind)> = expected.iter().map(|&(l, p, k)| (l, p.to_string(), k)).collect();
    assert_eq!(shown, expected);
    for n in &named {
        assert!(resolve(&root, n).is_some(), "{n:?} exists");
    }
    let gone = Named { line: 1, path: "worker/src/cheapest.rs".into(), kind: Kind::Entry };
    assert!(resolve(&root, &gone).is_none());
    let orphan = [(1, "  src/lib.rs   indented under nothing")];
    assert!(named_paths(&orphan, &root).is_err());
}
