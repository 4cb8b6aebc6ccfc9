//! Recordings as a source: [`Recording`] (`reader`) reads an MCAP file made by the
//! flight recorder from its index, and [`read_recording`] (`stream`) reads one from end
//! to end in blocks for the export, with the same checks; frames are decoded by
//! [`RecFrame`], the recording format's one decoder (`crate::format`). [`Player`]
//! (`player`), a named thread, fills a [`lrbc_live::sampler::SamplerData`] and a
//! [`lrbc_live::traffic::TrafficStore`] as of a timeline cursor, so that the panels draw a
//! recording as they draw a live segment; its reductions of a frame, its image region
//! and its rings' formats are public (`player`) for a reader of served messages to show
//! them as it does. [`RecordedActions`] (`actions`) hands a replaying trainer a recorded
//! run's actions step by step. No egui.

mod actions;
mod episodes;
mod events;
pub mod player;
mod reader;
pub mod stream;

pub use crate::format::{FrameError, RecFrame};
pub use actions::{ActionsError, RecordedActions, StepActions};
pub use episodes::{EpisodesError, RecordedEpisodes, recording_episodes};
pub use events::{EventsError, RecordingEvents, check_frame, find_again, recording_events};
pub use player::{PlayState, Player};
pub use reader::{
    ChunkInfo, Damage, LatestImages, NotLrbc, Packing, Recording, ReplayError, RingMessage,
    StateChange, Topic,
};
pub use stream::{End, ReadError, StreamItem, read_recording};

#[cfg(test)]
mod tests;
