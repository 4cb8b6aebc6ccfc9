//! `bench ui` and `bench sampler`: the window's and the sampler's costs, measured
//! against an engine and a client in separate processes (figures for the README).

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::CliError;
use super::benchmarks::SamplerPart;
use super::children::{ChildProcess, wait_for_segment};
use crate::attach::{Target, attach};
use crate::clock::MonotonicClock;
use crate::layout::LayoutChoice;
use crate::sampler::{Sampler, SamplerSettings, SamplerStats};
use crate::sim::engine::Preset;
use crate::ui::InspectorApp;
use crate::ui::raster::HeadlessRenderer;
use crate::ui::settings::{Settings, grid_tree};

/// An engine and (optionally) a client as child processes.
struct Run {
    name: String,
    engine: ChildProcess,
    client: Option<ChildProcess>,
}

fn start(
    preset: Preset,
    client: (Option<f64>, &str),
    client_steps: Option<u64>,
    tag: &str,
) -> Result<Run, CliError> {
    let (client_hz, policy) = client;
    let name = format!("lrbc-uibench-{}-{tag}", std::process::id());
    let mut engine = ChildProcess::spawn(
        "engine",
        &[
            "sim".into(),
            "engine".into(),
            "--name".into(),
            name.clone(),
            "--preset".into(),
            preset.as_str().into(),
            "--force".into(),
        ],
        Stdio::null(),
    )?;
    wait_for_segment(&name, &mut engine, Duration::from_secs(30))?;
    let client = match (client_hz, client_steps) {
        (None, None) => None,
        _ => {
            let mut args = vec![
                "sim".to_string(),
                "client".into(),
                "--shm".into(),
                name.clone(),
                "--policy".into(),
                policy.into(),
            ];
            if let Some(hz) = client_hz {
                args.extend(["--hz".into(), hz.to_string()]);
            }
            if let Some(steps) = client_steps {
                args.extend([
                    "--steps".into(),
                    steps.to_string(),
                    "--no-commands".into(),
                    "--json".into(),
                ]);
            }
            let stdout = if client_steps.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            };
            Some(ChildProcess::spawn("client", &args, stdout)?)
        }
    };
    Ok(Run {
        name,
        engine,
        client,
    })
}

/// CPU seconds used so far by a process (utime + stime).
fn cpu_secs(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = s.rsplit(')').next()?;
            let f: Vec<&str> = after.split_whitespace().collect();
            let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            Some(ticks as f64 / 100.0)
        })
        .unwrap_or(0.0)
}

/// CPU seconds of this process's threads, by thread name.
fn thread_cpu() -> Vec<(String, f64)> {
    threads_cpu("self")
}

/// CPU seconds of the threads of process `pid` ("self" for this one), by thread name.
fn threads_cpu(pid: &str) -> Vec<(String, f64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<(String, f64)> = Vec::new();
    for t in dir.filter_map(Result::ok) {
        let path = t.path();
        let name = std::fs::read_to_string(path.join("comm"))
            .unwrap_or_default()
            .trim()
            .to_string();
        let secs = std::fs::read_to_string(path.join("stat"))
            .ok()
            .and_then(|s| {
                let after = s.rsplit(')').next()?.to_string();
                let f: Vec<&str> = after.split_whitespace().collect();
                Some(
                    (f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?) as f64
                        / 100.0,
                )
            })
            .unwrap_or(0.0);
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, s)) => *s += secs,
            None => out.push((name, secs)),
        }
    }
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

