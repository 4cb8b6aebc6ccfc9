//! Reading a recording from its index: the summary's chunk index when the file was
//! finished, else an index built by walking the top-level records (a chunk's body is
//! skipped with a seek) up to the last complete one. Messages are read a chunk at a
//! time with positioned reads; a few decoded chunks are kept. The camera images at a
//! time come from the newest chunks whose message indexes list an image channel.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcap::records::{Record, op};

/// The frame decoder, where the player looks for it.
pub use super::frame::RecFrame;
use crate::layout::{Geometry, LayoutChoice, RegionKind};
use crate::record::{FRAME_SCHEMA, FRAME_TOPIC, SEGMENT_METADATA, segment_from_metadata};

/// A recording that cannot be opened, as one line.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{path}: not an MCAP file")]
    NotMcap { path: String },
    #[error("{path}: an MCAP file, but not an lrbc recording ({why})")]
    NotRecording { path: String, why: String },
    #[error("{path}: unreadable recording: {why}")]
    Corrupt { path: String, why: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// A chunk of the file: where it is and the log times of its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkInfo {
    pub offset: u64,
    pub length: u64,
    pub start_ns: u64,
    pub end_ns: u64,
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
        event: crate::traffic::TrafficEvent,
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

/// The newest camera images at or before a time: the foxglove messages as recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatestImages {
    /// Recorded env → (log time, its `foxglove.RawImage` on `/lrbc/camera/env<N>`).
    pub cameras: BTreeMap<u32, (u64, Arc<[u8]>)>,
    /// Stream (the topic's last part, `camera-front-env3`) → (log time, the ring
    /// entry's envelope that carried the frame, as the window decodes live streams).
    pub streams: BTreeMap<String, (u64, Arc<[u8]>)>,
}

/// The camera env of a `/lrbc/camera/env<N>` topic.
fn camera_env(topic: &str) -> Option<u32> {
    topic.strip_prefix("/lrbc/camera/env")?.parse().ok()
}

/// One message of a chunk.
#[derive(Clone, Debug)]
struct Msg {
    channel: u16,
    log_ns: u64,
    data: Arc<[u8]>,
}

const CACHED_CHUNKS: usize = 6;
/// Records longer than this are not read (a corrupt length).
pub(super) const MAX_RECORD_BYTES: u64 = 1 << 30;

/// The metadata record of the counts a recorder writes when it finishes.
pub const COUNTS_METADATA: &str = "lrbc.counts";

/// The profile recordings carry in their MCAP header.
pub const PROFILE: &str = "lrbc";

/// Whether an MCAP header's profile is a recording's; else why not.
pub(super) fn check_profile(profile: &str) -> Result<(), String> {
    if profile == PROFILE {
        Ok(())
    } else {
        Err(format!("its MCAP profile is {profile:?}, not {PROFILE:?}"))
    }
}

/// Whether channel `c` (its schema named `schema`) carries the frames; an error when
/// it is on the frame topic with another encoding or schema.
pub(super) fn is_frame_channel(
    c: &mcap::records::Channel,
    schema: Option<&str>,
) -> Result<bool, String> {
    if c.topic != FRAME_TOPIC {
        return Ok(false);
    }
    if c.message_encoding != "flatbuffer" {
        return Err(format!(
            "{FRAME_TOPIC} is encoded as {:?}",
            c.message_encoding
        ));
    }
    if schema != Some(FRAME_SCHEMA) {
        return Err(format!(
            "{FRAME_TOPIC} has the schema {:?}, not {FRAME_SCHEMA}",
            schema.unwrap_or("")
        ));
    }
    Ok(true)
}

/// Whether a chunk can be read (recordings are not compressed); else why not.
pub(super) fn check_chunk(header: &mcap::records::ChunkHeader) -> Result<(), String> {
    if header.compression.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "a chunk is compressed with {:?} (recordings are not)",
            header.compression
        ))
    }
}

/// The records of a run of bytes (a chunk's records, the summary section): opcode,
/// then the body; an error, then the end, when a record runs past the end.
pub(super) struct Records<'a>(pub &'a [u8]);

