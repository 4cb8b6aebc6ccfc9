//! lrbc-inspector: attach read-only to a live LRBC shared-memory segment and show
//! everything in it. See `ARCHITECTURE.md` for the module map.

pub mod layout;
pub mod segment;
