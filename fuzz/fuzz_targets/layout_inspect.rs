//! Header and region parsing over arbitrary bytes: never panics, and every region of a
//! geometry that validates lies inside the segment.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lrbc_inspector::layout::{LRBC_MAGIC, LayoutChoice, inspect};

fuzz_target!(|data: &[u8]| {
    let [selector, size_lo, size_hi, rest @ ..] = data else {
        return;
    };
    // A segment of at least the header's 4096 bytes (libFuzzer's inputs are shorter),
    // sometimes smaller, holding the input at its start.
    let extra = usize::from(u16::from_le_bytes([*size_lo, *size_hi])) * 16;
    let len = if selector & 16 != 0 { extra % 4200 } else { 4096 + extra };
    let mut bytes = vec![0u8; len];
    let n = rest.len().min(len);
    bytes[..n].copy_from_slice(&rest[..n]);
    // Give the fuzzer a head start past the magic, version and size checks.
    if bytes.len() >= 8 && selector & 1 == 1 {
        bytes[0..4].copy_from_slice(&LRBC_MAGIC.to_le_bytes());
        bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
    }
    let total = bytes.len() as u64;
    if bytes.len() >= 264 && selector & 2 == 2 {
        bytes[256..264].copy_from_slice(&total.to_le_bytes());
    } else if bytes.len() >= 120 && selector & 4 == 4 {
        bytes[112..120].copy_from_slice(&total.to_le_bytes());
    }
    let choice = match selector >> 6 {
        0 | 1 => LayoutChoice::Auto,
        2 => LayoutChoice::LrbcV1,
        _ => LayoutChoice::LuckyrobotsIpc,
    };
    if let Ok(g) = inspect(&bytes, choice) {
        for r in &g.regions {
            assert!(r.end_bytes() <= total);
        }
        for ring in &g.rings {
            assert!(ring.capacity_bytes.is_power_of_two());
        }
    }
});
