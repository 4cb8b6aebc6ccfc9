//! `lrbc-bench ui` and `lrbc-bench sampler`: the window's and the sampler's costs, measured
//! against an engine and a client in separate processes (figures in docs/benchmarks.md).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::fixtures::start;
use crate::observers::{Observer, fmt_cpu, observer_cost};
use crate::shared::BenchError;
use lrbc::attach::{Target, attach};
use lrbc::clock::MonotonicClock;
use lrbc::layout::LayoutChoice;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::{Settings, grid_tree};
use lrbc_live::follower::FrameCounts;
use lrbc_live::sampler::{Sampler, SamplerSettings, SamplerStats};
use lrbc_sim::engine::Preset;

/// One pass of the window without a window: egui's layout of `app` at `size` points and
/// its tessellation, what a frame costs the UI thread before a renderer draws it.
pub fn headless_pass(ctx: &egui::Context, size: egui::Vec2, app: &mut InspectorApp) {
    let input = egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, size)),
        ..Default::default()
    };
    let output = ctx.run_ui(input, |ui| app.run_frame(ui));
    // The tessellation's time is measured, not its output.
    let _ = ctx.tessellate(output.shapes, output.pixels_per_point);
}

/// One half of `lrbc-bench sampler`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SamplerPart {
    Share,
    Rate,
}

/// UI frame CPU time (layout and tessellation) at train4096 with every panel open.
pub fn ui(frames: usize, pane: Option<&str>) -> Result<(), BenchError> {
    if cfg!(windows) {
        return Err(BenchError::Other(
            "lrbc-bench ui pauses and resumes its observers (SIGSTOP/SIGCONT), which Windows cannot; run it on Linux".into(),
        ));
    }
    let tree = match pane {
        None => grid_tree(),
        Some(name) => {
            let p = lrbc_inspector::ui::settings::Pane::ALL
                .into_iter()
                .find(|p| p.title().eq_ignore_ascii_case(name))
                .ok_or_else(|| BenchError::Usage(format!("unknown panel {name:?}")))?;
            egui_tiles::Tree::new_tabs(egui::Id::unique("bench_one"), vec![p])
        }
    };
    let run = start(Preset::Train4096, (Some(1000.0), "balance"), None, "ui")?;
    std::thread::sleep(Duration::from_secs(2));
    let ctx = egui::Context::default();
    let mut app = InspectorApp::new(
        &ctx,
        Settings::default(),
        Some(tree),
        Some(Target::Shm(run.name.clone())),
        LayoutChoice::Auto,
    );
    if app.session.is_none() {
        return Err(BenchError::Other("could not attach".into()));
    }
    let size = egui::vec2(1600.0, 1000.0);
    // Warm up (fonts, textures) and let a few seconds of history build.
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs(5) {
        headless_pass(&ctx, size, &mut app);
        std::thread::sleep(Duration::from_millis(16));
    }
    let mut times = Vec::with_capacity(frames);
    let mut walls = Vec::with_capacity(frames);
    for _ in 0..frames {
        let (t, cpu) = (Instant::now(), lrbc_platform::thread_cpu_ns());
        headless_pass(&ctx, size, &mut app);
        times.push((lrbc_platform::thread_cpu_ns() - cpu) as f64 / 1e6);
        walls.push(t.elapsed().as_secs_f64() * 1e3);
        // Display rate: leave the rest of the frame to the other processes.
        std::thread::sleep(Duration::from_millis(16).saturating_sub(t.elapsed()));
    }
    walls.sort_by(f64::total_cmp);
    let history = app
        .session
        .as_ref()
        .map_or(0, |s| s.sampler.lock().frames.len());
    drop(app);
    drop(run);
    times.sort_by(f64::total_cmp);
    println!(
        "lrbc-bench ui: train4096 (4096 envs × obs 100 × act 12), engine and client (1 kHz) in separate processes,"
    );
    println!(
        "every panel open at 1600×1000, {frames} frames at display rate, {history} frames of history held"
    );
    println!(
        "UI frame CPU time of the UI thread (egui layout + tessellation, no rasterisation): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lrbc_live::stats::quantile(&times, 0.5).unwrap_or(0.0),
        lrbc_live::stats::quantile(&times, 0.99).unwrap_or(0.0),
        times.last().copied().unwrap_or(0.0)
    );
    println!(
        "the same frames in wall time (preemption by the engine and client included): p50 {:.2} ms, p99 {:.2} ms",
        lrbc_live::stats::quantile(&walls, 0.5).unwrap_or(0.0),
        lrbc_live::stats::quantile(&walls, 0.99).unwrap_or(0.0)
    );
    Ok(())
}

