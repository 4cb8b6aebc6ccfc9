//! ARCHITECTURE.md's module table lists, for each top-level module of `src/`, the
//! modules it depends on. This test derives those edges from the code (every
//! `crate::MODULE` path outside test code) and fails when the table lists an edge the
//! code lacks or lacks one the code has.

#![allow(
    clippy::expect_used,
    reason = "a test: an unreadable source tree fails it"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Edges = BTreeMap<String, BTreeSet<String>>;

/// Modules that are not layers of the picture: test and fuzzing support.
const NOT_LAYERS: &[&str] = &["testutil", "fuzzing"];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn top_level_modules() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(src_dir()).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let is_module = path.is_dir() || path.extension().is_some_and(|e| e == "rs");
        if is_module && !["lib", "main"].contains(&stem) && !NOT_LAYERS.contains(&stem) {
            out.insert(stem.to_string());
        }
    }
    out
}

/// The Rust files of a top-level module, test files (`tests.rs`, and a `tests/`
/// directory of a module's tests) and generated code left out.
fn files_of(module: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let file = src_dir().join(format!("{module}.rs"));
    if file.is_file() {
        out.push(file);
    }
    let mut dirs = vec![src_dir().join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if name != "tests" {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" && !name.contains("generated") {
                out.push(path);
            }
        }
    }
    out
}

/// The text without line comments and without `#[cfg(test)]` modules.
fn production_code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let next = lines.get(i + 1).map_or("", |l| l.trim());
        if lines[i].trim() == "#[cfg(test)]" && next.starts_with("mod ") {
            if next.ends_with(';') {
                i += 2;
                continue;
            }
            // Skip the module's block, braces counted from its opening line.
            let mut depth = 0i32;
            let mut j = i + 1;
            while j < lines.len() {
                depth += lines[j].matches('{').count() as i32;
                depth -= lines[j].matches('}').count() as i32;
                if depth <= 0 {
                    break;
                }
                j += 1;
            }
            i = j + 1;
            continue;
        }
        let line = lines[i].split("//").next().unwrap_or_default();
        out.push_str(line);
        out.push('\n');
        i += 1;
    }
    out
}

/// Every module named right after `crate::`, or at the top level of a
/// `crate::{…}` group.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => start = true,
                    c if c.is_whitespace() => {}
                    _ if start && depth == 1 => {
                        out.insert(ident(&group[k..]));
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out
}

fn edges_in_code(modules: &BTreeSet<String>) -> Edges {
    modules
        .iter()
        .map(|m| {
            let mut deps = BTreeSet::new();
            for file in files_of(m) {
                let text = std::fs::read_to_string(&file).expect("a source file is readable");
                for dep in crate_paths(&production_code(&text)) {
                    if modules.contains(&dep) && &dep != m {
                        deps.insert(dep);
                    }
                }
            }
            (m.clone(), deps)
        })
        .collect()
}

/// The table rows `| `module` | what it is | `dep`, `dep` |` (or `—`).
fn edges_in_architecture_md() -> Edges {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(path).expect("ARCHITECTURE.md is readable");
    let mut out = Edges::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // "", module, what, depends on, ""
        if cells.len() != 5 {
            continue;
        }
        let Some(module) = cells[1].strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
            continue;
        };
        let deps = cells[3]
            .split(',')
            .map(|d| d.trim().trim_matches('`').to_string())
            .filter(|d| !d.is_empty() && d != "—")
            .collect();
        out.insert(module.to_string(), deps);
    }
    out
}

#[test]
fn the_module_table_of_architecture_md_lists_exactly_the_edges_the_code_has() {
    let modules = top_level_modules();
    let code = edges_in_code(&modules);
    let doc = edges_in_architecture_md();
    let mut problems = Vec::new();
    for m in &modules {
        let Some(listed) = doc.get(m) else {
            problems.push(format!("`{m}` has no row"));
            continue;
        };
        let has = &code[m];
        for d in has.difference(listed) {
            problems.push(format!(
                "`{m}` depends on `{d}`, which its row does not list"
            ));
        }
        for d in listed.difference(has) {
            problems.push(format!(
                "`{m}`'s row lists `{d}`, which the code does not use"
            ));
        }
    }
    for m in doc.keys().filter(|m| !modules.contains(*m)) {
        problems.push(format!("the row `{m}` names no module of src/"));
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md and the code differ:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_edge_finder_reads_paths_groups_and_leaves_tests_and_comments_out() {
    let code = production_code(
        "use crate::layout::Geometry;\n\
         use crate::{rings::X, rpc::{self, fb}};\n\
         // crate::ui in a comment\n\
         let a = crate::segment::now();\n\
         #[cfg(test)]\n\
         mod tests {\n    use crate::sim;\n}\n",
    );
    let found = crate_paths(&code);
    let want: BTreeSet<String> = ["layout", "rings", "rpc", "segment"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(found, want);
}
