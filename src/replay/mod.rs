//! Recordings as a source for the window: [`Recording`] (`reader`) reads an MCAP file
//! made by the flight recorder from its index, and [`Player`] (`player`), a named
//! thread, fills a [`crate::sampler::SamplerData`] and a
//! [`crate::traffic::TrafficStore`] as of a timeline cursor, so that the panels draw a
//! recording as they draw a live segment. No egui.

mod player;
mod reader;

pub use player::{Find, PlayState, Player};
pub use reader::{ChunkInfo, RecFrame, Recording, ReplayError, RingMessage};

#[cfg(test)]
mod tests;
