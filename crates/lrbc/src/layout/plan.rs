//! A segment's plan: where an engine puts each region, and the header bytes that say
//! so. Used by the simulated engine and by tests; the inspector itself never writes.

use zerocopy::{FromZeros, IntoBytes};

use super::headers::{
    HEADER_REGION_BYTES, LRBC_MAGIC, LRBC_VERSION, LrbcHeader, LuckyHeader, LuckyRingHeader,
    RingHeader,
};
use super::{CTL_PAGE_BYTES, MIN_RING_CAPACITY, Names};

/// Which layout to produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanLayout {
    /// LRBC v1; `ext: false` leaves the extension block zero, as a seed-only engine would.
    Lrbc { ext: bool },
    /// The luckyrobots IPC layout.
    Lucky,
}

/// What the engine wants in its segment.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanSpec {
    pub layout: PlanLayout,
    pub num_envs: u32,
    pub obs_size: u32,
    pub act_size: u32,
    /// `(width, height, channels)`; LRBC only.
    pub image: Option<(u32, u32, u32)>,
    pub cmd_ring_size: u32,
    /// Control ring capacity; LRBC with the extension only. `None` offers no control rings.
    pub ctl_ring_size: Option<u32>,
    pub names: Names,
    /// 0 training, 1 inference (LRBC only).
    pub mode: u8,
    pub server_pid: u32,
    /// Refuse plans larger than this.
    pub max_size_bytes: u64,
}

/// Why a plan is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("num_envs must be at least 1")]
    ZeroEnvs,
    #[error("obs_size and act_size must be at least 1")]
    ZeroSize,
    #[error("sizes overflow: {0}")]
    Overflow(String),
    #[error("{field} {value} is not a power of two of at least {MIN_RING_CAPACITY}")]
    RingSize { field: &'static str, value: u32 },
    #[error("image channels must be 1, 3 or 4, not {0}")]
    Channels(u32),
    #[error("image width and height must be at least 1")]
    EmptyImage,
    #[error("the segment would be {size_bytes} bytes, more than the {max_bytes} bytes allowed")]
    TooLarge { size_bytes: u64, max_bytes: u64 },
    #[error("the {0} layout has no {1}")]
    Unsupported(&'static str, &'static str),
}

/// A planned segment: its size and the offset of every region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub size_bytes: u64,
    /// The first 4096 bytes, ready to copy into the segment.
    pub header: Vec<u8>,
    /// The names region bytes (at `names_offset`), possibly empty.
    pub names_bytes: Vec<u8>,
    pub obs_offset: u64,
    pub act_offset: u64,
    pub rewards_offset: u64,
    pub dones_offset: u64,
    pub truncateds_offset: u64,
    pub resets_offset: u64,
    pub names_offset: u64,
    pub cmd_s2c_offset: u64,
    pub cmd_c2s_offset: u64,
    pub ctl_s2c_offset: u64,
    pub ctl_c2s_offset: u64,
    pub image_offset: u64,
}

fn align(value: u64, to: u64) -> Option<u64> {
    value.checked_add(to - 1).map(|v| v / to * to)
}

struct Cursor {
    at: u64,
}

impl Cursor {
    fn take(&mut self, length: u64, alignment: u64) -> Result<u64, PlanError> {
        let start = align(self.at, alignment).ok_or_else(|| overflow("offsets"))?;
        self.at = start
            .checked_add(length)
            .ok_or_else(|| overflow("offsets"))?;
        Ok(start)
    }
}

fn overflow(what: &str) -> PlanError {
    PlanError::Overflow(what.to_string())
}

fn mul(a: u64, b: u64, what: &str) -> Result<u64, PlanError> {
    a.checked_mul(b).ok_or_else(|| overflow(what))
}

fn check_ring(field: &'static str, value: u32) -> Result<(), PlanError> {
    if value.is_power_of_two() && value >= MIN_RING_CAPACITY {
        Ok(())
    } else {
        Err(PlanError::RingSize { field, value })
    }
}

/// What a spec asks that no layout can hold: no envs, empty rows, ring sizes that are not
/// powers of two of at least the smallest.
fn check_spec(spec: &PlanSpec) -> Result<(), PlanError> {
    if spec.num_envs == 0 {
        return Err(PlanError::ZeroEnvs);
    }
    if spec.obs_size == 0 || spec.act_size == 0 {
        return Err(PlanError::ZeroSize);
    }
    check_ring("ring size", spec.cmd_ring_size)?;
    if let Some(ctl) = spec.ctl_ring_size {
        check_ring("control ring size", ctl)?;
    }
    Ok(())
}

