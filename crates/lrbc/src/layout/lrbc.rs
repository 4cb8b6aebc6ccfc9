//! Validating an LRBC segment (the seed's header, with or without the extension block).

use super::detect::{Builder, check_reserved, product, ring_capacity};
use super::{
    ByteSource, CTL_PAGE_BYTES, CounterOffsets, Geometry, ImageGeometry, Layout, LayoutError,
    LrbcHeader, Names, RegionKind, RingFormat, RingGeometry, RingHeader, headers, names,
};

/// Validates an LRBC segment whose header copy `header` decodes to `h`.
pub(super) fn validate<S: ByteSource + ?Sized>(
    src: &S,
    header: Vec<u8>,
    h: &LrbcHeader,
    layout: Layout,
    mut b: Builder,
) -> Result<Geometry, LayoutError> {
    let num_envs = h.num_envs.get();
    let obs_size = h.obs_size.get();
    let act_size = h.act_size.get();
    let mode = h.mode;
    if mode > 1 {
        b.warnings.push(format!(
            "mode is {mode}; only 0 (training) and 1 (inference) are defined"
        ));
    }
    let hot = b.hot_sizes(num_envs, obs_size, act_size)?;
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
                ("num_envs", hot.envs),
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

    b.add_hot(
        &hot,
        [
            h.obs_offset.get(),
            h.act_offset.get(),
            h.rewards_offset.get(),
            h.dones_offset.get(),
            h.resets_offset.get(),
        ],
    )?;

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
            b.add(RegionKind::Truncateds, truncateds_offset, hot.envs)?;
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
