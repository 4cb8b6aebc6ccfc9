use super::*;
use crate::layout::{RegionKind, RingFormat};
use crate::segment::{SHM_DIR, SegmentRw};
use crate::testutil::unique_name;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

struct RingFile {
    path: PathBuf,
    mem: SegmentRw,
    ring: RingGeometry,
}

impl Drop for RingFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn ring_file(capacity: u32) -> RingFile {
    let path = PathBuf::from(SHM_DIR).join(unique_name("ring"));
    let mem = SegmentRw::create(&path, 128 + u64::from(capacity), false).unwrap();
    RingFile {
        path,
        mem,
        ring: RingGeometry {
            kind: RegionKind::CmdC2s,
            format: RingFormat::Lrbc,
            offset_bytes: 64,
            capacity_bytes: capacity,
        },
    }
}

/// A payload that proves its own integrity: a sequence number, then bytes derived from it.
fn payload(seq: u64, len: usize) -> Vec<u8> {
    let mut p = seq.to_le_bytes().to_vec();
    p.extend((0..len.saturating_sub(8)).map(|i| (seq as usize * 31 + i * 7) as u8));
    p
}

fn check_payload(p: &[u8]) -> u64 {
    let seq = u64::from_le_bytes(p[..8].try_into().unwrap());
    assert_eq!(
        p,
        payload(seq, p.len()).as_slice(),
        "torn payload delivered"
    );
    seq
}

#[test]
fn entries_round_trip_through_producer_and_consumer_across_the_wrap() {
    let f = ring_file(256);
    let mut prod = Producer::new(&f.mem, f.ring);
    let mut cons = Consumer::new(&f.mem, f.ring);
    let mut buf = Vec::new();
    for seq in 0..200u64 {
        let p = payload(seq, 8 + (seq as usize * 13) % 60);
        let pos = prod.try_push(&f.mem, &p).unwrap();
        assert_eq!(pos % 8, 0, "entries start at multiples of 8");
        assert_eq!(cons.try_pop(&f.mem, &mut buf).unwrap(), Some(pos));
        assert_eq!(buf, p);
    }
    assert_eq!(cons.try_pop(&f.mem, &mut buf).unwrap(), None);
    // Positions are free-running: 200 entries went far past the 256-byte capacity.
    assert!(prod.write_pos() > 4 * 256);
}

#[test]
fn a_full_ring_refuses_and_bad_sizes_are_errors() {
    let f = ring_file(64);
    let mut prod = Producer::new(&f.mem, f.ring);
    assert_eq!(prod.try_push(&f.mem, &[]), Err(PushError::Empty));
    assert!(matches!(
        prod.try_push(&f.mem, &[0; 61]),
        Err(PushError::TooLarge { .. })
    ));
    prod.try_push(&f.mem, &[1; 60]).unwrap();
    assert!(matches!(
        prod.try_push(&f.mem, &[2; 1]),
        Err(PushError::Full { .. })
    ));
}

#[test]
fn the_wrap_marker_skips_to_the_start_and_the_skip_counts_as_used() {
    let f = ring_file(128);
    let mut prod = Producer::new(&f.mem, f.ring);
    let mut cons = Consumer::new(&f.mem, f.ring);
    let mut buf = Vec::new();
    prod.try_push(&f.mem, &[1; 90]).unwrap(); // 96 bytes: 32 left before the end
    cons.try_pop(&f.mem, &mut buf).unwrap();
    let pos = prod.try_push(&f.mem, &[2; 40]).unwrap(); // 48 bytes: must wrap
    assert_eq!(
        pos, 128,
        "the entry starts at the next position mapping to index 0"
    );
    assert_eq!(prod.write_pos(), 128 + 48);
    let mut word = [0u8; 4];
    f.mem.read_at(f.ring.offset_bytes + DATA + 96, &mut word);
    assert_eq!(u32::from_le_bytes(word), WRAP_MARKER);
    assert_eq!(cons.try_pop(&f.mem, &mut buf).unwrap(), Some(128));
    assert_eq!(buf, vec![2; 40]);
}

