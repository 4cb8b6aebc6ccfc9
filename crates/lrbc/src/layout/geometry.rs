//! What validation produces: the regions, rings and image of a segment, and
//! [`Geometry`], their validated whole; [`LayoutError`], why there is none.

use std::fmt;

use zerocopy::FromBytes;

use super::{
    CounterOffsets, FieldSpec, LRBC_MAGIC, LRBC_VERSION, Layout, LrbcHeader, LuckyHeader, Names,
    NamesError,
};

/// A named region of the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RegionKind {
    Header,
    Obs,
    Act,
    Rewards,
    Dones,
    Truncateds,
    Resets,
    CmdS2c,
    CmdC2s,
    CtlS2c,
    CtlC2s,
    Image,
    Names,
}

impl RegionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Header => "header",
            Self::Obs => "obs",
            Self::Act => "act",
            Self::Rewards => "rewards",
            Self::Dones => "dones",
            Self::Truncateds => "truncateds",
            Self::Resets => "resets",
            Self::CmdS2c => "cmd_s2c",
            Self::CmdC2s => "cmd_c2s",
            Self::CtlS2c => "ctl_s2c",
            Self::CtlC2s => "ctl_c2s",
            Self::Image => "image",
            Self::Names => "names",
        }
    }

    /// The ring named `name` (`cmd_s2c`, `cmd_c2s`, `ctl_s2c`, `ctl_c2s`).
    pub fn ring_named(name: &str) -> Option<Self> {
        [Self::CmdS2c, Self::CmdC2s, Self::CtlS2c, Self::CtlC2s]
            .into_iter()
            .find(|k| k.as_str() == name)
    }
}

