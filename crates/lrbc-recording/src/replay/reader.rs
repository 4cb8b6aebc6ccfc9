//! Reading a recording from its index: the summary's chunk index when the file was
//! finished, else an index built by walking the top-level records (a chunk's body is
//! skipped with a seek) up to the last complete one. Messages are read a chunk at a
//! time with positioned reads; a few decoded chunks are kept. The camera images at a
//! time come from the newest chunks whose message indexes list an image channel
//! (`images`). The index is read or built in `index`; `checks` holds what the
//! whole-file pass (`stream`) checks the same way; `damage` names what is found wrong.

mod checks;
mod damage;
mod images;
mod index;
mod states;

pub(super) use checks::{
    MAX_RECORD_BYTES, Records, check_profile, chunk_records, is_frame_channel,
};
pub use damage::{Damage, NotLrbc};
pub use images::LatestImages;
pub use states::StateChange;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcap::records::{Record, op};

use crate::format::{
    COUNTS_METADATA, Counts, CountsError, EVENTS_TOPIC, RHYTHM_TOPIC, RING_ENTRY_SCHEMA,
    RING_EVENTS_TOPIC, RecFrame, SEGMENT_METADATA, STATE_TOPIC, camera_env_of_topic,
    ring_entry_payload, ring_event_of, ring_of_header_topic, ring_of_topic, segment_from_metadata,
    stream_of_topic,
};
use index::{read_at, read_summary, record_at, walk};
use lrbc::layout::{Geometry, LayoutChoice, RegionKind};

/// A recording that cannot be opened, as one line.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{path}: not an MCAP file")]
    NotMcap { path: String },
    #[error("{path}: an MCAP file, but not an lrbc recording ({why})")]
    NotRecording { path: String, why: NotLrbc },
    #[error("{path}: unreadable recording: {why}")]
    Corrupt { path: String, why: Damage },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// A chunk of the file: where it is, the log times of its messages, and how its
/// records are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkInfo {
    pub offset: u64,
    pub length: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub packing: Packing,
    /// The bytes of its records, decompressed.
    pub uncompressed: u64,
}

/// How a chunk's records are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Packing {
    #[default]
    None,
    Zstd,
    Lz4,
    /// A compression this tool does not read.
    Other,
}

impl Packing {
    /// The packing of a chunk record's `compression` field.
    pub fn of(name: &str) -> Self {
        match name {
            "" => Self::None,
            "zstd" => Self::Zstd,
            "lz4" => Self::Lz4,
            _ => Self::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Zstd => "zstd",
            Self::Lz4 => "lz4",
            Self::Other => "another (not read)",
        }
    }
}

/// A ring entry's payload as recorded, or a ring's loss or malformed entry.
#[derive(Clone, Debug, PartialEq)]
pub enum RingMessage {
    Entry {
        log_ns: u64,
        ring: RegionKind,
        payload: Arc<[u8]>,
    },
    /// A loss or a malformed entry of `/lrbc/ring_events`.
    Event {
        log_ns: u64,
        event: lrbc_live::traffic::TrafficEvent,
    },
    /// The luckyrobots entry header of the next entry of `ring` (its JSON, as recorded
    /// on `/lrbc/ring/<ring>/header`).
    Header { ring: RegionKind, json: Arc<[u8]> },
}

/// What a message of a recording is, among those the player reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    /// `/lrbc/frame`.
    Frame,
    /// `/lrbc/ring/<ring>`.
    Ring(RegionKind),
    /// `/lrbc/ring_events`.
    RingEvent,
    /// `/lrbc/ring/<ring>/header`.
    RingHeader(RegionKind),
}

/// One message of a chunk.
#[derive(Clone, Debug)]
struct Msg {
    channel: u16,
    log_ns: u64,
    data: Arc<[u8]>,
}

/// Chunks whose messages (decompressed and parsed) are kept, at most...
const CACHED_CHUNKS: usize = 6;
/// ...and their bytes at most, beyond the newest chunk read (other writers' chunks may be
/// larger than ours).
const CACHED_BYTES: usize = 48 << 20;

