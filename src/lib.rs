//! lrbc-inspector: attach read-only to a live LRBC shared-memory segment and show
//! everything in it. The window (`ui`), what a source holds for it (`session`: a live
//! segment, a recording or a served run) and the command line (`cli`), over the
//! workspace's crates: `lrbc` (the contract), `lrbc-live`, `lrbc-recording`,
//! `lrbc-remote` and `lrbc-sim`. See `ARCHITECTURE.md`.
//!
//! `unsafe` is denied here but for the window's one OpenGL query (`ui`).

pub mod cli;
#[doc(hidden)]
pub mod fuzzing;
pub mod session;
pub mod ui;
