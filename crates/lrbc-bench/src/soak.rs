//! `lrbc-bench soak`: the observers' resident memory over a long run (an engine and a client
//! with command traffic), to show that it levels off once the memory budget is full.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;

use crate::shared::BenchError;
use lrbc_sim::children::{ChildProcess, start_client, start_engine};
use lrbc_sim::engine::Preset;

#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// How long to run (units ms, s, min, h allowed; a bare number is seconds).
    #[arg(long, value_name = "SECS", default_value = "30min", value_parser = crate::shared::seconds_f64)]
    pub duration: f64,
    /// Seconds between samples.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = crate::shared::seconds_f64)]
    pub every: f64,
    /// Sizes from the seed's examples.
    #[arg(long, value_parser = crate::shared::preset(), default_value = "train4096")]
    pub preset: Preset,
    /// The client's pace, steps per second (it sends commands too).
    #[arg(long, value_name = "F", default_value = "1000", value_parser = crate::shared::parse_hz)]
    pub hz: f64,
    /// The memory budget of the app and the window, MiB.
    #[arg(long, value_name = "MIB", default_value_t = lrbc_live::memory::DEFAULT_BUDGET_MIB, value_parser = clap::value_parser!(u32).range(16..=65536))]
    pub memory_budget: u32,
    /// The app's and the window's sampler on a busy machine, percent of one core. 0 (the
    /// default here) takes every frame, so that their histories fill at the engine's
    /// pace rather than at a few dozen frames a second.
    #[arg(long, value_name = "PCT", default_value = "0", value_parser = crate::shared::parse_percent)]
    pub busy_budget: f32,
}

/// An observer measured.
struct Observed {
    label: &'static str,
    process: ChildProcess,
    /// (seconds since start, resident KiB).
    samples: Vec<(f64, u64)>,
    /// (seconds since start, KiB of its own and of the segment: resident anonymous and
    /// shared memory, without the pages of the files it maps); Linux only.
    own: Vec<(f64, u64)>,
}

pub use lrbc_platform::resident_kib as rss_kib;

/// A process's resident memory by kind, KiB: its own (anonymous), pages of files it
/// maps (shared libraries, mostly shared with other processes), shared memory (the
/// segment). Linux only (`RssAnon`, `RssFile`, `RssShmem` of `/proc/<pid>/status`); None
/// elsewhere.
fn resident_split_kib(pid: u32) -> Option<(u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some((field("RssAnon:")?, field("RssFile:")?, field("RssShmem:")?))
}

/// The least-squares slope of `samples` (KiB per minute).
pub fn slope_kib_per_min(samples: &[(f64, u64)]) -> f64 {
    let n = samples.len() as f64;
    if samples.len() < 2 {
        return 0.0;
    }
    let mx = samples.iter().map(|s| s.0).sum::<f64>() / n;
    let my = samples.iter().map(|s| s.1 as f64).sum::<f64>() / n;
    let sxy: f64 = samples.iter().map(|s| (s.0 - mx) * (s.1 as f64 - my)).sum();
    let sxx: f64 = samples.iter().map(|s| (s.0 - mx).powi(2)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx * 60.0 }
}

pub fn run(args: &SoakArgs) -> Result<(), BenchError> {
    let stop = crate::shared::stop_flag();
    let name = format!("lrbc-soak-{}", std::process::id());
    let mut engine = start_engine(&name, args.preset, &["--force"])?;
    let mut client = start_client(&name, &["--hz".into(), args.hz.to_string()], Stdio::null())?;
    let display = lrbc_inspector::ui::display_available();
    let (mut observers, app_data) = start_observers(&name, args, display)?;
    print_heading(args, display, &observers);
    let data_samples = sample(&name, args, &stop, &mut observers, &app_data, &mut client)?;
    print_summary(&observers, &data_samples);
    drop(observers);
    // Cleanup: there may be nothing to remove.
    let _ = std::fs::remove_file(crate::observers::settings_file(&name));
    client.stop(Duration::from_secs(5));
    engine.stop(Duration::from_secs(5));
    Ok(())
}

