//! The byte contract (`lrbc-v1.md`) in code: header tables, layout detection, and the
//! validated geometry of a segment (every region, checked to lie inside the segment and
//! not to overlap another). Pure: it reads bytes through [`ByteSource`], so it runs the
//! same over a live mapping, a file, or a fuzzer's input.

pub mod fields;
pub mod headers;
pub mod names;
pub mod plan;

mod builder;
mod detect;
mod geometry;
mod lucky;
mod sparse;
mod v1;

use std::fmt;

pub use detect::inspect;
pub use fields::{FieldKind, FieldSpec, FieldValue};
pub use geometry::{
    CTL_PAGE_BYTES, Geometry, ImageGeometry, LayoutError, MIN_RING_CAPACITY, Region, RegionKind,
    RingFormat, RingGeometry, Warning,
};
pub use headers::{
    CounterOffsets, ExtCounterOffsets, HEADER_REGION_BYTES, LRBC_MAGIC, LRBC_VERSION, LrbcHeader,
    LuckyHeader, LuckyRingHeader, Preamble, RingHeader,
};
pub use names::{Names, NamesError};
pub use sparse::{Sparse, Traced};

/// Something that bytes of a segment can be copied out of.
pub trait ByteSource {
    /// Size of the segment in bytes.
    fn len_bytes(&self) -> u64;
    /// Copies `buf.len()` bytes starting at `offset_bytes`. Returns false when the range
    /// is not inside the source.
    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> bool;
}

impl ByteSource for [u8] {
    fn len_bytes(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> bool {
        let Ok(start) = usize::try_from(offset_bytes) else {
            return false;
        };
        match start
            .checked_add(buf.len())
            .and_then(|end| self.get(start..end))
        {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

impl ByteSource for Vec<u8> {
    fn len_bytes(&self) -> u64 {
        self.as_slice().len_bytes()
    }

    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> bool {
        self.as_slice().read_at(offset_bytes, buf)
    }
}

/// The layouts this tool reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Layout {
    /// The seed's header only; the extension block is zero.
    #[serde(rename = "lrbc-v1")]
    LrbcV1,
    /// The seed's header plus the extension block (spec 2.1).
    #[serde(rename = "lrbc-v1-ext")]
    LrbcV1Ext,
    /// The luckyrobots IPC layout (spec 8).
    #[serde(rename = "luckyrobots-ipc")]
    LuckyrobotsIpc,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LrbcV1 => "lrbc-v1",
            Self::LrbcV1Ext => "lrbc-v1-ext",
            Self::LuckyrobotsIpc => "luckyrobots-ipc",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the user asked for with `--layout`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayoutChoice {
    /// Detect as spec section 8 says.
    #[default]
    Auto,
    /// LRBC v1 (with the extension block when its total_size matches).
    LrbcV1,
    /// The luckyrobots IPC layout.
    LuckyrobotsIpc,
}

#[cfg(test)]
mod tests;
