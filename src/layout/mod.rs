//! The byte contract (`lrbc-v1.md`) in code: header tables, layout detection, and the
//! validated geometry of a segment (every region, checked to lie inside the segment and
//! not to overlap another). Pure: it reads bytes through [`ByteSource`], so it runs the
//! same over a live mapping, a file, or a fuzzer's input.

pub mod fields;
pub mod headers;
pub mod names;
pub mod plan;

use std::fmt;

use zerocopy::FromBytes;

pub use fields::{FieldKind, FieldSpec, FieldValue};
pub use headers::{
    CounterOffsets, ExtCounterOffsets, HEADER_REGION_BYTES, LRBC_MAGIC, LRBC_VERSION, LrbcHeader,
    LuckyHeader, LuckyRingHeader, Preamble, RingHeader,
};
pub use names::{Names, NamesError};

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

    pub fn is_lrbc(self) -> bool {
        matches!(self, Self::LrbcV1 | Self::LrbcV1Ext)
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

impl RingFormat {
    pub fn header_bytes(self) -> u64 {
        match self {
            Self::Lrbc => RingHeader::SIZE_BYTES as u64,
            Self::Lucky => LuckyRingHeader::SIZE_BYTES as u64,
        }
    }
}

/// Where a ring sits and how big its data area is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingGeometry {
    pub kind: RegionKind,
    pub format: RingFormat,
    pub offset_bytes: u64,
    pub capacity_bytes: u32,
}

impl RingGeometry {
    pub fn data_offset_bytes(&self) -> u64 {
        self.offset_bytes + self.format.header_bytes()
    }
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

impl ImageGeometry {
    pub fn env_offset_bytes(&self, env: u32) -> u64 {
        self.offset_bytes + u64::from(env) * self.bytes_per_env
    }
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
    pub fn region(&self, kind: RegionKind) -> Option<&Region> {
        self.regions.iter().find(|r| r.kind == kind)
    }

    pub fn ring(&self, kind: RegionKind) -> Option<&RingGeometry> {
        self.rings.iter().find(|r| r.kind == kind)
    }

    pub fn has_ext(&self) -> bool {
        self.layout == Layout::LrbcV1Ext
    }

    /// The header fields of this layout, in wire order, padding excluded.
    pub fn fields(&self) -> impl Iterator<Item = &'static FieldSpec> {
        let table = match self.layout {
            Layout::LrbcV1 | Layout::LrbcV1Ext => LrbcHeader::FIELDS,
            Layout::LuckyrobotsIpc => LuckyHeader::FIELDS,
        };
        table.iter().filter(|f| !f.is_reserved())
    }

