//! Redraw pacing: how often the window redraws, and how other threads wake it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::InspectorApp;
use lrbc::clock::monotonic_now_ns;

/// Wakes the UI from other threads, at most once per `interval_ns` (read at each call,
/// so that the rate can change while the threads run).
pub fn throttled_waker(
    ctx: &egui::Context,
    interval_ns: Arc<AtomicU64>,
) -> Arc<dyn Fn() + Send + Sync> {
    let ctx = ctx.clone();
    let last = AtomicU64::new(0);
    Arc::new(move || {
        let now = monotonic_now_ns();
        // Relaxed: a rate limit; a lost race costs one extra repaint at most.
        let interval = interval_ns.load(Ordering::Relaxed);
        let prev = last.load(Ordering::Relaxed);
        if now.saturating_sub(prev) >= interval {
            last.store(now, Ordering::Relaxed);
            // Not `request_repaint`: egui answers each of those with two passes, which
            // would double the rate; a request with a delay gets one.
            ctx.request_repaint_after(Duration::from_millis(1));
        }
    })
}

/// Whether OpenGL here is most likely a software rasteriser, before the window exists:
/// software rendering asked for (Mesa's `LIBGL_ALWAYS_SOFTWARE`), or, on Linux and the
/// BSDs, no GPU render node in `/dev/dri`. Redrawing then costs whole cores, so the
/// window redraws less often by default. Once the window exists, [`software_renderer`]
/// tells from the driver's own name.
pub fn software_rendering_likely() -> bool {
    if std::env::var_os("LIBGL_ALWAYS_SOFTWARE").is_some_and(|v| v != "0") {
        return true;
    }
    if cfg!(any(windows, target_os = "macos")) {
        // No /dev/dri to look at: the driver's name tells, once there is a context.
        return false;
    }
    let has_render_node = std::fs::read_dir("/dev/dri").is_ok_and(|d| {
        d.filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("renderD"))
    });
    !has_render_node
}

/// Whether an OpenGL renderer's name (`GL_RENDERER`) is a software rasteriser: Mesa's
/// llvmpipe and softpipe, SwiftShader, Windows' own GDI renderer and Basic Render Driver.
pub fn software_renderer(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "llvmpipe",
        "softpipe",
        "swiftshader",
        "gdi generic",
        "basic render",
    ]
    .iter()
    .any(|s| name.contains(s))
}

/// Redraws per second at most while the machine has no spare CPU (the sampler is
/// yielding) and the rate is automatic: a redraw is the window's largest cost, and the
/// run pays it.
pub const BUSY_REDRAW_HZ: u32 = (1_000_000_000 / lrbc_live::sampler::BUSY_READER_WAKE_NS) as u32;

/// Redraws per second at least while the machine is busy, however much a redraw costs:
/// the view stays live.
pub const BUSY_MIN_REDRAW_HZ: u32 = 1;

/// The share of one core that drawing keeps to while the machine is busy and the rate is
/// automatic (between [`BUSY_MIN_REDRAW_HZ`] and [`BUSY_REDRAW_HZ`] redraws a second).
pub const BUSY_DRAW_SHARE: f64 = 0.005;

/// The CPU time a redraw costs the window's thread (building the panels, tessellating,
/// painting), smoothed over the last few redraws.
#[derive(Debug, Default)]
pub struct PassCost {
    /// The thread's CPU time at the start of the last redraw.
    at_last_ns: Option<u64>,
    mean_ns: f64,
}

impl PassCost {
    /// A redraw starts, the thread's CPU time being `thread_cpu_ns`: what the thread used
    /// since the last start is what the last redraw cost.
    pub fn started(&mut self, thread_cpu_ns: u64) {
        if let Some(prev) = self.at_last_ns {
            let used = thread_cpu_ns.saturating_sub(prev) as f64;
            self.mean_ns = if self.mean_ns == 0.0 {
                used
            } else {
                self.mean_ns + (used - self.mean_ns) / 4.0
            };
        }
        self.at_last_ns = Some(thread_cpu_ns);
    }

    /// The smoothed cost of a redraw, in nanoseconds of CPU (0 before two redraws).
    pub fn mean_ns(&self) -> u64 {
        self.mean_ns as u64
    }
}