/// Sampler share at a pace, for `secs` seconds.
fn sampler_share(
    preset: Preset,
    hz: Option<f64>,
    secs: f64,
    tag: &str,
) -> Result<SamplerStats, BenchError> {
    // Unpaced: the client runs as fast as the engine answers (until the run is dropped).
    // Random actions: a client whose own work is small, so that the pace is kept.
    let steps = hz.is_none().then_some(1_000_000_000);
    let run = start(preset, (hz, "random"), steps, tag)?;
    let a = attach(&Target::Shm(run.name.clone()), LayoutChoice::Auto)?;
    let mut sampler = Sampler::start(
        a,
        SamplerSettings::default(),
        MonotonicClock,
        Box::new(|| {}),
        60.0,
    )
    .map_err(|e| BenchError::Other(e.to_string()))?;
    std::thread::sleep(Duration::from_secs_f64(secs));
    sampler.stop();
    let s = sampler.stats();
    drop(run);
    Ok(s)
}

/// How often at most `lrbc-bench headless-app` looks at its stop flag while idle.
const STOP_POLL: Duration = Duration::from_millis(500);

/// `lrbc-bench headless-app`: the app attached to `shm` with every panel open, a pass each
/// time it asks for a repaint (as eframe schedules them), until SIGINT or SIGTERM.
pub fn headless_app(
    shm: &str,
    overrides: lrbc_inspector::ui::settings::Overrides,
    report_memory: Option<f64>,
) -> Result<(), BenchError> {
    let stop = crate::shared::stop_flag();
    // As the window does: the app's threads yield to the run, the followers excepted.
    lrbc_inspector::ui::yield_to_the_run();
    let ctx = egui::Context::default();
    // A full channel already holds requests enough to repaint.
    let (tx, rx) = crossbeam_channel::bounded::<Duration>(64);
    ctx.set_request_repaint_callback(move |info| {
        // A full queue drops the sample: the measure takes those it can.
        let _ = tx.try_send(info.delay);
    });
    let mut app = InspectorApp::new(
        &ctx,
        Settings::default().with(&overrides),
        Some(grid_tree()),
        Some(Target::Shm(shm.to_string())),
        LayoutChoice::Auto,
    );
    let size = egui::vec2(1600.0, 1000.0);
    let mut due = Some(Instant::now());
    let mut reported = Instant::now();
    // Relaxed: a flag with no data behind it.
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if let Some(every) = report_memory
            && now.duration_since(reported).as_secs_f64() >= every
        {
            reported = now;
            println!("memory {}", app.memory_in_use());
        }
        match due {
            Some(at) if at <= now => {
                due = None;
                headless_pass(&ctx, size, &mut app);
            }
            _ => {
                // Asleep until the next repaint is due or asked for (or half a second,
                // to see the stop flag: a window has no such wakeups).
                let wait = due.map_or(STOP_POLL, |at| at - now);
                if let Ok(delay) = rx.recv_timeout(wait.min(STOP_POLL)) {
                    let at = Instant::now().checked_add(delay);
                    due = match (due, at) {
                        (Some(d), Some(a)) => Some(d.min(a)),
                        (d, a) => d.or(a),
                    };
                }
            }
        }
    }
    Ok(())
}

/// The sampler's share of frames and the engine's rate with observers attached.
pub fn sampler(
    secs: f64,
    rate_secs: f64,
    window_secs: f64,
    only: Option<SamplerPart>,
) -> Result<(), BenchError> {
    println!(
        "lrbc-bench sampler: engine and client in separate processes; the sampler runs in this process"
    );
    if only != Some(SamplerPart::Rate) {
        share_table(secs)?;
    }
    if only != Some(SamplerPart::Share) {
        rate_table(rate_secs, Duration::from_secs_f64(window_secs))?;
    }
    Ok(())
}

