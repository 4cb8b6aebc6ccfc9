//! The simulated engine and client: something live to inspect when no LuckyEngine runs,
//! and the other side of the tests and benchmarks.
//!
//! Modules, each using only those above it:
//! - `dynamics`: batched cart-pole dynamics: observations, rewards, dones, truncations
//! - `wait`: waiting for the other side: spin, yield, then sleep
//! - `schedule`: a paced trainer's ticks: catching up after a late step, starting over after an update
//! - `render`: camera images of the simulated envs
//! - `services`: the engine's RPC handlers, services toggled on the control ring
//! - `bench`: fixtures of the micro-benchmarks: sample envelopes, a ring-only segment
//! - `engine`: the simulated engine: a segment, lock-step stepping, answers, images, planted faults
//! - `client`: the simulated trainer: actions, reset flags and requests in lock-step
//! - `inprocess`: an engine and a client on threads of this process
//! - `children`: the engine, client and observers as child processes of lrbc-inspector

pub mod bench;
pub mod children;
pub mod client;
pub mod dynamics;
pub mod engine;
pub mod inprocess;
pub mod render;
mod schedule;
pub mod services;
pub mod wait;