/// The bytes of the regions whose size the spec sets.
struct RegionSizes {
    n: u64,
    obs: u64,
    act: u64,
    image: u64,
    names: Vec<u8>,
}

impl RegionSizes {
    /// Each region's bytes, refusing what the spec's layout cannot describe.
    fn of(spec: &PlanSpec) -> Result<Self, PlanError> {
        let n = u64::from(spec.num_envs);
        let obs_bytes = mul(
            mul(n, u64::from(spec.obs_size), "num_envs × obs_size")?,
            4,
            "obs bytes",
        )?;
        let act_bytes = mul(
            mul(n, u64::from(spec.act_size), "num_envs × act_size")?,
            4,
            "act bytes",
        )?;
        let lucky = spec.layout == PlanLayout::Lucky;
        let ext = spec.layout == PlanLayout::Lrbc { ext: true };
        if lucky && spec.image.is_some() {
            return Err(PlanError::Unsupported("luckyrobots-ipc", "image region"));
        }
        if !ext && spec.ctl_ring_size.is_some() {
            return Err(PlanError::Unsupported(
                "seed-only",
                "control rings (they need the extension block)",
            ));
        }
        let image_bytes = match spec.image {
            None => 0,
            Some((w, h, c)) => {
                if !matches!(c, 1 | 3 | 4) {
                    return Err(PlanError::Channels(c));
                }
                if w == 0 || h == 0 {
                    return Err(PlanError::EmptyImage);
                }
                let per_env = mul(
                    mul(u64::from(w), u64::from(h), "image width × height")?,
                    u64::from(c),
                    "image bytes per env",
                )?;
                mul(per_env, n, "image bytes")?
            }
        };
        Ok(Self {
            n,
            obs: obs_bytes,
            act: act_bytes,
            image: image_bytes,
            names: spec.names.encode(),
        })
    }
}

/// Every region placed after the header, 64-byte aligned, the control rings on pages of
/// their own; the header is left to write.
fn place_regions(spec: &PlanSpec, sizes: &RegionSizes) -> Result<Plan, PlanError> {
    let lucky = spec.layout == PlanLayout::Lucky;
    let ext = spec.layout == PlanLayout::Lrbc { ext: true };
    let n = sizes.n;
    let ring_header = if lucky {
        LuckyRingHeader::SIZE_BYTES as u64
    } else {
        RingHeader::SIZE_BYTES as u64
    };

    let mut c = Cursor {
        at: HEADER_REGION_BYTES,
    };
    let obs_offset = c.take(sizes.obs, 64)?;
    let act_offset = c.take(sizes.act, 64)?;
    let rewards_offset = c.take(n * 4, 64)?;
    let dones_offset = c.take(n, 64)?;
    let truncateds_offset = if ext { c.take(n, 64)? } else { 0 };
    let resets_offset = c.take(n, 64)?;
    let names_offset = if (ext || lucky) && !sizes.names.is_empty() {
        c.take(sizes.names.len() as u64, 64)?
    } else {
        0
    };
    let ring_bytes = ring_header + u64::from(spec.cmd_ring_size);
    let cmd_s2c_offset = c.take(ring_bytes, 64)?;
    let cmd_c2s_offset = c.take(ring_bytes, 64)?;
    let image_offset = if sizes.image > 0 {
        c.take(sizes.image, 64)?
    } else {
        0
    };
    let (ctl_s2c_offset, ctl_c2s_offset) = match spec.ctl_ring_size {
        Some(ctl) => {
            // Each control ring on pages of its own (spec 7).
            let bytes = align(
                RingHeader::SIZE_BYTES as u64 + u64::from(ctl),
                CTL_PAGE_BYTES,
            )
            .ok_or_else(|| overflow("control rings"))?;
            (
                c.take(bytes, CTL_PAGE_BYTES)?,
                c.take(bytes, CTL_PAGE_BYTES)?,
            )
        }
        None => (0, 0),
    };
    let size_bytes = align(c.at, CTL_PAGE_BYTES).ok_or_else(|| overflow("segment size"))?;
    if size_bytes > spec.max_size_bytes {
        return Err(PlanError::TooLarge {
            size_bytes,
            max_bytes: spec.max_size_bytes,
        });
    }

    Ok(Plan {
        size_bytes,
        header: Vec::new(),
        names_bytes: if names_offset != 0 {
            sizes.names.clone()
        } else {
            Vec::new()
        },
        obs_offset,
        act_offset,
        rewards_offset,
        dones_offset,
        truncateds_offset,
        resets_offset,
        names_offset,
        cmd_s2c_offset,
        cmd_c2s_offset,
        ctl_s2c_offset,
        ctl_c2s_offset,
        image_offset,
    })
}

