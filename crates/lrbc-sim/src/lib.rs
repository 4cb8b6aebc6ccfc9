//! The simulated engine and client: something live to inspect when no LuckyEngine is
//! running, and the other side of the tests and benchmarks. Uses segment access and
//! rings only.

pub mod bench;
pub mod client;
pub mod dynamics;
pub mod engine;
pub mod inprocess;
pub mod render;
pub mod services;
pub mod wait;
