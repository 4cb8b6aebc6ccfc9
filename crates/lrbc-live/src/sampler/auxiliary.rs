//! The auxiliary thread: the segment's state (told to the detector too), re-attachment
//! and camera images.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::data::{ImageFrame, SamplerData, SamplerSettings};
use super::{Waker, lock};
use crate::detect::DetectorFeed;
use crate::watch::AttachmentWatch;
use lrbc::clock::Clock;
use lrbc::layout::{Geometry, RegionKind};
use lrbc::segment::Segment;
use lrbc::snapshot;

/// How often the auxiliary thread looks at the segment's state (liveness, re-attach).
const AUX_TICK_NS: u64 = 250_000_000;
/// Camera images copied per second at most while the machine is busy: the window redraws
/// at most [`crate::busy::BUSY_READER_WAKE_NS`] apart then, so faster copies go unseen.
const BUSY_IMAGE_HZ: f32 = 10.0;
/// The auxiliary thread's longest sleep: a change of settings is taken up within it (a
/// tick while the machine is busy: a wakeup is paid for by the run).
const AUX_MAX_SLEEP_NS: u64 = 50_000_000;

/// Watches the segment's state, re-attaches, copies images, wakes the reader.
pub(super) struct AuxWorker<C: Clock> {
    pub watcher: AttachmentWatch<C>,
    /// The sampler's clock (the watcher's): the time of the states told to the detector.
    pub clock: C,
    pub data: Arc<Mutex<SamplerData>>,
    pub settings: Arc<Mutex<SamplerSettings>>,
    pub stop: Arc<AtomicBool>,
    pub waker: Waker,
    pub repaint_interval_ns: u64,
    /// The sampler's place at the frame follower, moved to a replaced segment here.
    pub follower: Arc<crate::follower::Subscription>,
    /// The detector's, when the sampler runs it: told the state at each tick.
    pub feed: Option<DetectorFeed>,
}

