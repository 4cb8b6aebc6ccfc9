//! The reader's pass over a whole recording from any `Read` (for the export): the file
//! is read in blocks through the mcap crate's sans-io `LinearReader`, whole chunks only,
//! so that memory does not grow with the file and a file whose recorder was killed
//! gives its complete chunks and says where it ends. It shares its checks (profile,
//! frame channel, chunks decompressed as needed) and the records of a chunk with
//! [`Recording`].
//!
//! [`Recording`]: super::Recording

use std::collections::{HashMap, HashSet};
use std::io::Read;

use mcap::records::{Metadata, Record, op};
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};

use super::reader::{MAX_RECORD_BYTES, NotLrbc, Records, check_profile, is_frame_channel};

/// Bytes asked of the file at a time.
const BLOCK: usize = 1 << 20;

/// A pass over a recording that could not be made, as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("reading the recording: {0}")]
    Input(String),
    #[error("not an MCAP file")]
    NotMcap,
    #[error("not an lrbc recording: {0}")]
    NotRecording(NotLrbc),
    #[error("the recording is damaged: {0}")]
    Damaged(String),
    /// A chunk that cannot be read: its compression is unknown here, or it does not
    /// decompress (the message names its offset and says which).
    #[error(transparent)]
    Chunk(#[from] crate::format::ChunkError),
}

/// What the reader hands over, in file order.
#[derive(Debug)]
pub enum StreamItem<'a> {
    Metadata(&'a Metadata),
    /// A message on `/lrbc/frame`: its log time and bytes.
    Frame {
        log_ns: u64,
        data: &'a [u8],
    },
    /// A camera image of env `env` (`/lrbc/camera/env<N>`, `foxglove.RawImage`).
    Camera {
        env: u32,
        log_ns: u64,
        data: &'a [u8],
    },
}

/// How the file ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct End {
    /// Complete chunks read.
    pub chunks: u64,
    /// Bytes read from the file.
    pub bytes: u64,
    /// The file stops before its end (inside a chunk or its summary): a recording whose
    /// recorder did not finish.
    pub truncated: bool,
}

/// Reads `input` to its end, calling `on` for each metadata record and frame message
/// in file order, and `progress` with the bytes read so far after each block.
pub fn read_recording<E: From<ReadError>>(
    input: &mut impl Read,
    mut on: impl FnMut(StreamItem<'_>) -> Result<(), E>,
    mut progress: impl FnMut(u64),
) -> Result<End, E> {
    let mut reader = LinearReader::new_with_options(
        LinearReaderOptions::default()
            .with_emit_chunks(true)
            .with_record_length_limit(MAX_RECORD_BYTES as usize),
    );
    let mut state = State::default();
    let mut end = End::default();
    // One buffer and zstd context for every chunk of the file.
    let mut chunks = crate::format::ChunkDecompressor::default();
    // Where the next record starts: after the magic, then record after record.
    let mut offset = MAGIC_BYTES;
    while let Some(event) = reader.next_event() {
        match event {
            Ok(LinearReadEvent::ReadRequest(need)) => {
                let buf = reader.insert(need.clamp(1, BLOCK));
                let n = read_some(input, buf)?;
                reader.notify_read(n);
                end.bytes += n as u64;
                progress(end.bytes);
            }
            Ok(LinearReadEvent::Record { opcode, data }) => {
                if !state.header_seen && opcode != op::HEADER {
                    return Err(ReadError::NotMcap.into());
                }
                let at = offset;
                offset += RECORD_PREFIX + data.len() as u64;
                let record = mcap::parse_record(opcode, data).map_err(damaged)?;
                if let Record::Chunk { header, data } = record {
                    let records = chunks
                        .records(
                            at,
                            &header.compression,
                            header.uncompressed_size,
                            &data,
                            MAX_RECORD_BYTES,
                        )
                        .map_err(ReadError::Chunk)?;
                    for inner in Records(records) {
                        let (op, body) = inner.map_err(|e| ReadError::Damaged(e.to_string()))?;
                        let record = mcap::parse_record(op, body).map_err(damaged)?;
                        state.record(record, &mut on)?;
                    }
                    end.chunks += 1;
                } else {
                    state.record(record, &mut on)?;
                }
            }
            Err(e) => {
                return match e {
                    _ if !state.header_seen => Err(ReadError::NotMcap.into()),
                    mcap::McapError::UnexpectedEof => Ok(End {
                        truncated: true,
                        ..end
                    }),
                    // The placeholder length of a chunk the writer never closed.
                    mcap::McapError::RecordTooLarge { opcode: 0x06, len } if len == u64::MAX => {
                        Ok(End {
                            truncated: true,
                            ..end
                        })
                    }
                    e => Err(damaged(e).into()),
                };
            }
        }
    }
    Ok(end)
}

/// The bytes of MCAP's magic at the start of a file.
const MAGIC_BYTES: u64 = 8;
/// A record's opcode and length before its body.
const RECORD_PREFIX: u64 = 9;

fn damaged(e: mcap::McapError) -> ReadError {
    ReadError::Damaged(e.to_string())
}

/// Reads what is there, retrying interruptions; 0 at the end of the file.
fn read_some(input: &mut impl Read, buf: &mut [u8]) -> Result<usize, ReadError> {
    loop {
        match input.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Input(e.to_string())),
        }
    }
}

/// Which channels carry frames; the schemas' names; whether the header was seen.
#[derive(Default)]
struct State {
    header_seen: bool,
    schemas: HashMap<u16, String>,
    frame_channels: HashSet<u16>,
    camera_channels: HashMap<u16, u32>,
}

impl State {
    fn record<E: From<ReadError>>(
        &mut self,
        record: Record<'_>,
        on: &mut impl FnMut(StreamItem<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        match record {
            Record::Header(h) => {
                check_profile(&h.profile).map_err(ReadError::NotRecording)?;
                self.header_seen = true;
            }
            Record::Schema { header, .. } => {
                self.schemas.insert(header.id, header.name);
            }
            Record::Channel(c) => {
                let schema = self.schemas.get(&c.schema_id).map(String::as_str);
                if is_frame_channel(&c, schema).map_err(ReadError::NotRecording)? {
                    self.frame_channels.insert(c.id);
                } else if let Some(env) = crate::format::camera_env_of_topic(&c.topic) {
                    self.camera_channels.insert(c.id, env);
                }
            }
            Record::Message { header, data }
                if self.frame_channels.contains(&header.channel_id) =>
            {
                on(StreamItem::Frame {
                    log_ns: header.log_time,
                    data: &data,
                })?;
            }
            Record::Message { header, data } => {
                if let Some(&env) = self.camera_channels.get(&header.channel_id) {
                    on(StreamItem::Camera {
                        env,
                        log_ns: header.log_time,
                        data: &data,
                    })?;
                }
            }
            Record::Metadata(m) => on(StreamItem::Metadata(&m))?,
            _ => {}
        }
        Ok(())
    }
}