    /// The value of a named header field in the attach-time copy.
    pub fn field(&self, name: &str) -> Option<FieldValue> {
        self.fields()
            .find(|f| f.name == name)
            .and_then(|f| f.decode(&self.header))
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

/// Reads the header of `src`, detects its layout (spec 8) unless `choice` forces one,
/// and validates every region.
pub fn inspect<S: ByteSource + ?Sized>(
    src: &S,
    choice: LayoutChoice,
) -> Result<Geometry, LayoutError> {
    let size_bytes = src.len_bytes();
    let too_small = || LayoutError::TooSmall {
        size_bytes,
        need_bytes: HEADER_REGION_BYTES,
    };
    let mut first = [0u8; Preamble::SIZE_BYTES];
    if size_bytes < Preamble::SIZE_BYTES as u64 || !src.read_at(0, &mut first) {
        return Err(too_small());
    }
    let Ok((preamble, _)) = Preamble::read_from_prefix(first.as_slice()) else {
        return Err(too_small());
    };
    let found = preamble.magic.get();
    if found != LRBC_MAGIC {
        return Err(LayoutError::BadMagic { found });
    }
    if size_bytes < HEADER_REGION_BYTES {
        return Err(too_small());
    }
    let version = preamble.version.get();
    if version != LRBC_VERSION {
        return Err(LayoutError::UnsupportedVersion { found: version });
    }
    let mut header = vec![0u8; HEADER_REGION_BYTES as usize];
    if !src.read_at(0, &mut header) {
        return Err(LayoutError::Unreadable {
            offset_bytes: 0,
            length_bytes: HEADER_REGION_BYTES,
        });
    }

    // The header copy is 4096 bytes, longer than either header.
    let (Ok((lrbc_header, _)), Ok((lucky_header, _))) = (
        LrbcHeader::read_from_prefix(header.as_slice()),
        LuckyHeader::read_from_prefix(header.as_slice()),
    ) else {
        return Err(too_small());
    };
    let ext_total = lrbc_header.total_size.get();
    let lucky_total = lucky_header.total_size.get();
    let layout = match choice {
        LayoutChoice::Auto if ext_total == size_bytes => Layout::LrbcV1Ext,
        LayoutChoice::Auto if lucky_total == size_bytes => Layout::LuckyrobotsIpc,
        LayoutChoice::Auto => Layout::LrbcV1,
        LayoutChoice::LrbcV1 if ext_total == size_bytes => Layout::LrbcV1Ext,
        LayoutChoice::LrbcV1 => Layout::LrbcV1,
        LayoutChoice::LuckyrobotsIpc => Layout::LuckyrobotsIpc,
    };

    let mut b = Builder {
        size_bytes,
        regions: vec![Region {
            kind: RegionKind::Header,
            offset_bytes: 0,
            length_bytes: HEADER_REGION_BYTES,
        }],
        warnings: Vec::new(),
    };
    match layout {
        Layout::LrbcV1 | Layout::LrbcV1Ext => lrbc(src, header, &lrbc_header, layout, b),
        Layout::LuckyrobotsIpc => {
            if lucky_total != size_bytes {
                b.warnings.push(format!(
                    "total_size is {lucky_total} but the segment is {size_bytes} bytes (layout forced)"
                ));
            }
            lucky(src, header, &lucky_header, b)
        }
    }
}

struct Builder {
    size_bytes: u64,
    regions: Vec<Region>,
    warnings: Vec<Warning>,
}

impl Builder {
    /// Adds a region after checking that it lies inside the segment.
    fn add(
        &mut self,
        kind: RegionKind,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Region, LayoutError> {
        let outside = LayoutError::OutsideSegment {
            region: kind,
            offset_bytes,
            length_bytes,
            size_bytes: self.size_bytes,
        };
        match offset_bytes.checked_add(length_bytes) {
            Some(end) if end <= self.size_bytes => {}
            _ => return Err(outside),
        }
        let region = Region {
            kind,
            offset_bytes,
            length_bytes,
        };
        self.regions.push(region);
        Ok(region)
    }

    /// Sorts the regions and rejects any two that overlap. Empty regions overlap nothing.
    fn finish_regions(&mut self) -> Result<Vec<Region>, LayoutError> {
        let mut regions = std::mem::take(&mut self.regions);
        regions.sort_by_key(|r| (r.offset_bytes, r.kind));
        let mut last: Option<Region> = None;
        for r in regions.iter().filter(|r| r.length_bytes > 0) {
            if let Some(prev) = last {
                if prev.end_bytes() > r.offset_bytes {
                    return Err(LayoutError::Overlap {
                        a: prev.kind,
                        a_start: prev.offset_bytes,
                        a_end: prev.end_bytes(),
                        b: r.kind,
                        b_start: r.offset_bytes,
                        b_end: r.end_bytes(),
                    });
                }
                if r.end_bytes() > prev.end_bytes() {
                    last = Some(*r);
                }
            } else {
                last = Some(*r);
            }
        }
        Ok(regions)
    }
}

/// `a * b * c` as a byte count, or the overflow error naming what was computed.
fn product(what: &'static str, factors: &[(&str, u64)]) -> Result<u64, LayoutError> {
    let mut total: u64 = 1;
    for (_, v) in factors {
        total = total
            .checked_mul(*v)
            .ok_or_else(|| LayoutError::SizeOverflow {
                what,
                detail: factors
                    .iter()
                    .map(|(n, v)| format!("{n} {v}"))
                    .collect::<Vec<_>>()
                    .join(" × "),
            })?;
    }
    Ok(total)
}

fn ring_capacity(field: &'static str, value: u64) -> Result<u32, LayoutError> {
    match u32::try_from(value) {
        Ok(v) if v.is_power_of_two() && v >= MIN_RING_CAPACITY => Ok(v),
        _ => Err(LayoutError::BadRingSize {
            field,
            value,
            min: MIN_RING_CAPACITY,
        }),
    }
}

/// Validates an LRBC segment whose header copy `header` decodes to `h`.
fn lrbc<S: ByteSource + ?Sized>(
    src: &S,
    header: Vec<u8>,
    h: &LrbcHeader,
    layout: Layout,
    mut b: Builder,
) -> Result<Geometry, LayoutError> {
    let num_envs = h.num_envs.get();
    let obs_size = h.obs_size.get();
    let act_size = h.act_size.get();
    let n = u64::from(num_envs);
    let mode = h.mode;
    if mode > 1 {
        b.warnings.push(format!(
            "mode is {mode}; only 0 (training) and 1 (inference) are defined"
        ));
    }
    if num_envs == 0 {
        b.warnings
            .push("num_envs is 0: there is no hot data".into());
    }

    let obs_bytes = product(
        "obs region",
        &[
            ("num_envs", n),
            ("obs_size", u64::from(obs_size)),
            ("f32", 4),
        ],
    )?;
    let act_bytes = product(
        "act region",
        &[
            ("num_envs", n),
            ("act_size", u64::from(act_size)),
            ("f32", 4),
        ],
    )?;
    let image_offset = h.image_offset.get();
    let image = if image_offset == 0 {
        None
    } else {
        let (width, height, channels) = (
            h.image_width.get(),
            h.image_height.get(),
            h.image_channels.get(),
        );
        if !matches!(channels, 1 | 3 | 4) {
            return Err(LayoutError::BadImageChannels { channels });
        }
        let bytes_per_env = product(
            "image region",
            &[
                ("image_width", u64::from(width)),
                ("image_height", u64::from(height)),
                ("image_channels", u64::from(channels)),
            ],
        )?;
        if bytes_per_env == 0 {
            b.warnings
                .push("image_offset is set but the image has no pixels".into());
        }
        let total = product(
            "image region",
            &[
                ("num_envs", n),
                ("image_width", u64::from(width)),
                ("image_height", u64::from(height)),
                ("image_channels", u64::from(channels)),
            ],
        )?;
        Some(ImageGeometry {
            offset_bytes: image_offset,
            width,
            height,
            channels,
            bytes_per_env,
            total_bytes: total,
        })
    };

    b.add(RegionKind::Obs, h.obs_offset.get(), obs_bytes)?;
    b.add(RegionKind::Act, h.act_offset.get(), act_bytes)?;
    b.add(RegionKind::Rewards, h.rewards_offset.get(), n * 4)?;
    b.add(RegionKind::Dones, h.dones_offset.get(), n)?;
    b.add(RegionKind::Resets, h.resets_offset.get(), n)?;

    if let Some(img) = &image {
        b.add(RegionKind::Image, img.offset_bytes, img.total_bytes)?;
    }

    let cmd_capacity = ring_capacity("cmd_ring_size", u64::from(h.cmd_ring_size.get()))?;
    let mut rings = Vec::new();
    for (kind, offset_bytes) in [
        (RegionKind::CmdS2c, h.cmd_s2c_offset.get()),
        (RegionKind::CmdC2s, h.cmd_c2s_offset.get()),
    ] {
        b.add(
            kind,
            offset_bytes,
            RingHeader::SIZE_BYTES as u64 + u64::from(cmd_capacity),
        )?;
        rings.push(RingGeometry {
            kind,
            format: RingFormat::Lrbc,
            offset_bytes,
            capacity_bytes: cmd_capacity,
        });
    }

    let mut names = Names::default();
    let mut ctl_page_aligned = false;
    let counters;
    if layout == Layout::LrbcV1Ext {
        counters = CounterOffsets::LRBC_EXT;
        let truncateds_offset = h.truncateds_offset.get();
        if truncateds_offset == 0 {
            b.warnings
                .push("truncateds_offset is 0: truncateds are unavailable".into());
        } else {
            b.add(RegionKind::Truncateds, truncateds_offset, n)?;
        }

        let (names_offset, names_size) = (h.names_offset.get(), u64::from(h.names_size.get()));
        if names_offset != 0 && names_size > 0 {
            b.add(RegionKind::Names, names_offset, names_size)?;
            let mut bytes = vec![0u8; names_size as usize];
            if !src.read_at(names_offset, &mut bytes) {
                return Err(LayoutError::Unreadable {
                    offset_bytes: names_offset,
                    length_bytes: names_size,
                });
            }
            let parsed = names::parse(&bytes)?;
            if parsed.trailing_garbage {
                b.warnings
                    .push("names region has non-zero bytes after the action names".into());
            }
            names = parsed.names;
        }

        let (s2c, c2s) = (h.ctl_s2c_offset.get(), h.ctl_c2s_offset.get());
        if s2c != 0 && c2s != 0 {
            let capacity = ring_capacity("ctl_ring_size", u64::from(h.ctl_ring_size.get()))?;
            let length = RingHeader::SIZE_BYTES as u64 + u64::from(capacity);
            ctl_page_aligned = true;
            for (kind, offset_bytes) in [(RegionKind::CtlS2c, s2c), (RegionKind::CtlC2s, c2s)] {
                b.add(kind, offset_bytes, length)?;
                rings.push(RingGeometry {
                    kind,
                    format: RingFormat::Lrbc,
                    offset_bytes,
                    capacity_bytes: capacity,
                });
                ctl_page_aligned &= offset_bytes % CTL_PAGE_BYTES == 0;
            }
            if !ctl_page_aligned {
                b.warnings.push(format!(
                    "control rings are not aligned to {CTL_PAGE_BYTES}-byte pages: the control channel is unavailable"
                ));
            }
        } else if s2c != 0 || c2s != 0 {
            b.warnings.push(format!(
                "only one control ring offset is set (ctl_s2c_offset {s2c}, ctl_c2s_offset {c2s}): the control channel is unavailable"
            ));
        }
    } else {
        counters = CounterOffsets::LRBC_SEED;
        if header[headers::EXT_BLOCK_START..headers::EXT_BLOCK_END]
            .iter()
            .any(|&x| x != 0)
        {
            b.warnings.push(format!(
                "the extension block is not zero but its total_size ({}) is not the segment size ({}): read as the seed header only",
                h.total_size.get(),
                b.size_bytes
            ));
        }
    }

    check_reserved(&header, LrbcHeader::FIELDS, &mut b.warnings);
    if header[headers::EXT_BLOCK_END..].iter().any(|&x| x != 0) {
        b.warnings
            .push("reserved header bytes 512..4096 are not zero".into());
    }
    if names.obs.len() > obs_size as usize || names.act.len() > act_size as usize {
        b.warnings.push(format!(
            "the names region lists {} observation and {} action names for obs_size {obs_size} and act_size {act_size}",
            names.obs.len(),
            names.act.len()
        ));
    }
    let regions = b.finish_regions()?;
    Ok(Geometry {
        layout,
        size_bytes: b.size_bytes,
        header,
        num_envs,
        obs_size,
        act_size,
        mode: Some(mode),
        counters,
        regions,
        image,
        rings,
        names,
        ctl_page_aligned,
        warnings: b.warnings,
    })
}

/// The page size engines align control rings to (spec 7). Mapping code checks the
/// running system's page size again before it maps anything writable.
pub const CTL_PAGE_BYTES: u64 = 4096;

fn check_reserved(header: &[u8], fields: &[FieldSpec], warnings: &mut Vec<Warning>) {
    for f in fields.iter().filter(|f| f.is_reserved()) {
        if header[f.offset_bytes..f.offset_bytes + f.size_bytes]
            .iter()
            .any(|&x| x != 0)
        {
            warnings.push(format!(
                "reserved bytes at offset {} ({} bytes) are not zero",
                f.offset_bytes, f.size_bytes
            ));
        }
    }
}

/// Validates a luckyrobots segment whose header copy `header` decodes to `h`.
fn lucky<S: ByteSource + ?Sized>(
    src: &S,
    header: Vec<u8>,
    h: &LuckyHeader,
    mut b: Builder,
) -> Result<Geometry, LayoutError> {
    let num_envs = h.num_envs.get();
    let obs_size = h.obs_size.get();
    let act_size = h.act_size.get();
    let n = u64::from(num_envs);
    if num_envs == 0 {
        b.warnings
            .push("num_envs is 0: there is no hot data".into());
    }
    let obs_bytes = product(
        "obs region",
        &[
            ("num_envs", n),
            ("obs_size", u64::from(obs_size)),
            ("f32", 4),
        ],
    )?;
    let act_bytes = product(
        "act region",
        &[
            ("num_envs", n),
            ("act_size", u64::from(act_size)),
            ("f32", 4),
        ],
    )?;
    b.add(RegionKind::Obs, h.obs_offset.get(), obs_bytes)?;
    b.add(RegionKind::Act, h.act_offset.get(), act_bytes)?;
    b.add(RegionKind::Rewards, h.reward_offset.get(), n * 4)?;
    b.add(RegionKind::Dones, h.done_offset.get(), n)?;
    b.add(RegionKind::Resets, h.reset_offset.get(), n)?;

    let mut rings = Vec::new();
    for (kind, offset_bytes) in [
        (RegionKind::CmdS2c, h.cmd_out_offset.get()),
        (RegionKind::CmdC2s, h.cmd_in_offset.get()),
    ] {
        let header_bytes = LuckyRingHeader::SIZE_BYTES as u64;
        // The capacity lives inside the ring header: check the header first.
        b.add(kind, offset_bytes, header_bytes)?;
        b.regions.pop();
        let unreadable = LayoutError::Unreadable {
            offset_bytes,
            length_bytes: header_bytes,
        };
        let mut ring_header = [0u8; LuckyRingHeader::SIZE_BYTES];
        if !src.read_at(offset_bytes, &mut ring_header) {
            return Err(unreadable);
        }
        let Ok((ring_header, _)) = LuckyRingHeader::read_from_prefix(ring_header.as_slice()) else {
            return Err(unreadable);
        };
        let raw = ring_header.capacity.get();
        let capacity = if raw == 0 {
            headers::LUCKY_DEFAULT_RING_CAPACITY
        } else {
            ring_capacity(
                match kind {
                    RegionKind::CmdS2c => "cmd_out capacity",
                    _ => "cmd_in capacity",
                },
                u64::from(raw),
            )?
        };
        b.add(kind, offset_bytes, header_bytes + u64::from(capacity))?;
        rings.push(RingGeometry {
            kind,
            format: RingFormat::Lucky,
            offset_bytes,
            capacity_bytes: capacity,
        });
    }

    let mut names = Names::default();
    let schema_offset = h.schema_offset.get();
    if schema_offset != 0 {
        if schema_offset >= b.size_bytes {
            return Err(LayoutError::OutsideSegment {
                region: RegionKind::Names,
                offset_bytes: schema_offset,
                length_bytes: 0,
                size_bytes: b.size_bytes,
            });
        }
        let avail = (b.size_bytes - schema_offset).min(headers::LUCKY_SCHEMA_MAX_BYTES);
        let mut bytes = vec![0u8; avail as usize];
        if !src.read_at(schema_offset, &mut bytes) {
            return Err(LayoutError::Unreadable {
                offset_bytes: schema_offset,
                length_bytes: avail,
            });
        }
        let parsed = names::parse(&bytes)?;
        b.add(
            RegionKind::Names,
            schema_offset,
            parsed.consumed_bytes as u64,
        )?;
        names = parsed.names;
    }
    check_reserved(&header, LuckyHeader::FIELDS, &mut b.warnings);
    let regions = b.finish_regions()?;
    Ok(Geometry {
        layout: Layout::LuckyrobotsIpc,
        size_bytes: b.size_bytes,
        header,
        num_envs,
        obs_size,
        act_size,
        mode: None,
        counters: CounterOffsets::LUCKY,
        regions,
        image: None,
        rings,
        names,
        ctl_page_aligned: false,
        warnings: b.warnings,
    })
}

#[cfg(test)]
mod tests;
