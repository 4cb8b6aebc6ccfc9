//! Recordings as a source for the window: [`Recording`] (`reader`) reads an MCAP file
//! made by the flight recorder from its index, and [`Player`] (`player`), a named
//! thread, fills a [`crate::sampler::SamplerData`] and a
//! [`crate::traffic::TrafficStore`] as of a timeline cursor, so that the panels draw a
//! recording as they draw a live segment. [`Frozen`] (`frozen`) is the live view
//! paused: a copy of the sampler's in-memory history moved through the same way. No
//! egui.

mod frozen;
mod player;
mod reader;

pub use frozen::Frozen;
pub use player::{Find, PlayState, Player};
pub use reader::{ChunkInfo, LatestImages, RecFrame, Recording, ReplayError, RingMessage};

#[cfg(test)]
mod tests;
