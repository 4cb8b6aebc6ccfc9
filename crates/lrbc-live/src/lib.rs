//! Observing a live segment over time, on threads of its own: one frame follower per
//! segment and its consumers. No window, async runtime, TLS or file format.
//!
//! Modules, each using only those above it:
//! - `text`: counts in words: thousands separators and plurals
//! - `memory`: the window's memory budget and its shares
//! - `stats`: quantiles, medians and geometric means: one convention for every figure
//! - `busy`: yielding to a busy machine: a CPU budget for observers
//! - `watch`: the attachment's state over time (attached, stale, gone, replaced), rates
//! - `traffic`: the command rings read, decoded, paired and stored
//! - `check`: the value check of one frame: NaN, infinities, bounds, saturation (pure)
//! - `rhythm`: the loop's rhythm (rollouts, updates, who waits) and endings in step (pure)
//! - `follower`: the frame follower: one thread per segment copying each frame for its sinks
//! - `live_sink`: the shape of the follower's sinks that run a state machine: handoff, control
//! - `detect`: the detector: events from frames' checks, time, state and ring faults; the live sink
//! - `episodes`: every env's episodes from every frame; the live sink
//! - `sampler`: the window's and `watch`'s consumer of the follower: per-frame figures, histories
//! - `controller`: the control lease held on a thread of its own, for a window's calls

pub mod busy;
pub mod check;
pub mod controller;
pub mod detect;
pub mod episodes;
pub mod follower;
mod live_sink;
pub mod memory;
pub mod rhythm;
pub mod sampler;
pub mod stats;
pub mod text;
pub mod traffic;
pub mod watch;