impl<C: Clock> AuxWorker<C> {
    pub(super) fn run(mut self) {
        lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Sampler);
        let mut settings = lock(&self.settings).clone();
        let (mut last_tick, mut last_wake, mut last_image) = (0u64, 0u64, 0u64);
        let mut last_image_seq = None;
        let mut fps_window: (u64, u64) = (0, 0);
        self.tick();
        // Relaxed: a flag with no data behind it.
        while !self.stop.load(Ordering::Relaxed) {
            let now = lrbc::clock::monotonic_now_ns();
            if let Ok(s) = self.settings.try_lock() {
                settings.clone_from(&s);
            }
            let period = |hz: f32| (hz > 0.0).then(|| (1e9 / hz) as u64);
            let yielding = lock(&self.data).yielding;
            let (image_hz, wake_ns, max_sleep_ns) = if yielding {
                (
                    settings.max_image_hz.min(BUSY_IMAGE_HZ),
                    self.repaint_interval_ns
                        .max(crate::busy::BUSY_READER_WAKE_NS),
                    AUX_TICK_NS,
                )
            } else {
                (
                    settings.max_image_hz,
                    self.repaint_interval_ns,
                    AUX_MAX_SLEEP_NS,
                )
            };
            // No image region: nothing to look at for images.
            let image_period = period(image_hz).filter(|_| self.geometry().image.is_some());
            if now.saturating_sub(last_tick) >= AUX_TICK_NS {
                last_tick = now;
                self.tick();
            }
            if image_period.is_some_and(|p| now.saturating_sub(last_image) >= p) {
                last_image = now;
                if let Some((seq, took)) =
                    self.capture_image(now, last_image_seq, settings.image_bytes)
                {
                    fps_window.1 += u64::from(took);
                    last_image_seq = Some(seq);
                }
            }
            if now.saturating_sub(fps_window.0) >= 1_000_000_000 {
                let secs = now.saturating_sub(fps_window.0) as f32 / 1e9;
                lock(&self.data).image_fps = fps_window.1 as f32 / secs;
                fps_window = (now, 0);
            }
            if now.saturating_sub(last_wake) >= wake_ns {
                last_wake = now;
                (self.waker)();
            }
            // Asleep until the next thing is due: a wakeup costs a busy machine a context
            // switch. Settings are read again within `max_sleep_ns`.
            let due = [
                Some(last_tick + AUX_TICK_NS),
                Some(fps_window.0 + 1_000_000_000),
                Some(last_wake + wake_ns),
                image_period.map(|p| last_image + p),
            ];
            let next = due.into_iter().flatten().min().unwrap_or(now);
            let after = lrbc::clock::monotonic_now_ns();
            std::thread::sleep(Duration::from_nanos(
                next.saturating_sub(after).clamp(1_000_000, max_sleep_ns),
            ));
        }
    }

    fn seg(&self) -> &Segment {
        &self.watcher.attached().segment
    }

    fn geometry(&self) -> &Geometry {
        &self.watcher.attached().geometry
    }

    fn tick(&mut self) {
        let before = self.watcher.reattach_count;
        let report = self.watcher.tick();
        let mut d = lock(&self.data);
        if self.watcher.reattach_count != before {
            // A new segment: start the histories over.
            let a = self.watcher.attached();
            d.geometry = Arc::new(a.geometry.clone());
            d.generation = u64::from(self.watcher.reattach_count);
            d.label = a.label();
            d.frames.clear();
            d.envs.clear();
            d.latest = None;
            d.image = None;
            if let Ok(mapped) = a.reopen() {
                self.follower.retarget(mapped);
            }
        }
        if let Some(feed) = &self.feed {
            feed.state(report.state, report.note.as_deref(), self.clock.now_ns());
        }
        d.report = Some(report);
    }

    /// Copies the image region when `image_seq` moved. Returns (image_seq, copied).
    fn capture_image(&mut self, now: u64, last: Option<u64>, budget: usize) -> Option<(u64, bool)> {
        let g = self.geometry().clone();
        let img = g.image?;
        // The copy, and the window's RGBA textures of it.
        let pixels = u64::from(g.num_envs) * u64::from(img.width) * u64::from(img.height);
        let cost = pixels.saturating_mul(u64::from(img.channels) + 4);
        if cost > budget as u64 {
            let mut d = lock(&self.data);
            d.image = None;
            if d.image_note.is_none() {
                d.image_note = Some(format!(
                    "camera images are not copied: {:.1} MiB with their textures, over the {:.1} MiB the memory budget gives them (Settings)",
                    cost as f64 / 1048576.0,
                    budget as f64 / 1048576.0
                ));
            }
            return None;
        }
        let seg = self.seg();
        let seq = g
            .counters
            .ext
            .and_then(|e| seg.load_u64(e.image_seq))
            .unwrap_or(0);
        if Some(seq) == last {
            return Some((seq, false));
        }
        let region = g.region(RegionKind::Image)?;
        let len = usize::try_from(region.length_bytes).ok()?;
        let copy = snapshot::guarded_read(seg, &g, 16, |s| {
            s.read_vec(region.offset_bytes, len).unwrap_or_default()
        });
        if seg.sigbus_faults() != 0 {
            // Zeros where a shrunk file's pixels were (the guard's pages stay zeros in
            // this mapping): not an image.
            return None;
        }
        let mut d = lock(&self.data);
        d.image_note = None;
        if copy.consistent || copy.guard == snapshot::CopyGuard::Unguarded {
            d.stats.images_captured += 1;
            d.image = Some(ImageFrame {
                image_seq: seq,
                frame_seq: copy.frame_seq,
                width: img.width,
                height: img.height,
                channels: img.channels,
                num_envs: g.num_envs,
                pixels: Arc::new(copy.value),
                captured_ns: now,
                consistent: copy.consistent,
            });
            Some((seq, true))
        } else {
            d.stats.images_torn += 1;
            None
        }
    }
}
