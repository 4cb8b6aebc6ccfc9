//! The loop's rhythm: how the run steps and pauses (rollouts, policy updates, which side
//! waits, the shares of wall time) learned from `frame_seq`, `action_seq` and the frames'
//! times, and the endings of envs in step (time limits, resets of every env). Pure: the
//! detector runs it live and over a recording.
//!
//! `pauses` (the state machine of steps and pauses, and its judgment of a wait),
//! `endings` (each env's episode start, a frame's endings told apart), `summary` (what
//! the views show: [`RhythmSummary`]).

mod endings;
mod pauses;
mod summary;

pub use endings::{EndingsInStep, FlagEnding, Flags, FrameEndings};
pub use pauses::{
    CONTINUOUS_FRAMES, CONTINUOUS_NS, FrameTimes, Judgment, PAUSE_INTERVALS, PAUSE_MIN_NS,
    PauseVerdict, Rhythm, RhythmSettings, Side, Waiting, Why,
};
pub use summary::{LoopKind, Pause, RECENT_PAUSES, RhythmSummary};

#[cfg(test)]
mod tests;
