//! lrbc-inspector: attach read-only to a live LRBC shared-memory segment and show
//! everything in it, over the workspace's crates. See `ARCHITECTURE.md`. `unsafe` is denied
//! here but for the window's one OpenGL query (`ui`).
//!
//! Modules, each using only those above it:
//! - `session`: what a source holds for the window: a live segment, a recording or a served run
//! - `ui`: the window (eframe/egui): the app, its panels, settings and screenshots
//! - `cli`: the command line: arguments, one-line errors and every subcommand

pub mod cli;
#[doc(hidden)]
pub mod fuzzing;
pub mod session;
pub mod ui;