/// The time between the redraws that new data asks for: one over [`redraw_rate`], and
/// while the machine is busy and the rate automatic, long enough that redraws costing
/// `pass_cpu_ns` each keep within [`BUSY_DRAW_SHARE`] of a core, down to
/// [`BUSY_MIN_REDRAW_HZ`]. Input redraws at once anyway.
pub fn redraw_interval_ns(setting: u32, software: bool, busy: bool, pass_cpu_ns: u64) -> u64 {
    let shortest = 1_000_000_000 / u64::from(redraw_rate(setting, software, busy).max(1));
    if setting == 0 && busy {
        let longest = 1_000_000_000 / u64::from(BUSY_MIN_REDRAW_HZ);
        ((pass_cpu_ns as f64 / BUSY_DRAW_SHARE) as u64).clamp(shortest, longest.max(shortest))
    } else {
        shortest
    }
}

/// Redraws per second: the setting, else 60, or 20 under software rendering, and at
/// most [`BUSY_REDRAW_HZ`] while the machine is `busy`. Input redraws at once anyway.
fn redraw_rate(setting: u32, software: bool, busy: bool) -> u32 {
    match (setting, software) {
        (0, _) if busy => BUSY_REDRAW_HZ,
        (0, true) => 20,
        (0, false) => 60,
        (n, _) => n.clamp(5, 240),
    }
}

/// How often the window redraws: the interval the waker keeps to, what a redraw costs,
/// and the redraws of the last second.
#[derive(Debug)]
pub struct Pacing {
    /// How often the background threads may wake the window (the waker reads it).
    interval_ns: Arc<AtomicU64>,
    /// OpenGL is most likely a software rasteriser (set by the window).
    pub software_rendering: bool,
    /// The start of the current second, and the redraws in it.
    second_ns: u64,
    redraws_in_second: u32,
    /// The last full second's redraws.
    pub redraws_per_sec: f32,
    /// What a redraw costs the window's thread.
    cost: PassCost,
}

impl Pacing {
    /// Pacing at 60 redraws a second until told otherwise, and the waker of `ctx` that
    /// keeps to it.
    pub fn new(ctx: &egui::Context) -> (Self, Arc<dyn Fn() + Send + Sync>) {
        let interval_ns = Arc::new(AtomicU64::new(1_000_000_000 / 60));
        let waker = throttled_waker(ctx, Arc::clone(&interval_ns));
        let pacing = Self {
            interval_ns,
            software_rendering: false,
            second_ns: 0,
            redraws_in_second: 0,
            redraws_per_sec: 0.0,
            cost: PassCost::default(),
        };
        (pacing, waker)
    }

    /// The time between the redraws that new data asks for, with the redraw rate
    /// `setting` (0: automatic) while the machine is `busy` or not.
    pub fn interval_for(&self, setting: u32, busy: bool) -> u64 {
        redraw_interval_ns(setting, self.software_rendering, busy, self.cost.mean_ns())
    }

    /// The waker keeps to `interval_ns` from now on.
    pub fn set_interval(&self, interval_ns: u64) {
        // Relaxed: a rate the waker reads; no data behind it.
        self.interval_ns.store(interval_ns, Ordering::Relaxed);
    }

    /// Counts a redraw (per second, shown in the Settings menu) and what the last one
    /// cost.
    pub fn count_redraw(&mut self) {
        self.cost.started(lrbc_platform::thread_cpu_ns());
        let now = monotonic_now_ns();
        self.redraws_in_second += 1;
        if now.saturating_sub(self.second_ns) >= 1_000_000_000 {
            let secs = now.saturating_sub(self.second_ns) as f32 / 1e9;
            self.redraws_per_sec = if self.second_ns == 0 {
                0.0
            } else {
                self.redraws_in_second as f32 / secs
            };
            (self.second_ns, self.redraws_in_second) = (now, 0);
        }
    }
}

impl InspectorApp {
    /// The machine has no spare CPU: the sampler is yielding to it.
    pub(super) fn machine_busy(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| s.sampler.lock().yielding)
    }

    /// The time between the redraws that new data asks for, as things stand now.
    pub(super) fn redraw_interval_ns(&self) -> u64 {
        (self.pacing).interval_for(self.settings.max_fps, self.machine_busy())
    }
}

