//! The rolling buffer: the messages of the last seconds, within a byte budget, written
//! as a complete MCAP file on demand. Camera images have a share of the budget of their
//! own, so that they never crowd out frames and ring entries.

use std::collections::VecDeque;
use std::io::{Seek, Write};

use super::{Counts, FileSink, Kind, Message, Prelude, RecordError};

/// Bytes counted for a message besides its data (its place in the buffer, the header
/// it gets in a file).
const MESSAGE_OVERHEAD_BYTES: u64 = 64;
/// The part of the budget camera images may take (a quarter).
const IMAGE_SHARE_DIVISOR: u64 = 4;

/// What a rolling buffer keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RollingLimits {
    /// Messages older than this (by log time, against the newest) are dropped.
    pub seconds: f64,
    /// The buffer's bytes stay within this; the oldest messages go first. Camera images
    /// take at most a quarter of it, frames and ring entries the rest.
    pub max_bytes: u64,
}

impl RollingLimits {
    fn images(&self) -> u64 {
        self.max_bytes / IMAGE_SHARE_DIVISOR
    }

    fn others(&self) -> u64 {
        self.max_bytes - self.images()
    }
}

/// Messages oldest first, with their bytes.
#[derive(Debug, Default)]
struct Queue {
    messages: VecDeque<Message>,
    bytes: u64,
}

/// The last seconds of messages.
#[derive(Debug)]
pub struct Rolling {
    limits: RollingLimits,
    /// Frames and ring entries.
    main: Queue,
    images: Queue,
    frames: u64,
    frames_dropped: u64,
    ring_entries_dropped: u64,
}

/// A copy of a rolling buffer's messages, to be written elsewhere (on another thread).
#[derive(Clone, Debug)]
pub struct RollingCopy {
    /// Oldest first.
    pub messages: Vec<Message>,
    /// The capture's counts, with `frames_recorded`, `ring_entries`, `images` and the
    /// dropped counts of the buffer.
    pub counts: Counts,
}

fn cost(m: &Message) -> u64 {
    m.data.len() as u64 + MESSAGE_OVERHEAD_BYTES
}

impl Rolling {
    pub fn new(limits: RollingLimits) -> Self {
        Self {
            limits,
            main: Queue::default(),
            images: Queue::default(),
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
        self.main.bytes + self.images.bytes
    }

    /// Frames held.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    fn newest(&self) -> u64 {
        let last = |q: &Queue| q.messages.back().map_or(0, |m| m.log_time);
        last(&self.main).max(last(&self.images))
    }

    /// Seconds between the oldest and the newest message held.
    pub fn seconds(&self) -> f64 {
        let first = [&self.main, &self.images]
            .iter()
            .filter_map(|q| q.messages.front().map(|m| m.log_time))
            .min();
        first.map_or(0.0, |f| self.newest().saturating_sub(f) as f64 / 1e9)
    }

    /// Adds a message and drops the oldest ones past the limits.
    pub fn push(&mut self, m: Message) {
        let q = if m.kind == Kind::Image {
            &mut self.images
        } else {
            &mut self.main
        };
        q.bytes += cost(&m);
        if m.is_frame() {
            self.frames += 1;
        }
        q.messages.push_back(m);
        self.evict();
    }

    fn evict(&mut self) {
        let newest = self.newest();
        let keep_ns = (self.limits.seconds.max(0.0) * 1e9) as u64;
        let (others, images) = (self.limits.others(), self.limits.images());
        for (q, max_bytes) in [(&mut self.main, others), (&mut self.images, images)] {
            while let Some(front) = q.messages.front() {
                let old = newest.saturating_sub(front.log_time) > keep_ns;
                if !old && q.bytes <= max_bytes {
                    break;
                }
                let Some(m) = q.messages.pop_front() else {
                    break;
                };
                q.bytes = q.bytes.saturating_sub(cost(&m));
                match m.kind {
                    Kind::Frame => {
                        self.frames = self.frames.saturating_sub(1);
                        self.frames_dropped += 1;
                    }
                    Kind::RingEntry => self.ring_entries_dropped += 1,
                    Kind::RingEvent
                    | Kind::RingHeader
                    | Kind::Image
                    | Kind::State
                    | Kind::Event => {}
                }
            }
        }
    }

    /// The messages held, oldest first, and the counts a file of them says, from the
    /// capture's.
    pub fn copy(&self, capture: Counts) -> RollingCopy {
        let mut messages =
            Vec::with_capacity(self.main.messages.len() + self.images.messages.len());
        let (mut a, mut b) = (
            self.main.messages.iter().peekable(),
            self.images.messages.iter().peekable(),
        );
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if y.log_time < x.log_time => b.next(),
                (Some(_), _) => a.next(),
                (None, _) => b.next(),
            };
            let Some(m) = next else { break };
            messages.push(m.clone());
        }
        let count = |k| messages.iter().filter(|m: &&Message| m.kind == k).count() as u64;
        RollingCopy {
            counts: Counts {
                frames_recorded: count(Kind::Frame),
                ring_entries: count(Kind::RingEntry),
                ring_events: count(Kind::RingEvent),
                images: count(Kind::Image),
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
