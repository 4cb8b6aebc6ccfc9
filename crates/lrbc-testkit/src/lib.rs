//! What the integration tests and the benchmarks share and the product does not hold. No
//! dependency.
//!
//! Modules, each using only those above it:
//! - `cargo`: cargo run from a program cargo started, without the variables it set
//! - `netns`: a slow link: a network namespace whose loopback `tc` limits

pub mod cargo;
pub mod netns;