/// The sampler's share of frames at each pace, for both presets.
fn share_table(secs: f64) -> Result<(), BenchError> {
    println!(
        "{:<10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9}",
        "preset", "pace", "frames/s", "seen", "sampled", "missed", "torn", "skipped", "share"
    );
    for preset in [Preset::Cams64, Preset::Train4096] {
        // Paces from slow to fast: the highest pace at which the share stays at 100 %
        // is the last one before the first pace with a frame missed or torn.
        let mut best: Option<f64> = None;
        let mut all_so_far = true;
        let paces = [
            Some(250.0),
            Some(500.0),
            Some(1000.0),
            Some(2000.0),
            Some(4000.0),
            Some(8000.0),
            None,
        ];
        for (i, hz) in paces.into_iter().enumerate() {
            let FrameCounts {
                seen,
                sampled,
                missed,
                torn,
                skipped,
                ..
            } = sampler_share(preset, hz, secs, &format!("s{i}"))?.frames;
            let share = if seen > 0 {
                100.0 * sampled as f64 / seen as f64
            } else {
                0.0
            };
            let pace = hz.map_or("unpaced".to_string(), |h| format!("{h:.0} Hz"));
            println!(
                "{:<10} {:>10} {:>10.0} {seen:>10} {sampled:>10} {missed:>8} {torn:>8} {skipped:>8} {share:>8.2}%",
                preset.as_str(),
                pace,
                seen as f64 / secs
            );
            all_so_far &= sampled == seen && seen > 0;
            if all_so_far {
                best = Some(seen as f64 / secs);
            }
        }
        println!(
            "{:<10} highest pace sampled at 100 %: {}",
            preset.as_str(),
            best.map_or("none measured".into(), |b| format!("{b:.0} frames/s")),
        );
    }
    println!();
    Ok(())
}

/// The engine's unpaced rate with each observer switched on and off within one run.
fn rate_table(secs: f64, window: Duration) -> Result<(), BenchError> {
    println!(
        "engine's unpaced lock-step rate, train4096, each observer switched off and on in \
         windows of {} s, blocks of off-on-on-off, {secs:.0} s of one run each:",
        window.as_secs_f64()
    );
    let display = lrbc_inspector::ui::display_available();
    let mut observers = vec![
        Observer::Watch,
        Observer::WatchEveryFrame,
        Observer::HeadlessApp,
    ];
    if display {
        observers.push(Observer::Window);
    }
    let mut costs = Vec::new();
    for (k, &observer) in observers.iter().enumerate() {
        let c = observer_cost(observer, None, secs, window, &format!("r{k}"))?;
        let lrbc_live::stats::Interval {
            estimate: ratio,
            low: lo,
            high: hi,
        } = c.ratio();
        println!(
            "  with {:<52} ratio {ratio:.3} (95 % CI {lo:.3}–{hi:.3}, {} blocks; {:.0} vs {:.0} steps/s)",
            observer.label(),
            c.blocks.len(),
            c.rate_on,
            c.rate_off,
        );
        costs.push((observer, c));
    }
    if !display {
        println!(
            "  (no display: the real window was not measured; run under X or Xvfb for that row)"
        );
    }
    println!(
        "  (ratio: the geometric mean over blocks of the rate with the observer on / off; \
         off = the observer's process stopped with SIGSTOP)"
    );
    println!("  where the CPU goes while the observer is on (share of one core):");
    for (observer, c) in &costs {
        println!(
            "    {observer:?}: engine {:.1} % (off {:.1} %), client {:.1} % (off {:.1} %); {}",
            100.0 * c.pair_on.0,
            100.0 * c.pair_off.0,
            100.0 * c.pair_on.1,
            100.0 * c.pair_off.1,
            fmt_cpu(&c.cpu_on)
        );
    }
    Ok(())
}
