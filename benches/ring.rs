//! The traffic tap's cost per ring entry: copied, confirmed, verified, decoded and
//! paired by the reader of `traffic --follow` and the window, on one core.
//!
//! `cargo bench --bench ring`; figures in docs/benchmarks.md. The highest producer
//! rate that reader follows without loss, which runs in real time with a producer
//! thread, is `lrbc-inspector bench ring`.

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lrbc::attach::Attached;
use lrbc::clock::monotonic_now_ns;
use lrbc::layout::{LayoutChoice, RegionKind};
use lrbc::rings::v1::{V1Consumer, V1Producer};
use lrbc_live::traffic::{RingSelection, Traffic, TrafficEvent};
use lrbc_sim::bench::{RingSegment, sample_envelopes};

/// Entries published before each timed read: well within the 512 KiB ring.
const BATCH: u64 = 1_000;

fn follow(c: &mut Criterion) {
    let name = format!("lrbc-bench-tap-{}", std::process::id());
    let seg = RingSegment::create(&name, 512 * 1024).unwrap_or_else(|e| panic!("{e}"));
    let attached = Attached::open_at(&seg.location, Some(name), LayoutChoice::Auto)
        .unwrap_or_else(|e| panic!("{e}"));
    let Some(&ring) = attached.geometry.ring(RegionKind::CmdC2s) else {
        panic!("the segment has no cmd_c2s ring");
    };
    let samples = sample_envelopes();
    let mut producer = V1Producer::new(&*seg.rw, ring);
    let mut consumer = V1Consumer::new(&*seg.rw, ring);
    let mut traffic = Traffic::new(&attached, RingSelection::Cmd);
    let (mut events, mut popped) = (Vec::new(), Vec::new());
    let mut sent = 0u64;

    let mut group = c.benchmark_group("ring");
    group.throughput(Throughput::Elements(1));
    group.bench_function(
        "tap per entry (unread entries, 3 sample envelopes in turn)",
        |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let batch = left.min(BATCH);
                    for _ in 0..batch {
                        let bytes = &samples[(sent % 3) as usize].1;
                        if let Err(e) = producer.try_push(&*seg.rw, bytes) {
                            panic!("the ring is full after {sent} entries: {e:?}");
                        }
                        sent += 1;
                    }
                    // Timed: the reader reports every entry of the batch.
                    let start = Instant::now();
                    let mut seen = 0u64;
                    let mut idle_polls = 0;
                    while seen < batch {
                        events.clear();
                        traffic.poll(&*seg.rw, monotonic_now_ns(), usize::MAX, &mut events);
                        let before = seen;
                        for e in &events {
                            match e {
                                TrafficEvent::Record(_) => seen += 1,
                                TrafficEvent::Lost { .. } | TrafficEvent::Malformed { .. } => {
                                    panic!("the reader lost or misread an entry: {e:?}")
                                }
                                _ => {}
                            }
                        }
                        idle_polls = if seen == before { idle_polls + 1 } else { 0 };
                        assert!(
                            idle_polls < 1_000_000,
                            "the reader saw {seen} of {batch} entries"
                        );
                    }
                    timed += start.elapsed();
                    // Untimed: the engine's consumer frees the ring for the next batch.
                    while let Ok(Some(_)) = consumer.try_pop(&*seg.rw, &mut popped) {}
                    left -= batch;
                }
                timed
            });
        },
    );
    group.finish();
}

criterion_group!(benches, follow);
criterion_main!(benches);