/// An open recording.
pub struct Recording {
    path: PathBuf,
    file: File,
    file_len: u64,
    pub chunks: Vec<ChunkInfo>,
    frame_channel: u16,
    rings: HashMap<u16, RegionKind>,
    /// The channel of ring losses and malformed entries, when the file has it.
    ring_events: Option<u16>,
    /// The channel of the segment's state changes, when the file has it.
    state: Option<u16>,
    /// The channel of the detector's events, when the file has it.
    events: Option<u16>,
    /// The channel of the loop's rhythm, when the file has it.
    rhythm: Option<u16>,
    /// The channels of luckyrobots entry headers: channel → ring.
    ring_headers: HashMap<u16, RegionKind>,
    /// Camera channels of the image region: channel → env.
    cameras: HashMap<u16, u32>,
    /// Streamed image channels: channel → the topic's last part.
    streams: HashMap<u16, String>,
    /// Every channel whose record was read.
    known: HashSet<u16>,
    /// Schema names by id.
    schemas: HashMap<u16, String>,
    /// Ring channels of JSON ring entries (`lrbc.recording.RingEntry`), whose messages
    /// are read as the exact bytes they carry.
    entries_as_json: HashSet<u16>,
    /// Channels with messages in the file, from the message indexes.
    indexed: BTreeSet<u16>,
    /// A chunk's (by its offset) channels with messages, from its message indexes.
    chunk_channels: HashMap<u64, Vec<u16>>,
    pub metadata: BTreeMap<String, BTreeMap<String, String>>,
    pub geometry: Geometry,
    /// Where the file ends early (its recorder did not finish it): the last complete
    /// byte read.
    pub unfinished_at: Option<u64>,
    /// Frames in the file (from the statistics or the message indexes), if known.
    pub frame_count: Option<u64>,
    cache: VecDeque<(usize, Arc<Vec<Msg>>)>,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("path", &self.path)
            .field("chunks", &self.chunks.len())
            .field("unfinished_at", &self.unfinished_at)
            .finish_non_exhaustive()
    }
}

