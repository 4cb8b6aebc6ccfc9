//! Traffic written by an independent producer (Google's flatbuffers Python runtime with
//! code generated from our schema, ring entries written by hand from spec 4) is listed
//! by `traffic --json` with every field right.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Stdio;

use common::*;
use serde_json::Value;

fn compare(expected: &Value, got: &Value, path: &str) {
    match expected {
        Value::Object(map) => {
            for (k, v) in map {
                compare(v, &got[k], &format!("{path}.{k}"));
            }
        }
        Value::Array(items) => {
            let g = got
                .as_array()
                .unwrap_or_else(|| panic!("{path}: not an array: {got}"));
            assert_eq!(items.len(), g.len(), "{path}");
            for (i, (e, g)) in items.iter().zip(g).enumerate() {
                compare(e, g, &format!("{path}[{i}]"));
            }
        }
        Value::Number(n) => {
            let (e, g) = (n.as_f64().unwrap(), got.as_f64().unwrap_or(f64::NAN));
            assert_eq!(e, g, "{path}");
        }
        other => assert_eq!(other, got, "{path}"),
    }
}

#[test]
fn envelopes_from_an_independent_producer_are_listed_with_every_field() {
    let name = unique_name("pyproducer");
    let mut producer = std::process::Command::new("python3")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/ring_producer.py"))
        .args(["--name", &name, "--count", "300", "--ring", "4096"])
        .env("PYTHONPATH", python_path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = producer.stdin.take().unwrap();
    let rx = line_channel(producer.stdout.take().unwrap());
    let expected: Value = serde_json::from_str(&next_line(&rx, "the producer's entries")).unwrap();
    let (code, out, err) = run_inspector(&["traffic", "--shm", &name, "--json"]);
    writeln!(stdin, "quit").unwrap();
    drop(stdin);
    let _ = wait_with_deadline(producer);
    let _ = std::fs::remove_file(PathBuf::from("/dev/shm").join(&name));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let entries = expected["entries"].as_array().unwrap();
    let (records, totals) = lines.split_at(lines.len() - 1);
    assert_eq!(records.len(), entries.len());
    assert!(
        entries[0]["position"].as_u64().unwrap() > 4096 * 10,
        "the ring wrapped many times before the listed entries"
    );
    for (e, g) in entries.iter().zip(records) {
        for key in ["ring", "position", "correlation_id", "method", "size"] {
            assert_eq!(e[key], g[key], "{key} of {e}");
        }
        assert_eq!(g["error"], Value::Null);
        assert_eq!(g["fields"]["sent_ns"], e["sent_ns"]);
        assert_eq!(g["fields"]["correlation_id"], e["correlation_id"]);
        compare(&e["payload"], &g["fields"]["payload"], "payload");
    }
    let t = &totals[0]["totals"]["cmd_c2s"];
    assert_eq!(t["entries"].as_u64().unwrap(), entries.len() as u64);
    assert_eq!(t["lost_bytes"], 0);
    assert_eq!(t["malformed"], 0);
}
