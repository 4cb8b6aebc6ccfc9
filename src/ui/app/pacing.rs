//! Redraw pacing: how often the window redraws, and how other threads wake it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::InspectorApp;
use crate::clock::monotonic_now_ns;

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

/// Redraws per second while the machine has no spare CPU (the sampler is yielding) and
/// the rate is automatic: a redraw is the window's largest cost, and the run pays it.
pub const BUSY_REDRAW_HZ: u32 = 10;

/// Redraws per second: the setting, else 60, or 20 under software rendering, and at
/// most [`BUSY_REDRAW_HZ`] while the machine is `busy`. Input redraws at once anyway.
pub fn redraw_rate(setting: u32, software: bool, busy: bool) -> u32 {
    match (setting, software) {
        (0, _) if busy => BUSY_REDRAW_HZ,
        (0, true) => 20,
        (0, false) => 60,
        (n, _) => n.clamp(5, 240),
    }
}

impl InspectorApp {
    /// The machine has no spare CPU: the sampler is yielding to it.
    pub(super) fn machine_busy(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| s.sampler.lock().yielding)
    }

    /// Counts redraws per second (shown in the Settings menu).
    pub(super) fn count_redraw(&mut self) {
        let now = monotonic_now_ns();
        self.redraws.1 += 1;
        if now.saturating_sub(self.redraws.0) >= 1_000_000_000 {
            let secs = now.saturating_sub(self.redraws.0) as f32 / 1e9;
            self.redraws_per_sec = if self.redraws.0 == 0 {
                0.0
            } else {
                self.redraws.1 as f32 / secs
            };
            self.redraws = (now, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BUSY_REDRAW_HZ, redraw_rate, throttled_waker};
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
