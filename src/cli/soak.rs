//! `bench soak`: the observers' resident memory over a long run (an engine and a client
//! with command traffic), to show that it levels off once the memory budget is full.

use std::process::Stdio;
use std::time::{Duration, Instant};

use clap::Args;

use super::CliError;
use super::children::{ChildProcess, wait_for_segment};
use crate::sim::engine::Preset;

#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// How long to run (units ms, s, min, h allowed; a bare number is seconds).
    #[arg(long, value_name = "SECS", default_value = "30min", value_parser = super::args::seconds_f64)]
    pub duration: f64,
    /// Seconds between samples.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = super::args::seconds_f64)]
    pub every: f64,
    /// Sizes from the seed's examples.
    #[arg(long, value_enum, default_value_t = Preset::Train4096)]
    pub preset: Preset,
    /// The client's pace, steps per second (it sends commands too).
    #[arg(long, value_name = "F", default_value = "1000", value_parser = super::args::parse_hz)]
    pub hz: f64,
}

/// An observer measured.
struct Observed {
    label: &'static str,
    process: ChildProcess,
    /// (seconds since start, resident KiB).
    samples: Vec<(f64, u64)>,
}

/// Resident memory of a process, KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
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

pub fn run(args: &SoakArgs) -> Result<(), CliError> {
    let stop = super::stop_flag();
    let name = format!("lrbc-soak-{}", std::process::id());
    let mut engine = ChildProcess::spawn(
        "engine",
        &[
            "sim".into(),
            "engine".into(),
            "--name".into(),
            name.clone(),
            "--preset".into(),
            args.preset.as_str().into(),
            "--force".into(),
        ],
        Stdio::null(),
    )?;
    wait_for_segment(&name, &mut engine, Duration::from_secs(30))?;
    let mut client = ChildProcess::spawn(
        "client",
        &[
            "sim".into(),
            "client".into(),
            "--shm".into(),
            name.clone(),
            "--hz".into(),
            args.hz.to_string(),
        ],
        Stdio::null(),
    )?;
    let shm = |mut a: Vec<String>| {
        a.extend(["--shm".into(), name.clone()]);
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
        },
        Observed {
            label: "the app, every panel, no window",
            process: ChildProcess::spawn(
                "observer",
                &shm(vec!["bench".into(), "headless-app".into()]),
                Stdio::null(),
            )?,
            samples: Vec::new(),
        },
    ];
    let display =
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if display {
        observers.push(Observed {
            label: "the window on $DISPLAY, every panel",
            process: ChildProcess::spawn("observer", &shm(Vec::new()), Stdio::null())?,
            samples: Vec::new(),
        });
    }
    println!(
        "bench soak: {} at {} Hz with command traffic, {:.1} min, resident memory (MiB) every {:.0} s{}",
        args.preset.as_str(),
        args.hz,
        args.duration / 60.0,
        args.every,
        if display {
            ""
        } else {
            " (no $DISPLAY: the real window is not measured)"
        }
    );
    let header: Vec<String> = observers
        .iter()
        .map(|o| format!("{:>12}", short(o.label)))
        .collect();
    println!("{:>8} {:>10} {}", "minute", "frames/s", header.join(" "));
    let start = Instant::now();
    let frames = |a: &crate::attach::Attached| {
        a.segment
            .load_u64(a.geometry.counters.frame_seq)
            .unwrap_or(0)
    };
    let probe = crate::attach::attach(
        &crate::attach::Target::Shm(name.clone()),
        crate::layout::LayoutChoice::Auto,
    )?;
    let mut last = (0.0f64, frames(&probe));
    let mut next = args.every;
    loop {
        if super::sleep_unless_stopped(
            Duration::from_secs_f64((next - start.elapsed().as_secs_f64()).max(0.0)),
            &stop,
        ) {
            break;
        }
        let t = start.elapsed().as_secs_f64();
        let f = frames(&probe);
        let rate = (f.saturating_sub(last.1)) as f64 / (t - last.0).max(1e-9);
        last = (t, f);
        let mut cells = Vec::new();
        for o in &mut observers {
            if let Some(code) = o.process.exited() {
                return Err(CliError::Other(format!(
                    "{} exited (code {code}) during the soak",
                    o.label
                )));
            }
            let kib = rss_kib(o.process.pid()).unwrap_or(0);
            o.samples.push((t, kib));
            cells.push(format!("{:>12.1}", kib as f64 / 1024.0));
        }
        println!("{:>8.1} {:>10.0} {}", t / 60.0, rate, cells.join(" "));
        if let Some(code) = client.exited() {
            return Err(CliError::Other(format!(
                "the client exited (code {code}) during the soak"
            )));
        }
        if t >= args.duration {
            break;
        }
        next += args.every;
    }
    println!();
    println!(
        "{:<40} {:>10} {:>10} {:>10} {:>22}",
        "observer", "MiB first", "MiB peak", "MiB last", "KiB/min, second half"
    );
    for o in &observers {
        let (Some(first), Some(last)) = (o.samples.first(), o.samples.last()) else {
            continue;
        };
        let peak = o.samples.iter().map(|s| s.1).max().unwrap_or(0);
        let half = &o.samples[o.samples.len() / 2..];
        println!(
            "{:<40} {:>10.1} {:>10.1} {:>10.1} {:>22.1}",
            o.label,
            first.1 as f64 / 1024.0,
            peak as f64 / 1024.0,
            last.1 as f64 / 1024.0,
            slope_kib_per_min(half)
        );
    }
    drop(observers);
    client.stop(Duration::from_secs(5));
    engine.stop(Duration::from_secs(5));
    Ok(())
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
    }
}