/// Starts the observers of segment `name`: `traffic --follow`, the app without a window
/// (with a thread keeping the latest size of its data, as it reports it) and, with a
/// `display`, the window.
fn start_observers(
    name: &str,
    args: &SoakArgs,
    display: bool,
) -> Result<(Vec<Observed>, Arc<AtomicU64>), BenchError> {
    let window = |mut a: Vec<String>| {
        a.extend([
            "--shm".into(),
            name.to_string(),
            "--memory-budget".into(),
            args.memory_budget.to_string(),
            "--busy-budget".into(),
            args.busy_budget.to_string(),
        ]);
        a
    };
    let shm = |mut a: Vec<String>| {
        a.extend(["--shm".into(), name.to_string()]);
        a
    };
    let mut observers = vec![
        Observed {
            label: "traffic --follow",
            process: ChildProcess::spawn(
                "observer",
                &shm(vec!["traffic".into(), "--follow".into()]),
                Stdio::null(),
            )?,
            samples: Vec::new(),
            own: Vec::new(),
        },
        Observed {
            label: "the app, every panel, no window",
            process: ChildProcess::spawn_program(
                &crate::fixtures::this_program()?,
                "observer",
                &window(vec![
                    "headless-app".into(),
                    "--report-memory".into(),
                    "1".into(),
                ]),
                Stdio::piped(),
            )?,
            samples: Vec::new(),
            own: Vec::new(),
        },
    ];
    // What the app's data uses of its budget, as it reports it.
    let app_data = Arc::new(AtomicU64::new(0));
    if let Some(out) = observers[1].process.child.stdout.take() {
        let latest = Arc::clone(&app_data);
        std::thread::Builder::new()
            .name("soak-report".into())
            .spawn(move || {
                use std::io::BufRead as _;
                for line in std::io::BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if let Some(v) = line.strip_prefix("memory ").and_then(|v| v.parse().ok()) {
                        // Relaxed: a figure for display, ordered with nothing.
                        latest.store(v, Ordering::Relaxed);
                    }
                }
            })
            .map_err(|e| BenchError::Other(e.to_string()))?;
    }
    if display {
        observers.push(Observed {
            label: "the window, every panel",
            process: ChildProcess::spawn(
                "observer",
                &window(vec![
                    "--settings".into(),
                    crate::observers::settings_file(name).display().to_string(),
                ]),
                Stdio::null(),
            )?,
            samples: Vec::new(),
            own: Vec::new(),
        });
    }
    Ok((observers, app_data))
}

/// What is measured, and the table's heading.
fn print_heading(args: &SoakArgs, display: bool, observers: &[Observed]) {
    println!(
        "lrbc-bench soak: {} at {} Hz with command traffic, {:.1} min, memory budget {} MiB, busy budget {} %; resident memory (MiB) every {:.0} s{}",
        args.preset.as_str(),
        args.hz,
        args.duration / 60.0,
        args.memory_budget,
        args.busy_budget,
        args.every,
        if display {
            ""
        } else {
            " (no display: the real window is not measured)"
        }
    );
    let header: Vec<String> = observers
        .iter()
        .map(|o| format!("{:>12}", short(o.label)))
        .collect();
    println!(
        "{:>8} {:>10} {:>10} {}",
        "minute",
        "frames/s",
        "app data",
        header.join(" ")
    );
}

/// Samples the observers' memory every `args.every` seconds until the duration is over
/// or the run is stopped, a line each time; the app's data sizes (`app_data`) sampled.
fn sample(
    name: &str,
    args: &SoakArgs,
    stop: &AtomicBool,
    observers: &mut [Observed],
    app_data: &AtomicU64,
    client: &mut ChildProcess,
) -> Result<Vec<(f64, u64)>, BenchError> {
    let mut data_samples: Vec<(f64, u64)> = Vec::new();
    let start = Instant::now();
    let frames = |a: &lrbc::attach::Attached| {
        a.segment
            .load_u64(a.geometry.counters.frame_seq)
            .unwrap_or(0)
    };
    let probe = lrbc::attach::attach(
        &lrbc::attach::Target::Shm(name.to_string()),
        lrbc::layout::LayoutChoice::Auto,
    )?;
    let mut last = (0.0f64, frames(&probe));
    let mut next = args.every;
    loop {
        if crate::shared::sleep_unless_stopped(
            Duration::from_secs_f64((next - start.elapsed().as_secs_f64()).max(0.0)),
            stop,
        ) {
            break;
        }
        let t = start.elapsed().as_secs_f64();
        let f = frames(&probe);
        let rate = (f.saturating_sub(last.1)) as f64 / (t - last.0).max(1e-9);
        last = (t, f);
        let cells = sample_observers(observers, t)?;
        // Relaxed: see the reader in start_observers.
        let data = app_data.load(Ordering::Relaxed);
        data_samples.push((t, data));
        println!(
            "{:>8.1} {:>10.0} {:>10.1} {}",
            t / 60.0,
            rate,
            data as f64 / 1048576.0,
            cells.join(" ")
        );
        if let Some(code) = client.exited() {
            return Err(BenchError::Other(format!(
                "the client exited (code {code}) during the soak"
            )));
        }
        if t >= args.duration {
            break;
        }
        next += args.every;
    }
    Ok(data_samples)
}

