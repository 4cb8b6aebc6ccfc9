//! `open`: a recording of `record` in the window, or its summary, its loop's rhythm and
//! its events with `--info`. A file that is not a recording is one line and exit 1, before any window.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use lrbc_recording::replay::Recording;

#[derive(Debug, Args)]
pub struct OpenArgs {
    /// The MCAP file written by `lrbc-inspector record`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print what the recording holds, its events included, instead of opening the
    /// window.
    #[arg(long)]
    pub info: bool,
    /// Compare the recording with this one, its baseline: the Divergence panel lists
    /// where each env departs from it (as `compare BASELINE FILE` does).
    #[arg(long, value_name = "BASELINE.mcap", conflicts_with = "info")]
    pub baseline: Option<PathBuf>,
}

pub fn run(args: &OpenArgs, window: super::WindowArgs) -> Result<(), CliError> {
    let mut rec = Recording::open(&args.file)?;
    if let Some(b) = &args.baseline {
        // A baseline that is no recording is one line before any window.
        Recording::open(b).map_err(|e| CliError::Other(format!("--baseline: {e}")))?;
    }
    if !args.info {
        drop(rec);
        return crate::ui::run_window_on_recording(
            args.file.clone(),
            args.baseline.clone(),
            window.overrides(),
        )
        .map_err(CliError::Other);
    }
    let g = &rec.geometry;
    println!("file: {}", args.file.display());
    println!(
        "segment: {} · {} bytes · {} envs × obs {} × act {}",
        g.layout, g.size_bytes, g.num_envs, g.obs_size, g.act_size
    );
    if let Some(envs) = rec
        .metadata
        .get("lrbc.geometry")
        .and_then(|m| m.get("recorded_envs"))
    {
        println!("recorded envs: {envs}");
    }
    let frames = rec
        .frame_count
        .map_or_else(|| "unknown".to_string(), |n| n.to_string());
    println!("frames: {frames}");
    println!("chunks: {}", rec.chunks.len());
    for (packing, (chunks, records, stored)) in rec.packings() {
        let ratio = if stored > 0 {
            records as f64 / stored as f64
        } else {
            1.0
        };
        println!(
            "compression: {} · {chunks} chunks · {:.1} MB of records in {:.1} MB (ratio {ratio:.2})",
            packing.name(),
            records as f64 / 1e6,
            stored as f64 / 1e6,
        );
    }
    match rec.time_range() {
        Some((t0, t1)) => {
            println!("duration: {:.3} s", t1.saturating_sub(t0) as f64 / 1e9);
            let last = rec.frame_at(t1)?.map(|f| f.frame_seq);
            let mut start = None;
            rec.frames_between(t0, t1, |f| {
                start = Some(f.frame_seq);
                false
            })?;
            if let (Some(a), Some(b)) = (start, last) {
                println!("frame_seq: {a} to {b}");
            }
        }
        None => println!("duration: no message"),
    }
    match rec.unfinished_note() {
        Some(n) => println!("{n}"),
        None => println!("finished"),
    }
    // The events: its recorder's, or found again from its frames for a file without.
    let t0 = rec.time_range().map_or(0, |r| r.0);
    let found = lrbc_recording::replay::recording_events(
        &mut rec,
        &lrbc_live::detect::DetectSettings::default(),
        |_| true,
    )
    .map_err(|e| CliError::Other(format!("{}: {e}", args.file.display())))?;
    println!(
        "{}",
        super::events::summary(&found.totals, found.found_again)
    );
    match &found.rhythm {
        Some(r) => {
            println!("{}", r.line());
            if let Some(step) = r.step_secs {
                println!(
                    "rhythm: a step every {:.2} ms; {} pauses over {:.1} s followed",
                    step * 1e3,
                    r.pauses,
                    r.followed_secs
                );
            }
        }
        None => println!(
            "rhythm: not recorded (a file of an earlier version; `events FILE --find-again` learns it)"
        ),
    }
    let mut printer = super::events::Printer::new(false, t0, Vec::new());
    for e in &found.events {
        printer.print(e);
    }
    Ok(())
}
