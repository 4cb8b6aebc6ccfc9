//! What validating either layout takes: [`Builder`], which adds regions only inside the
//! segment and sorts them and checks that none overlap; products that do not overflow,
//! ring capacities and reserved bytes.

use super::{FieldSpec, LayoutError, MIN_RING_CAPACITY, Region, RegionKind, Warning};

/// The sizes of the hot arrays, from [`Builder::hot_sizes`].
pub(super) struct HotSizes {
    /// Envs: entries of the rewards, dones and resets arrays.
    pub(super) envs: u64,
    pub(super) obs_bytes: u64,
    pub(super) act_bytes: u64,
}

pub(super) struct Builder {
    pub(super) size_bytes: u64,
    pub(super) regions: Vec<Region>,
    pub(super) warnings: Vec<Warning>,
}

impl Builder {
    /// Adds a region after checking that it lies inside the segment.
    pub(super) fn add(
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

    /// The sizes of the hot arrays of `num_envs` envs (spec 3); warns when there are
    /// none.
    pub(super) fn hot_sizes(
        &mut self,
        num_envs: u32,
        obs_size: u32,
        act_size: u32,
    ) -> Result<HotSizes, LayoutError> {
        let envs = u64::from(num_envs);
        if num_envs == 0 {
            self.warnings
                .push("num_envs is 0: there is no hot data".into());
        }
        let row = |what, field, size: u32| {
            product(
                what,
                &[("num_envs", envs), (field, u64::from(size)), ("f32", 4)],
            )
        };
        Ok(HotSizes {
            envs,
            obs_bytes: row("obs region", "obs_size", obs_size)?,
            act_bytes: row("act region", "act_size", act_size)?,
        })
    }

    /// Adds the hot arrays at their offsets `[obs, act, rewards, dones, resets]`: the
    /// observations and actions, an f32 reward and a byte of done and of reset per env.
    pub(super) fn add_hot(
        &mut self,
        sizes: &HotSizes,
        offsets: [u64; 5],
    ) -> Result<(), LayoutError> {
        let [obs, act, rewards, dones, resets] = offsets;
        self.add(RegionKind::Obs, obs, sizes.obs_bytes)?;
        self.add(RegionKind::Act, act, sizes.act_bytes)?;
        self.add(RegionKind::Rewards, rewards, sizes.envs * 4)?;
        self.add(RegionKind::Dones, dones, sizes.envs)?;
        self.add(RegionKind::Resets, resets, sizes.envs)?;
        Ok(())
    }

    /// Sorts the regions and rejects any two that overlap. Empty regions overlap nothing.
    pub(super) fn finish_regions(&mut self) -> Result<Vec<Region>, LayoutError> {
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
pub(super) fn product(what: &'static str, factors: &[(&str, u64)]) -> Result<u64, LayoutError> {
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

pub(super) fn ring_capacity(field: &'static str, value: u64) -> Result<u32, LayoutError> {
    match u32::try_from(value) {
        Ok(v) if v.is_power_of_two() && v >= MIN_RING_CAPACITY => Ok(v),
        _ => Err(LayoutError::BadRingSize {
            field,
            value,
            min: MIN_RING_CAPACITY,
        }),
    }
}

pub(super) fn check_reserved(header: &[u8], fields: &[FieldSpec], warnings: &mut Vec<Warning>) {
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
