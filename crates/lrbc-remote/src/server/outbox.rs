//! What waits to be written to one client: the messages that must all arrive (ring
//! entries and events, state changes, metadata, status, advertisements, service
//! responses) in order, and, per channel, the frames or images not yet written. While
//! the client keeps up, every frame goes (a burst of up to [`DEPTH`] per channel
//! waits); once its link holds messages back, only the newest of each channel waits
//! (latest wins: [`Outbox::collapse`]), the others counted as conflated. Pure.

use std::collections::VecDeque;
use std::sync::Arc;

/// How a message is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A frame: the newest waiting replaces an older one.
    Frame,
    /// An image: the newest waiting replaces an older one.
    Image,
    /// A series where every message counts but a link too thin for it may lose some (a
    /// frame's summary): up to [`SERIES_DEPTH`] wait, the oldest go when more come; never
    /// collapsed to the newest.
    Series,
    /// Everything else: never replaced, never dropped while the client is connected.
    Reliable,
}

/// A message for the client, as it goes on the wire.
#[derive(Clone, Debug)]
pub enum Payload {
    Text(String),
    /// A message on a subscription: the header and the shared data.
    Data {
        header: [u8; 13],
        data: Arc<[u8]>,
    },
    Binary(Vec<u8>),
}

impl Payload {
    /// The log time of a message on a subscription.
    pub fn log_time(&self) -> Option<u64> {
        match self {
            Self::Data { header, .. } => crate::protocol::u64_at(header, 5),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Self::Text(t) => t.len(),
            Self::Data { header, data } => header.len() + data.len(),
            Self::Binary(b) => b.len(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Out {
    pub class: Class,
    pub payload: Payload,
}

/// Which share of the link a class takes turns for (reliable messages go first).
fn share_of(class: Class) -> Option<usize> {
    match class {
        Class::Frame => Some(0),
        Class::Image => Some(1),
        Class::Series => Some(2),
        Class::Reliable => None,
    }
}

/// Delivered, replaced while waiting, and dropped (never sent: the client unsubscribed,
/// the channel went, or the client did) messages of one class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    pub delivered: u64,
    pub conflated: u64,
    pub dropped: u64,
}

/// What one client was sent and spared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClientCounts {
    pub frames: Tally,
    pub images: Tally,
    /// Frames' summaries.
    pub summaries: Tally,
    /// Messages that are never replaced, delivered.
    pub reliable: u64,
    /// Bytes the socket took (WebSocket framing and TLS aside).
    pub bytes: u64,
}

impl ClientCounts {
    fn tally(&mut self, class: Class) -> Option<&mut Tally> {
        match class {
            Class::Frame => Some(&mut self.frames),
            Class::Image => Some(&mut self.images),
            Class::Series => Some(&mut self.summaries),
            Class::Reliable => None,
        }
    }

    /// Adds another client's counts.
    pub fn add(&mut self, o: &Self) {
        for (a, b) in [
            (&mut self.frames, &o.frames),
            (&mut self.images, &o.images),
            (&mut self.summaries, &o.summaries),
        ] {
            a.delivered += b.delivered;
            a.conflated += b.conflated;
            a.dropped += b.dropped;
        }
        self.reliable += o.reliable;
        self.bytes += o.bytes;
    }
}

/// Frames or images waiting per channel at most; an older one goes when a newer comes.
pub const DEPTH: usize = 16;
/// Messages of a series waiting per channel at most.
pub const SERIES_DEPTH: usize = 1_000;
/// While the link holds messages back, a series keeps only its messages logged within
/// this time of its newest.
pub const SERIES_HELD_NS: u64 = 100_000_000;

/// The reliable messages waited for more than this many bytes: the client cannot take
/// even those.
#[derive(Debug, PartialEq, Eq)]
pub struct Overflow(pub usize);

/// One client's waiting messages.
#[derive(Debug)]
pub struct Outbox {
    reliable: VecDeque<Out>,
    reliable_bytes: usize,
    limit: usize,
    /// Per channel, the frames or images waiting, each with the order it came in.
    lanes: Vec<(u64, VecDeque<(u64, Out)>)>,
    order: u64,
    /// Bytes written of frames, of images and of series ([`share_of`]) while they
    /// waited: each kind that waits gets an even share of what the link takes.
    shares: [u64; 3],
    pub counts: ClientCounts,
}

impl Outbox {
    /// An outbox whose reliable messages may hold up to `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            reliable: VecDeque::new(),
            reliable_bytes: 0,
            limit,
            lanes: Vec::new(),
            order: 0,
            shares: [0; 3],
            counts: ClientCounts::default(),
        }
    }

