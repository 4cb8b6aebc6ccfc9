//! The ring entry parsers (LRBC and luckyrobots watchers) over arbitrary ring bytes and
//! positions: never panic, never loop, and account for every byte they pass.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lrbc_inspector::layout::{RegionKind, RingFormat, RingGeometry};
use lrbc_inspector::rings::{AnyWatcher, WatchEvent};

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let capacity = 64u32 << (shape & 7);
    let lucky = shape & 8 != 0;
    let header = if lucky { 192 } else { 64 };
    let mut mem = vec![0u8; header + capacity as usize];
    let n = rest.len().min(mem.len());
    mem[..n].copy_from_slice(&rest[..n]);
    if lucky {
        mem[128..132].copy_from_slice(&capacity.to_le_bytes());
    }
    let ring = RingGeometry {
        kind: RegionKind::CmdC2s,
        format: if lucky { RingFormat::Lucky } else { RingFormat::Lrbc },
        offset_bytes: 0,
        capacity_bytes: capacity,
    };
    let mut w = AnyWatcher::new(&mem, ring);
    let start = w.cursor();
    let mut out = Vec::new();
    w.poll(&mem, &mut out, 100_000);
    let s = w.stats();
    for e in &out {
        if let WatchEvent::Entry { payload, .. } = e {
            assert!(payload.len() <= capacity as usize);
        }
    }
    // A producer position behind the consumer's is a re-initialised ring: the watcher
    // says so and starts over; no bytes were passed.
    if out
        .iter()
        .any(|e| matches!(e, WatchEvent::Malformed { error, .. } if error.contains("re-initialised")))
    {
        return;
    }
    let moved = if lucky {
        w.cursor().wrapping_sub(start)
    } else {
        u64::from((w.cursor() as u32).wrapping_sub(start as u32))
    };
    assert_eq!(s.bytes + s.lost_bytes, moved, "every byte passed is seen or lost");
});
