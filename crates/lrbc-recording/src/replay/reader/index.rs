//! The index of a recording: from the summary section when the file was finished, else
//! built by walking the top-level records up to the last complete one.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use mcap::records::{Record, op};

use super::checks::{MAX_RECORD_BYTES, Records, chunk_records};
use super::{ChunkInfo, Damage, Packing};
use crate::format::FRAME_TOPIC;

/// What the index walk collects.
#[derive(Default)]
pub(super) struct Index {
    pub chunks: Vec<ChunkInfo>,
    pub schemas: HashMap<u16, String>,
    pub channels: Vec<mcap::records::Channel>,
    pub metadata: BTreeMap<String, BTreeMap<String, String>>,
    pub frame_count: Option<u64>,
    pub channel_counts: BTreeMap<u16, u64>,
    pub unfinished_at: Option<u64>,
    pub chunk_channels: HashMap<u64, Vec<u16>>,
}

/// Reads `len` bytes at `offset`.
pub(super) fn read_at(file: &mut File, offset: u64, len: u64) -> Result<Vec<u8>, Damage> {
    if len > MAX_RECORD_BYTES {
        return Err(Damage::RecordTooLong { offset, len });
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(|source| Damage::Seek { offset, source })?;
    let mut buf = vec![0u8; usize::try_from(len).map_err(|_| Damage::Length { offset })?];
    file.read_exact(&mut buf).map_err(|source| Damage::Read {
        offset,
        len,
        source,
    })?;
    Ok(buf)
}

/// Reads one record at `offset`: (opcode, body).
pub(super) fn record_at(file: &mut File, offset: u64) -> Result<(u8, Vec<u8>), Damage> {
    let head = read_at(file, offset, 9)?;
    let len = u64::from_le_bytes(
        head[1..9]
            .try_into()
            .map_err(|_| Damage::Length { offset })?,
    );
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
pub(super) fn read_summary(file: &mut File, len: u64) -> Result<Option<Index>, Damage> {
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
        match mcap::read::parse_record(opcode, body)? {
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
                    packing: Packing::of(&c.compression),
                    uncompressed: c.uncompressed_size,
                });
            }
            Record::MetadataIndex(m) => metadata_at.push(m.offset),
            Record::Statistics(s) => index.channel_counts = s.channel_message_counts,
            r => add(&mut index, r),
        }
    }
    for offset in metadata_at {
        let (opcode, body) = record_at(file, offset)?;
        let r = mcap::read::parse_record(opcode, &body)?;
        add(&mut index, r);
    }
    Ok(Some(index))
}

/// The index built by walking the records: a chunk's body is skipped, bar the chunks
/// before the first metadata record (where the recorder writes its channels).
pub(super) fn walk(file: &mut File, len: u64) -> Result<Index, Damage> {
    let mut index = Index::default();
    let mut at = 8u64;
    let mut before_metadata = true;
    let mut frames = 0u64;
    let mut finished = false;
    while at + 9 <= len {
        let head = read_at(file, at, 9)?;
        let opcode = head[0];
        let n = u64::from_le_bytes(
            head[1..9]
                .try_into()
                .map_err(|_| Damage::Length { offset: at })?,
        );
        let end = at.saturating_add(9).saturating_add(n);
        if end > len {
            break;
        }
        match opcode {
            op::CHUNK => {
                // The chunk header: message_start_time, message_end_time,
                // uncompressed_size, uncompressed_crc, then the compression's name.
                let head = read_at(file, at + 9, 64.min(n))?;
                let word = |i: usize| {
                    head.get(i..i + 8)
                        .and_then(|b| b.try_into().ok())
                        .map_or(0, u64::from_le_bytes)
                };
                let name_len = head
                    .get(28..32)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u32::from_le_bytes) as usize;
                let name = head.get(32..32 + name_len.min(32)).unwrap_or_default();
                index.chunks.push(ChunkInfo {
                    offset: at,
                    length: end - at,
                    start_ns: word(0),
                    end_ns: word(8),
                    packing: Packing::of(std::str::from_utf8(name).unwrap_or("?")),
                    uncompressed: word(16),
                });
                if before_metadata {
                    let body = read_at(file, at + 9, n)?;
                    if let Ok(Record::Chunk { header, data }) =
                        mcap::read::parse_record(op::CHUNK, &body)
                    {
                        let records = chunk_records(at, &header, &data)?;
                        for (o, b) in Records(&records).map_while(Result::ok) {
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
        return Err(Damage::NoRecord);
    }
    // The message indexes follow their chunk: the last chunk's may be missing.
    index.frame_count = (frames > 0).then_some(frames);
    if !finished {
        index.unfinished_at = Some(at);
    }
    Ok(index)
}
