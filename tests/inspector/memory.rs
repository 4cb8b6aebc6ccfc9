//! The window's data stays within its memory budget, counted in real bytes: a session
//! (sampler and traffic tap) attached to an engine and client at 2 kHz, with
//! small limits so that they fill in seconds. Live heap bytes are counted by this test
//! binary's allocator, in a process of the binary's own that runs only this test (the
//! other tests' allocations would count too in the binary's usual run).

#![expect(
    unsafe_code,
    reason = "the counting allocator forwards to the system allocator"
)]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lrbc::layout::LayoutChoice;
use lrbc_inspector::session::Session;
use lrbc_live::sampler::SamplerSettings;
use lrbc_live::traffic::TrafficLimits;
use lrbc_sim::engine::Preset;
use lrbc_sim::inprocess::SimRun;

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator with the same layout; the
// counter is only arithmetic on the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            // Relaxed: a statistic, ordered with nothing.
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on unchanged.
        unsafe { System.dealloc(ptr, layout) };
        // Relaxed: as above.
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Relaxed: as above.
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    // Relaxed: a statistic.
    LIVE.load(Ordering::Relaxed)
}

/// The highest live count over `d`, sampled every 10 ms.
fn peak_over(d: Duration) -> usize {
    let end = Instant::now() + d;
    let mut peak = 0;
    while Instant::now() < end {
        peak = peak.max(live());
        std::thread::sleep(Duration::from_millis(10));
    }
    peak
}

#[test]
fn a_session_stays_within_its_budget_and_flat_once_full() {
    crate::common::in_a_process_of_its_own("memory::a_session_in_a_process_of_its_own");
}

#[test]
#[ignore = "run by a_session_stays_within_its_budget_and_flat_once_full in a process of its own"]
fn a_session_in_a_process_of_its_own() {
    const MIB: usize = 1 << 20;
    let run = SimRun::start(Preset::Cams64, Some(2000.0)).expect("simulated run");
    let settings = SamplerSettings {
        history_bytes: 2 * MIB,
        image_bytes: 2 * MIB,
        // One copy of the image region (0.75 MiB here) comes and goes whole, which
        // would hide a slow growth; its bound is a single copy, tested on its own.
        max_image_hz: 0.0,
        // Every frame, however busy the machine: the histories fill at the client's pace.
        busy_budget_percent: None,
        ..SamplerSettings::default()
    };
    let limits = TrafficLimits {
        max_rows: 1_000_000,
        max_bytes: 2 * MIB,
        max_stream_bytes: MIB,
    };
    let session = Session::start(
        run.target(),
        LayoutChoice::Auto,
        settings.clone(),
        limits,
        Arc::new(|| {}),
    )
    .expect("attach");
    // Until every part is full: the overview ring at its capacity, traffic rows let go.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let full = {
            let d = session.sampler.lock();
            d.frames.len() == d.frames.capacity() && d.frames.len() > 1
        } && session.traffic.lock().rows_dropped > 0;
        if full {
            break;
        }
        if Instant::now() >= deadline {
            let d = session.sampler.lock();
            panic!(
                "the limits did not fill: {} of {} frames, {:?}, {} rows dropped",
                d.frames.len(),
                d.frames.capacity(),
                d.stats,
                session.traffic.lock().rows_dropped
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Each part within its share, counted as the window counts it.
    let m = session.memory();
    assert!(m.histories <= settings.history_bytes + 64 * 1024, "{m:?}");
    assert!(m.traffic <= limits.max_bytes, "{m:?}");
    assert!(m.streamed_frames <= limits.max_stream_bytes, "{m:?}");
    assert!(m.camera_images <= settings.image_bytes, "{m:?}");
    // And the heap of the whole process (engine and client threads included) stays
    // flat: the peak of a later second is no higher than that of an earlier one by more
    // than a small part of what the parts hold.
    let early = peak_over(Duration::from_secs(2));
    let m_early = session.memory();
    let sampled = || session.sampler.lock().stats.frames.sampled;
    let (frames_before, rows_before) = (sampled(), session.traffic.lock().total_rows());
    // Then 8,000 frames more (4 s of the run at 2 kHz, however long this machine takes),
    // with traffic rows among them: what would grow the heap if anything held on.
    let deadline = Instant::now() + Duration::from_secs(120);
    while sampled() - frames_before < 8_000 || session.traffic.lock().total_rows() <= rows_before {
        assert!(
            Instant::now() < deadline,
            "the run stalled: {} frames, {} rows in 2 minutes",
            sampled() - frames_before,
            session.traffic.lock().total_rows() - rows_before
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let late = peak_over(Duration::from_secs(2));
    let frames = sampled() - frames_before;
    let rows = session.traffic.lock().total_rows();
    assert!(
        late <= early + MIB / 4,
        "live heap grew from {early} to {late} bytes over {frames} frames ({rows} traffic rows so far); parts {m_early:?} then {:?}",
        session.memory()
    );
    drop(session);
    drop(run);
}
