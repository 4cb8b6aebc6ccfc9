//! The checks both readers of a recording share.
//!
//! The profile, the frame channel, a chunk's records (decompressed), and the records of a
//! run of bytes are checked the same way by the reader and the whole-file pass (`stream`).

use super::{Damage, NotLrbc};
use crate::format::{FRAME_SCHEMA, FRAME_TOPIC, PROFILE};

/// Records longer than this are not read (a corrupt length).
pub(in crate::replay) const MAX_RECORD_BYTES: u64 = 1 << 30;

/// Whether an MCAP header's profile is a recording's; else why not.
pub(in crate::replay) fn check_profile(profile: &str) -> Result<(), NotLrbc> {
    if profile == PROFILE {
        Ok(())
    } else {
        Err(NotLrbc::Profile {
            found: profile.to_string(),
        })
    }
}

/// Whether channel `c` (its schema named `schema`) carries the frames; an error when
/// it is on the frame topic with another encoding or schema.
pub(in crate::replay) fn is_frame_channel(
    c: &mcap::records::Channel,
    schema: Option<&str>,
) -> Result<bool, NotLrbc> {
    if c.topic != FRAME_TOPIC {
        return Ok(false);
    }
    if c.message_encoding != "flatbuffer" {
        return Err(NotLrbc::FrameEncoding {
            encoding: c.message_encoding.clone(),
        });
    }
    if schema != Some(FRAME_SCHEMA) {
        return Err(NotLrbc::FrameSchema {
            schema: schema.unwrap_or("").to_string(),
        });
    }
    Ok(true)
}

/// The records of the chunk at byte `offset` of its file, decompressed if need be; one
/// error naming the offset when its compression is unknown or it is damaged.
pub(in crate::replay) fn chunk_records<'a>(
    offset: u64,
    header: &mcap::records::ChunkHeader,
    data: &'a [u8],
) -> Result<std::borrow::Cow<'a, [u8]>, crate::format::ChunkError> {
    crate::format::decompress_chunk(
        offset,
        &header.compression,
        header.uncompressed_size,
        data,
        MAX_RECORD_BYTES,
    )
}

/// The records of a run of bytes (a chunk's records, the summary section): opcode,
/// then the body; an error, then the end, when a record runs past the end.
pub(in crate::replay) struct Records<'a>(pub &'a [u8]);

impl<'a> Iterator for Records<'a> {
    type Item = Result<(u8, &'a [u8]), Damage>;

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
            return Some(Err(Damage::RecordPastEnd));
        };
        self.0 = &self.0[9 + body.len()..];
        Some(Ok((op, body)))
    }
}
