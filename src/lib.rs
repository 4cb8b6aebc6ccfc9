//! lrbc-inspector: attach read-only to a live LRBC shared-memory segment and show
//! everything in it. See `ARCHITECTURE.md` for the module map.
//!
//! `unsafe` is denied everywhere but in `segment` and `platform` (and in the code that
//! flatc generates for `rpc`).

pub mod attach;
pub mod busy;
pub mod cli;
pub mod clock;
pub mod control;
pub mod discovery;
pub mod export;
pub mod follow;
#[doc(hidden)]
pub mod fuzzing;
pub mod layout;
pub mod memory;
#[expect(
    unsafe_code,
    reason = "calls into the operating system that std does not offer, each with its SAFETY line"
)]
pub mod platform;
pub mod procinfo;
pub mod record;
pub mod recording;
pub mod remote;
pub mod replay;
pub mod rings;
pub mod rpc;
pub mod sampler;
#[expect(
    unsafe_code,
    reason = "the mappings: atomic words and bounds-checked copies through raw pointers, and the SIGBUS guard"
)]
pub mod segment;
pub mod serve;
pub mod session;
pub mod sim;
pub mod snapshot;
pub mod stats;
pub mod sync;
pub mod traffic;
pub mod ui;
pub mod watch;

#[cfg(test)]
pub(crate) mod testutil;