#[test]
fn the_watcher_sees_every_entry_without_moving_read_pos() {
    let f = ring_file(512);
    let mut prod = Producer::new(&f.mem, f.ring);
    let mut watcher = Watcher::new(&f.mem, f.ring);
    let mut out = Vec::new();
    for seq in 0..5 {
        prod.try_push(&f.mem, &payload(seq, 20)).unwrap();
    }
    watcher.poll(&f.mem, &mut out, usize::MAX);
    assert_eq!(out.len(), 5);
    for (seq, e) in out.iter().enumerate() {
        let WatchEvent::Entry { payload: p, .. } = e else {
            panic!("{e:?}")
        };
        assert_eq!(check_payload(p), seq as u64);
    }
    assert_eq!(f.mem.load_u32(f.ring.offset_bytes + READ_POS), Some(0));
    assert_eq!(watcher.stats.entries, 5);
    assert_eq!(watcher.stats.bytes, 5 * 24, "4 + 20 bytes, padded to 24");
}

#[test]
fn a_producer_lapping_the_watcher_is_counted_to_the_byte() {
    let f = ring_file(1024);
    let mut prod = Producer::new(&f.mem, f.ring);
    let mut cons = Consumer::new(&f.mem, f.ring);
    let mut watcher = Watcher::new(&f.mem, f.ring);
    let start = prod.write_pos();
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    let mut seen = std::collections::BTreeSet::new();
    for seq in 0..5000u64 {
        prod.try_push(&f.mem, &payload(seq, 8 + (seq as usize % 5) * 9))
            .unwrap();
        cons.try_pop(&f.mem, &mut buf).unwrap();
        // Poll irregularly: sometimes often enough, sometimes far too rarely.
        if seq % 97 == 0 || (seq / 500) % 2 == 0 && seq % 7 == 0 {
            watcher.poll(&f.mem, &mut out, usize::MAX);
        }
    }
    watcher.poll(&f.mem, &mut out, usize::MAX);
    for e in &out {
        if let WatchEvent::Entry { payload: p, .. } = e {
            assert!(
                seen.insert(check_payload(p)),
                "an entry was delivered twice"
            );
        }
    }
    let produced = u64::from(prod.write_pos().wrapping_sub(start));
    let s = watcher.stats;
    assert!(s.lost_bytes > 0, "the test must actually lap the watcher");
    assert!(s.entries > 0);
    assert_eq!(s.bytes + s.lost_bytes, produced, "seen + lost = produced");
    assert_eq!(s.malformed, 0);
    assert!(out.iter().any(|e| matches!(
        e,
        WatchEvent::Lost {
            lost_entries: None,
            ..
        }
    )));
}

#[test]
fn malformed_entries_are_reported_with_raw_bytes_and_the_watcher_keeps_going() {
    let f = ring_file(256);
    let mut watcher = Watcher::new(&f.mem, f.ring);
    let mut out = Vec::new();
    // Length 0 at position 0, published by hand.
    f.mem
        .write_at(f.ring.offset_bytes + DATA, &[0, 0, 0, 0, 9, 9, 9, 9]);
    f.mem.store_u32(f.ring.offset_bytes + WRITE_POS, 8);
    watcher.poll(&f.mem, &mut out, usize::MAX);
    assert!(
        matches!(&out[0], WatchEvent::Malformed { error, raw, .. } if error.contains("length 0") && raw[4] == 9)
    );
    // Ordinary traffic after it is seen.
    let mut prod = Producer::new(&f.mem, f.ring);
    prod.try_push(&f.mem, &[5; 4]).unwrap();
    out.clear();
    watcher.poll(&f.mem, &mut out, usize::MAX);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(matches!(&out[0], WatchEvent::Entry { payload, .. } if payload == &vec![5; 4]));
    // A length beyond the capacity.
    let w = prod.write_pos();
    f.mem.write_at(data_at(&f.ring, w), &1000u32.to_le_bytes());
    f.mem.store_u32(f.ring.offset_bytes + WRITE_POS, w + 8);
    out.clear();
    watcher.poll(&f.mem, &mut out, usize::MAX);
    assert!(
        matches!(&out[0], WatchEvent::Malformed { error, .. } if error.contains("exceeds the capacity"))
    );
    // An entry longer than what was published.
    let w = w + 8;
    f.mem.write_at(data_at(&f.ring, w), &100u32.to_le_bytes());
    f.mem.store_u32(f.ring.offset_bytes + WRITE_POS, w + 16);
    out.clear();
    watcher.poll(&f.mem, &mut out, usize::MAX);
    assert!(
        matches!(&out[0], WatchEvent::Malformed { error, .. } if error.contains("past write_pos"))
    );
    assert_eq!(watcher.stats.malformed, 3);
    // And ordinary traffic again.
    let mut prod = Producer::new(&f.mem, f.ring);
    prod.try_push(&f.mem, &[7; 3]).unwrap();
    out.clear();
    watcher.poll(&f.mem, &mut out, usize::MAX);
    assert!(matches!(&out[0], WatchEvent::Entry { .. }));
}

