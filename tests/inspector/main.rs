//! The app's integration tests, one binary with a module per subject: the binary
//! against independent implementations of the spec (Python, C on Windows) and against
//! Foxglove's own packages, the window headless and real, `serve` on loopback and on slow
//! links, bad input of every kind, and the workspace's architecture. Run by
//! `cargo test --workspace`; one subject: `cargo test --test inspector -- serve::`.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "tests: a step that fails fails the test"
)]

mod common;

mod architecture;
mod bad_input;
mod compare;
mod compare_window;
mod episodes;
mod episodes_window;
mod events;
mod events_window;
mod export;
mod fault_peer;
mod flight;
mod fuzz_corpus;
mod memory;
mod record;
mod remote_window;
mod replay;
mod rhythm;
mod screenshots;
mod segment;
mod serve;
mod serve_link;
mod serve_tls;
mod sim;
mod snapshots;
mod snapshots_live;
mod traffic;
mod ui;
mod window;
mod windows;
mod windows_console;
mod windows_gui;
