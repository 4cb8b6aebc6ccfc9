//! The rolling buffer: the messages of the last seconds, within a byte budget, written
//! as a complete MCAP file on demand.

use std::collections::VecDeque;
use std::io::{Seek, Write};

use super::{Counts, FileSink, Message, Prelude, RecordError};

/// Bytes counted for a message besides its data (its place in the buffer, the header
/// it gets in a file).
const MESSAGE_OVERHEAD_BYTES: u64 = 64;

/// What a rolling buffer keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RollingLimits {
    /// Messages older than this (by log time, against the newest) are dropped.
    pub seconds: f64,
    /// The buffer's bytes stay within this; the oldest messages go first.
    pub max_bytes: u64,
}

/// The last seconds of messages.
#[derive(Debug)]
pub struct Rolling {
    limits: RollingLimits,
    messages: VecDeque<Message>,
    bytes: u64,
    frames: u64,
    frames_dropped: u64,
    ring_entries_dropped: u64,
}

/// A copy of a rolling buffer's messages, to be written elsewhere (on another thread).
#[derive(Clone, Debug)]
pub struct RollingCopy {
    pub messages: Vec<Message>,
    /// The capture's counts, with `frames_recorded`, `ring_entries` and the dropped
    /// counts of the buffer.
    pub counts: Counts,
}

fn cost(m: &Message) -> u64 {
    m.data.len() as u64 + MESSAGE_OVERHEAD_BYTES
}

impl Rolling {
    pub fn new(limits: RollingLimits) -> Self {
        Self {
            limits,
            messages: VecDeque::new(),
            bytes: 0,
            frames: 0,
            frames_dropped: 0,
            ring_entries_dropped: 0,
        }
    }

    pub fn limits(&self) -> RollingLimits {
        self.limits
    }

    /// New limits; the buffer shrinks to them at once.
    pub fn set_limits(&mut self, limits: RollingLimits) {
        self.limits = limits;
        self.evict();
    }

    /// Bytes held (data and per-message overhead).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Frames held.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Seconds between the oldest and the newest message held.
    pub fn seconds(&self) -> f64 {
        match (self.messages.front(), self.messages.back()) {
            (Some(a), Some(b)) => b.log_time.saturating_sub(a.log_time) as f64 / 1e9,
            _ => 0.0,
        }
    }

    /// Adds a message and drops the oldest ones past the limits.
    pub fn push(&mut self, m: Message) {
        self.bytes += cost(&m);
        if m.is_frame() {
            self.frames += 1;
        }
        self.messages.push_back(m);
        self.evict();
    }

    fn evict(&mut self) {
        let newest = self.messages.back().map_or(0, |m| m.log_time);
        let keep_ns = (self.limits.seconds.max(0.0) * 1e9) as u64;
        while let Some(front) = self.messages.front() {
            let old = newest.saturating_sub(front.log_time) > keep_ns;
            if !old && self.bytes <= self.limits.max_bytes {
                break;
            }
            let Some(m) = self.messages.pop_front() else {
                break;
            };
            self.bytes = self.bytes.saturating_sub(cost(&m));
            if m.is_frame() {
                self.frames = self.frames.saturating_sub(1);
                self.frames_dropped += 1;
            } else {
                self.ring_entries_dropped += 1;
            }
        }
    }

    /// The messages held and the counts a file of them says, from the capture's.
    pub fn copy(&self, capture: Counts) -> RollingCopy {
        let messages: Vec<Message> = self.messages.iter().cloned().collect();
        let ring_entries = messages.len() as u64 - self.frames.min(messages.len() as u64);
        RollingCopy {
            counts: Counts {
                frames_recorded: self.frames,
                ring_entries,
                frames_dropped: self.frames_dropped,
                ring_entries_dropped: self.ring_entries_dropped,
                ..capture
            },
            messages,
        }
    }
}

impl RollingCopy {
    /// Writes a complete MCAP file: `prelude`, the messages, the counts.
    pub fn write<W: Write + Seek>(&self, prelude: &Prelude, out: W) -> Result<W, RecordError> {
        let mut file = FileSink::new(out, prelude)?;
        for m in &self.messages {
            file.write(m)?;
        }
        file.finish(&self.counts)
    }
}
