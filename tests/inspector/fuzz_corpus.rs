//! The app's fuzz target's body (`lrbc_inspector::fuzzing::cli_args`) over its
//! checked-in corpus (`fuzz/corpus/cli_args/`), on stable Rust: a change that breaks a
//! property the fuzzer checks fails here at once. The seed inputs are written by
//! `cargo test --test inspector -- --ignored fuzz_corpus::write_seed_corpus`; files the
//! fuzzer finds may be added beside them. The contract's targets are tested in
//! `crates/lrbc/tests/fuzz_corpus.rs`.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use std::path::{Path, PathBuf};

use lrbc_inspector::fuzzing;

/// A fuzz target's body.
type Body = fn(&[u8]);

const TARGETS: [(&str, Body); 1] = [("cli_args", fuzzing::cli_args)];

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn inputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_fuzz_target_passes_over_its_corpus() {
    for (target, body) in TARGETS {
        let files = inputs(&corpus_dir(target));
        assert!(files.len() >= 5, "{target}: only {} inputs", files.len());
        for (name, data) in &files {
            let result = std::panic::catch_unwind(|| body(data));
            assert!(result.is_ok(), "{target}: input {name} fails");
        }
    }
}

#[test]
fn the_seed_corpus_is_current() {
    for (target, seeds) in seeds() {
        let dir = corpus_dir(target);
        for (name, bytes) in seeds {
            let path = dir.join(&name);
            let found = std::fs::read(&path).unwrap_or_default();
            assert!(
                found == bytes,
                "{} differs from its seed: run `cargo test --test inspector -- --ignored fuzz_corpus::write_seed_corpus`",
                path.display()
            );
        }
    }
}

#[test]
#[ignore = "writes fuzz/corpus: run by hand after changing a seed"]
fn write_seed_corpus() {
    for (target, seeds) in seeds() {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
}

type Seeds = Vec<(String, Vec<u8>)>;

fn seeds() -> Vec<(&'static str, Seeds)> {
    vec![("cli_args", cli_seeds())]
}

fn named(list: Vec<(&str, Vec<u8>)>) -> Seeds {
    list.into_iter()
        .map(|(n, b)| (format!("seed-{n}"), b))
        .collect()
}

fn cli_seeds() -> Seeds {
    let args = |a: &[&str]| a.join("\0").into_bytes();
    named(vec![
        (
            "watch-interval-1e20",
            args(&["watch", "--shm", "x", "--interval", "1e20"]),
        ),
        (
            "traffic-duration-1e308",
            args(&["traffic", "--shm", "x", "--follow", "--duration", "1e308"]),
        ),
        (
            "control-timeout-1e308",
            args(&[
                "control",
                "--shm",
                "x",
                "--service",
                "camera",
                "--status",
                "--timeout",
                "1e308",
            ]),
        ),
        ("dump-pid-0", args(&["dump", "--pid", "0"])),
        (
            "traffic-count-0",
            args(&["traffic", "--shm", "x", "--follow", "--count", "0"]),
        ),
        (
            "sim-engine-hz-tiny",
            args(&["sim", "engine", "--hz", "1e-300"]),
        ),
        (
            "sim-client-hz-tiny",
            args(&["sim", "client", "--hz", "1e-300"]),
        ),
        ("demo-hz-nan", args(&["demo", "--hz", "NaN"])),
        (
            "export-from-huge",
            args(&["export", "in.mcap", "-o", "out.parquet", "--from", "1e300"]),
        ),
        (
            "watch-valid",
            args(&["watch", "--shm", "x", "--interval", "500ms", "--count", "3"]),
        ),
        (
            "sim-engine-sizes",
            args(&[
                "sim",
                "engine",
                "--envs",
                "4294967295",
                "--obs",
                "4294967295",
                "--act",
                "1",
            ]),
        ),
        (
            "sim-engine-image",
            args(&["sim", "engine", "--image", "0x0x0"]),
        ),
    ])
}
