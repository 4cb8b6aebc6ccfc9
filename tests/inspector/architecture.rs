//! The layers of ARCHITECTURE.md, as the code has them: its crate table lists every
//! crate of the workspace from the bottom up, and each crate's manifest depends only on
//! crates listed before it; each crate's root (`lib.rs`, or `main.rs` for `lrbc-bench`)
//! lists its top-level modules one line each (`//! - `module`: …`), and a module uses
//! (`crate::MODULE`, `super::MODULE` in its own file, outside test code) only modules
//! listed above it.

#![allow(
    clippy::expect_used,
    reason = "a test: an unreadable source tree fails it"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Edges = BTreeMap<String, BTreeSet<String>>;

/// Modules that are not layers of the picture: test and fuzzing support.
const NOT_LAYERS: &[&str] = &["testutil", "fuzzing"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A crate of the workspace.
struct Crate {
    /// The package's name (`lrbc-live`).
    name: String,
    /// The name its code is used by (`lrbc_live`).
    ident: String,
    src: PathBuf,
    /// Its top-level modules.
    modules: BTreeSet<String>,
}

/// The workspace's crates, the app first.
fn crates() -> Vec<Crate> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .expect("crates/ is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    let mut out = vec![("lrbc-inspector".to_string(), root().join("src"))];
    for dir in dirs {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a crate's folder is named")
            .to_string();
        out.push((name, dir.join("src")));
    }
    out.into_iter()
        .map(|(name, src)| Crate {
            ident: name.replace('-', "_"),
            modules: top_level_modules(&src),
            name,
            src,
        })
        .collect()
}

fn top_level_modules(src: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(src).expect("src/ is readable") {
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
/// directory of a module's tests) and generated code left out; each with whether it is
/// the module's own file (where `super::` is the crate's root).
fn files_of(src: &Path, module: &str) -> Vec<(PathBuf, bool)> {
    let mut out = Vec::new();
    let file = src.join(format!("{module}.rs"));
    if file.is_file() {
        out.push((file, true));
    }
    let dir = src.join(module);
    for path in rs_files_under(&dir, |name| name != "tests") {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name != "tests.rs" && !name.contains("generated") {
            let own = name == "mod.rs" && path.parent() == Some(dir.as_path());
            out.push((path, own));
        }
    }
    out
}

/// The `.rs` files under `dir` (none when it does not exist), going into the folders
/// whose name `enter` takes.
fn rs_files_under(dir: &Path, enter: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            assert!(!dir.exists(), "{} is not readable", dir.display());
            continue;
        };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if enter(name) {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") {
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

/// Every module named right after `PREFIX::` (`crate`, or a crate's name), or at the
/// top level of a `PREFIX::{…}` group.
fn crate_paths(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let pattern = format!("{prefix}::");
    for (at, _) in code.match_indices(&pattern) {
        // A whole path's first segment: not the tail of `a::lrbc::` or of `xlrbc::`.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c == ':' || c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + pattern.len()..];
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

/// Each module's edges: to modules of its own crate (`crate::`, and `super::` in its
/// own file) and of the workspace's other crates (`lrbc::`, `lrbc_live::`, …). Module
/// names are unique across the workspace, so an edge is the module's name.
fn edges_in_code() -> (Edges, Vec<String>) {
    let crates = crates();
    let mut edges = Edges::new();
    let mut problems = Vec::new();
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for c in &crates {
        for m in &c.modules {
            if let Some(other) = owner.insert(m, &c.name) {
                problems.push(format!(
                    "the module `{m}` is in both {other} and {}",
                    c.name
                ));
            }
        }
    }
    for c in &crates {
        for m in &c.modules {
            let mut deps = BTreeSet::new();
            for (file, at_root) in files_of(&c.src, m) {
                let text = std::fs::read_to_string(&file).expect("a source file is readable");
                let mut code = production_code(&text);
                if at_root {
                    code = code.replace("super::", "crate::");
                }
                // `::lrbc::…`: a crate named where a module of the same name is in scope.
                code = code.replace(" ::", " ");
                for (prefix, theirs) in crates.iter().map(|o| {
                    let prefix = if o.ident == c.ident {
                        "crate"
                    } else {
                        &o.ident
                    };
                    (prefix, &o.modules)
                }) {
                    deps.extend(
                        crate_paths(&code, prefix)
                            .into_iter()
                            .filter(|d| theirs.contains(d)),
                    );
                }
            }
            deps.remove(m);
            edges.insert(m.clone(), deps);
        }
    }
    (edges, problems)
}

/// ARCHITECTURE.md's crate table: the crates in its rows `| `crate` | what it is |`, in
/// order.
fn crates_in_architecture_md() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md is readable");
    text.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // "", the two cells, "".
            if cells.len() != 4 {
                return None;
            }
            cells[1]
                .strip_prefix("`lrbc")
                .and_then(|c| c.strip_suffix('`'))
                .map(|c| format!("lrbc{c}"))
        })
        .collect()
}

/// The workspace crates a crate's manifest depends on (normal dependencies).
fn manifest_deps(src: &Path, names: &BTreeSet<String>) -> BTreeSet<String> {
    let manifest =
        std::fs::read_to_string(src.parent().expect("src has a parent").join("Cargo.toml"))
            .expect("a crate's Cargo.toml is readable");
    let mut out = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        let key = line.split(['.', ' ', '=']).next().unwrap_or_default();
        if in_deps && names.contains(key) {
            out.insert(key.to_string());
        }
    }
    out
}

#[test]
fn architecture_md_lists_every_crate_above_the_crates_it_depends_on() {
    let crates = crates();
    let names: BTreeSet<String> = crates.iter().map(|c| c.name.clone()).collect();
    let order = crates_in_architecture_md();
    let mut problems = Vec::new();
    for c in &crates {
        let Some(at) = order.iter().position(|n| *n == c.name) else {
            problems.push(format!("the crate `{}` has no row", c.name));
            continue;
        };
        for dep in manifest_deps(&c.src, &names) {
            if !order[..at].contains(&dep) {
                problems.push(format!(
                    "`{}` depends on `{dep}`, which is not listed below it",
                    c.name
                ));
            }
        }
    }
    for n in order.iter().filter(|n| !names.contains(*n)) {
        problems.push(format!("the row `{n}` names no crate of the workspace"));
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md and the workspace differ:\n{}",
        problems.join("\n")
    );
}

/// The modules a crate's root lists (`//! - `module`: …`), in order.
fn modules_listed(src: &Path) -> Vec<String> {
    let root_file = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|p| p.is_file())
        .expect("a crate has a lib.rs or main.rs");
    let text = std::fs::read_to_string(root_file).expect("a crate root is readable");
    text.lines()
        .take_while(|l| l.starts_with("//!"))
        .filter_map(|l| {
            let rest = l.strip_prefix("//! - `")?;
            Some(rest.split('`').next()?.to_string())
        })
        .collect()
}

#[test]
fn each_crate_lists_its_modules_and_a_module_uses_only_those_above_it() {
    let (edges, mut problems) = edges_in_code();
    for c in crates() {
        let listed = modules_listed(&c.src);
        let set: BTreeSet<String> = listed.iter().cloned().collect();
        if set != c.modules || set.len() != listed.len() {
            problems.push(format!(
                "`{}`'s root lists the modules {listed:?}; it has {:?}",
                c.name, c.modules
            ));
            continue;
        }
        for (k, m) in listed.iter().enumerate() {
            for d in edges.get(m).into_iter().flatten() {
                if let Some(at) = listed.iter().position(|x| x == d)
                    && at > k
                {
                    problems.push(format!(
                        "`{}`: `{m}` uses `{d}`, which is listed below it",
                        c.name
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the modules' floors and the code differ:\n{}",
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
    let found = crate_paths(&code, "crate");
    let want: BTreeSet<String> = ["layout", "rings", "rpc", "segment"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(found, want);
}

#[test]
fn a_crate_s_paths_are_found_only_as_a_path_s_first_segment() {
    let code = "use lrbc::layout::X;\nuse lrbc_live::{follower, traffic::Y};\nuse crate::rings::lrbc::Z;\n";
    let want = |v: &[&str]| -> BTreeSet<String> { v.iter().map(|s| s.to_string()).collect() };
    assert_eq!(crate_paths(code, "lrbc"), want(&["layout"]));
    assert_eq!(
        crate_paths(code, "lrbc_live"),
        want(&["follower", "traffic"])
    );
}

/// The types a file declares public to more than itself (`pub`, `pub(crate)`,
/// `pub(super)`, `pub(in …)` structs, enums, unions, traits and type aliases), by name.
fn public_types(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in code.lines() {
        let Some(rest) = line.trim_start().strip_prefix("pub") else {
            continue;
        };
        let rest = match rest.strip_prefix('(') {
            Some(scoped) => scoped.split_once(')').map_or("", |(_, after)| after),
            None => rest,
        };
        let mut words = rest.split_whitespace();
        if let (Some("struct" | "enum" | "union" | "trait" | "type"), Some(name)) =
            (words.next(), words.next())
        {
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

/// No two public types share a name for different things. A type of a platform backend
/// (`unix.rs` beside `windows.rs`) is the same thing on each platform and counts once.
#[test]
fn no_two_public_types_of_the_workspace_share_a_name() {
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for krate in crates() {
        let mut files: Vec<(PathBuf, bool)> = Vec::new();
        for module in top_level_modules(&krate.src) {
            files.extend(files_of(&krate.src, &module));
        }
        for (file, _) in files {
            let text = std::fs::read_to_string(&file).expect("a source file is readable");
            let shown = file
                .strip_prefix(root())
                .unwrap_or(&file)
                .display()
                .to_string();
            let backend = shown.replace("/windows.rs", "/unix.rs");
            for name in public_types(&production_code(&text)) {
                let files = seen.entry(name).or_default();
                if !files
                    .iter()
                    .any(|f| f.replace("/windows.rs", "/unix.rs") == backend)
                {
                    files.push(shown.clone());
                }
            }
        }
    }
    let shared: Vec<String> = seen
        .iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(name, files)| format!("{name}: {}", files.join(", ")))
        .collect();
    assert!(
        shared.is_empty(),
        "public types share a name:\n{}",
        shared.join("\n")
    );
}

#[test]
fn public_types_are_found_with_any_visibility_and_not_in_other_lines() {
    let code = "pub struct A;\npub(crate) enum B {}\n  pub(super) trait C {}\n\
                pub(in crate::x) type D = u8;\nstruct Private;\npub fn e() {}\n\
                let s = \"pub struct F\";\npub struct G<T>(T);\n";
    assert_eq!(public_types(code), ["A", "B", "C", "D", "G"]);
}

/// The most words a module doc's opening sentence has.
const OPENING_WORDS: usize = 25;

/// A module doc's opening sentence: its `//!` text up to the first full stop, colon or
/// semicolon that ends a word, or up to its first blank line; None when the file opens
/// with no `//!` doc.
fn opening_sentence(text: &str) -> Option<String> {
    let mut words: Vec<&str> = Vec::new();
    for line in text.lines().skip_while(|l| l.trim().is_empty()) {
        let Some(doc) = line.trim_start().strip_prefix("//!") else {
            break;
        };
        if doc.trim().is_empty() {
            if words.is_empty() {
                continue;
            }
            break;
        }
        for word in doc.split_whitespace() {
            words.push(word);
            if word.ends_with(['.', ':', ';']) {
                return Some(words.join(" "));
            }
        }
    }
    (!words.is_empty()).then(|| words.join(" "))
}

/// Every module, crate roots included, opens with a doc whose first sentence says what
/// it is, briefly.
#[test]
fn every_module_opens_with_one_short_sentence() {
    let mut wrong = Vec::new();
    for krate in crates() {
        let mut files: Vec<PathBuf> = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| krate.src.join(f))
            .filter(|p| p.is_file())
            .collect();
        for module in top_level_modules(&krate.src) {
            files.extend(files_of(&krate.src, &module).into_iter().map(|(f, _)| f));
        }
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a source file is readable");
            let shown = file.strip_prefix(root()).unwrap_or(&file).display();
            match opening_sentence(&text) {
                None => wrong.push(format!("{shown}: no module doc")),
                Some(s) if s.split_whitespace().count() > OPENING_WORDS => {
                    wrong.push(format!("{shown}: {s}"));
                }
                Some(_) => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "module docs that do not open with one sentence of at most {OPENING_WORDS} words:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_opening_sentence_ends_at_its_stop_or_its_paragraph() {
    assert_eq!(
        opening_sentence("//! The map: more.\n//! Further.\nfn f() {}\n").as_deref(),
        Some("The map:")
    );
    assert_eq!(
        opening_sentence("\n//! A title\n//!\n//! Then prose.\n").as_deref(),
        Some("A title")
    );
    assert_eq!(opening_sentence("// a comment\n//! late\n"), None);
    assert_eq!(opening_sentence("use x;\n"), None);
}

/// The homes of `unsafe`: each file that lifts the workspace's denial of `unsafe_code`,
/// the module it lifts it for (None: the whole file or crate), and the words that name
/// the home in ARCHITECTURE.md's rule.
const UNSAFE_HOMES: &[(&str, Option<&str>, &str)] = &[
    ("crates/lrbc-platform/src/lib.rs", None, "`lrbc-platform`"),
    (
        "crates/lrbc/src/lib.rs",
        Some("segment"),
        "`lrbc`'s `segment`",
    ),
    ("crates/lrbc/src/rpc/mod.rs", None, "`lrbc`'s `rpc`"),
    ("src/ui/mod.rs", Some("renderer"), "`ui::renderer`"),
    (
        "tests/inspector/memory.rs",
        None,
        "`tests/inspector/memory.rs`",
    ),
    (
        "tests/inspector/common/win32.rs",
        None,
        "`tests/inspector/common/win32.rs`",
    ),
    (
        "tests/inspector/windows_console.rs",
        None,
        "`windows_console.rs`",
    ),
    ("tests/inspector/windows_gui.rs", None, "`windows_gui.rs`"),
];

/// Every `.rs` file of the workspace (build output left out), relative to its root.
fn rust_files() -> Vec<String> {
    let root = root();
    rs_files_under(&root, |name| name != "target" && !name.starts_with('.'))
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(&root).unwrap_or(&path);
            rel.to_string_lossy().replace('\\', "/")
        })
        .collect()
}

/// The `allow` and `expect` attributes (inner or outer) that name `lint`: each one's
/// first and last line.
fn lint_lifts(lines: &[&str], lint: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let lifts = ["#[allow(", "#![allow(", "#[expect(", "#![expect("]
            .iter()
            .any(|p| line.starts_with(p));
        if !lifts {
            i += 1;
            continue;
        }
        let mut end = i;
        while end + 1 < lines.len() && !lines[end].trim_end().ends_with(")]") {
            end += 1;
        }
        let names = lines[i..=end].iter().any(|l| {
            l.split("//")
                .next()
                .unwrap_or_default()
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| word == lint)
        });
        if names {
            out.push((i, end));
        }
        i = end + 1;
    }
    out
}

/// The module declared by the first `mod` item after `line`, if any.
fn next_module(lines: &[&str], line: usize) -> Option<String> {
    lines.iter().skip(line + 1).find_map(|l| {
        let l = l.trim();
        let rest = l
            .strip_prefix("pub mod ")
            .or_else(|| l.strip_prefix("mod "))?;
        Some(rest.trim_end_matches([';', '{', ' ']).to_string())
    })
}

/// `unsafe` is denied for the whole workspace (`[workspace.lints]`); the files that lift
/// the denial are exactly the homes ARCHITECTURE.md names, each lifting it only for the
/// module it names.
#[test]
fn unsafe_code_is_allowed_only_in_the_homes_architecture_md_names() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains("unsafe_code = \"deny\""),
        "the workspace denies unsafe_code"
    );
    let architecture =
        std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let rule = architecture
        .split("\n- ")
        .find(|item| item.starts_with("`unsafe` only"))
        .expect("ARCHITECTURE.md has the rule of `unsafe`");
    let rule = rule.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut wrong = Vec::new();
    let mut lifting = BTreeSet::new();
    for file in rust_files() {
        let text = std::fs::read_to_string(root().join(&file)).expect("a source file");
        let lines: Vec<&str> = text.lines().collect();
        for (start, end) in lint_lifts(&lines, "unsafe_code") {
            lifting.insert(file.clone());
            match UNSAFE_HOMES.iter().find(|(f, _, _)| *f == file) {
                None => wrong.push(format!("{file}:{}: lifts unsafe_code", start + 1)),
                Some((_, Some(module), _)) => {
                    let found = next_module(&lines, end);
                    if found.as_deref() != Some(*module) {
                        wrong.push(format!(
                            "{file}:{}: lifts unsafe_code for {found:?}, not `{module}`",
                            start + 1
                        ));
                    }
                }
                Some((_, None, _)) => {}
            }
        }
    }
    for (file, _, named) in UNSAFE_HOMES {
        if !lifting.contains(*file) {
            wrong.push(format!(
                "{file}: listed as a home of unsafe but lifts nothing"
            ));
        }
        if !rule.contains(named) {
            wrong.push(format!("ARCHITECTURE.md's rule does not name {named}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "unsafe outside the homes ARCHITECTURE.md names:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn lint_lifts_are_found_in_attributes_of_one_or_many_lines_only() {
    let lines = [
        "#![allow(unsafe_code, reason = \"x\")]",
        "let s = \"unsafe_code\";",
        "#[expect(",
        "    clippy::foo,",
        "    unsafe_code,",
        "    reason = \"y\"",
        ")]",
        "mod m;",
        "#[allow(unsafe_op_in_unsafe_fn)]",
        "#[allow(dead_code)] // unsafe_code",
    ];
    assert_eq!(lint_lifts(&lines, "unsafe_code"), vec![(0, 0), (2, 6)]);
    assert_eq!(next_module(&lines, 6).as_deref(), Some("m"));
}

#[test]
fn the_module_after_an_attribute_is_found() {
    let lines = ["#[expect(unsafe_code)]", "pub mod segment;", "mod other;"];
    assert_eq!(next_module(&lines, 0).as_deref(), Some("segment"));
    assert_eq!(next_module(&lines, 1).as_deref(), Some("other"));
    assert_eq!(next_module(&lines, 2), None);
}
