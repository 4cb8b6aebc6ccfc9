//! A flight recorder: follows `frame_seq` and writes each consistent frame of the
//! recorded envs as a FlatBuffers `lrbc.recording.Frame` (`schema/recording.fbs`) on the
//! MCAP channel `/lrbc/frame`, and each command or control ring entry's payload, as
//! written, on `/lrbc/ring/<ring>`. Metadata records describe the segment (`lrbc.header`,
//! `lrbc.geometry`, `lrbc.names`, `lrbc.tool`) and, at the end, what was kept and lost
//! (`lrbc.counts`). Chunks are uncompressed.
//!
//! One [`Capture`] (`capture`) follows the segment and produces encoded messages; they go
//! to an MCAP file ([`FileSink`], `file`) and/or to a [`Rolling`] buffer of the last
//! seconds (`rolling`), which writes a complete file on demand. [`Recorder`] is a capture
//! feeding a file; [`flight::Flight`] runs a capture on its own thread for the window.

mod capture;
mod file;
pub mod flight;
mod images;
mod inbox;
mod rolling;
mod writer;

pub use capture::{Capture, ChannelDef, Kind, Message, Prelude, SchemaDef};
pub use file::FileSink;
pub use images::stream_name_of;
pub use rolling::{Rolling, RollingCopy, RollingLimits};

use std::collections::BTreeMap;
use std::io::{Seek, Write};

use crate::attach::Attached;
use crate::layout::RegionKind;
#[cfg(test)]
use crate::rpc::recording_fb as fb;
pub(super) use crate::sync::lock;

/// The channel of frames.
pub const FRAME_TOPIC: &str = "/lrbc/frame";
/// The schema name of frames.
pub const FRAME_SCHEMA: &str = "lrbc.recording.Frame";

/// The channel of ring losses and malformed ring entries: one JSON object per event,
/// `{"event": "lost", "ring", "lost_bytes", "lost_entries"}` (`lost_entries` null when
/// the ring cannot tell) or `{"event": "malformed", "ring", "position", "error",
/// "raw_hex"}`.
pub const RING_EVENTS_TOPIC: &str = "/lrbc/ring_events";
/// The channel of the segment's state changes (JSON: `state`, `note`, `frame_seq`):
/// truncated, unlinked, replaced, engine gone, and back to attached.
pub const STATE_TOPIC: &str = "/lrbc/state";

/// The channel of the luckyrobots entry headers of `ring`: one JSON object per entry,
/// `{"correlation_id": 7, "method_or_status": 2}`, written just before the entry's
/// payload on `/lrbc/ring/<ring>`.
pub fn ring_header_topic(ring: RegionKind) -> String {
    format!("/lrbc/ring/{}/header", ring.as_str())
}

/// The ring of a `/lrbc/ring/<ring>/header` topic.
pub fn ring_of_header_topic(topic: &str) -> Option<RegionKind> {
    let name = topic.strip_prefix("/lrbc/ring/")?.strip_suffix("/header")?;
    RegionKind::ring_named(name)
}

/// The message of a luckyrobots entry header.
pub fn lucky_header_json(h: crate::rings::LuckyEntryHeader) -> String {
    serde_json::json!({
        "correlation_id": h.correlation_id,
        "method_or_status": h.method_or_status,
    })
    .to_string()
}

/// The luckyrobots entry header of a `/lrbc/ring/<ring>/header` message (its payload
/// length is the payload's, which follows).
pub fn lucky_header_of(
    json: &[u8],
    payload_length: usize,
) -> Option<crate::rings::LuckyEntryHeader> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let field = |k: &str| u32::try_from(v.get(k)?.as_u64()?).ok();
    Some(crate::rings::LuckyEntryHeader {
        correlation_id: field("correlation_id")?,
        method_or_status: field("method_or_status")?,
        payload_length: u32::try_from(payload_length).ok()?,
    })
}

/// The `/lrbc/ring_events` message of a loss or a malformed entry; None for other events:
/// the event's `traffic --json` object, with `event` and a malformed entry's `position`.
pub fn ring_event_json(e: &crate::traffic::TrafficEvent) -> Option<String> {
    use crate::traffic::TrafficEvent;
    let (event, position) = match e {
        TrafficEvent::Lost { .. } => ("lost", None),
        TrafficEvent::Malformed { position, .. } => ("malformed", Some(*position)),
        _ => return None,
    };
    let mut v = e.to_json()?;
    v["event"] = event.into();
    if let Some(p) = position {
        v["position"] = p.into();
    }
    Some(v.to_string())
}

