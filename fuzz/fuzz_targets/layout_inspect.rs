//! Header and region parsing over arbitrary bytes: never panics, and every region of a
//! geometry that validates lies inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lrbc_inspector::layout::{LayoutChoice, LRBC_MAGIC, inspect};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    // Most random inputs fail the magic check; give the fuzzer a head start by
    // stamping a valid magic and version, and sometimes the total_size of a layout.
    let mut bytes = rest.to_vec();
    if bytes.len() >= 8 && selector & 1 == 1 {
        bytes[0..4].copy_from_slice(&LRBC_MAGIC.to_le_bytes());
        bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
    }
    let len = bytes.len() as u64;
    if bytes.len() >= 264 && selector & 2 == 2 {
        bytes[256..264].copy_from_slice(&len.to_le_bytes());
    } else if bytes.len() >= 120 && selector & 4 == 4 {
        bytes[112..120].copy_from_slice(&len.to_le_bytes());
    }
    let choice = match selector >> 6 {
        0 | 1 => LayoutChoice::Auto,
        2 => LayoutChoice::LrbcV1,
        _ => LayoutChoice::LuckyrobotsIpc,
    };
    if let Ok(g) = inspect(&bytes, choice) {
        for r in &g.regions {
            assert!(r.end_bytes() <= len);
        }
        for ring in &g.rings {
            assert!(ring.capacity_bytes.is_power_of_two());
        }
    }
});