/// Samples each observer's resident memory at `t`; its cells of the table's line. An
/// error if one has exited.
fn sample_observers(observers: &mut [Observed], t: f64) -> Result<Vec<String>, BenchError> {
    let mut cells = Vec::new();
    for o in observers {
        if let Some(code) = o.process.exited() {
            return Err(BenchError::Other(format!(
                "{} exited (code {code}) during the soak",
                o.label
            )));
        }
        let kib = rss_kib(o.process.pid()).unwrap_or(0);
        o.samples.push((t, kib));
        if let Some((anon, _, shmem)) = resident_split_kib(o.process.pid()) {
            o.own.push((t, anon + shmem));
        }
        cells.push(format!("{:>12.1}", kib as f64 / 1024.0));
    }
    Ok(cells)
}

/// When the app's data filled its budget, and each observer's memory before and after.
fn print_summary(observers: &[Observed], data_samples: &[(f64, u64)]) {
    // The budget is full once the app's data stays within 2 % of its largest size.
    let top = data_samples.iter().map(|s| s.1).max().unwrap_or(0);
    let full_at = data_samples
        .iter()
        .position(|s| s.1 as f64 >= top as f64 * 0.98)
        .unwrap_or(0);
    let full_t = data_samples.get(full_at).map_or(0.0, |s| s.0);
    println!();
    println!(
        "The app's data reached {:.1} MiB (98 % of its largest size) at minute {:.1}.",
        data_samples.get(full_at).map_or(0, |s| s.1) as f64 / 1048576.0,
        full_t / 60.0
    );
    println!(
        "{:<40} {:>9} {:>9} {:>9} {:>9} {:>18} {:>18}",
        "observer",
        "MiB first",
        "MiB full",
        "MiB last",
        "MiB peak",
        "KiB/min once full",
        "KiB/min last half"
    );
    for o in observers {
        summary_row(o.label, &o.samples, full_t);
    }
    // Where the kinds of resident memory are not told apart (Windows), no block.
    if observers.iter().any(|o| !o.own.is_empty()) {
        println!(
            "Its own and the segment (resident anonymous and shared memory, without the \
             pages of shared libraries):"
        );
        for o in observers {
            summary_row(o.label, &o.own, full_t);
        }
    }
    for o in observers {
        if let Some((anon, file, shmem)) = resident_split_kib(o.process.pid()) {
            println!(
                "{}: at the end {:.1} MiB its own (anonymous), {:.1} MiB pages of files it maps (shared libraries), {:.1} MiB shared memory (the segment)",
                o.label,
                anon as f64 / 1024.0,
                file as f64 / 1024.0,
                shmem as f64 / 1024.0
            );
        }
    }
}

/// One observer's line of the summary: first, once the data is full (`full_t`), last,
/// peak and slopes of `samples`.
fn summary_row(label: &str, samples: &[(f64, u64)], full_t: f64) {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return;
    };
    let peak = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let after: Vec<(f64, u64)> = samples.iter().copied().filter(|s| s.0 >= full_t).collect();
    let at_full = after.first().map_or(0, |s| s.1);
    println!(
        "{:<40} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>18.1} {:>18.1}",
        label,
        first.1 as f64 / 1024.0,
        at_full as f64 / 1024.0,
        last.1 as f64 / 1024.0,
        peak as f64 / 1024.0,
        slope_kib_per_min(&after),
        slope_kib_per_min(&samples[samples.len() / 2..])
    );
}

fn short(label: &str) -> &str {
    match label {
        "traffic --follow" => "traffic",
        "the app, every panel, no window" => "app",
        _ => "window",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_of_a_line_is_its_rate_per_minute() {
        let flat: Vec<(f64, u64)> = (0..10).map(|i| (f64::from(i) * 60.0, 5000)).collect();
        assert_eq!(slope_kib_per_min(&flat), 0.0);
        let rising: Vec<(f64, u64)> = (0..10)
            .map(|i| (f64::from(i) * 60.0, 5000 + 40 * i as u64))
            .collect();
        assert!((slope_kib_per_min(&rising) - 40.0).abs() < 1e-9);
        assert!(rss_kib(std::process::id()).is_some_and(|k| k > 0));
        #[cfg(target_os = "linux")]
        {
            let (anon, _, _) = resident_split_kib(std::process::id()).expect("read");
            assert!(anon > 0 && anon <= rss_kib(std::process::id()).unwrap_or(0) + 1024);
        }
    }
}
