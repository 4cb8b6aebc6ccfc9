//! Observing a live LRBC segment over time, on threads of their own: the frame follower
//! (`frames`: one per segment, any number of consumers), the window's and `watch`'s
//! consumer of it (`sampler`), the ring traffic decoded and paired (`traffic`), the
//! attachment's state and re-attachment (`watch`), yielding to a busy machine (`busy`),
//! the memory budget (`memory`) and the statistics every figure uses (`stats`), the
//! check of every frame's values (`check`), the events of a run found as they happen
//! (`detect`) and every env's episodes (`episodes`). No window, async runtime, TLS or file format.

pub mod busy;
pub mod check;
pub mod detect;
pub mod episodes;
pub mod frames;
pub mod memory;
pub mod sampler;
pub mod stats;
pub mod traffic;
pub mod watch;
