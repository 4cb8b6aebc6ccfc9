//! What the integration tests and the benchmarks (`lrbc-bench`) share, and the product
//! does not hold: slow links for `serve` and its viewers (`netns`). No dependency.

pub mod netns;
