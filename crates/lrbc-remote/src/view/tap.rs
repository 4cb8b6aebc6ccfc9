//! A served run's messages for the window's flight recorder ([`Tap`], a
//! [`lrbc_recording::recorder::flight::FlightSource`]): the viewer's thread hands it the server's
//! channels, metadata records and each message as it arrives, through a bounded
//! channel; the recorder builds its prelude from them, so that Record and Save write a
//! file that `open` reads as it reads a local recording.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};

use super::wire::AdvertisedChannel;
use lrbc_live::detect::{Event, EventKind};
use lrbc_recording::format::{
    EVENTS_TOPIC, FRAME_TOPIC, LOG_TOPIC, RHYTHM_TOPIC, RING_EVENTS_TOPIC, STATE_TOPIC,
    camera_env_of_topic, ring_of_header_topic, ring_of_topic, stream_of_topic,
};
use lrbc_recording::recorder::flight::FlightSource;
use lrbc_recording::recorder::{ChannelDef, Counts, Kind, Message, Prelude, SchemaDef};

/// Messages waiting for the recorder, at most; more are dropped and counted.
const CAPACITY: usize = 8192;

/// What the viewer's thread hands the recorder.
#[derive(Debug)]
pub(super) enum Tapped {
    Channel(AdvertisedChannel),
    Metadata(String, BTreeMap<String, String>),
    Message {
        channel: u64,
        log_time: u64,
        data: Arc<[u8]>,
        /// Frames between this frame and the previous one that never arrived.
        gap: u64,
    },
}

/// The viewer's end of a tap.
#[derive(Debug, Clone)]
pub(super) struct TapSender {
    tx: Sender<Tapped>,
    /// Messages dropped because the recorder fell behind.
    dropped: Arc<AtomicU64>,
}

