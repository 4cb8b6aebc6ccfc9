//! Layout detection (spec 8): the header read, its layout chosen, and the segment
//! validated by that layout's module (`v1`, `lucky`).

use zerocopy::FromBytes;

use super::builder::Builder;
use super::{
    ByteSource, Geometry, HEADER_REGION_BYTES, LRBC_MAGIC, LRBC_VERSION, Layout, LayoutChoice,
    LayoutError, LrbcHeader, LuckyHeader, Preamble, Region, RegionKind, lucky, v1,
};

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
        Layout::LrbcV1 | Layout::LrbcV1Ext => v1::validate(src, header, &lrbc_header, layout, b),
        Layout::LuckyrobotsIpc => {
            if lucky_total != size_bytes {
                b.warnings.push(format!(
                    "total_size is {lucky_total} but the segment is {size_bytes} bytes (layout forced)"
                ));
            }
            lucky::validate(src, header, &lucky_header, b)
        }
    }
}
