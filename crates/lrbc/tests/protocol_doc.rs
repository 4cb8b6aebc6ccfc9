//! The field tables of `docs/protocol.md` are generated from the wire structs, so the
//! document cannot drift from the code: each table sits between marker comments,
//!
//! ```text
//! <!-- fields:LrbcHeader begin -->
//! | offset | size | field | type | atomic | meaning |
//! …
//! <!-- fields:LrbcHeader end -->
//! ```
//!
//! and this test renders it from `LrbcHeader::FIELDS` (and the other headers) and
//! compares. `UPDATE_DOCS=1 cargo test -p lrbc --test protocol_doc` rewrites the tables instead.

use std::fmt::Write as _;
use std::path::PathBuf;

use lrbc::layout::fields::{FieldKind, FieldSpec};
use lrbc::layout::headers::{LrbcHeader, LuckyHeader, LuckyRingHeader, RingHeader};

/// The command that brings the document up to date.
const UPDATE_COMMAND: &str = "UPDATE_DOCS=1 cargo test -p lrbc --test protocol_doc";

/// Every wire struct with a table in the document, by the name its markers use.
fn tables() -> [(&'static str, &'static [FieldSpec]); 4] {
    [
        ("LrbcHeader", LrbcHeader::FIELDS),
        ("LuckyHeader", LuckyHeader::FIELDS),
        ("RingHeader", RingHeader::FIELDS),
        ("LuckyRingHeader", LuckyRingHeader::FIELDS),
    ]
}

fn protocol_md_path() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/protocol.md"
    ))
}

/// The wire type of a field as the document shows it.
fn type_label(field: &FieldSpec) -> String {
    match field.kind {
        FieldKind::U8 => "u8".into(),
        FieldKind::U32 | FieldKind::Magic => "u32".into(),
        FieldKind::U64 => "u64".into(),
        FieldKind::I64 => "i64".into(),
        FieldKind::Blob | FieldKind::Reserved => format!("u8[{}]", field.size_bytes),
    }
}

/// One Markdown table of a struct's fields, padding and reserved bytes included.
fn render_table(fields: &[FieldSpec]) -> String {
    let mut table = String::from(
        "| offset | size | field | type | atomic | meaning |\n|---:|---:|---|---|---|---|\n",
    );
    for field in fields {
        let name = if field.is_reserved() {
            "—".to_string()
        } else {
            format!("`{}`", field.name)
        };
        let atomic = if field.atomic { "atomic" } else { "" };
        let meaning = field.doc.replace('|', "\\|");
        // Writing to a String cannot fail.
        let _ = writeln!(
            table,
            "| {} | {} | {name} | {} | {atomic} | {meaning} |",
            field.offset_bytes,
            field.size_bytes,
            type_label(field),
        );
    }
    table
}

fn begin_marker(name: &str) -> String {
    format!("<!-- fields:{name} begin -->\n")
}

fn end_marker(name: &str) -> String {
    format!("<!-- fields:{name} end -->")
}

/// The byte range of the text between a table's markers, or why it cannot be found.
fn block_range(doc: &str, name: &str) -> Result<std::ops::Range<usize>, String> {
    let begin = begin_marker(name);
    let end = end_marker(name);
    let starts: Vec<usize> = doc.match_indices(&begin).map(|(i, _)| i).collect();
    let start = match starts[..] {
        [i] => i + begin.len(),
        [] => return Err(format!("no line `{}`", begin.trim_end())),
        _ => return Err(format!("more than one line `{}`", begin.trim_end())),
    };
    let Some(length) = doc[start..].find(&end) else {
        return Err(format!("no `{end}` after `{}`", begin.trim_end()));
    };
    Ok(start..start + length)
}

#[test]
fn field_tables_in_protocol_md_match_the_wire_structs() {
    let path = protocol_md_path();
    let original = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let update = std::env::var_os("UPDATE_DOCS").is_some_and(|v| v == "1");

    let mut doc = original.clone();
    let mut stale = Vec::new();
    for (name, fields) in tables() {
        let range = block_range(&doc, name)
            .unwrap_or_else(|e| panic!("{}: the table of {name}: {e}", path.display()));
        let rendered = render_table(fields);
        if doc[range.clone()] != rendered {
            stale.push(name);
            doc.replace_range(range, &rendered);
        }
    }

    if update {
        if doc != original {
            std::fs::write(&path, &doc)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            eprintln!(
                "rewrote the tables of {} in {}",
                stale.join(", "),
                path.display()
            );
        }
        return;
    }
    assert!(
        stale.is_empty(),
        "{}: the field tables of {} differ from the wire structs in src/layout/headers.rs; \
         run `{UPDATE_COMMAND}` to regenerate them",
        path.display(),
        stale.join(", "),
    );
}