#[test]
fn a_wrap_marker_at_index_zero_is_malformed() {
    let f = ring_file(128);
    let mut watcher = Watcher::new(&f.mem, f.ring);
    f.mem
        .write_at(f.ring.offset_bytes + DATA, &WRAP_MARKER.to_le_bytes());
    f.mem.store_u32(f.ring.offset_bytes + WRITE_POS, 8);
    let mut out = Vec::new();
    watcher.poll(&f.mem, &mut out, usize::MAX);
    assert!(
        matches!(&out[0], WatchEvent::Malformed { error, .. } if error.contains("no wrap is possible"))
    );
}

#[test]
fn torn_copies_are_never_delivered_under_a_concurrent_producer() {
    let f = Arc::new(ring_file(4096));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (f, stop) = (Arc::clone(&f), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("test-producer".into())
            .spawn(move || {
                let mut prod = Producer::new(&f.mem, f.ring);
                let mut cons = Consumer::new(&f.mem, f.ring);
                let mut buf = Vec::new();
                let mut seq = 0u64;
                // Relaxed: a stop flag with no data behind it.
                while !stop.load(Ordering::Relaxed) && seq < 2_000_000 {
                    if prod
                        .try_push(&f.mem, &payload(seq, 8 + (seq as usize % 11) * 17))
                        .is_ok()
                    {
                        seq += 1;
                    }
                    // Vary the pace so that the watcher both keeps up and gets lapped.
                    let pause = if (seq / 1000).is_multiple_of(2) {
                        2000
                    } else {
                        0
                    };
                    for _ in 0..pause {
                        std::hint::spin_loop();
                    }
                    while cons.try_pop(&f.mem, &mut buf).unwrap().is_some() {}
                }
                prod.write_pos()
            })
            .unwrap()
    };
    let mut watcher = Watcher::new(&f.mem, f.ring);
    let start = watcher.cursor;
    let mut out = Vec::new();
    let mut last_seq = None;
    // Follow until 4 MiB have gone through the 4 KiB ring.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while watcher.cursor.wrapping_sub(start) < 4 << 20 {
        assert!(std::time::Instant::now() < deadline, "the producer stalled");
        out.clear();
        watcher.poll(&f.mem, &mut out, 64);
        for e in &out {
            if let WatchEvent::Entry { payload: p, .. } = e {
                let seq = check_payload(p);
                assert!(last_seq.is_none_or(|l| seq > l), "out of order");
                last_seq = Some(seq);
            }
        }
    }
    // Relaxed: see above.
    stop.store(true, Ordering::Relaxed);
    let end = producer.join().unwrap();
    out.clear();
    watcher.poll(&f.mem, &mut out, usize::MAX);
    for e in &out {
        if let WatchEvent::Entry { payload: p, .. } = e {
            check_payload(p);
        }
    }
    let s = watcher.stats;
    assert_eq!(s.bytes + s.lost_bytes, u64::from(end.wrapping_sub(start)));
    assert_eq!(s.malformed, 0);
    assert!(s.entries > 1000, "entries seen: {}", s.entries);
}