/// The loss or malformed entry of a `/lrbc/ring_events` message; None when the message
/// is not one ([`ring_event_json`] writes them).
pub fn ring_event_of(json: &[u8]) -> Option<crate::traffic::TrafficEvent> {
    use crate::traffic::TrafficEvent;
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let ring = RegionKind::ring_named(v.get("ring")?.as_str()?)?;
    match v.get("event")?.as_str()? {
        "lost" => Some(TrafficEvent::Lost {
            ring,
            lost_bytes: v.get("lost_bytes")?.as_u64()?,
            lost_entries: v.get("lost_entries").and_then(serde_json::Value::as_u64),
        }),
        "malformed" => {
            let hex = v.get("raw_hex")?.as_str()?;
            Some(TrafficEvent::Malformed {
                ring,
                position: v.get("position")?.as_u64()?,
                error: v.get("error")?.as_str()?.to_string(),
                raw: crate::layout::fields::bytes_of_hex(hex)?,
            })
        }
        _ => None,
    }
}

/// The metadata record holding the bytes of the segment that layout detection reads
/// (header, names, ring headers): `size_bytes`, and `bytes@OFFSET` as lowercase hex.
pub const SEGMENT_METADATA: &str = "lrbc.segment";

/// The `lrbc.segment` metadata of `sparse`.
pub fn segment_metadata(sparse: &crate::layout::Sparse) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("size_bytes".into(), sparse.len_bytes.to_string());
    for (offset, bytes) in &sparse.pieces {
        m.insert(
            format!("bytes@{offset}"),
            crate::layout::fields::hex_string(bytes),
        );
    }
    m
}

/// The bytes stored by [`segment_metadata`]; None when a value is not what it writes.
pub fn segment_from_metadata(m: &BTreeMap<String, String>) -> Option<crate::layout::Sparse> {
    let len_bytes = m.get("size_bytes")?.parse().ok()?;
    let mut pieces = Vec::new();
    for (key, hex) in m {
        let Some(offset) = key.strip_prefix("bytes@") else {
            continue;
        };
        let offset: u64 = offset.parse().ok()?;
        pieces.push((offset, crate::layout::fields::bytes_of_hex(hex)?));
    }
    pieces.sort_by_key(|(o, _)| *o);
    let overlapping = pieces
        .windows(2)
        .any(|w| w[0].0 + w[0].1.len() as u64 > w[1].0);
    (!overlapping).then_some(crate::layout::Sparse { len_bytes, pieces })
}

/// A recording that could not be written or started, as one line.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("writing the recording: {0}")]
    Mcap(#[from] mcap::McapError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("env {env} does not exist (the segment has {num_envs} envs)")]
    NoSuchEnv { env: u32, num_envs: u32 },
}

impl RecordError {
    /// The cause of a write error, without the layers around it (e.g. "No space left on
    /// device (os error 28)").
    pub fn cause(&self) -> String {
        match self {
            Self::Mcap(mcap::McapError::Io(io)) | Self::Io(io) => io.to_string(),
            other => other.to_string(),
        }
    }
}

/// What the recorder saw, kept and lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Frames whose `frame_seq` the recorder saw (copied, torn or not).
    pub frames_seen: u64,
    pub frames_recorded: u64,
    /// Frames that came and went between two looks (`frame_seq` jumped by more than one).
    pub frames_missed: u64,
    /// Frames copied while the engine wrote them, so not kept.
    pub frames_torn: u64,
    /// Frames let pass on purpose while the recorder held off, keeping to its budget on
    /// a machine without spare CPU.
    pub frames_skipped: u64,
    /// Frames published while the segment's file was shorter than its layout (their data
    /// read as zeros), so not kept.
    pub frames_unreadable: u64,
    /// Changes of the segment's state recorded on `/lrbc/state`.
    pub state_changes: u64,
    pub ring_entries: u64,
    /// Ring losses and malformed ring entries recorded on `/lrbc/ring_events`.
    pub ring_events: u64,
    /// Ring bytes overwritten before the recorder read them.
    pub ring_lost_bytes: u64,
    /// Frames recorded and then dropped from the front of a rolling buffer (its seconds
    /// or bytes were full); 0 in a file recorded from start to end.
    pub frames_dropped: u64,
    /// Ring entries dropped from the front of a rolling buffer.
    pub ring_entries_dropped: u64,
    /// Camera images recorded (image region and streamed frames), when asked for.
    pub images: u64,
}

