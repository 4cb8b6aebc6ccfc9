//! Per-channel limits of what is served: a limited channel sends at most one message
//! per interval; a message that comes too soon waits, and a newer one replaces it
//! (latest-only), the replaced one counted as dropped. Pure: the caller gives the time.

use lrbc_recording::recorder::Message;

#[derive(Debug, Default)]
struct Slot {
    /// 0: no limit.
    interval_ns: u64,
    /// When the next message may go.
    next_ns: u64,
    held: Option<Message>,
    dropped: u64,
}

impl Slot {
    /// The time the next message may go after one went at `now`, on the cadence of the
    /// interval while messages come on time, from `now` after a pause.
    fn sent(&mut self, now: u64) {
        self.next_ns = if now.saturating_sub(self.next_ns) < self.interval_ns {
            self.next_ns + self.interval_ns
        } else {
            now + self.interval_ns
        };
    }
}

/// The limits of every channel, indexed as the capture's prelude.
#[derive(Debug, Default)]
pub(super) struct Pacer {
    slots: Vec<Slot>,
}

impl Pacer {
    /// Channel `channel` sends at most `hz` messages a second (0 or less: every message).
    pub fn limit(&mut self, channel: usize, hz: f64) {
        if self.slots.len() <= channel {
            self.slots.resize_with(channel + 1, Slot::default);
        }
        self.slots[channel].interval_ns = if hz > 0.0 {
            (1e9 / hz).round().max(1.0) as u64
        } else {
            0
        };
    }

    /// `m` if it may go now; else it waits for [`Pacer::due`] (replacing, and counting
    /// as dropped, a message that waited before it).
    pub fn offer(&mut self, now: u64, m: Message) -> Option<Message> {
        let Some(slot) = self.slots.get_mut(m.channel).filter(|s| s.interval_ns > 0) else {
            return Some(m);
        };
        if slot.held.is_none() && now >= slot.next_ns {
            slot.sent(now);
            return Some(m);
        }
        if slot.held.replace(m).is_some() {
            slot.dropped += 1;
        }
        None
    }

    /// Appends the waiting messages whose time came to `out`.
    pub fn due(&mut self, now: u64, out: &mut Vec<Message>) {
        for slot in &mut self.slots {
            if now >= slot.next_ns
                && let Some(m) = slot.held.take()
            {
                slot.sent(now);
                out.push(m);
            }
        }
    }

    /// Messages replaced before they went, on `channel`.
    pub fn dropped(&self, channel: usize) -> u64 {
        self.slots.get(channel).map_or(0, |s| s.dropped)
    }

    /// Forgets every channel (their messages waiting too): the prelude changed.
    pub fn clear(&mut self) {
        self.slots.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use lrbc_recording::recorder::Kind;

    fn message(channel: usize, n: u64) -> Message {
        Message {
            channel,
            kind: Kind::Frame,
            log_time: n,
            publish_time: n,
            data: Arc::from(n.to_le_bytes().to_vec()),
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn an_unlimited_channel_sends_everything_at_once() {
        let mut p = Pacer::default();
        p.limit(1, 10.0);
        for n in 0..100 {
            assert!(p.offer(n, message(0, n)).is_some());
        }
        assert_eq!(p.dropped(0), 0);
    }

    #[test]
    fn a_limited_channel_sends_the_newest_message_once_per_interval() {
        let mut p = Pacer::default();
        p.limit(0, 100.0);
        let mut sent = Vec::new();
        // A message each millisecond for one second, offered and then the waiting
        // ones sent, as the server does.
        for t in 0..1000 {
            let now = t * MS;
            if let Some(m) = p.offer(now, message(0, t)) {
                sent.push(m);
            }
            p.due(now, &mut sent);
        }
        assert_eq!(sent.len(), 100);
        // Each one the newest when it went: on the cadence of 10 ms.
        let times: Vec<u64> = sent.iter().map(|m| m.log_time).collect();
        assert_eq!(times[..3], [0, 10, 20]);
        assert_eq!(
            p.dropped(0),
            1000 - 100 - 1,
            "all but the sent and the waiting"
        );
    }

    #[test]
    fn a_message_that_waits_goes_when_its_time_comes_even_if_nothing_follows() {
        let mut p = Pacer::default();
        p.limit(2, 10.0);
        assert!(p.offer(0, message(2, 1)).is_some());
        assert!(p.offer(5 * MS, message(2, 2)).is_none());
        let mut out = Vec::new();
        p.due(99 * MS, &mut out);
        assert!(out.is_empty());
        p.due(100 * MS, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].log_time, 2);
        assert_eq!(p.dropped(2), 0);
    }

    #[test]
    fn after_a_pause_the_first_message_goes_at_once_and_no_burst_follows() {
        let mut p = Pacer::default();
        p.limit(0, 100.0);
        assert!(p.offer(0, message(0, 0)).is_some());
        assert!(p.offer(5_000 * MS, message(0, 1)).is_some());
        assert!(p.offer(5_001 * MS, message(0, 2)).is_none());
        let mut out = Vec::new();
        p.due(5_010 * MS, &mut out);
        assert_eq!(out.len(), 1);
    }
}
