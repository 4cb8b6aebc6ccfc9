//! The body of the app's fuzz target `cli_args`.
//!
//! It lives here so that `cargo test` runs it over its checked-in corpus
//! (`fuzz/corpus/cli_args/`) on stable Rust, and the fuzzer (nightly, run by hand) calls
//! the very same code. It panics only when a property of the command line fails. The
//! contract's targets are `lrbc::fuzzing`'s.

/// The command line over arbitrary arguments (NUL-separated): parsing and the checks
/// that follow it never panic, and every value that parses is one the commands can use
/// (durations that fit, rates with a period, counts and pids above zero).
pub fn cli_args(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let args: Vec<&str> = text.split('\0').collect();
    crate::cli::check_arguments(&args);
}
