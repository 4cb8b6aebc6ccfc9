//! Recordings of LRBC runs: the format (`format`: an MCAP profile, its topics, schemas
//! and frame table, chunks compressed with zstd by default), the flight recorder that
//! writes it (`recorder`), the reader and player that replay it (`replay`), and export
//! for analysis as Parquet or CSV (`export`). No window.

pub mod export;
pub mod format;
pub mod recorder;
pub mod replay;
