//! The LRBC contract between LuckyEngine and its trainer, and access to a live segment:
//! the byte layout (`layout`), read-only mappings (`segment`), consistent copies of the
//! hot data (`snapshot`, spec 3.2), the rings and watchers that never consume them
//! (`rings`, spec 4.1), the RPC schemas and their decoding (`rpc`), the segments on this
//! machine (`discovery`), attaching by name, PID or path (`attach`), and the one
//! exception to read-only, the control lease (`control`, spec 7). No window, async
//! runtime, TLS or file format.
//!
//! Reading one frame of a live segment:
//!
//! ```no_run
//! use lrbc::attach::{Target, attach};
//! use lrbc::layout::LayoutChoice;
//! use lrbc::snapshot::{copy_hot, guarded_read};
//!
//! let attached = attach(&Target::Shm("lrbc_demo".into()), LayoutChoice::Auto)?;
//! let frame = guarded_read(&attached.segment, &attached.geometry, 100, |segment| {
//!     copy_hot(segment, &attached.geometry)
//! });
//! println!(
//!     "frame {} (whole: {}): env 0's reward {:?}",
//!     frame.frame_seq,
//!     frame.consistent,
//!     frame.value.rewards.first()
//! );
//! # Ok::<(), lrbc::attach::AttachError>(())
//! ```
//!
//! `unsafe` is denied everywhere but in `segment` and `platform` (and in the code that
//! flatc generates for `rpc`).

pub mod attach;
pub mod clock;
pub mod control;
pub mod discovery;
pub mod layout;
#[expect(
    unsafe_code,
    reason = "calls into the operating system that std does not offer, each with its SAFETY line"
)]
pub mod platform;
pub mod procinfo;
pub mod rings;
pub mod rpc;
#[expect(
    unsafe_code,
    reason = "the mappings: atomic words and bounds-checked copies through raw pointers, and the SIGBUS guard"
)]
pub mod segment;
pub mod snapshot;
pub mod sync;
#[doc(hidden)]
pub mod testutil;
