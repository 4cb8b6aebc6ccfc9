//! What the reader finds wrong with a file: why it is no lrbc recording ([`NotLrbc`]),
//! and the damage that stops a read ([`Damage`]), each as the line it always was.

use crate::format::{ChunkError, FRAME_SCHEMA, FRAME_TOPIC, PROFILE, SEGMENT_METADATA};

/// Why an MCAP file is not an lrbc recording, as one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotLrbc {
    /// The header's profile is another's.
    #[error("its MCAP profile is {found:?}, not {PROFILE:?}")]
    Profile { found: String },
    /// The frame topic's messages are not flatbuffers.
    #[error("{FRAME_TOPIC} is encoded as {encoding:?}")]
    FrameEncoding { encoding: String },
    /// The frame topic's schema is another (empty: the channel names none).
    #[error("{FRAME_TOPIC} has the schema {schema:?}, not {FRAME_SCHEMA}")]
    FrameSchema { schema: String },
    /// No channel carries the frames.
    #[error("no {FRAME_TOPIC} channel with schema {FRAME_SCHEMA}")]
    NoFrameChannel,
    /// The recorded segment's metadata is missing or does not read.
    #[error("no valid {SEGMENT_METADATA} metadata")]
    NoSegment,
}

/// Damage found in a recording (or a read of it that failed), as one line; offsets are
/// bytes from the start of the file.
#[derive(Debug, thiserror::Error)]
pub enum Damage {
    /// A record's length over the most read (1 GiB: a corrupt length).
    #[error("a record of {len} bytes at {offset}")]
    RecordTooLong { offset: u64, len: u64 },
    /// A length this machine cannot hold in memory.
    #[error("length")]
    Length { offset: u64 },
    /// The file cannot be positioned at `offset`.
    #[error("{source}")]
    Seek { offset: u64, source: std::io::Error },
    /// The file ends, or fails, before `len` bytes at `offset` are read.
    #[error("reading {len} bytes at {offset}: {source}")]
    Read {
        offset: u64,
        len: u64,
        source: std::io::Error,
    },
    /// A record of a chunk or of the summary section runs past the bytes it is in.
    #[error("a record runs past the end of its chunk")]
    RecordPastEnd,
    /// A record that the mcap crate does not read.
    #[error(transparent)]
    Record(#[from] mcap::McapError),
    /// Not one complete record follows the magic.
    #[error("no complete record after the magic")]
    NoRecord,
    /// A chunk whose compression is not read here, or that does not decompress.
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    /// The index has no chunk `index` (a chunk asked for that is not there).
    #[error("no such chunk")]
    NoSuchChunk { index: usize },
    /// The index places a chunk (partly) beyond the end of the file.
    #[error("a chunk at byte {offset} of {length} bytes runs past the end of the file")]
    ChunkPastEnd { offset: u64, length: u64 },
    /// The index points at a record that is not a chunk.
    #[error("not a chunk")]
    NotAChunk { offset: u64 },
    /// The recorded segment's metadata reads, but its layout does not.
    #[error("the recorded segment: {0}")]
    Segment(#[source] lrbc::layout::LayoutError),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each line is the one the reader wrote before its errors were typed.
    #[test]
    fn the_lines_are_those_of_before() {
        let lines = [
            (
                NotLrbc::Profile {
                    found: "ros2".into(),
                }
                .to_string(),
                format!("its MCAP profile is {:?}, not {PROFILE:?}", "ros2"),
            ),
            (
                NotLrbc::FrameEncoding {
                    encoding: "json".into(),
                }
                .to_string(),
                format!("{FRAME_TOPIC} is encoded as {:?}", "json"),
            ),
            (
                NotLrbc::FrameSchema {
                    schema: String::new(),
                }
                .to_string(),
                format!("{FRAME_TOPIC} has the schema {:?}, not {FRAME_SCHEMA}", ""),
            ),
            (
                NotLrbc::NoFrameChannel.to_string(),
                format!("no {FRAME_TOPIC} channel with schema {FRAME_SCHEMA}"),
            ),
            (
                NotLrbc::NoSegment.to_string(),
                format!("no valid {SEGMENT_METADATA} metadata"),
            ),
            (
                Damage::RecordTooLong {
                    offset: 8,
                    len: 1 << 31,
                }
                .to_string(),
                "a record of 2147483648 bytes at 8".into(),
            ),
            (
                Damage::Read {
                    offset: 40,
                    len: 9,
                    source: std::io::ErrorKind::UnexpectedEof.into(),
                }
                .to_string(),
                format!(
                    "reading 9 bytes at 40: {}",
                    std::io::Error::from(std::io::ErrorKind::UnexpectedEof)
                ),
            ),
            (
                Damage::RecordPastEnd.to_string(),
                "a record runs past the end of its chunk".into(),
            ),
            (
                Damage::NoRecord.to_string(),
                "no complete record after the magic".into(),
            ),
            (
                Damage::ChunkPastEnd {
                    offset: 100,
                    length: 4096,
                }
                .to_string(),
                "a chunk at byte 100 of 4096 bytes runs past the end of the file".into(),
            ),
            (
                Damage::NoSuchChunk { index: 3 }.to_string(),
                "no such chunk".into(),
            ),
            (
                Damage::NotAChunk { offset: 100 }.to_string(),
                "not a chunk".into(),
            ),
            (Damage::Length { offset: 8 }.to_string(), "length".into()),
        ];
        for (line, before) in lines {
            assert_eq!(line, before);
        }
    }
}