/// The luckyrobots header (spec 8) of a placed plan.
fn lucky_header(spec: &PlanSpec, p: &Plan) -> Vec<u8> {
    let mut h = LuckyHeader::new_zeroed();
    h.magic = LRBC_MAGIC.into();
    h.version = LRBC_VERSION.into();
    h.engine_pid = spec.server_pid.into();
    h.num_envs = spec.num_envs.into();
    h.obs_size = spec.obs_size.into();
    h.act_size = spec.act_size.into();
    h.obs_offset = p.obs_offset.into();
    h.act_offset = p.act_offset.into();
    h.reward_offset = p.rewards_offset.into();
    h.done_offset = p.dones_offset.into();
    h.reset_offset = p.resets_offset.into();
    h.schema_offset = p.names_offset.into();
    h.cmd_in_offset = p.cmd_c2s_offset.into();
    h.cmd_out_offset = p.cmd_s2c_offset.into();
    h.total_size = p.size_bytes.into();
    let mut header = vec![0u8; HEADER_REGION_BYTES as usize];
    header[..LuckyHeader::SIZE_BYTES].copy_from_slice(h.as_bytes());
    header
}

/// The LRBC header of a placed plan, with the extension block when `ext`; `names_len` is
/// the bytes of the names the spec gives.
fn v1_header(spec: &PlanSpec, p: &Plan, ext: bool, names_len: usize) -> Result<Vec<u8>, PlanError> {
    let mut h = LrbcHeader::new_zeroed();
    h.magic = LRBC_MAGIC.into();
    h.version = LRBC_VERSION.into();
    h.server_pid = spec.server_pid.into();
    h.mode = spec.mode;
    h.num_envs = spec.num_envs.into();
    h.obs_size = spec.obs_size.into();
    h.act_size = spec.act_size.into();
    h.obs_offset = p.obs_offset.into();
    h.act_offset = p.act_offset.into();
    h.rewards_offset = p.rewards_offset.into();
    h.dones_offset = p.dones_offset.into();
    h.resets_offset = p.resets_offset.into();
    h.cmd_s2c_offset = p.cmd_s2c_offset.into();
    h.cmd_c2s_offset = p.cmd_c2s_offset.into();
    h.cmd_ring_size = spec.cmd_ring_size.into();
    h.image_offset = p.image_offset.into();
    if let Some((w, hgt, ch)) = spec.image {
        h.image_width = w.into();
        h.image_height = hgt.into();
        h.image_channels = ch.into();
    }
    if ext {
        h.total_size = p.size_bytes.into();
        h.truncateds_offset = p.truncateds_offset.into();
        h.names_offset = p.names_offset.into();
        // names_size is a u32: a larger names region cannot be described.
        h.names_size = u32::try_from(names_len)
            .map_err(|_| overflow("names region"))?
            .into();
        h.ctl_s2c_offset = p.ctl_s2c_offset.into();
        h.ctl_c2s_offset = p.ctl_c2s_offset.into();
        h.ctl_ring_size = spec.ctl_ring_size.unwrap_or(0).into();
    }
    let mut header = vec![0u8; HEADER_REGION_BYTES as usize];
    header[..LrbcHeader::SIZE_BYTES].copy_from_slice(h.as_bytes());
    Ok(header)
}

impl Plan {
    pub fn new(spec: &PlanSpec) -> Result<Self, PlanError> {
        check_spec(spec)?;
        let sizes = RegionSizes::of(spec)?;
        let mut plan = place_regions(spec, &sizes)?;
        plan.header = match spec.layout {
            PlanLayout::Lucky => lucky_header(spec, &plan),
            PlanLayout::Lrbc { ext } => v1_header(spec, &plan, ext, sizes.names.len())?,
        };
        Ok(plan)
    }

    /// The whole segment's initial bytes: header, names, and ring capacities (luckyrobots).
    pub fn initial_bytes(&self, spec: &PlanSpec) -> Vec<u8> {
        let mut bytes = vec![0u8; self.size_bytes as usize];
        bytes[..self.header.len()].copy_from_slice(&self.header);
        let at = self.names_offset as usize;
        bytes[at..at + self.names_bytes.len()].copy_from_slice(&self.names_bytes);
        if spec.layout == PlanLayout::Lucky {
            let mut ring = LuckyRingHeader::new_zeroed();
            ring.capacity = spec.cmd_ring_size.into();
            for offset in [self.cmd_s2c_offset, self.cmd_c2s_offset] {
                let at = offset as usize;
                bytes[at..at + LuckyRingHeader::SIZE_BYTES].copy_from_slice(ring.as_bytes());
            }
        }
        bytes
    }
}
