//! The LRBC contract between LuckyEngine and its trainer, and read-only access to a live
//! segment. No threads of its own, window, async runtime, TLS, image decoding or file
//! format.
//!
//! Modules, each using only those above it:
//! - `layout`: the byte layout: wire structs, field tables, names, detection into a `Geometry`
//! - `procinfo`: process names, liveness, CPU and memory
//! - `sync`: the one lock helper: a poisoned mutex is taken as it is
//! - `clock`: the monotonic clock of the spec's `*_time_ns` words; a manual clock for tests
//! - `segment`: mappings (read-only; control rings writable), atomic words, copies (`unsafe`)
//! - `rings`: ring formats, producers, consumers and watchers that never consume (spec 4)
//! - `rpc`: the FlatBuffers schemas, generated code and the verifying decoder of envelopes
//! - `snapshot`: consistent copies of the hot data (spec 3.2)
//! - `discovery`: the LRBC segments on this machine and the processes that map them
//! - `attach`: attaching by name, PID or path: a mapping and its geometry
//! - `control`: the control lease (spec 7), the one write
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
//! `unsafe` is denied everywhere but in `segment` (and in the code that flatc generates
//! for `rpc`); the other operating-system calls are `lrbc_platform`'s.

pub mod attach;
pub mod clock;
pub mod control;
pub mod discovery;
#[doc(hidden)]
pub mod fuzzing;
pub mod layout;
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
