use super::*;
use crate::layout::{RegionKind, RingFormat};
use crate::rings::WatchEvent;
use crate::rings::confirm::GIVE_UP_NS;
use crate::segment::{Location, SegmentRw};
use crate::testutil::unique_name;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

struct RingFile {
    location: Location,
    mem: SegmentRw,
    ring: RingGeometry,
}

impl Drop for RingFile {
    fn drop(&mut self) {
        self.location.remove_file();
    }
}

fn ring_file(capacity: u32) -> RingFile {
    let location = Location::shm(&unique_name("ring"));
    let mem = SegmentRw::create_at(&location, 128 + u64::from(capacity), false).unwrap();
    RingFile {
        location,
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
    let mut prod = V1Producer::new(&f.mem, f.ring);
    let mut cons = V1Consumer::new(&f.mem, f.ring);
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
    let mut prod = V1Producer::new(&f.mem, f.ring);
    assert_eq!(prod.try_push(&f.mem, &[]), Err(V1PushError::Empty));
    assert!(matches!(
        prod.try_push(&f.mem, &[0; 61]),
        Err(V1PushError::TooLarge { .. })
    ));
    prod.try_push(&f.mem, &[1; 60]).unwrap();
    assert!(matches!(
        prod.try_push(&f.mem, &[2; 1]),
        Err(V1PushError::Full { .. })
    ));
}

#[test]
fn the_wrap_marker_skips_to_the_start_and_the_skip_counts_as_used() {
    let f = ring_file(128);
    let mut prod = V1Producer::new(&f.mem, f.ring);
    let mut cons = V1Consumer::new(&f.mem, f.ring);
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
    let mut prod = V1Producer::new(&f.mem, f.ring);
    let mut watcher = V1Watcher::new(&f.mem, f.ring);
    let mut out = Vec::new();
    for seq in 0..5 {
        prod.try_push(&f.mem, &payload(seq, 20)).unwrap();
    }
    watcher.poll(&f.mem, &mut out, usize::MAX, 0);
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
    let mut prod = V1Producer::new(&f.mem, f.ring);
    let mut cons = V1Consumer::new(&f.mem, f.ring);
    let mut watcher = V1Watcher::new(&f.mem, f.ring);
    let start = prod.write_pos();
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    assert_eq!(u64::from(start), watcher.cursor);
    let mut seen = std::collections::BTreeSet::new();
    for seq in 0..5000u64 {
        prod.try_push(&f.mem, &payload(seq, 8 + (seq as usize % 5) * 9))
            .unwrap();
        cons.try_pop(&f.mem, &mut buf).unwrap();
        // Poll irregularly: sometimes often enough, sometimes far too rarely.
        if seq % 97 == 0 || (seq / 500) % 2 == 0 && seq % 7 == 0 {
            watcher.poll(&f.mem, &mut out, usize::MAX, 0);
        }
    }
    // The last entries were consumed before the watcher read them: they wait for the
    // producer to publish again, or (a quiet ring) for a while.
    watcher.poll(&f.mem, &mut out, usize::MAX, GIVE_UP_NS);
    assert_eq!(watcher.held_len(), 0);
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
    let mut watcher = V1Watcher::new(&f.mem, f.ring);
    let mut out = Vec::new();
    // Length 0 at position 0, published by hand.
    f.mem
        .write_at(f.ring.offset_bytes + DATA, &[0, 0, 0, 0, 9, 9, 9, 9]);
    f.mem.store_u32(f.ring.offset_bytes + WRITE_POS, 8);
    watcher.poll(&f.mem, &mut out, usize::MAX, 0);
    assert!(
        matches!(&out[0], WatchEvent::Malformed { error, raw, .. } if error.contains("length 0") && raw[4] == 9)
    );
    // Ordinary traffic after it is seen.
    let mut prod = V1Producer::new(&f.mem, f.ring);
    prod.try_push(&f.mem, &[5; 4]).unwrap();
    out.clear();
    watcher.poll(&f.mem, &mut out, usize::MAX, 0);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(matches!(&out[0], WatchEvent::Entry { payload, .. } if payload == &vec![5; 4]));
    // A length beyond the capacity.
    let w = prod.write_pos();
    f.mem.write_at(data_at(&f.ring, w), &1000u32.to_le_bytes());
    f.mem.store_u32(f.ring.offset_bytes + WRITE_POS, w + 8);
    out.clear();
    watcher.poll(&f.mem, &mut out, usize::MAX, 0);
    assert!(
        matches!(&out[0], WatchEvent::Malformed { error, .. } if error.contains("exceeds the capacity"))
    );
    // An entry longer than what was published.
    let w = w + 8;
    f.mem.write_at(data_at(&f.ring, w), &100u32.to_le_bytes());
    f.mem.store_u32(f.ring.offset_bytes + WRITE_POS, w + 16);
    out.clear();
    watcher.poll(&f.mem, &mut out, usize::MAX, 0);
    assert!(
        matches!(&out[0], WatchEvent::Malformed { error, .. } if error.contains("past write_pos"))
    );
    assert_eq!(watcher.stats.malformed, 3);
    // And ordinary traffic again.
    let mut prod = V1Producer::new(&f.mem, f.ring);
    prod.try_push(&f.mem, &[7; 3]).unwrap();
    out.clear();
    watcher.poll(&f.mem, &mut out, usize::MAX, 0);
    assert!(matches!(&out[0], WatchEvent::Entry { .. }));
}

#[test]
fn a_wrap_marker_at_index_zero_is_malformed() {
    let f = ring_file(128);
    let mut watcher = V1Watcher::new(&f.mem, f.ring);
    f.mem
        .write_at(f.ring.offset_bytes + DATA, &WRAP_MARKER.to_le_bytes());
    f.mem.store_u32(f.ring.offset_bytes + WRITE_POS, 8);
    let mut out = Vec::new();
    watcher.poll(&f.mem, &mut out, usize::MAX, 0);
    assert!(
        matches!(&out[0], WatchEvent::Malformed { error, .. } if error.contains("no wrap is possible"))
    );
}

/// Ring memory whose next large copy runs into a producer writing its next entry: the
/// interleaving that a concurrent producer makes now and then, made to happen on cue.
struct InFlight {
    mem: std::cell::RefCell<Vec<u8>>,
    /// Bytes the producer writes (offset, bytes) when the watcher's next copy of more
    /// than a length word starts; taken once.
    write_during_copy: std::cell::RefCell<Option<(usize, Vec<u8>)>>,
}

impl RingRead for InFlight {
    fn load_u32(&self, offset: u64) -> Option<u32> {
        self.mem.borrow().load_u32(offset)
    }
    fn load_u64(&self, offset: u64) -> Option<u64> {
        self.mem.borrow().load_u64(offset)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        if buf.len() > 8
            && let Some((at, bytes)) = self.write_during_copy.borrow_mut().take()
        {
            self.mem.borrow_mut()[at..at + bytes.len()].copy_from_slice(&bytes);
        }
        self.mem.borrow().read_at(offset, buf)
    }
}

impl RingWrite for InFlight {
    fn store_u32(&self, offset: u64, value: u32) -> bool {
        self.write_at(offset, &value.to_le_bytes())
    }
    fn store_u64(&self, offset: u64, value: u64) -> bool {
        self.write_at(offset, &value.to_le_bytes())
    }
    fn write_at(&self, offset: u64, bytes: &[u8]) -> bool {
        let at = offset as usize;
        let mut m = self.mem.borrow_mut();
        match m.get_mut(at..at + bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }
    fn compare_exchange_u32(&self, offset: u64, current: u32, new: u32) -> Option<u32> {
        let found = self.load_u32(offset)?;
        if found == current {
            self.store_u32(offset, new);
        }
        Some(found)
    }
}

/// The interleaving that passed the old margin check: the watcher copies a consumed
/// entry while the producer, not yet having published, writes an entry larger than any
/// the watcher has seen, after a wrap skip, over the bytes being copied.
#[test]
fn an_entry_overwritten_during_its_copy_by_a_larger_one_across_the_wrap_is_lost() {
    let cap = 4096u32;
    let ring = RingGeometry {
        kind: RegionKind::CmdC2s,
        format: RingFormat::Lrbc,
        offset_bytes: 0,
        capacity_bytes: cap,
    };
    let m = InFlight {
        mem: std::cell::RefCell::new(vec![0u8; 64 + cap as usize]),
        write_during_copy: std::cell::RefCell::new(None),
    };
    let mut watcher = V1Watcher::new(&m, ring);
    let mut prod = V1Producer::new(&m, ring);
    let mut cons = V1Consumer::new(&m, ring);
    let mut buf = Vec::new();
    // Small entries up to position 3000, consumed by the engine at once.
    let mut seq = 0u64;
    while prod.write_pos() < 3000 {
        prod.try_push(&m, &payload(seq, 40)).unwrap();
        while cons.try_pop(&m, &mut buf).unwrap().is_some() {}
        seq += 1;
    }
    let w = prod.write_pos();
    assert!(w < 3100);
    // The next entry: 2,000 bytes, which does not fit before the end of the data area:
    // a wrap marker at w, the entry at index 0 — over the first entries, which the
    // watcher is about to copy. Mid-write, its first 16 bytes are still the old ones.
    let big = payload(1_000_000, 2_000);
    let mut entry = (big.len() as u32).to_le_bytes().to_vec();
    entry.extend_from_slice(&big);
    *m.write_during_copy.borrow_mut() = Some((64 + 16, entry[16..].to_vec()));
    let mut out = Vec::new();
    watcher.poll(&m, &mut out, usize::MAX, 0);
    // The producer finishes and publishes: the marker, the entry, write_pos.
    m.write_at(64 + u64::from(w & (cap - 1)), &WRAP_MARKER.to_le_bytes());
    m.write_at(64, &entry[..16]);
    let published = w + (cap - (w & (cap - 1))) + align8(entry.len() as u64) as u32;
    m.store_u32(WRITE_POS, published);
    watcher.poll(&m, &mut out, usize::MAX, 1_000);
    watcher.poll(&m, &mut out, usize::MAX, GIVE_UP_NS);
    let mut delivered = 0;
    for e in &out {
        match e {
            WatchEvent::Entry { payload: p, .. } => {
                check_payload(p);
                delivered += 1;
            }
            WatchEvent::Malformed { error, .. } => panic!("false malformed entry: {error}"),
            WatchEvent::Lost { .. } => {}
        }
    }
    assert!(
        watcher.stats.lost_bytes > 0,
        "the overwritten entries are counted lost"
    );
    let s = watcher.stats;
    assert_eq!(
        s.bytes + s.lost_bytes,
        u64::from(published),
        "every byte is seen or lost ({delivered} entries delivered)"
    );
}

/// Checks a payload of `payload()` without allocating: false if torn.
fn payload_intact(p: &[u8]) -> Option<u64> {
    let seq = u64::from_le_bytes(p.get(..8)?.try_into().ok()?);
    p[8..]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (seq as usize * 31 + i * 7) as u8)
        .then_some(seq)
}

/// What a stress run saw.
#[derive(Debug, Default)]
struct StressCount {
    produced: u64,
    delivered: u64,
    false_entries: u64,
    malformed: u64,
    lost_bytes: u64,
    watchers: u64,
}

/// A producer that mostly writes small entries and now and then one larger than any
/// before it (so larger than any the watcher has seen), often across the wrap; the
/// engine consumes at once; watchers join, each new one knowing no sizes yet.
fn stress(entries: u64) -> StressCount {
    let f = Arc::new(ring_file(4096));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (f, stop) = (Arc::clone(&f), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("test-producer".into())
            .spawn(move || {
                let mut prod = V1Producer::new(&f.mem, f.ring);
                let mut cons = V1Consumer::new(&f.mem, f.ring);
                let mut buf = Vec::new();
                let mut seq = 0u64;
                let mut record = 64usize;
                // Relaxed: a stop flag with no data behind it.
                while !stop.load(Ordering::Relaxed) && seq < entries {
                    let len = if seq.is_multiple_of(613) {
                        // Larger than any before, up to 3 KiB, then from small again.
                        record = if record >= 3000 { 64 } else { record + 97 };
                        record
                    } else {
                        8 + (seq as usize % 13) * 5
                    };
                    let body = payload(seq, len);
                    if prod.try_push(&f.mem, &body).is_ok() {
                        seq += 1;
                    }
                    // Vary the pace so that the watcher both keeps up and gets lapped.
                    if (seq / 4096).is_multiple_of(3) {
                        for _ in 0..300 {
                            std::hint::spin_loop();
                        }
                    }
                    while cons.try_pop(&f.mem, &mut buf).unwrap().is_some() {}
                }
                seq
            })
            .unwrap()
    };
    let mut count = StressCount::default();
    let mut out = Vec::new();
    let mut last_seq: Option<u64> = None;
    let clock = std::time::Instant::now();
    let now = || clock.elapsed().as_nanos() as u64;
    let mut watcher = V1Watcher::new(&f.mem, f.ring);
    let mut polls = 0u64;
    let add = |w: &V1Watcher, c: &mut StressCount| {
        c.lost_bytes += w.stats.lost_bytes;
        c.malformed += w.stats.malformed;
        c.watchers += 1;
    };
    while !producer.is_finished() {
        out.clear();
        watcher.poll(&f.mem, &mut out, 64, now());
        polls += 1;
        for e in &out {
            if let WatchEvent::Entry { payload: p, .. } = e {
                match payload_intact(p) {
                    Some(seq) if last_seq.is_none_or(|l| seq > l) => {
                        last_seq = Some(seq);
                        count.delivered += 1;
                    }
                    _ => count.false_entries += 1,
                }
            }
        }
        // A new watcher now and then: it has seen no entry, so the next large one is
        // larger than any it knows.
        if polls.is_multiple_of(20_000) {
            add(&watcher, &mut count);
            watcher = V1Watcher::new(&f.mem, f.ring);
            // It starts at the consumer's position, which may be before entries the
            // last one delivered.
            last_seq = None;
        }
    }
    // Relaxed: see above.
    stop.store(true, Ordering::Relaxed);
    count.produced = producer.join().unwrap();
    add(&watcher, &mut count);
    count
}

#[test]
fn a_concurrent_producer_with_ever_larger_entries_across_the_wrap_yields_no_false_entry() {
    let c = stress(2_000_000);
    assert_eq!(c.false_entries, 0, "{c:?}");
    assert_eq!(c.malformed, 0, "{c:?}");
    assert!(c.delivered > 10_000, "the watcher kept up at times: {c:?}");
    assert!(c.lost_bytes > 0, "the watcher was lapped at times: {c:?}");
}

/// The full stress run: `cargo test --release -p lrbc --lib -- --ignored stress_ten_million`.
#[test]
#[ignore = "ten million entries: run in release"]
fn stress_ten_million() {
    let c = stress(10_000_000);
    println!("{c:?}");
    assert_eq!(c.false_entries, 0, "{c:?}");
    assert_eq!(c.malformed, 0, "{c:?}");
}