    /// Queues `out` of `channel`.
    pub fn push(&mut self, channel: u64, out: Out) -> Result<(), Overflow> {
        if out.class == Class::Reliable {
            self.reliable_bytes += out.payload.len();
            self.reliable.push_back(out);
            if self.reliable_bytes > self.limit {
                return Err(Overflow(self.reliable_bytes));
            }
            return Ok(());
        }
        self.order += 1;
        let order = self.order;
        let i = match self.lanes.iter().position(|(c, _)| *c == channel) {
            Some(i) => i,
            None => {
                self.lanes.push((channel, VecDeque::new()));
                self.lanes.len() - 1
            }
        };
        let depth = if out.class == Class::Series {
            SERIES_DEPTH
        } else {
            DEPTH
        };
        let series = out.class == Class::Series;
        let lane = &mut self.lanes[i].1;
        lane.push_back((order, out));
        if lane.len() > depth
            && let Some((place, old)) = lane.pop_front()
        {
            if !series && let Some(next) = lane.front_mut() {
                // The next frame or image keeps the place in line of the one it replaces.
                next.0 = place;
            }
            if let Some(t) = self.counts.tally(old.class) {
                t.conflated += 1;
            }
        }
        Ok(())
    }

    /// The client's link holds messages back: of each channel's frames or images only
    /// the newest waits, of a series those logged within [`SERIES_HELD_NS`] of its
    /// newest; the others counted as conflated.
    pub fn collapse(&mut self) {
        for (_, lane) in &mut self.lanes {
            if lane.front().is_some_and(|(_, o)| o.class == Class::Series) {
                let newest = lane.back().and_then(|(_, o)| o.payload.log_time());
                let keep_from = newest.map_or(0, |t| t.saturating_sub(SERIES_HELD_NS));
                while lane.len() > 1
                    && lane
                        .front()
                        .is_some_and(|(_, o)| o.payload.log_time().is_some_and(|t| t < keep_from))
                {
                    if let Some((_, old)) = lane.pop_front()
                        && let Some(t) = self.counts.tally(old.class)
                    {
                        t.conflated += 1;
                    }
                }
                continue;
            }
            // The newest keeps the place in line of the oldest it replaces: a channel that
            // keeps sending still gets its turn.
            let place = lane.front().map(|(o, _)| *o);
            while lane.len() > 1 {
                if let Some((_, old)) = lane.pop_front()
                    && let Some(t) = self.counts.tally(old.class)
                {
                    t.conflated += 1;
                }
            }
            if let (Some(place), Some(newest)) = (place, lane.front_mut()) {
                newest.0 = place;
            }
        }
    }

    /// The next message to write: reliable ones first, in order; then, of frames,
    /// images and series, the kind with the smallest share of the bytes written while
    /// it waited, its message that has waited longest.
    pub fn pop(&mut self) -> Option<Out> {
        if let Some(out) = self.reliable.pop_front() {
            self.reliable_bytes -= out.payload.len();
            return Some(out);
        }
        let oldest = |kind: usize| {
            (0..self.lanes.len())
                .filter_map(|i| {
                    let (order, out) = self.lanes[i].1.front()?;
                    (share_of(out.class) == Some(kind)).then_some((i, *order))
                })
                .min_by_key(|&(_, order)| order)
                .map(|(i, _)| i)
        };
        let heads = [oldest(0), oldest(1), oldest(2)];
        let kind = (0..3)
            .filter(|&k| heads[k].is_some())
            .min_by_key(|&k| self.shares[k])?;
        let i = heads[kind]?;
        let out = self.lanes[i].1.pop_front().map(|(_, o)| o)?;
        self.shares[kind] += out.payload.len() as u64;
        // A kind with nothing waiting banks no credit for later.
        let spent = self.shares[kind];
        for (share, head) in self.shares.iter_mut().zip(heads) {
            if head.is_none() {
                *share = (*share).max(spent);
            }
        }
        if self.lanes[i].1.is_empty() {
            self.lanes.swap_remove(i);
        }
        Some(out)
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.reliable.is_empty() && self.lanes.is_empty()
    }

