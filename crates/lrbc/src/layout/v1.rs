//! The validation of an LRBC v1 segment (the seed's header, with or without the extension
//! block, spec 2).

use super::builder::{Builder, HotSizes, check_reserved, product, ring_capacity};
use super::{
    ByteSource, CTL_PAGE_BYTES, CounterOffsets, Geometry, ImageGeometry, Layout, LayoutError,
    LrbcHeader, Names, RegionKind, RingFormat, RingGeometry, RingHeader, headers, names,
};

/// Validates an LRBC segment whose header copy `header` decodes to `h`: its mode, the
/// hot arrays and the image region, the command rings, the extension block's regions
/// (or, in a seed-only segment, that the block is zero), and the reserved bytes.
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
    check_mode(mode, &mut b);
    let hot = b.hot_sizes(num_envs, obs_size, act_size)?;
    let image = image_geometry(h, &hot, &mut b)?;
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
    let mut rings = command_rings(h, &mut b)?;

    let mut names = Names::default();
    let mut ctl_page_aligned = false;
    let counters;
    if layout == Layout::LrbcV1Ext {
        counters = CounterOffsets::LRBC_EXT;
        add_truncateds(h, &hot, &mut b)?;
        if let Some(found) = names_region(src, h, &mut b)? {
            names = found;
        }
        ctl_page_aligned = control_rings(h, &mut b, &mut rings)?;
    } else {
        counters = CounterOffsets::LRBC_SEED;
        check_ext_block_is_zero(&header, h, &mut b);
    }

    check_reserved(&header, LrbcHeader::FIELDS, &mut b.warnings);
    check_header_tail(&header, &mut b);
    check_names_fit(&names, obs_size, act_size, &mut b);
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

/// Warns of a mode the spec does not define.
fn check_mode(mode: u8, b: &mut Builder) {
    if mode > 1 {
        b.warnings.push(format!(
            "mode is {mode}; only 0 (training) and 1 (inference) are defined"
        ));
    }
}

/// The image region's geometry (spec 5), None when `image_offset` is 0; its size is
/// checked not to overflow, not yet to lie inside the segment.
fn image_geometry(
    h: &LrbcHeader,
    hot: &HotSizes,
    b: &mut Builder,
) -> Result<Option<ImageGeometry>, LayoutError> {
    let image_offset = h.image_offset.get();
    if image_offset == 0 {
        return Ok(None);
    }
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
    Ok(Some(ImageGeometry {
        offset_bytes: image_offset,
        width,
        height,
        channels,
        bytes_per_env,
        total_bytes: total,
    }))
}

/// Adds the two command rings (spec 4), `cmd_s2c` then `cmd_c2s`, of `cmd_ring_size`.
fn command_rings(h: &LrbcHeader, b: &mut Builder) -> Result<Vec<RingGeometry>, LayoutError> {
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
    Ok(rings)
}

/// Adds the truncateds array of the extension block, or warns that there is none.
fn add_truncateds(h: &LrbcHeader, hot: &HotSizes, b: &mut Builder) -> Result<(), LayoutError> {
    let truncateds_offset = h.truncateds_offset.get();
    if truncateds_offset == 0 {
        b.warnings
            .push("truncateds_offset is 0: truncateds are unavailable".into());
    } else {
        b.add(RegionKind::Truncateds, truncateds_offset, hot.envs)?;
    }
    Ok(())
}

/// Adds the names region (spec 6) and parses it; None when the header gives none.
fn names_region<S: ByteSource + ?Sized>(
    src: &S,
    h: &LrbcHeader,
    b: &mut Builder,
) -> Result<Option<Names>, LayoutError> {
    let (names_offset, names_size) = (h.names_offset.get(), u64::from(h.names_size.get()));
    if names_offset == 0 || names_size == 0 {
        return Ok(None);
    }
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
    Ok(Some(parsed.names))
}

/// Adds the two control rings (spec 7) when both offsets are set; returns whether they
/// start on pages of their own (the control channel's condition), warning when not.
fn control_rings(
    h: &LrbcHeader,
    b: &mut Builder,
    rings: &mut Vec<RingGeometry>,
) -> Result<bool, LayoutError> {
    let (s2c, c2s) = (h.ctl_s2c_offset.get(), h.ctl_c2s_offset.get());
    if s2c == 0 || c2s == 0 {
        if s2c != 0 || c2s != 0 {
            b.warnings.push(format!(
                "only one control ring offset is set (ctl_s2c_offset {s2c}, ctl_c2s_offset {c2s}): the control channel is unavailable"
            ));
        }
        return Ok(false);
    }
    let capacity = ring_capacity("ctl_ring_size", u64::from(h.ctl_ring_size.get()))?;
    let length = RingHeader::SIZE_BYTES as u64 + u64::from(capacity);
    let mut ctl_page_aligned = true;
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
    Ok(ctl_page_aligned)
}

/// In a segment read as the seed's header only, warns when the extension block is not
/// zero.
fn check_ext_block_is_zero(header: &[u8], h: &LrbcHeader, b: &mut Builder) {
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

/// Warns when the header's reserved bytes after the extension block are not zero.
fn check_header_tail(header: &[u8], b: &mut Builder) {
    if header[headers::EXT_BLOCK_END..].iter().any(|&x| x != 0) {
        b.warnings
            .push("reserved header bytes 512..4096 are not zero".into());
    }
}

/// Warns when the names region lists more names than the arrays have values.
fn check_names_fit(names: &Names, obs_size: u32, act_size: u32, b: &mut Builder) {
    if names.obs.len() > obs_size as usize || names.act.len() > act_size as usize {
        b.warnings.push(format!(
            "the names region lists {} observation and {} action names for obs_size {obs_size} and act_size {act_size}",
            names.obs.len(),
            names.act.len()
        ));
    }
}