impl Recording {
    /// Opens `path`: reads its summary (or walks its records when it has none), the
    /// metadata, and detects the recorded segment's geometry again.
    pub fn open(path: &Path) -> Result<Self, ReplayError> {
        let shown = path.display().to_string();
        let io = |source| ReplayError::Io {
            path: shown.clone(),
            source,
        };
        let mut file = File::open(path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let mut magic = [0u8; 8];
        if file_len < 8 || file.read_exact(&mut magic).is_err() || magic != mcap::MAGIC {
            return Err(ReplayError::NotMcap { path: shown });
        }
        let not_recording = |why: NotLrbc| ReplayError::NotRecording {
            path: shown.clone(),
            why,
        };
        // The header's profile, when the header is there (else the walk says what is).
        if let Ok((op::HEADER, body)) = record_at(&mut file, 8)
            && let Ok(Record::Header(h)) = mcap::read::parse_record(op::HEADER, &body)
        {
            check_profile(&h.profile).map_err(not_recording)?;
        }
        let corrupt = |why: Damage| ReplayError::Corrupt {
            path: shown.clone(),
            why,
        };
        let mut index = match read_summary(&mut file, file_len) {
            Ok(Some(i)) => i,
            Ok(None) | Err(_) => walk(&mut file, file_len).map_err(corrupt)?,
        };
        let mut frame_channel = None;
        for c in &index.channels {
            let schema = index.schemas.get(&c.schema_id).map(String::as_str);
            if is_frame_channel(c, schema).map_err(not_recording)? {
                frame_channel = Some(c.id);
                break;
            }
        }
        let frame_channel = frame_channel.ok_or_else(|| not_recording(NotLrbc::NoFrameChannel))?;
        let rings = index
            .channels
            .iter()
            .filter_map(|c| Some((c.id, ring_of_topic(&c.topic)?)))
            .collect();
        let segment = index
            .metadata
            .get(SEGMENT_METADATA)
            .and_then(segment_from_metadata)
            .ok_or_else(|| not_recording(NotLrbc::NoSegment))?;
        let geometry = lrbc::layout::inspect(&segment, LayoutChoice::Auto)
            .map_err(|e| corrupt(Damage::Segment(e)))?;
        index
            .chunks
            .retain(|c| c.start_ns <= c.end_ns && c.end_ns > 0);
        index.chunks.sort_by_key(|c| (c.start_ns, c.offset));
        let indexed = index.chunk_channels.values().flatten().copied().collect();
        let mut rec = Self {
            path: path.to_path_buf(),
            file,
            file_len,
            chunks: index.chunks,
            frame_channel,
            rings,
            ring_events: None,
            state: None,
            events: None,
            rhythm: None,
            ring_headers: HashMap::new(),
            cameras: HashMap::new(),
            streams: HashMap::new(),
            known: HashSet::new(),
            schemas: std::mem::take(&mut index.schemas),
            entries_as_json: HashSet::new(),
            indexed,
            chunk_channels: index.chunk_channels,
            metadata: index.metadata,
            geometry,
            unfinished_at: index.unfinished_at,
            frame_count: index
                .frame_count
                .or_else(|| index.channel_counts.get(&frame_channel).copied()),
            cache: VecDeque::new(),
        };
        for c in &index.channels {
            rec.register(c);
        }
        Ok(rec)
    }

    /// Notes a channel's topic: a ring, a camera or a stream.
    fn register(&mut self, c: &mcap::records::Channel) {
        self.known.insert(c.id);
        if let Some(k) = ring_of_topic(&c.topic) {
            self.rings.insert(c.id, k);
            if self.schemas.get(&c.schema_id).map(String::as_str) == Some(RING_ENTRY_SCHEMA) {
                self.entries_as_json.insert(c.id);
            }
        } else if c.topic == RING_EVENTS_TOPIC {
            self.ring_events = Some(c.id);
        } else if c.topic == STATE_TOPIC {
            self.state = Some(c.id);
        } else if c.topic == EVENTS_TOPIC {
            self.events = Some(c.id);
        } else if c.topic == RHYTHM_TOPIC {
            self.rhythm = Some(c.id);
        } else if let Some(ring) = ring_of_header_topic(&c.topic) {
            self.ring_headers.insert(c.id, ring);
        } else if let Some(env) = camera_env_of_topic(&c.topic) {
            self.cameras.insert(c.id, env);
        } else if let Some(name) = stream_of_topic(&c.topic) {
            self.streams.insert(c.id, name.to_string());
        }
    }

    /// The counts its recorder wrote at the end (`lrbc.counts`: frames recorded,
    /// missed, torn, ...; a count an older recorder did not write is 0); None when the
    /// file has none (its recorder did not finish it), an error when they are not
    /// readable (a value that is no number, or a newer form than this build reads).
    pub fn counts(&self) -> Result<Option<Counts>, CountsError> {
        self.metadata
            .get(COUNTS_METADATA)
            .map(Counts::from_metadata)
            .transpose()
    }

    /// Whether the recording has camera images of the image region (as far as read).
    pub fn has_camera_images(&self) -> bool {
        !self.cameras.is_empty()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's name, for titles.
    pub fn label(&self) -> String {
        self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }

    /// Log times of the first and last message (ns, the recorder's clock).
    pub fn time_range(&self) -> Option<(u64, u64)> {
        let start = self.chunks.iter().map(|c| c.start_ns).min()?;
        let end = self.chunks.iter().map(|c| c.end_ns).max()?;
        Some((start, end))
    }

    /// "not finished: read up to byte N of M" for a file its recorder did not finish.
    pub fn unfinished_note(&self) -> Option<String> {
        self.unfinished_at.map(|at| {
            format!(
                "not finished: read up to its last complete chunk (byte {at} of {})",
                self.file_len
            )
        })
    }

    /// How the chunks are compressed: each packing with its chunks, the bytes of their
    /// records and of the chunks in the file.
    pub fn packings(&self) -> BTreeMap<Packing, (u64, u64, u64)> {
        let mut out = BTreeMap::new();
        for c in &self.chunks {
            let e = out.entry(c.packing).or_insert((0, 0, 0));
            e.0 += 1;
            e.1 += c.uncompressed;
            e.2 += c.length;
        }
        out
    }

    /// The messages of chunk `i`, from the cache or the file.
    fn chunk(&mut self, i: usize) -> Result<Arc<Vec<Msg>>, Damage> {
        if let Some(pos) = self.cache.iter().position(|(j, _)| *j == i)
            && let Some(hit) = self.cache.remove(pos)
        {
            let msgs = Arc::clone(&hit.1);
            self.cache.push_front(hit);
            return Ok(msgs);
        }
        let c = *self.chunks.get(i).ok_or(Damage::NoSuchChunk { index: i })?;
        if c.length < 9 || c.offset.saturating_add(c.length) > self.file_len {
            return Err(Damage::ChunkPastEnd {
                offset: c.offset,
                length: c.length,
            });
        }
        let body = read_at(&mut self.file, c.offset + 9, c.length.saturating_sub(9))?;
        let Record::Chunk { header, data } = mcap::read::parse_record(op::CHUNK, &body)? else {
            return Err(Damage::NotAChunk { offset: c.offset });
        };
        let records = chunk_records(c.offset, &header, &data)?;
        let mut msgs = Vec::new();
        for (opcode, body) in Records(&records).map_while(Result::ok) {
            match mcap::read::parse_record(opcode, body) {
                Ok(Record::Message { header, data }) => {
                    // A ring entry as JSON: its exact bytes, as earlier recordings hold it
                    // (one that does not read is kept as it is: the traffic shows it as
                    // malformed).
                    let data = match (self.entries_as_json.contains(&header.channel_id))
                        .then(|| ring_entry_payload(&data))
                        .flatten()
                    {
                        Some(bytes) => Arc::from(bytes),
                        None => Arc::from(&*data),
                    };
                    msgs.push(Msg {
                        channel: header.channel_id,
                        log_ns: header.log_time,
                        data,
                    });
                }
                Ok(Record::Schema { header, .. }) => {
                    self.schemas.insert(header.id, header.name);
                }
                Ok(Record::Channel(ch)) => self.register(&ch),
                _ => {}
            }
        }
        msgs.sort_by_key(|m| m.log_ns);
        let msgs = Arc::new(msgs);
        self.cache.push_front((i, Arc::clone(&msgs)));
        self.cache.truncate(CACHED_CHUNKS);
        let mut bytes = 0;
        let keep = self
            .cache
            .iter()
            .take_while(|(_, m)| {
                bytes += m.iter().map(|m| m.data.len() + 32).sum::<usize>();
                bytes <= CACHED_BYTES
            })
            .count();
        self.cache.truncate(keep.max(1));
        Ok(msgs)
    }

    /// The first chunk that may hold messages at or after `t`.
    fn first_chunk_from(&self, t: u64) -> usize {
        self.chunks.partition_point(|c| c.end_ns < t)
    }

    /// The frame at `t` or the last one before it; None before the first frame.
    pub fn frame_at(&mut self, t: u64) -> Result<Option<RecFrame>, Damage> {
        let mut i = self.chunks.partition_point(|c| c.start_ns <= t);
        while i > 0 {
            i -= 1;
            let msgs = self.chunk(i)?;
            let found = msgs
                .iter()
                .rev()
                .filter(|m| m.log_ns <= t && m.channel == self.frame_channel)
                .find_map(|m| RecFrame::decode(m.log_ns, &m.data));
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// Calls `each` with every message of `[t0, t1]` in order: a frame, a ring entry or
    /// a ring event. Stops when `each` returns false.
    pub fn each_message(
        &mut self,
        t0: u64,
        t1: u64,
        mut each: impl FnMut(Topic, u64, &Arc<[u8]>) -> bool,
    ) -> Result<(), Damage> {
        let mut i = self.first_chunk_from(t0);
        while i < self.chunks.len() && self.chunks[i].start_ns <= t1 {
            let msgs = self.chunk(i)?;
            for m in msgs.iter() {
                if m.log_ns < t0 || m.log_ns > t1 {
                    continue;
                }
                let kind = if m.channel == self.frame_channel {
                    Topic::Frame
                } else if let Some(&ring) = self.rings.get(&m.channel) {
                    Topic::Ring(ring)
                } else if self.ring_events == Some(m.channel) {
                    Topic::RingEvent
                } else if let Some(&ring) = self.ring_headers.get(&m.channel) {
                    Topic::RingHeader(ring)
                } else {
                    continue;
                };
                if !each(kind, m.log_ns, &m.data) {
                    return Ok(());
                }
            }
            i += 1;
        }
        Ok(())
    }

    /// Calls `each` with every frame of `[t0, t1]` in order; stops when it returns false.
    pub fn frames_between(
        &mut self,
        t0: u64,
        t1: u64,
        mut each: impl FnMut(RecFrame) -> bool,
    ) -> Result<(), Damage> {
        self.each_message(t0, t1, |kind, log_ns, data| {
            if kind != Topic::Frame {
                return true;
            }
            RecFrame::decode(log_ns, data).is_none_or(&mut each)
        })
    }

    /// The ring entries, losses and malformed entries of `[t0, t1]`, in order, at most
    /// `max` (the newest kept). A ring event that does not read is left out.
    pub fn ring_between(
        &mut self,
        t0: u64,
        t1: u64,
        max: usize,
    ) -> Result<Vec<RingMessage>, Damage> {
        let mut out = VecDeque::new();
        self.each_message(t0, t1, |kind, log_ns, data| {
            let m = match kind {
                Topic::Frame => return true,
                Topic::Ring(ring) => RingMessage::Entry {
                    log_ns,
                    ring,
                    payload: Arc::clone(data),
                },
                Topic::RingEvent => match ring_event_of(data) {
                    Some(event) => RingMessage::Event { log_ns, event },
                    None => return true,
                },
                Topic::RingHeader(ring) => RingMessage::Header {
                    ring,
                    json: Arc::clone(data),
                },
            };
            out.push_back(m);
            if out.len() > max {
                out.pop_front();
            }
            true
        })?;
        Ok(out.into())
    }
}

#[cfg(test)]
mod tests;