impl<'a> Iterator for Records<'a> {
    type Item = Result<(u8, &'a [u8]), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let (Some(&op), Some(body)) = (
            self.0.first(),
            self.0.get(1..9).and_then(|len| {
                let len = usize::try_from(u64::from_le_bytes(len.try_into().ok()?)).ok()?;
                self.0.get(9..9usize.checked_add(len)?)
            }),
        ) else {
            self.0 = &[];
            return Some(Err("a record runs past the end of its chunk".into()));
        };
        self.0 = &self.0[9 + body.len()..];
        Some(Ok((op, body)))
    }
}

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
    /// The channels of luckyrobots entry headers: channel → ring.
    ring_headers: HashMap<u16, RegionKind>,
    /// Camera channels of the image region: channel → env.
    cameras: HashMap<u16, u32>,
    /// Streamed image channels: channel → the topic's last part.
    streams: HashMap<u16, String>,
    /// Every channel whose record was read.
    known: HashSet<u16>,
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

fn ring_kind(topic: &str) -> Option<RegionKind> {
    RegionKind::ring_named(topic.strip_prefix("/lrbc/ring/")?)
}

/// What the index walk collects.
#[derive(Default)]
struct Index {
    chunks: Vec<ChunkInfo>,
    schemas: HashMap<u16, String>,
    channels: Vec<mcap::records::Channel>,
    metadata: BTreeMap<String, BTreeMap<String, String>>,
    frame_count: Option<u64>,
    channel_counts: BTreeMap<u16, u64>,
    unfinished_at: Option<u64>,
    chunk_channels: HashMap<u64, Vec<u16>>,
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
        let not_recording = |why: String| ReplayError::NotRecording {
            path: shown.clone(),
            why,
        };
        // The header's profile, when the header is there (else the walk says what is).
        if let Ok((op::HEADER, body)) = record_at(&mut file, 8)
            && let Ok(Record::Header(h)) = mcap::read::parse_record(op::HEADER, &body)
        {
            check_profile(&h.profile).map_err(not_recording)?;
        }
        let corrupt = |why: String| ReplayError::Corrupt {
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
        let frame_channel = frame_channel.ok_or_else(|| {
            not_recording(format!(
                "no {FRAME_TOPIC} channel with schema {FRAME_SCHEMA}"
            ))
        })?;
        let rings = index
            .channels
            .iter()
            .filter_map(|c| Some((c.id, ring_kind(&c.topic)?)))
            .collect();
        let segment = index
            .metadata
            .get(SEGMENT_METADATA)
            .and_then(segment_from_metadata)
            .ok_or_else(|| ReplayError::NotRecording {
                path: shown.clone(),
                why: format!("no valid {SEGMENT_METADATA} metadata"),
            })?;
        let geometry = crate::layout::inspect(&segment, LayoutChoice::Auto)
            .map_err(|e| corrupt(format!("the recorded segment: {e}")))?;
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
            ring_headers: HashMap::new(),
            cameras: HashMap::new(),
            streams: HashMap::new(),
            known: HashSet::new(),
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
        if let Some(k) = ring_kind(&c.topic) {
            self.rings.insert(c.id, k);
        } else if c.topic == crate::record::RING_EVENTS_TOPIC {
            self.ring_events = Some(c.id);
        } else if let Some(ring) = crate::record::ring_of_header_topic(&c.topic) {
            self.ring_headers.insert(c.id, ring);
        } else if let Some(env) = camera_env(&c.topic) {
            self.cameras.insert(c.id, env);
        } else if let Some(name) = c.topic.strip_prefix("/lrbc/stream/") {
            self.streams.insert(c.id, name.to_string());
        }
    }