    /// Counts `out` as written, `bytes` of it taken by the socket.
    pub fn delivered(&mut self, out: &Out) {
        self.counts.bytes += out.payload.len() as u64;
        match self.counts.tally(out.class) {
            Some(t) => t.delivered += 1,
            None => self.counts.reliable += 1,
        }
    }

    /// Drops the frame or image waiting on `channel` (unsubscribed, or the channel
    /// went), counted.
    pub fn forget(&mut self, channel: u64) {
        if let Some(i) = self.lanes.iter().position(|(c, _)| *c == channel) {
            let (_, lane) = self.lanes.swap_remove(i);
            self.count_dropped(lane);
        }
    }

    fn count_dropped(&mut self, lane: VecDeque<(u64, Out)>) {
        for (_, out) in lane {
            if let Some(t) = self.counts.tally(out.class) {
                t.dropped += 1;
            }
        }
    }

    /// Drops everything waiting (the client is gone), frames and images counted.
    pub fn clear(&mut self) {
        for (_, lane) in std::mem::take(&mut self.lanes) {
            self.count_dropped(lane);
        }
        self.reliable.clear();
        self.reliable_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(class: Class, n: u8) -> Out {
        Out {
            class,
            payload: Payload::Binary(vec![n; 10]),
        }
    }

    fn tag(o: &Out) -> u8 {
        match &o.payload {
            Payload::Binary(b) => b[0],
            _ => 0,
        }
    }

    #[test]
    fn reliable_messages_go_first_and_frames_in_order_while_the_client_keeps_up() {
        let mut b = Outbox::new(1 << 20);
        for n in 0..5 {
            assert!(b.push(1, out(Class::Frame, n)).is_ok());
            assert!(b.push(2, out(Class::Reliable, 100 + n)).is_ok());
            assert!(b.push(3, out(Class::Image, 200 + n)).is_ok());
        }
        let mut order = Vec::new();
        while let Some(o) = b.pop() {
            b.delivered(&o);
            order.push(tag(&o));
        }
        assert_eq!(
            order,
            [
                100, 101, 102, 103, 104, 0, 200, 1, 201, 2, 202, 3, 203, 4, 204
            ]
        );
        assert_eq!(
            (b.counts.frames.delivered, b.counts.images.delivered),
            (5, 5)
        );
        assert_eq!(b.counts.frames.conflated, 0);
        assert_eq!(b.counts.reliable, 5);
        assert_eq!(b.counts.bytes, 150);
        assert!(b.is_empty());
    }

    #[test]
    fn a_held_back_client_gets_the_newest_of_each_channel_and_a_burst_is_bounded() {
        let mut b = Outbox::new(1 << 20);
        for n in 0..40 {
            let _ = b.push(1, out(Class::Frame, n));
        }
        assert_eq!(b.counts.frames.conflated, (40 - DEPTH) as u64);
        let _ = b.push(2, out(Class::Image, 100));
        let _ = b.push(2, out(Class::Image, 101));
        let _ = b.push(9, out(Class::Reliable, 50));
        let _ = b.push(3, out(Class::Series, 60));
        let _ = b.push(3, out(Class::Series, 61));
        b.collapse();
        assert_eq!(b.counts.frames.conflated, 39);
        assert_eq!(b.counts.images.conflated, 1);
        let order: Vec<u8> = std::iter::from_fn(|| b.pop()).map(|o| tag(&o)).collect();
        assert_eq!(
            order,
            [50, 39, 101, 60, 61],
            "nothing reliable is conflated, nor a series; the kinds take turns"
        );
        for n in 0..(SERIES_DEPTH + 5) {
            let _ = b.push(3, out(Class::Series, n as u8));
        }
        assert_eq!(b.counts.summaries.conflated, 5);
        // Held back, a series keeps what was logged within SERIES_HELD_NS of its newest.
        let mut b = Outbox::new(1 << 20);
        let ms = 1_000_000;
        for t in 0..500u64 {
            let data: Arc<[u8]> = Arc::from(vec![0u8; 8]);
            let header = crate::protocol::message_data_header(1, t * ms);
            let _ = b.push(
                3,
                Out {
                    class: Class::Series,
                    payload: Payload::Data { header, data },
                },
            );
        }
        b.collapse();
        let first = b.pop().and_then(|o| o.payload.log_time());
        assert_eq!(first, Some(499 * ms - SERIES_HELD_NS));
        assert_eq!(b.counts.summaries.conflated, 399);
    }

    #[test]
    fn frames_and_a_series_share_the_bytes_written_while_both_wait() {
        let mut b = Outbox::new(1 << 20);
        let big = |n: u8| Out {
            class: Class::Frame,
            payload: Payload::Binary(vec![n; 1000]),
        };
        for n in 0..5 {
            let _ = b.push(1, big(n));
        }
        for n in 0..100 {
            let _ = b.push(2, out(Class::Series, n));
        }
        // Ten series messages of 10 bytes weigh what a tenth of a frame does.
        let (mut frames, mut series) = (0, 0);
        for _ in 0..60 {
            match b.pop().map(|o| o.class) {
                Some(Class::Frame) => frames += 1,
                Some(Class::Series) => series += 1,
                _ => {}
            }
        }
        assert_eq!(frames, 1, "the series had the smaller share");
        assert_eq!(series, 59);
        assert_eq!(b.pop().map(|o| o.class), Some(Class::Series));
    }

    #[test]
    fn frames_keep_their_turn_among_many_image_channels_on_a_held_back_link() {
        let mut b = Outbox::new(1 << 20);
        let sized = |class, n: usize| Out {
            class,
            payload: Payload::Binary(vec![0; n]),
        };
        for c in 0..64 {
            let _ = b.push(100 + c, sized(Class::Image, 1000));
        }
        let (mut frames, mut images) = (0, 0);
        for _ in 0..100 {
            // A frame comes before each write (a run at 1 kHz), and each image channel
            // has a newer image now and then.
            let _ = b.push(1, sized(Class::Frame, 1000));
            if frames % 8 == 0 {
                for c in 0..64 {
                    let _ = b.push(100 + c, sized(Class::Image, 1000));
                }
            }
            b.collapse();
            match b.pop().map(|o| o.class) {
                Some(Class::Frame) => frames += 1,
                Some(Class::Image) => images += 1,
                _ => {}
            }
        }
        assert_eq!(
            (frames, images),
            (50, 50),
            "an even share of the bytes each"
        );
    }

    #[test]
    fn reliable_messages_past_the_limit_are_an_overflow_and_forgotten_ones_are_counted() {
        let mut b = Outbox::new(25);
        assert!(b.push(9, out(Class::Reliable, 0)).is_ok());
        assert!(b.push(9, out(Class::Reliable, 0)).is_ok());
        assert_eq!(b.push(9, out(Class::Reliable, 0)), Err(Overflow(30)));
        let _ = b.push(1, out(Class::Frame, 1));
        let _ = b.push(2, out(Class::Image, 2));
        b.forget(1);
        assert_eq!(b.counts.frames.dropped, 1);
        b.clear();
        assert_eq!(b.counts.images.dropped, 1);
        assert!(b.is_empty());
        assert!(
            b.push(9, out(Class::Reliable, 0)).is_ok(),
            "the count starts again"
        );
    }
}
