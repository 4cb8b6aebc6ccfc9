//! `lrbc-bench detect`: what the detector (`events`) costs and what it finds, against an
//! engine and a client in separate processes. Its CPU beside `watch --no-events` (the same
//! follower without the detector) and the numpy anchor a user would write
//! (`nan_checker.py`), the three attached together over the same seconds of one run; the
//! engine's rate (at 1 kHz and unpaced) with `events` switched on and off (`observers`);
//! how many planted one-frame NaNs it finds at their frame, env, channel and index, on a
//! quiet machine or with both cores loaded; and the events it prints over a clean run.
//!
//! Each measure is a module: `cpu`, `ratio`, `plants` (the `rate` measure) and `clean`
//! (the `false` measure); `events` runs the detector they attach.

mod clean;
mod cpu;
mod events;
mod plants;
mod ratio;

use std::path::PathBuf;

use crate::pollerbench::check_numpy;
use crate::rounds::RunArgs;
use crate::shared::BenchError;
use crate::shared::seconds_f64;

/// Arguments of `lrbc-bench detect`.
#[derive(Debug, Clone, clap::Args)]
pub struct DetectBenchArgs {
    /// The run measured: the CPU rounds, the client's pace (in the CPU rounds, the runs
    /// with planted NaNs and the clean run) and the engine's rate with `events` switched
    /// off and on (at `--hz`, and unpaced).
    #[command(flatten)]
    pub run: RunArgs,
    /// How long `events` is switched on or off at a time for the engine's rate.
    #[arg(long, value_name = "SECS", default_value = "0.1", value_parser = seconds_f64)]
    pub window: f64,
    /// One-frame NaNs planted for the detection rate (train4096, ten to an engine run).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub nans: u32,
    /// Seed of where and when the NaNs are planted: the same seed plants the same NaNs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The detection rate also with both cores loaded by two busy-loop processes, as on a
    /// training node.
    #[arg(long)]
    pub busy: bool,
    /// Seconds of `events` over a clean run (train4096, no plants); the client runs on
    /// after it ends.
    #[arg(long, value_name = "SECS", default_value = "600", value_parser = seconds_f64)]
    pub clean_secs: f64,
    /// Also the numpy anchor without its nap (it spins a core), in a turn of its own
    /// after each round.
    #[arg(long)]
    pub spin: bool,
    /// The numpy anchor (default: the checkout's benches/nan_checker.py).
    #[arg(long, value_name = "FILE")]
    pub anchor: Option<PathBuf>,
    /// Only these measures (comma-separated): cpu, ratio (the engine's rate), rate (the
    /// planted NaNs found), false (events over a clean run).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<DetectPart>,
}

/// A measure of `lrbc-bench detect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DetectPart {
    /// CPU of `events`, `watch --no-events` and the numpy anchor.
    Cpu,
    /// The engine's rate with `events` on ÷ off, at `--hz` and unpaced.
    Ratio,
    /// Planted one-frame NaNs found.
    Rate,
    /// Events printed over a clean run.
    #[value(name = "false")]
    Clean,
}

pub fn run(args: &DetectBenchArgs) -> Result<(), BenchError> {
    if !cfg!(target_os = "linux") {
        return Err(BenchError::Other(
            "lrbc-bench detect runs on Linux: the numpy anchor maps the segment from /dev/shm"
                .into(),
        ));
    }
    let wants = |p: DetectPart| args.only.is_empty() || args.only.contains(&p);
    println!(
        "lrbc-bench detect: what the detector (`events`) costs and finds; engine, client and \
         observers in separate processes"
    );
    if wants(DetectPart::Cpu) {
        let anchor = crate::pollerbench::nan_checker_script(args.anchor.as_deref())?;
        check_numpy().map_err(|_| {
            BenchError::Other(
                "lrbc-bench detect needs python3 with numpy for the anchor (the test command, \
                 bash .ci/test, installs it under target/pydeps)"
                    .into(),
            )
        })?;
        cpu::cpu_table(args, &anchor)?;
    }
    if wants(DetectPart::Ratio) {
        ratio::ratio_table(args)?;
    }
    if wants(DetectPart::Rate) {
        plants::rate_table(args)?;
    }
    if wants(DetectPart::Clean) {
        clean::clean_table(args)?;
    }
    Ok(())
}
