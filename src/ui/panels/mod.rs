//! The window's panels. Each draws from data gathered elsewhere and returns what the
//! user asked for; none of them waits on the engine.

pub mod attach;
pub mod cameras;
pub mod counters;
pub mod divergence;
pub mod envs;
pub mod episodes;
pub mod events;
pub mod header;
pub mod rpc;
pub mod traffic;
