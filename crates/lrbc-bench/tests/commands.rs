//! The benchmarks the docs name are those the program runs, and a bad command is refused
//! in one line with exit code 2.

use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lrbc-bench"))
}

/// Every `lrbc-bench COMMAND` that docs/benchmarks.md gives a reader to run is a command
/// of this program (its help exits 0).
#[test]
fn every_command_docs_benchmarks_names_is_one_the_program_runs() {
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/benchmarks.md");
    let text = std::fs::read_to_string(docs).unwrap_or_else(|e| panic!("{docs}: {e}"));
    let mut named: Vec<&str> = text
        .split("lrbc-bench ")
        .skip(1)
        .filter_map(|rest| {
            rest.split(|c: char| !(c.is_ascii_lowercase() || c == '-'))
                .next()
        })
        .filter(|word| !word.is_empty() && !word.starts_with('-'))
        .collect();
    named.sort_unstable();
    named.dedup();
    assert!(named.len() >= 10, "docs/benchmarks.md names only {named:?}");
    for command in named {
        let out = bench()
            .args([command, "--help"])
            .output()
            .unwrap_or_else(|e| panic!("lrbc-bench {command} --help: {e}"));
        assert!(
            out.status.success(),
            "docs/benchmarks.md names `lrbc-bench {command}`, which the program refuses: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_command_it_does_not_know_is_refused_with_exit_code_2() {
    let out = bench()
        .arg("no-such-benchmark")
        .output()
        .expect("run lrbc-bench");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: unrecognized subcommand 'no-such-benchmark'"),
        "{stderr}"
    );
}
