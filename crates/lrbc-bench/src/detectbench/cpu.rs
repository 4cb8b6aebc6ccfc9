//! The `cpu` measure: `events`, `watch --no-events` and the numpy anchor attached
//! together to one run, in rounds, per preset.

use std::path::Path;
use std::process::Command;

use super::DetectBenchArgs;
use super::events::EventsProcess;
use crate::pollerbench::{python_path, run_to_end};
use crate::rounds::{cpu_of_rounds, in_rounds, run_together};
use crate::shared::BenchError;
use lrbc_inspector::cli::watch::WatchLine;
use lrbc_sim::children::inspector_exe;
use lrbc_sim::engine::Preset;

/// An observer's share of the CPU rounds.
#[derive(Clone, Debug, Default)]
struct Turns {
    /// Share of one core, each round.
    cpu: Vec<f64>,
    seen: u64,
    /// Frames checked whole (`None`: it checks nothing).
    checked: Option<u64>,
    /// `events`: frames whose rewards and flags it checked.
    flags_checked: Option<u64>,
    /// `events`: events printed.
    events: u64,
}

impl Turns {
    fn add(&mut self, cpu: f64, seen: u64, checked: Option<u64>) {
        self.cpu.push(cpu);
        self.seen += seen;
        if let Some(c) = checked {
            *self.checked.get_or_insert(0) += c;
        }
    }
}

fn watch_command(name: &str, secs: f64) -> Result<Command, BenchError> {
    let mut c = Command::new(inspector_exe()?);
    c.args([
        "watch",
        "--shm",
        name,
        "--no-events",
        "--count",
        "1",
        "--json",
    ])
    .args(["--interval", &secs.to_string()]);
    Ok(c)
}

fn anchor_command(anchor: &Path, name: &str, secs: f64, nap_us: Option<u32>) -> Command {
    let mut c = Command::new("python3");
    c.arg(anchor)
        .args([name, &secs.to_string()])
        .env("PYTHONPATH", python_path());
    if let Some(nap) = nap_us {
        c.args(["--nap", &nap.to_string()]);
    }
    c
}

/// The numpy anchor's figures: share of a core (its own, over its loop), seen, checked.
fn anchor_figures(v: &serde_json::Value) -> (f64, u64, u64) {
    (
        v["cpu_share_of_core"].as_f64().unwrap_or(0.0),
        v["frames_seen"].as_u64().unwrap_or(0),
        v["frames_checked"].as_u64().unwrap_or(0),
    )
}

/// One round: `events`, `watch --no-events` and the anchor with its nap, attached
/// together to the run `name` for `secs`.
fn round(name: &str, secs: f64, anchor: &Path, turns: &mut [Turns; 4]) -> Result<(), BenchError> {
    let ([watch, numpy], events) = run_together(
        [
            (
                "bench-watch",
                watch_command(name, secs),
                "watch --no-events",
            ),
            (
                "bench-anchor",
                Ok(anchor_command(anchor, name, secs, Some(100))),
                "the numpy anchor",
            ),
        ],
        || EventsProcess::start(name, Some(secs)).and_then(EventsProcess::finish),
    );
    let (events, (watch, watch_usage), (numpy, _)) = (events?, watch?, numpy?);
    turns[0].add(events.cpu_secs / secs, events.seen, Some(events.checked));
    *turns[0].flags_checked.get_or_insert(0) += events.flags_checked;
    turns[0].events += events.events.len() as u64;
    turns[1].add(
        watch_usage.cpu_secs / secs,
        WatchLine::from_json(&watch)?.frames.seen,
        None,
    );
    let (cpu, seen, checked) = anchor_figures(&numpy);
    turns[2].add(cpu, seen, Some(checked));
    Ok(())
}

pub(super) fn cpu_table(args: &DetectBenchArgs, anchor: &Path) -> Result<(), BenchError> {
    println!(
        "CPU: `events`, `watch --no-events` and the numpy anchor (--nap 100) attached together \
         to one engine and client at {} Hz, {} rounds of {} s per preset{}",
        args.run.hz,
        args.run.rounds,
        args.run.secs,
        if args.spin {
            "; the anchor without nap in a turn of its own after each round"
        } else {
            ""
        }
    );
    println!(
        "  {:<10} {:<28} {:>8}  {:<30} {:>9} {:>9} {:>8} {:>14} {:>7}",
        "preset",
        "observer",
        "CPU",
        "per round",
        "seen",
        "checked",
        "share",
        "rewards/flags",
        "events"
    );
    for preset in [Preset::Train4096, Preset::Cams64] {
        let mut turns: [Turns; 4] = Default::default();
        in_rounds(
            preset,
            args.run.hz,
            &format!("detect-cpu-{}", preset.as_str()),
            args.run.rounds,
            |name| {
                round(name, args.run.secs, anchor, &mut turns)?;
                if args.spin {
                    let (v, _) = run_to_end(
                        anchor_command(anchor, name, args.run.secs, None),
                        "the numpy anchor",
                    )?;
                    let (cpu, seen, checked) = anchor_figures(&v);
                    turns[3].add(cpu, seen, Some(checked));
                }
                Ok(())
            },
        )?;
        let labels = [
            "events (the detector)",
            "watch --no-events",
            "numpy anchor, --nap 100",
            "numpy anchor, no nap (alone)",
        ];
        for (t, label) in turns.iter().zip(labels) {
            if t.cpu.is_empty() {
                continue;
            }
            let (mean, per_round) = cpu_of_rounds(&t.cpu);
            let (checked, share) = match t.checked {
                Some(c) => (
                    c.to_string(),
                    format!("{:.2} %", 100.0 * c as f64 / t.seen.max(1) as f64),
                ),
                None => ("–".into(), "–".into()),
            };
            println!(
                "  {:<10} {label:<28} {:>6.1} %  {:<30} {:>9} {checked:>9} {share:>8} {:>14} {:>7}",
                preset.as_str(),
                100.0 * mean,
                per_round,
                t.seen,
                t.flags_checked
                    .map_or_else(|| "–".into(), |f| f.to_string()),
                if label.starts_with("events") {
                    t.events.to_string()
                } else {
                    "–".into()
                },
            );
        }
    }
    println!(
        "  (CPU: share of one core, the mean of the rounds; events and watch: the whole \
         process over its run, its start included; the anchor: its own figure over its loop. \
         checked: frames whose every value was checked, of those seen)"
    );
    Ok(())
}