/// UI frame CPU time (layout and tessellation) at train4096 with every panel open.
pub fn ui(frames: usize, pane: Option<&str>) -> Result<(), CliError> {
    let tree = match pane {
        None => grid_tree(),
        Some(name) => {
            let p = crate::ui::settings::Pane::ALL
                .into_iter()
                .find(|p| p.title().eq_ignore_ascii_case(name))
                .ok_or_else(|| CliError::Usage(format!("unknown panel {name:?}")))?;
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
        return Err(CliError::Other("could not attach".into()));
    }
    let mut renderer = HeadlessRenderer::new();
    let size = egui::vec2(1600.0, 1000.0);
    // Warm up (fonts, textures) and let a few seconds of history build.
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs(5) {
        let _ = renderer.pass(&ctx, size, 1.0, |ui| app.ui(ui));
        std::thread::sleep(Duration::from_millis(16));
    }
    let mut times = Vec::with_capacity(frames);
    let mut walls = Vec::with_capacity(frames);
    for _ in 0..frames {
        let (t, cpu) = (Instant::now(), crate::segment::thread_cpu_ns());
        let _ = renderer.pass(&ctx, size, 1.0, |ui| app.ui(ui));
        times.push((crate::segment::thread_cpu_ns() - cpu) as f64 / 1e6);
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
        "bench ui: train4096 (4096 envs × obs 100 × act 12), engine and client (1 kHz) in separate processes,"
    );
    println!(
        "every panel open at 1600×1000, {frames} frames at display rate, {history} frames of history held"
    );
    println!(
        "UI frame CPU time of the UI thread (egui layout + tessellation, no rasterisation): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.last().copied().unwrap_or(0.0)
    );
    println!(
        "the same frames in wall time (preemption by the engine and client included): p50 {:.2} ms, p99 {:.2} ms",
        percentile(&walls, 0.5),
        percentile(&walls, 0.99)
    );
    Ok(())
}

/// Sampler share at a pace, for `secs` seconds.
fn sampler_share(
    preset: Preset,
    hz: Option<f64>,
    secs: f64,
    tag: &str,
) -> Result<SamplerStats, CliError> {
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
    .map_err(|e| CliError::Other(e.to_string()))?;
    std::thread::sleep(Duration::from_secs_f64(secs));
    sampler.stop();
    let s = sampler.stats();
    drop(run);
    Ok(s)
}

/// Steps/s of an unpaced client for `steps` steps, optionally with an observer.
fn engine_rate(
    preset: Preset,
    steps: u64,
    observer: Observer,
    tag: &str,
) -> Result<(f64, Vec<(String, f64)>), CliError> {
    let mut run = start(preset, (None, "random"), None, tag)?;
    let mut watch = None;
    let mut window = None;
    let mut app = None;
    let ctx = egui::Context::default();
    match observer {
        Observer::None => {}
        Observer::Watch | Observer::WatchEveryFrame => {
            let budget = if observer == Observer::Watch {
                crate::sampler::DEFAULT_BUSY_BUDGET_PERCENT
            } else {
                0.0
            };
            watch = Some(ChildProcess::spawn(
                "watch",
                &[
                    "watch".into(),
                    "--shm".into(),
                    run.name.clone(),
                    "--interval".into(),
                    "1".into(),
                    "--busy-budget".into(),
                    budget.to_string(),
                ],
                Stdio::null(),
            )?);
            std::thread::sleep(Duration::from_millis(300));
        }
        Observer::RealWindow => {
            // The binary with no subcommand opens the window on $DISPLAY.
            window = Some(ChildProcess::spawn(
                "window",
                &["--shm".into(), run.name.clone()],
                Stdio::null(),
            )?);
            // Let it open, attach and draw its first frames.
            std::thread::sleep(Duration::from_secs(3));
        }
        Observer::Window => {
            let a = InspectorApp::new(
                &ctx,
                Settings::default(),
                Some(grid_tree()),
                Some(Target::Shm(run.name.clone())),
                LayoutChoice::Auto,
            );
            app = Some(a);
        }
    }
    let engine_pid = run.engine.pid();
    let window_pid = window.as_ref().map(|w| w.pid().to_string());
    let observer_threads = || match &window_pid {
        Some(pid) => threads_cpu(pid),
        None => thread_cpu(),
    };
    let cpu_before = (cpu_secs(engine_pid), observer_threads());
    let mut client = ChildProcess::spawn(
        "client",
        &[
            "sim".into(),
            "client".into(),
            "--shm".into(),
            run.name.clone(),
            "--steps".into(),
            steps.to_string(),
            "--no-commands".into(),
            "--json".into(),
        ],
        Stdio::piped(),
    )?;
    let client_pid = client.pid();
    let mut renderer = HeadlessRenderer::new();
    let size = egui::vec2(1600.0, 1000.0);
    let mut client_cpu = 0.0;
    // Drive the window at display rate while the client runs.
    while client.exited().is_none() {
        client_cpu = cpu_secs(client_pid).max(client_cpu);
        if let Some(a) = &mut app {
            let t = Instant::now();
            let _ = renderer.pass(&ctx, size, 1.0, |ui| a.ui(ui));
            std::thread::sleep(Duration::from_millis(16).saturating_sub(t.elapsed()));
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let mut out = String::new();
    if let Some(stdout) = client.child.stdout.as_mut() {
        use std::io::Read as _;
        let _ = stdout.read_to_string(&mut out);
    }
    let engine_cpu = cpu_secs(engine_pid) - cpu_before.0;
    let after = observer_threads();
    let mut cpu = vec![
        ("engine process".to_string(), engine_cpu),
        ("client process".to_string(), client_cpu),
    ];
    if let Some(w) = &watch {
        cpu.push(("watch process".into(), cpu_secs(w.pid())));
    }
    if app.is_some() || window.is_some() {
        let whose = if window.is_some() {
            "window"
        } else {
            "inspector"
        };
        for (name, secs) in after {
            let before = cpu_before
                .1
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0.0, |(_, s)| *s);
            if secs - before > 0.005 {
                cpu.push((format!("{whose} thread {name}"), secs - before));
            }
        }
    }
    drop(watch);
    drop(window);
    drop(app);
    run.client = None;
    drop(run);
    let v: serde_json::Value = serde_json::from_str(out.trim())
        .map_err(|e| CliError::Other(format!("bad client report: {e}")))?;
    Ok((v["steps_per_sec"].as_f64().unwrap_or(0.0), cpu))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Observer {
    None,
    Watch,
    /// `watch --busy-budget 0`: the sampler follows every frame, busy machine or not.
    WatchEveryFrame,
    /// The app driven headlessly in this process (layout and tessellation, no raster).
    Window,
    /// The real window, a separate process on $DISPLAY (rasterised by the GL driver).
    RealWindow,
}

/// The sampler's share of frames and the engine's rate with observers attached.
pub fn sampler(
    secs: f64,
    steps: u64,
    rounds: usize,
    only: Option<SamplerPart>,
) -> Result<(), CliError> {
    println!(
        "bench sampler: engine and client in separate processes; the sampler runs in this process"
    );
    if only != Some(SamplerPart::Rate) {
        share_table(secs)?;
    }
    if only != Some(SamplerPart::Share) {
        rate_table(steps, rounds)?;
    }
    Ok(())
}

/// The sampler's share of frames at each pace, for both presets.
fn share_table(secs: f64) -> Result<(), CliError> {
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
            let SamplerStats {
                frames_seen: seen,
                frames_sampled: sampled,
                frames_missed: missed,
                frames_torn: torn,
                frames_skipped: skipped,
                ..
            } = sampler_share(preset, hz, secs, &format!("s{i}"))?;
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
            best.map_or("none measured".into(), |b| format!("{b:.0} frames/s"))
        );
    }
    println!();
    Ok(())
}

/// The engine's unpaced rate with and without observers, in interleaved rounds.
fn rate_table(steps: u64, rounds: usize) -> Result<(), CliError> {
    println!(
        "engine's unpaced lock-step rate, train4096, {steps} steps, with and without observers:"
    );
    // Interleaved rounds: the machine is shared and noisy (its speed drifts by tens of
    // percent between minutes), so every configuration is measured once per round, and
    // each observer's rate is compared with the rate without observers of its own round.
    let display = std::env::var_os("DISPLAY").is_some_and(|d| !d.is_empty());
    let mut observers = vec![
        Observer::None,
        Observer::Watch,
        Observer::WatchEveryFrame,
        Observer::Window,
    ];
    if display {
        observers.push(Observer::RealWindow);
    }
    let mut rates = vec![Vec::new(); observers.len()];
    let mut cpus = vec![Vec::new(); observers.len()];
    for round in 0..rounds {
        for (k, &observer) in observers.iter().enumerate() {
            let (rate, cpu) =
                engine_rate(Preset::Train4096, steps, observer, &format!("r{round}{k}"))?;
            rates[k].push(rate);
            cpus[k] = cpu;
        }
    }
    let fmt_runs = |v: &[f64]| {
        v.iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let medians: Vec<f64> = rates.iter().map(|r| median(r.clone())).collect();
    let paired: Vec<f64> = rates
        .iter()
        .map(|r| {
            median(
                r.iter()
                    .zip(&rates[0])
                    .filter(|(_, b)| **b > 0.0)
                    .map(|(a, b)| a / b)
                    .collect(),
            )
        })
        .collect();
    for (k, observer) in observers.iter().enumerate() {
        let label = match observer {
            Observer::None => "without observers",
            Observer::Watch => "with `watch` (sampler running)",
            Observer::WatchEveryFrame => "with `watch --busy-budget 0` (every frame)",
            Observer::Window => "with the app headless (every panel, 60 fps, no raster)",
            Observer::RealWindow => "with the window on $DISPLAY (every panel)",
        };
        let ratio = if k == 0 {
            String::new()
        } else {
            format!("  ratio {:.3}", paired[k])
        };
        println!(
            "  {label:<56} {:>8.0} steps/s{ratio} (rounds {})",
            medians[k],
            fmt_runs(&rates[k])
        );
    }
    if !display {
        println!(
            "  (no $DISPLAY: the real window was not measured; run under X or Xvfb for that row)"
        );
    }
    println!(
        "  (ratio: the median over rounds of the rate with the observer / without, same round)"
    );
    println!("  (CPU seconds below: the last round)");
    for (observer, cpu) in observers.iter().zip(&cpus) {
        println!("  CPU seconds, {observer:?}: {}", fmt_cpu(cpu));
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn fmt_cpu(cpu: &[(String, f64)]) -> String {
    cpu.iter()
        .map(|(n, s)| format!("{n} {s:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}
