//! What the integration tests and the benchmarks share and the product does not hold. No
//! dependency.
//!
//! Modules, each using only those above it:
//! - `netns`: a slow link: a network namespace whose loopback `tc` limits

pub mod netns;
