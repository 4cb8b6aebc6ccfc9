//! lrbc-inspector: attach read-only to a live LRBC shared-memory segment and show
//! everything in it. See `ARCHITECTURE.md` for the module map.

pub mod attach;
pub mod cli;
pub mod clock;
pub mod control;
pub mod discovery;
#[doc(hidden)]
pub mod fuzzing;
pub mod layout;
pub mod memory;
pub mod platform;
pub mod procinfo;
pub mod rings;
pub mod rpc;
pub mod sampler;
pub mod segment;
pub mod session;
pub mod sim;
pub mod snapshot;
pub mod stats;
pub mod traffic;
pub mod ui;
pub mod watch;

#[cfg(test)]
pub(crate) mod testutil;