impl TapSender {
    /// Hands `t` on; false once the recorder is gone.
    pub(super) fn send(&self, t: Tapped) -> bool {
        match self.tx.try_send(t) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                // Relaxed: a count read for the file's counts, no data behind it.
                self.dropped.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

/// The recorder's end: a [`FlightSource`] of the served run's messages.
#[derive(Debug)]
pub struct Tap {
    rx: Receiver<Tapped>,
    held: Option<Tapped>,
    prelude: Prelude,
    /// The server's channel id → the prelude's channel.
    channels: HashMap<u64, usize>,
    counts: Counts,
    dropped: Arc<AtomicU64>,
    /// The first event of each kind the server's detector found, as it was found.
    first_events: BTreeMap<EventKind, Event>,
}

/// A tap: the viewer's end and the recorder's.
pub(super) fn tap() -> (TapSender, Tap) {
    let (tx, rx) = bounded(CAPACITY);
    let dropped = Arc::new(AtomicU64::new(0));
    (
        TapSender {
            tx,
            dropped: Arc::clone(&dropped),
        },
        Tap {
            rx,
            held: None,
            prelude: Prelude::default(),
            channels: HashMap::new(),
            counts: Counts::default(),
            dropped,
            first_events: BTreeMap::new(),
        },
    )
}

/// What a message of `topic` holds, for the rolling buffer and the counts.
fn kind_of(topic: &str) -> Option<Kind> {
    if topic == FRAME_TOPIC {
        Some(Kind::Frame)
    } else if ring_of_topic(topic).is_some() {
        Some(Kind::RingEntry)
    } else if ring_of_header_topic(topic).is_some() {
        Some(Kind::RingHeader)
    } else if topic == RING_EVENTS_TOPIC {
        Some(Kind::RingEvent)
    } else if topic == STATE_TOPIC {
        Some(Kind::State)
    } else if topic == EVENTS_TOPIC || topic == LOG_TOPIC || topic == RHYTHM_TOPIC {
        Some(Kind::Event)
    } else if camera_env_of_topic(topic).is_some() || stream_of_topic(topic).is_some() {
        Some(Kind::Image)
    } else {
        None
    }
}

impl Tap {
    fn take(&mut self, t: Tapped, out: &mut Vec<Message>) {
        match t {
            Tapped::Channel(c) => {
                if self.channels.contains_key(&c.id) || kind_of(&c.topic).is_none() {
                    return;
                }
                let schema = (!c.schema_name.is_empty()).then(|| {
                    self.prelude.schemas.push(SchemaDef {
                        name: c.schema_name.clone(),
                        encoding: c.schema_encoding.clone().unwrap_or_default(),
                        data: std::borrow::Cow::Owned(c.schema.clone()),
                    });
                    self.prelude.schemas.len() - 1
                });
                self.prelude.channels.push(ChannelDef {
                    topic: c.topic.clone(),
                    schema,
                    message_encoding: c.encoding.clone(),
                });
                self.channels.insert(c.id, self.prelude.channels.len() - 1);
            }
            Tapped::Metadata(name, m) => {
                match self.prelude.metadata.iter_mut().find(|(n, _)| *n == name) {
                    Some(slot) => slot.1 = m,
                    None => self.prelude.metadata.push((name, m)),
                }
            }
            Tapped::Message {
                channel,
                log_time,
                data,
                gap,
            } => {
                let Some(&index) = self.channels.get(&channel) else {
                    return;
                };
                let Some(kind) = self
                    .prelude
                    .channels
                    .get(index)
                    .and_then(|c| kind_of(&c.topic))
                else {
                    return;
                };
                let c = &mut self.counts;
                match kind {
                    Kind::Frame => {
                        c.frames_seen += 1 + gap;
                        c.frames_missed += gap;
                        c.frames_recorded += 1;
                    }
                    Kind::RingEntry => c.ring_entries += 1,
                    Kind::RingEvent => c.ring_events += 1,
                    Kind::State => c.state_changes += 1,
                    Kind::Image => c.images += 1,
                    Kind::Event => {
                        let topic = self.prelude.channels.get(index).map(|c| c.topic.as_str());
                        if topic == Some(EVENTS_TOPIC)
                            && let Some(e) = lrbc_recording::format::event_of(&data)
                        {
                            c.events_found = c.events_found.max(e.id);
                            self.first_events.entry(e.kind).or_insert(e);
                        }
                    }
                    Kind::RingHeader => {}
                }
                out.push(Message {
                    channel: index,
                    kind,
                    log_time,
                    publish_time: log_time,
                    data,
                });
            }
        }
    }
}

impl FlightSource for Tap {
    fn prelude(&self) -> &Prelude {
        &self.prelude
    }

    fn poll(&mut self, out: &mut Vec<Message>) {
        if let Some(t) = self.held.take() {
            self.take(t, out);
        }
        while let Ok(t) = self.rx.try_recv() {
            self.take(t, out);
        }
    }

    fn wait(&mut self, timeout: Duration) {
        if self.held.is_none()
            && let Ok(t) = self.rx.recv_timeout(timeout)
        {
            self.held = Some(t);
        }
    }

    fn first_event(&self, kinds: &[EventKind]) -> Option<Event> {
        kinds
            .iter()
            .filter_map(|k| self.first_events.get(k))
            .min_by_key(|e| e.id)
            .cloned()
    }

    fn counts(&self) -> Counts {
        let mut c = self.counts;
        // Relaxed: see `TapSender::send`. Messages the recorder fell behind on count
        // as frames missed (most messages are frames).
        c.frames_missed += self.dropped.load(Ordering::Relaxed);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(id: u64, topic: &str) -> AdvertisedChannel {
        AdvertisedChannel {
            id,
            topic: topic.into(),
            encoding: "flatbuffer".into(),
            schema_name: "lrbc.recording.Frame".into(),
            schema: vec![1, 2, 3],
            schema_encoding: Some("flatbuffer".into()),
        }
    }

    #[test]
    fn a_tap_builds_its_prelude_from_the_servers_channels_and_counts_what_came() {
        let (tx, mut tap) = tap();
        assert!(tx.send(Tapped::Channel(channel(7, FRAME_TOPIC))));
        assert!(tx.send(Tapped::Channel(channel(9, "/lrbc/serve/status"))));
        assert!(tx.send(Tapped::Metadata("lrbc.segment".into(), BTreeMap::new())));
        for (seq, gap) in [(1, 0), (4, 2)] {
            assert!(tx.send(Tapped::Message {
                channel: 7,
                log_time: seq,
                data: Arc::from(&[0u8][..]),
                gap,
            }));
        }
        // A channel the recorder does not keep, and one never advertised.
        for channel in [9, 11] {
            assert!(tx.send(Tapped::Message {
                channel,
                log_time: 5,
                data: Arc::from(&[0u8][..]),
                gap: 0,
            }));
        }
        tap.wait(Duration::from_secs(1));
        let mut out = Vec::new();
        tap.poll(&mut out);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|m| m.kind == Kind::Frame && m.channel == 0));
        let p = tap.prelude();
        assert_eq!(p.channels.len(), 1);
        assert_eq!(p.schemas[0].data.as_ref(), &[1, 2, 3]);
        assert_eq!(p.metadata[0].0, "lrbc.segment");
        let c = tap.counts();
        assert_eq!(
            (c.frames_seen, c.frames_recorded, c.frames_missed),
            (4, 2, 2)
        );
        drop(tap);
        assert!(!tx.send(Tapped::Channel(channel(1, FRAME_TOPIC))));
    }
}