/// Records one attachment into an MCAP file: a [`Capture`] on the caller's thread
/// feeding a [`FileSink`] on a writer thread (`writer`), so that looking at the segment
/// never waits for the disk.
pub struct Recorder<W: Write + Seek + Send + 'static> {
    capture: Capture,
    writer: writer::Writer<W>,
    /// Schemas and channels of the capture's prelude handed to the writer.
    synced: (usize, usize),
}

impl<W: Write + Seek + Send + 'static> std::fmt::Debug for Recorder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("capture", &self.capture)
            .finish_non_exhaustive()
    }
}

impl<W: Write + Seek + Send + 'static> Recorder<W> {
    /// Starts a recording of `envs` of `attached` into `out`: writes the schemas,
    /// channels and the segment's metadata.
    pub fn new(attached: Attached, envs: Vec<u32>, out: W) -> Result<Self, RecordError> {
        Self::of(Capture::new(attached, envs)?, out)
    }

    /// A recording of `capture` (e.g. [`Capture::with_images`]) into `out`.
    pub fn of(capture: Capture, out: W) -> Result<Self, RecordError> {
        let file = FileSink::new(out, capture.prelude())?;
        let p = capture.prelude();
        let synced = (p.schemas.len(), p.channels.len());
        Ok(Self {
            writer: writer::Writer::start(file)?,
            capture,
            synced,
        })
    }

    pub fn attached(&self) -> &Attached {
        self.capture.attached()
    }

    pub fn counts(&self) -> Counts {
        self.capture.counts()
    }

    /// Waits up to `timeout` for a frame to record ([`Capture::wait`]).
    pub fn wait(&self, timeout: std::time::Duration) {
        self.capture.wait(timeout);
    }

    /// True while the recorder keeps to its budget on a busy machine.
    pub fn yielding(&self) -> bool {
        self.capture.yielding()
    }

    /// Bytes in the file so far.
    pub fn bytes_written(&self) -> u64 {
        self.writer.bytes_written()
    }

    /// Records a new frame, if one was published, and the ring entries published since
    /// the last call. True when anything was captured. An error is the file's: the
    /// writer stopped at it.
    pub fn poll(&mut self) -> Result<bool, RecordError> {
        if let Some(e) = self.writer.take_error() {
            return Err(e);
        }
        let mut messages = Vec::new();
        self.capture.poll(&mut messages);
        let p = self.capture.prelude();
        if (p.schemas.len(), p.channels.len()) != self.synced {
            self.synced = (p.schemas.len(), p.channels.len());
            self.writer.prelude(p);
        }
        if messages.is_empty() {
            return Ok(false);
        }
        self.writer.messages(messages);
        Ok(true)
    }

    /// Polls as frames come from the follower until `frames` are recorded (tests; fails
    /// after 20 s without them).
    #[cfg(test)]
    pub(crate) fn poll_until_recorded(&mut self, frames: u64) {
        self.poll_until(|c| c.frames_recorded >= frames);
    }

    /// Polls as frames come from the follower until `done` says so (tests; fails after
    /// 20 s without it).
    #[cfg(test)]
    pub(crate) fn poll_until(&mut self, done: impl Fn(&Counts) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !done(&self.counts()) {
            assert!(
                std::time::Instant::now() < deadline,
                "waited 20 s: {:?}",
                self.counts()
            );
            self.wait(std::time::Duration::from_millis(10));
            self.poll().expect("the recording is written");
        }
    }

    /// Ends the current chunk and flushes it to the output: what was recorded so far
    /// reads back even if the process dies before [`Recorder::finish`].
    pub fn end_chunk(&mut self) -> Result<(), RecordError> {
        if let Some(e) = self.writer.take_error() {
            return Err(e);
        }
        self.writer.end_chunk();
        Ok(())
    }

    /// Writes what is left, `lrbc.counts` and the summary: the file is complete.
    pub fn finish(self) -> Result<Counts, RecordError> {
        self.finish_into_inner().map(|(c, _)| c)
    }

    /// Like [`Recorder::finish`], and gives back the output.
    pub fn finish_into_inner(mut self) -> Result<(Counts, W), RecordError> {
        // What the follower delivered before it let go is recorded too.
        self.capture.stop_following();
        self.poll()?;
        let c = self.capture.counts();
        let out = self.writer.finish()?.finish(&c)?;
        Ok((c, out))
    }
}

#[cfg(test)]
mod tests;
