//! `lrbc-bench record`: what recording costs the engine, and what share of the frames a
//! recording keeps, against an engine and a client in separate processes (figures in
//! docs/benchmarks.md).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::fixtures::start;
use crate::observers::{Observer, WINDOW, observer_cost, print_cost, record_file};
use crate::shared::BenchError;
use lrbc_recording::format::Counts;
use lrbc_sim::children::ChildProcess;
use lrbc_sim::engine::Preset;

/// The `lrbc.counts` metadata of a finished recording.
fn counts(path: &Path) -> Result<Counts, BenchError> {
    let fail = |what: String| BenchError::Other(format!("{}: {what}", path.display()));
    lrbc_recording::replay::Recording::open(path)
        .map_err(|e| fail(e.to_string()))?
        .counts()
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| fail("no lrbc.counts".into()))
}

/// Records `run`'s segment for `secs` with `extra` options; returns the counts and the
/// file's size.
pub(crate) fn record_for(
    name: &str,
    secs: f64,
    extra: &[&str],
) -> Result<(Counts, u64), BenchError> {
    let path = record_file(name);
    let mut args: Vec<String> = vec![
        "record".into(),
        "--shm".into(),
        name.into(),
        "-o".into(),
        path.display().to_string(),
        "--duration".into(),
        secs.to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut rec = ChildProcess::spawn("recorder", &args, Stdio::null())?;
    let code = loop {
        if let Some(code) = rec.exited() {
            break code;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let result = if code == 0 {
        counts(&path).map(|c| {
            let size = std::fs::metadata(&path).map_or(0, |m| m.len());
            (c, size)
        })
    } else {
        Err(BenchError::Other(format!("record exited with {code}")))
    };
    // Cleanup: there may be nothing to remove.
    let _ = std::fs::remove_file(&path);
    result
}

/// One line of the share table.
fn share_line(label: &str, secs: f64, c: &Counts, size: u64) {
    let published = c.frames_published();
    let recorded = c.frames_recorded;
    let share = 100.0 * c.share_recorded().unwrap_or(0.0);
    println!(
        "  {label:<48} {:>9.0} {recorded:>10} {published:>10} {:>7} {:>6} {:>8} {:>7} {share:>8.2}% {:>8.1}",
        published as f64 / secs,
        c.frames_missed,
        c.frames_torn,
        c.frames_skipped,
        c.images,
        size as f64 / 1e6 / secs,
    );
}

pub fn run(secs: f64, rate_secs: f64) -> Result<(), BenchError> {
    println!("lrbc-bench record: engine, client and recorder in separate processes");
    println!(
        "  {:<48} {:>9} {:>10} {:>10} {:>7} {:>6} {:>8} {:>7} {:>9} {:>8}",
        "share of frames recorded",
        "frames/s",
        "recorded",
        "published",
        "missed",
        "torn",
        "skipped",
        "images",
        "share",
        "MB/s"
    );
    {
        // Unpaced: the client steps as fast as the engine answers.
        let run = start(
            Preset::Train4096,
            (None, "random"),
            Some(1_000_000_000),
            "share",
        )?;
        let (c, size) = record_for(&run.name, secs, &["--envs", "0-7"])?;
        share_line("train4096 unpaced, --envs 0-7", secs, &c, size);
        let (c, size) = record_for(&run.name, secs, &["--envs", "0-7", "--busy-budget", "0"])?;
        share_line(
            "train4096 unpaced, --envs 0-7 --busy-budget 0",
            secs,
            &c,
            size,
        );
    }
    {
        let run = start(Preset::Cams64, (Some(1000.0), "random"), None, "cams")?;
        let (c, size) = record_for(&run.name, secs, &["--images"])?;
        share_line("cams64 at 1 kHz, --images", secs, &c, size);
    }
    compression(secs)?;
    println!(
        "engine's unpaced lock-step rate, train4096, the recorder switched off and on in \
         windows of 0.1 s, blocks of off-on-on-off, {rate_secs:.0} s of one run:"
    );
    let c = observer_cost(Observer::Record, None, rate_secs, WINDOW, "rate")?;
    print_cost(Observer::Record, &c);
    Ok(())
}

/// The compressions compared: label and `record`'s options.
const COMPRESSIONS: [(&str, &[&str]); 4] = [
    ("none", &["--compression", "none"]),
    ("zstd level 1 (default)", &[]),
    ("zstd level 3", &["--compression-level", "3"]),
    ("lz4", &["--compression", "lz4"]),
];

/// File size and MB/s written for each compression, train4096 and cams64 with images,
/// one recording after the other of the same run.
fn compression(secs: f64) -> Result<(), BenchError> {
    println!(
        "  {:<48} {:<24} {:>9} {:>7} {:>9} {:>9} {:>8}",
        "compression (recordings of the same run in turn)",
        "chunks",
        "share",
        "images",
        "file MB",
        "MB/s",
        "ratio"
    );
    let workloads: [(Preset, f64, &str, &[&str]); 3] = [
        (
            Preset::Train4096,
            1000.0,
            "train4096 at 1 kHz, --envs 0-7",
            &["--envs", "0-7"],
        ),
        (
            Preset::Cams64,
            1000.0,
            "cams64 at 1 kHz, --images --all-envs",
            &["--images", "--all-envs"],
        ),
        (
            Preset::Cams64,
            200.0,
            "cams64 at 200 Hz, --images --all-envs",
            &["--images", "--all-envs"],
        ),
    ];
    for (preset, hz, label, options) in workloads {
        let run = start(preset, (Some(hz), "random"), None, "compression")?;
        let mut raw = None;
        for (name, extra) in COMPRESSIONS {
            let (c, size) = record_for(&run.name, secs, &[options, extra].concat())?;
            let share = 100.0 * c.share_recorded().unwrap_or(0.0);
            // Bytes a recorded frame, so that recordings of a few more or fewer frames
            // compare.
            let per_frame = size as f64 / c.frames_recorded.max(1) as f64;
            let raw_per_frame = *raw.get_or_insert(per_frame);
            println!(
                "  {label:<48} {name:<24} {share:>8.2}% {:>7} {:>9.1} {:>9.1} {:>8.2}",
                c.images,
                size as f64 / 1e6,
                size as f64 / 1e6 / secs,
                raw_per_frame / per_frame,
            );
        }
    }
    println!("  (ratio: bytes a recorded frame without compression ÷ with it)");
    Ok(())
}
