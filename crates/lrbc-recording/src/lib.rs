//! Recordings of LRBC runs: an MCAP profile, written, read, played and exported. No window.
//!
//! Modules, each using only those above it:
//! - `format`: the recording format: topics, schemas, the frame table, events, compression
//! - `recorder`: the capture, the file writer and the flight recorder's rolling buffer
//! - `replay`: reading recordings: the reader, the stream pass, the player, events and episodes
//! - `export`: Parquet and CSV of frames, one row per episode, a LeRobot dataset
//! - `compare`: two runs compared frame by frame: each env's first divergence and its origin

pub mod compare;
pub mod export;
pub mod format;
pub mod recorder;
pub mod replay;