impl fmt::Display for RegionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A region of the segment: `[offset_bytes, offset_bytes + length_bytes)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub kind: RegionKind,
    pub offset_bytes: u64,
    pub length_bytes: u64,
}

impl Region {
    pub fn end_bytes(&self) -> u64 {
        // Validated at construction: the end fits in the segment, so it fits in u64.
        self.offset_bytes + self.length_bytes
    }
}

/// The ring formats of spec 4 (LRBC) and spec 8 (luckyrobots).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingFormat {
    /// 64-byte header, u32 positions, entries never wrap.
    Lrbc,
    /// 192-byte header, u64 positions, 16-byte envelope header, entries split at the end.
    Lucky,
}

/// Where a ring sits and how big its data area is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingGeometry {
    pub kind: RegionKind,
    pub format: RingFormat,
    pub offset_bytes: u64,
    pub capacity_bytes: u32,
}

/// The image region (spec 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageGeometry {
    pub offset_bytes: u64,
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    /// `width * height * channels`.
    pub bytes_per_env: u64,
    /// `num_envs * bytes_per_env`.
    pub total_bytes: u64,
}

/// A problem that does not stop the tool from reading the segment, shown to the user.
pub type Warning = String;

/// Why a segment cannot be read as any layout.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("segment is {size_bytes} bytes, smaller than the {need_bytes}-byte header")]
    TooSmall { size_bytes: u64, need_bytes: u64 },
    #[error("bad magic 0x{found:08x} (expected 0x{LRBC_MAGIC:08x}, \"LRBC\")")]
    BadMagic { found: u32 },
    #[error("unsupported version {found} (this tool reads version {LRBC_VERSION})")]
    UnsupportedVersion { found: u32 },
    #[error("the {what} size overflows: {detail}")]
    SizeOverflow { what: &'static str, detail: String },
    #[error(
        "region {region} at offset {offset_bytes} with length {length_bytes} lies outside the {size_bytes}-byte segment"
    )]
    OutsideSegment {
        region: RegionKind,
        offset_bytes: u64,
        length_bytes: u64,
        size_bytes: u64,
    },
    #[error("region {a} [{a_start}, {a_end}) overlaps region {b} [{b_start}, {b_end})")]
    Overlap {
        a: RegionKind,
        a_start: u64,
        a_end: u64,
        b: RegionKind,
        b_start: u64,
        b_end: u64,
    },
    #[error("{field} is {value}, not a power of two of at least {min}")]
    BadRingSize {
        field: &'static str,
        value: u64,
        min: u32,
    },
    #[error("image_channels is {channels}; must be 1, 3 or 4")]
    BadImageChannels { channels: u32 },
    #[error("names region: {0}")]
    Names(#[from] NamesError),
    #[error("the segment could not be read at offset {offset_bytes} ({length_bytes} bytes)")]
    Unreadable {
        offset_bytes: u64,
        length_bytes: u64,
    },
}

/// Smallest ring data capacity accepted (an entry needs at least 8 bytes).
pub const MIN_RING_CAPACITY: u32 = 64;

/// A validated description of a segment: layout, sizes, and every region present.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    pub layout: Layout,
    pub size_bytes: u64,
    /// A copy of the first 4096 bytes, taken at attach. Counters in it are stale by
    /// the time anyone reads them; load live words from the segment.
    pub header: Vec<u8>,
    pub num_envs: u32,
    pub obs_size: u32,
    pub act_size: u32,
    /// The mode byte (LRBC only): 0 training, 1 inference.
    pub mode: Option<u8>,
    pub counters: CounterOffsets,
    /// Every region present, sorted by offset.
    pub regions: Vec<Region>,
    pub image: Option<ImageGeometry>,
    /// The command rings and, when offered, the control rings.
    pub rings: Vec<RingGeometry>,
    pub names: Names,
    /// Control rings lie on whole pages of their own, so they can be mapped writable
    /// without exposing anything else (spec 7).
    pub ctl_page_aligned: bool,
    pub warnings: Vec<Warning>,
}

impl Geometry {
    /// No segment known yet (a served run before its description arrives): no envs,
    /// no regions, an empty header.
    pub fn none() -> Self {
        Self {
            layout: Layout::LrbcV1,
            size_bytes: 0,
            header: Vec::new(),
            num_envs: 0,
            obs_size: 0,
            act_size: 0,
            mode: None,
            counters: CounterOffsets::LRBC_SEED,
            regions: Vec::new(),
            image: None,
            rings: Vec::new(),
            names: Names::default(),
            ctl_page_aligned: false,
            warnings: Vec::new(),
        }
    }

    pub fn region(&self, kind: RegionKind) -> Option<&Region> {
        self.regions.iter().find(|r| r.kind == kind)
    }

    pub fn ring(&self, kind: RegionKind) -> Option<&RingGeometry> {
        self.rings.iter().find(|r| r.kind == kind)
    }

    /// The header fields of this layout, in wire order, padding excluded.
    pub fn fields(&self) -> impl Iterator<Item = &'static FieldSpec> {
        let table = match self.layout {
            Layout::LrbcV1 | Layout::LrbcV1Ext => LrbcHeader::FIELDS,
            Layout::LuckyrobotsIpc => LuckyHeader::FIELDS,
        };
        table.iter().filter(|f| !f.is_reserved())
    }

    /// True when `other` describes the same segment shape (layout, size, sizes and
    /// regions): if not, the segment was replaced or re-initialised in place.
    pub fn same_shape(&self, other: &Self) -> bool {
        self.layout == other.layout
            && self.size_bytes == other.size_bytes
            && self.num_envs == other.num_envs
            && self.obs_size == other.obs_size
            && self.act_size == other.act_size
            && self.regions == other.regions
            && self.image == other.image
    }

    /// The engine's pid in the attach-time copy of the header; 0 if the copy is short.
    pub fn server_pid(&self) -> u32 {
        let header = self.header.as_slice();
        match self.layout {
            Layout::LrbcV1 | Layout::LrbcV1Ext => {
                LrbcHeader::read_from_prefix(header).map_or(0, |(h, _)| h.server_pid.get())
            }
            Layout::LuckyrobotsIpc => {
                LuckyHeader::read_from_prefix(header).map_or(0, |(h, _)| h.engine_pid.get())
            }
        }
    }
}

/// The page size engines align control rings to (spec 7). Mapping code checks the
/// running system's page size again before it maps anything writable.
pub const CTL_PAGE_BYTES: u64 = 4096;
