//! The validation of a luckyrobots IPC segment (spec 8).

use zerocopy::FromBytes;

use super::builder::{Builder, check_reserved, ring_capacity};
use super::{
    ByteSource, CounterOffsets, Geometry, Layout, LayoutError, LuckyHeader, LuckyRingHeader, Names,
    RegionKind, RingFormat, RingGeometry, headers, names,
};

/// Validates a luckyrobots segment whose header copy `header` decodes to `h`.
pub(super) fn validate<S: ByteSource + ?Sized>(
    src: &S,
    header: Vec<u8>,
    h: &LuckyHeader,
    mut b: Builder,
) -> Result<Geometry, LayoutError> {
    let num_envs = h.num_envs.get();
    let obs_size = h.obs_size.get();
    let act_size = h.act_size.get();
    let hot = b.hot_sizes(num_envs, obs_size, act_size)?;
    b.add_hot(
        &hot,
        [
            h.obs_offset.get(),
            h.act_offset.get(),
            h.reward_offset.get(),
            h.done_offset.get(),
            h.reset_offset.get(),
        ],
    )?;

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