    /// The counts its recorder wrote at the end (`lrbc.counts`: frames recorded,
    /// missed, torn, ...), those that are numbers; None when the file has none (its
    /// recorder did not finish it).
    pub fn counts(&self) -> Option<BTreeMap<String, u64>> {
        let m = self.metadata.get(COUNTS_METADATA)?;
        Some(
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
                .collect(),
        )
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

    /// The messages of chunk `i`, from the cache or the file.
    fn chunk(&mut self, i: usize) -> Result<Arc<Vec<Msg>>, String> {
        if let Some(pos) = self.cache.iter().position(|(j, _)| *j == i) {
            let hit = self.cache.remove(pos).ok_or("cache")?;
            let msgs = Arc::clone(&hit.1);
            self.cache.push_front(hit);
            return Ok(msgs);
        }
        let c = *self.chunks.get(i).ok_or("no such chunk")?;
        if c.length < 9 || c.offset.saturating_add(c.length) > self.file_len {
            return Err(format!(
                "a chunk at byte {} of {} bytes runs past the end of the file",
                c.offset, c.length
            ));
        }
        let body = read_at(&mut self.file, c.offset + 9, c.length.saturating_sub(9))?;
        let Record::Chunk { header, data } =
            mcap::read::parse_record(op::CHUNK, &body).map_err(|e| e.to_string())?
        else {
            return Err("not a chunk".into());
        };
        check_chunk(&header)?;
        let mut msgs = Vec::new();
        for (opcode, body) in Records(&data).map_while(Result::ok) {
            match mcap::read::parse_record(opcode, body) {
                Ok(Record::Message { header, data }) => msgs.push(Msg {
                    channel: header.channel_id,
                    log_ns: header.log_time,
                    data: Arc::from(&*data),
                }),
                Ok(Record::Channel(ch)) => self.register(&ch),
                _ => {}
            }
        }
        msgs.sort_by_key(|m| m.log_ns);
        let msgs = Arc::new(msgs);
        self.cache.push_front((i, Arc::clone(&msgs)));
        self.cache.truncate(CACHED_CHUNKS);
        Ok(msgs)
    }

    /// The first chunk that may hold messages at or after `t`.
    fn first_chunk_from(&self, t: u64) -> usize {
        self.chunks.partition_point(|c| c.end_ns < t)
    }

    /// The frame at `t` or the last one before it; None before the first frame.
    pub fn frame_at(&mut self, t: u64) -> Result<Option<RecFrame>, String> {
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
    ) -> Result<(), String> {
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
    ) -> Result<(), String> {
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
    ) -> Result<Vec<RingMessage>, String> {
        let mut out = VecDeque::new();
        self.each_message(t0, t1, |kind, log_ns, data| {
            let m = match kind {
                Topic::Frame => return true,
                Topic::Ring(ring) => RingMessage::Entry {
                    log_ns,
                    ring,
                    payload: Arc::clone(data),
                },
                Topic::RingEvent => match crate::record::ring_event_of(data) {
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

impl Recording {
    /// The newest camera image of every recorded env and the newest frame of every
    /// stream at or before `t`. Chunks are read newest first, only those whose message
    /// indexes list an image channel not found yet (or a channel not known yet).
    pub fn images_at(&mut self, t: u64) -> Result<LatestImages, String> {
        // A channel's record is in the chunk of its first message: those chunks are
        // read first (once), so that every channel listed in the indexes is known.
        let unknown: Vec<u16> = self
            .indexed
            .iter()
            .filter(|id| !self.known.contains(id))
            .copied()
            .collect();
        for id in unknown {
            if self.known.contains(&id) {
                continue;
            }
            let first = self.chunks.iter().position(|c| {
                self.chunk_channels
                    .get(&c.offset)
                    .is_some_and(|chs| chs.contains(&id))
            });
            if let Some(i) = first {
                self.chunk(i)?;
            }
            if !self.known.contains(&id) {
                // Not in its chunk: not looked for again.
                self.known.insert(id);
            }
        }
        let mut out = LatestImages::default();
        let mut found: HashSet<u16> = HashSet::new();
        let mut unmatched = Vec::new();
        let mut i = self.chunks.partition_point(|c| c.start_ns <= t);
        while i > 0 {
            i -= 1;
            let wanted = |id: &u16| {
                !found.contains(id)
                    && (self.cameras.contains_key(id)
                        || self.streams.contains_key(id)
                        || !self.known.contains(id))
            };
            let offset = self.chunks[i].offset;
            if self
                .chunk_channels
                .get(&offset)
                .is_some_and(|chs| !chs.iter().any(wanted))
            {
                continue;
            }
            let msgs = self.chunk(i)?;
            for m in msgs.iter().rev() {
                if m.log_ns > t || found.contains(&m.channel) {
                    continue;
                }
                if let Some(&env) = self.cameras.get(&m.channel) {
                    found.insert(m.channel);
                    out.cameras.insert(env, (m.log_ns, Arc::clone(&m.data)));
                } else if let Some(name) = self.streams.get(&m.channel) {
                    found.insert(m.channel);
                    // The ring entry written with it (same log time) is the frame as
                    // the engine sent it.
                    match self.envelope_of(&msgs, m.log_ns, name) {
                        Some(e) => {
                            out.streams.insert(name.clone(), (m.log_ns, e));
                        }
                        None => unmatched.push((name.clone(), m.log_ns)),
                    }
                }
            }
            // A chunk closed between the image and its ring entry: the next one has it.
            if !unmatched.is_empty() && i + 1 < self.chunks.len() {
                let next = self.chunk(i + 1)?;
                for (name, log_ns) in unmatched.drain(..) {
                    if let Some(e) = self.envelope_of(&next, log_ns, &name) {
                        out.streams.insert(name, (log_ns, e));
                    }
                }
            }
            unmatched.clear();
            let complete = self
                .cameras
                .keys()
                .chain(self.streams.keys())
                .all(|id| found.contains(id))
                && self.indexed.iter().all(|id| self.known.contains(id));
            if complete {
                break;
            }
        }
        Ok(out)
    }
}

impl Recording {
    /// The ring entry of `msgs` logged at `log_ns` that is a frame of stream `name`.
    fn envelope_of(&self, msgs: &[Msg], log_ns: u64, name: &str) -> Option<Arc<[u8]>> {
        msgs.iter()
            .find(|r| {
                r.log_ns == log_ns
                    && self.rings.contains_key(&r.channel)
                    && crate::record::stream_name_of(&r.data).as_deref() == Some(name)
            })
            .map(|r| Arc::clone(&r.data))
    }
}

/// Reads `len` bytes at `offset`.
fn read_at(file: &mut File, offset: u64, len: u64) -> Result<Vec<u8>, String> {
    if len > MAX_RECORD_BYTES {
        return Err(format!("a record of {len} bytes at {offset}"));
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; usize::try_from(len).map_err(|_| "length")?];
    file.read_exact(&mut buf)
        .map_err(|e| format!("reading {len} bytes at {offset}: {e}"))?;
    Ok(buf)
}

/// Reads one record at `offset`: (opcode, body).
fn record_at(file: &mut File, offset: u64) -> Result<(u8, Vec<u8>), String> {
    let head = read_at(file, offset, 9)?;
    let len = u64::from_le_bytes(head[1..9].try_into().map_err(|_| "length")?);
    Ok((head[0], read_at(file, offset + 9, len)?))
}

fn add(index: &mut Index, record: Record<'_>) {
    match record {
        Record::Schema { header, .. } => {
            index.schemas.insert(header.id, header.name);
        }
        Record::Channel(c) if !index.channels.iter().any(|x| x.id == c.id) => {
            index.channels.push(c);
        }
        Record::Metadata(m) => {
            index.metadata.insert(m.name, m.metadata);
        }
        _ => {}
    }
}

/// The index from the summary section; None when the file has none (not finished, or
/// written without one).
fn read_summary(file: &mut File, len: u64) -> Result<Option<Index>, String> {
    // Footer record (9 + 20 bytes) then the closing magic.
    if len < 8 + 29 + 8 {
        return Ok(None);
    }
    let tail = read_at(file, len - 37, 37)?;
    if tail[29..] != *mcap::MAGIC || tail[0] != op::FOOTER {
        return Ok(None);
    }
    let Ok(Record::Footer(footer)) = mcap::read::parse_record(op::FOOTER, &tail[9..29]) else {
        return Ok(None);
    };
    if footer.summary_start == 0 || footer.summary_start >= len - 37 {
        return Ok(None);
    }
    let summary = read_at(file, footer.summary_start, len - 37 - footer.summary_start)?;
    let mut index = Index::default();
    let mut metadata_at = Vec::new();
    for record in Records(&summary) {
        let (opcode, body) = record?;
        match mcap::read::parse_record(opcode, body).map_err(|e| e.to_string())? {
            Record::ChunkIndex(c) => {
                index.chunk_channels.insert(
                    c.chunk_start_offset,
                    c.message_index_offsets.keys().copied().collect(),
                );
                index.chunks.push(ChunkInfo {
                    offset: c.chunk_start_offset,
                    length: c.chunk_length,
                    start_ns: c.message_start_time,
                    end_ns: c.message_end_time,
                });
            }
            Record::MetadataIndex(m) => metadata_at.push(m.offset),
            Record::Statistics(s) => index.channel_counts = s.channel_message_counts,
            r => add(&mut index, r),
        }
    }
    for offset in metadata_at {
        let (opcode, body) = record_at(file, offset)?;
        let r = mcap::read::parse_record(opcode, &body).map_err(|e| e.to_string())?;
        add(&mut index, r);
    }
    Ok(Some(index))
}

/// The index built by walking the records: a chunk's body is skipped, bar the chunks
/// before the first metadata record (where the recorder writes its channels).
fn walk(file: &mut File, len: u64) -> Result<Index, String> {
    let mut index = Index::default();
    let mut at = 8u64;
    let mut before_metadata = true;
    let mut frames = 0u64;
    let mut finished = false;
    while at + 9 <= len {
        let head = read_at(file, at, 9)?;
        let opcode = head[0];
        let n = u64::from_le_bytes(head[1..9].try_into().map_err(|_| "length")?);
        let end = at.saturating_add(9).saturating_add(n);
        if end > len {
            break;
        }
        match opcode {
            op::CHUNK => {
                // message_start_time, message_end_time (the chunk header's first words).
                let times = read_at(file, at + 9, 16.min(n))?;
                let word = |i: usize| {
                    times
                        .get(i..i + 8)
                        .and_then(|b| b.try_into().ok())
                        .map_or(0, u64::from_le_bytes)
                };
                index.chunks.push(ChunkInfo {
                    offset: at,
                    length: end - at,
                    start_ns: word(0),
                    end_ns: word(8),
                });
                if before_metadata {
                    let body = read_at(file, at + 9, n)?;
                    if let Ok(Record::Chunk { data, .. }) =
                        mcap::read::parse_record(op::CHUNK, &body)
                    {
                        for (o, b) in Records(&data).map_while(Result::ok) {
                            if let Ok(r) = mcap::read::parse_record(o, b) {
                                add(&mut index, r);
                            }
                        }
                    }
                }
            }
            op::MESSAGE_INDEX | op::METADATA => {
                let body = read_at(file, at + 9, n)?;
                match mcap::read::parse_record(opcode, &body) {
                    Ok(Record::MessageIndex(m)) => {
                        if let Some(c) = index.chunks.last()
                            && !m.records.is_empty()
                        {
                            index
                                .chunk_channels
                                .entry(c.offset)
                                .or_default()
                                .push(m.channel_id);
                        }
                        if index
                            .channels
                            .iter()
                            .any(|c| c.id == m.channel_id && c.topic == FRAME_TOPIC)
                        {
                            frames += m.records.len() as u64;
                        }
                    }
                    Ok(r @ Record::Metadata(_)) => {
                        before_metadata = false;
                        add(&mut index, r);
                    }
                    _ => {}
                }
            }
            op::SCHEMA | op::CHANNEL => {
                let body = read_at(file, at + 9, n)?;
                if let Ok(r) = mcap::read::parse_record(opcode, &body) {
                    add(&mut index, r);
                }
            }
            op::DATA_END | op::FOOTER => {
                finished = true;
                break;
            }
            _ => {}
        }
        at = end;
    }
    if index.channels.is_empty() && index.chunks.is_empty() {
        return Err("no complete record after the magic".into());
    }
    // The message indexes follow their chunk: the last chunk's may be missing.
    index.frame_count = (frames > 0).then_some(frames);
    if !finished {
        index.unfinished_at = Some(at);
    }
    Ok(index)
}