#[cfg(test)]
mod tests {
    use super::{
        BUSY_MIN_REDRAW_HZ, BUSY_REDRAW_HZ, PassCost, redraw_interval_ns, redraw_rate,
        throttled_waker,
    };
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn a_wake_from_another_thread_asks_for_one_pass_and_wakes_are_throttled() {
        let ctx = egui::Context::default();
        let pass = |ctx: &egui::Context| {
            let mut out = ctx.run_ui(egui::RawInput::default(), |_| {});
            // Nothing paints here: the font atlas is let go on purpose.
            out.textures_delta.clear();
        };
        // A new context asks for a few passes of its own first.
        for _ in 0..4 {
            pass(&ctx);
        }
        assert!(!ctx.has_requested_repaint());
        let waker = throttled_waker(&ctx, Arc::new(AtomicU64::new(1_000_000_000)));
        waker();
        assert!(
            ctx.has_requested_repaint(),
            "the first wake asks for a pass"
        );
        pass(&ctx);
        assert!(
            !ctx.has_requested_repaint(),
            "one pass answers it (a plain request_repaint asks for two)"
        );
        waker();
        assert!(!ctx.has_requested_repaint(), "within the interval: no pass");
    }

    #[test]
    fn the_automatic_redraw_rate_gives_way_to_software_raster_and_to_a_busy_machine() {
        assert_eq!(redraw_rate(0, false, false), 60);
        assert_eq!(redraw_rate(0, true, false), 20);
        assert_eq!(redraw_rate(0, false, true), BUSY_REDRAW_HZ);
        assert_eq!(redraw_rate(0, true, true), BUSY_REDRAW_HZ);
        // A rate the user set is kept, busy machine or not, within bounds.
        assert_eq!(redraw_rate(30, true, true), 30);
        assert_eq!(redraw_rate(1, false, false), 5);
        assert_eq!(redraw_rate(1000, false, false), 240);
    }

    #[test]
    fn a_busy_machine_spaces_redraws_by_what_they_cost() {
        const S: u64 = 1_000_000_000;
        let fastest = S / u64::from(BUSY_REDRAW_HZ);
        let slowest = S / u64::from(BUSY_MIN_REDRAW_HZ);
        // 0.25 ms a redraw: half a percent of a core allows 20 a second, more than the
        // busy rate.
        assert_eq!(redraw_interval_ns(0, false, true, 250_000), fastest);
        // 2 ms a redraw: 2.5 a second keep to half a percent of a core.
        assert_eq!(redraw_interval_ns(0, false, true, 2_000_000), 400_000_000);
        // 90 ms a redraw (a software rasteriser): never fewer than the slowest rate.
        assert_eq!(redraw_interval_ns(0, true, true, 90_000_000), slowest);
        // With spare CPU, or a rate the user set, the cost does not matter.
        assert_eq!(redraw_interval_ns(0, false, false, 90_000_000), S / 60);
        assert_eq!(redraw_interval_ns(0, true, false, 90_000_000), S / 20);
        assert_eq!(redraw_interval_ns(30, false, true, 90_000_000), S / 30);
    }

    #[test]
    fn a_redraw_costs_the_thread_time_between_two_starts_smoothed() {
        let mut c = PassCost::default();
        c.started(1_000_000);
        assert_eq!(c.mean_ns(), 0, "one start measures nothing");
        c.started(5_000_000);
        assert_eq!(c.mean_ns(), 4_000_000);
        // One cheap redraw moves the mean a quarter of the way.
        c.started(5_000_000);
        assert_eq!(c.mean_ns(), 3_000_000);
        // A clock that went back counts as nothing used, not as a huge cost.
        c.started(1_000);
        assert_eq!(c.mean_ns(), 2_250_000);
    }
}

#[cfg(test)]
mod renderer_tests {
    #[test]
    fn software_rasterisers_are_told_from_gpus_by_their_renderer_name() {
        for soft in [
            "llvmpipe (LLVM 15.0.6, 256 bits)",
            "GDI Generic",
            "Microsoft Basic Render Driver",
            "Google SwiftShader",
        ] {
            assert!(super::software_renderer(soft), "{soft}");
        }
        for gpu in [
            "NVIDIA GeForce RTX 4090/PCIe/SSE2",
            "AMD Radeon RX 7900",
            "Intel(R) UHD Graphics 770",
        ] {
            assert!(!super::software_renderer(gpu), "{gpu}");
        }
    }
}
