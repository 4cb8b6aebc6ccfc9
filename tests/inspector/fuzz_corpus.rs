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

use std::path::PathBuf;

use lrbc::fuzzing::corpus;
use lrbc_inspector::fuzzing;

const TARGETS: [(&str, corpus::Body); 1] = [("cli_args", fuzzing::cli_args)];

/// The workspace's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_fuzz_target_passes_over_its_corpus() {
    for (target, body) in TARGETS {
        if let Err(e) = corpus::run(target, &corpus::dir(&root(), target), body) {
            panic!("{e}");
        }
    }
}

#[test]
fn the_seed_corpus_is_current() {
    for (target, seeds) in seeds() {
        let stale = corpus::stale(&corpus::dir(&root(), target), &seeds);
        assert!(
            stale.is_empty(),
            "{stale:?} differ from their seeds: run `cargo test --test inspector -- --ignored fuzz_corpus::write_seed_corpus`"
        );
    }
}

#[test]
#[ignore = "writes fuzz/corpus: run by hand after changing a seed"]
fn write_seed_corpus() {
    for (target, seeds) in seeds() {
        corpus::write(&corpus::dir(&root(), target), &seeds).unwrap();
    }
}

fn seeds() -> Vec<(&'static str, corpus::Seeds)> {
    vec![("cli_args", cli_seeds())]
}

fn cli_seeds() -> corpus::Seeds {
    let args = |a: &[&str]| a.join("\0").into_bytes();
    corpus::named(vec![
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
