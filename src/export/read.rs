//! Streams a recording's records from a file read in blocks (the mcap crate's sans-io
//! `LinearReader`): whole chunks only, so that a file whose recorder was killed gives
//! its complete chunks and says where it ends.

use std::collections::HashSet;
use std::io::Read;

use mcap::records::{Metadata, Record};
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};

use super::ExportError;
use crate::record::FRAME_TOPIC;

/// Bytes asked of the file at a time.
const BLOCK: usize = 1 << 20;
/// The largest record (or chunk) read: larger claims are damage, not data.
const MAX_RECORD: usize = 1 << 30;
/// The MCAP record opcodes this reader looks at inside chunks.
const OP_HEADER: u8 = 0x01;

/// What the reader hands over, in file order.
#[derive(Debug)]
pub enum Event<'a> {
    Metadata(&'a Metadata),
    /// The bytes of a message on `/lrbc/frame`.
    Frame(&'a [u8]),
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

/// The profile recordings carry in their MCAP header.
pub const PROFILE: &str = "lrbc";

/// Reads `input` to its end, calling `on` for each metadata record and frame message,
/// and `progress` with the bytes read so far after each block.
pub fn read_recording(
    input: &mut impl Read,
    mut on: impl FnMut(Event<'_>) -> Result<(), ExportError>,
    mut progress: impl FnMut(u64),
) -> Result<End, ExportError> {
    let mut reader = LinearReader::new_with_options(
        LinearReaderOptions::default()
            .with_emit_chunks(true)
            .with_record_length_limit(MAX_RECORD),
    );
    let mut state = State::default();
    let mut end = End::default();
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
                if !state.header_seen && opcode != OP_HEADER {
                    return Err(ExportError::NotMcap);
                }
                let record = mcap::parse_record(opcode, data).map_err(damaged)?;
                if let Record::Chunk { header, data } = record {
                    if !header.compression.is_empty() {
                        return Err(ExportError::Damaged(format!(
                            "a chunk is compressed with {:?} (recordings are not)",
                            header.compression
                        )));
                    }
                    for inner in ChunkRecords(&data) {
                        let (op, body) = inner?;
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
                    _ if !state.header_seen => Err(ExportError::NotMcap),
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
                    e => Err(damaged(e)),
                };
            }
        }
    }
    Ok(end)
}

fn damaged(e: mcap::McapError) -> ExportError {
    ExportError::Damaged(e.to_string())
}

/// Reads what is there, retrying interruptions; 0 at the end of the file.
fn read_some(input: &mut impl Read, buf: &mut [u8]) -> Result<usize, ExportError> {
    loop {
        match input.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ExportError::Input(e.to_string())),
        }
    }
}

/// The records of an uncompressed chunk: opcode, then the body.
struct ChunkRecords<'a>(&'a [u8]);

impl<'a> Iterator for ChunkRecords<'a> {
    type Item = Result<(u8, &'a [u8]), ExportError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let bad = || {
            Some(Err(ExportError::Damaged(
                "a record runs past the end of its chunk".into(),
            )))
        };
        let (Some(&op), Some(len)) = (self.0.first(), self.0.get(1..9)) else {
            self.0 = &[];
            return bad();
        };
        let mut le = [0u8; 8];
        le.copy_from_slice(len);
        let len = u64::from_le_bytes(le);
        let Some(body) = usize::try_from(len)
            .ok()
            .and_then(|len| self.0.get(9..9usize.checked_add(len)?))
        else {
            self.0 = &[];
            return bad();
        };
        self.0 = &self.0[9 + body.len()..];
        Some(Ok((op, body)))
    }
}

/// Which channels carry frames; whether the header was seen.
#[derive(Default)]
struct State {
    header_seen: bool,
    frame_channels: HashSet<u16>,
}

impl State {
    fn record(
        &mut self,
        record: Record<'_>,
        on: &mut impl FnMut(Event<'_>) -> Result<(), ExportError>,
    ) -> Result<(), ExportError> {
        match record {
            Record::Header(h) => {
                if h.profile != PROFILE {
                    return Err(ExportError::NotLrbc(format!(
                        "its MCAP profile is {:?}, not {PROFILE:?}",
                        h.profile
                    )));
                }
                self.header_seen = true;
            }
            Record::Channel(c) if c.topic == FRAME_TOPIC => {
                if c.message_encoding != "flatbuffer" {
                    return Err(ExportError::NotLrbc(format!(
                        "{FRAME_TOPIC} is encoded as {:?}",
                        c.message_encoding
                    )));
                }
                self.frame_channels.insert(c.id);
            }
            Record::Message { header, data }
                if self.frame_channels.contains(&header.channel_id) =>
            {
                on(Event::Frame(&data))?;
            }
            Record::Metadata(m) => on(Event::Metadata(&m))?,
            _ => {}
        }
        Ok(())
    }
}
