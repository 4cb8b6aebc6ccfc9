//! Episodes: every env's, from every frame taken. An episode of env E runs from the frame
//! after its previous ending (or from the first frame followed) to the frame whose done
//! or truncated flag is set, or after which the trainer asked for a reset. What is kept
//! of each: its length, its return, its smallest and largest reward, its first and last
//! frame and time, and how it ended; one that spans frames not taken is incomplete, with
//! the count of frames it lacks, and its return is never given as exact.
//!
//! `accountant` (the state machine, pure: the same code over the follower's frames and a
//! recording's), `book` (what a consumer keeps: every env's totals, the recent episodes
//! within a bound, the means per time bin, outliers), `live` (the accountant on the frame
//! follower's thread: [`EpisodeTracker`]).

mod accountant;
mod book;
mod live;

pub use accountant::{Accountant, Ending, Episode, FrameView};
pub use book::{
    Bin, BookDetail, DEFAULT_EPISODES_KEPT, EnvTotals, EpisodeBook, FIRST_BIN_NS, MAX_BINS,
    RunTotals,
};
pub use live::{EpisodeTracker, nonfinite_envs};

#[cfg(test)]
mod tests;
