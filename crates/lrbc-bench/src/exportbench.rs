//! `lrbc-bench export`: rows/s and MB/s of `export` on a large synthetic recording.

use std::path::PathBuf;
use std::time::Instant;

use crate::shared::BenchError;
use crate::shared::{export_error, mb};
use clap::Args;
use lrbc_recording::export::{self, ExportFormat, ExportOptions, synthetic};
use lrbc_recording::format::Compression;

/// `lrbc-bench export`: the shape of the synthetic recording and where it goes.
#[derive(Debug, Clone, Args)]
pub struct ExportBenchArgs {
    /// Size of the synthetic recording, MiB.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub size_mib: u64,
    /// Envs of the segment.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub envs: u32,
    /// Observation size.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub obs: u32,
    /// Action size.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub act: u32,
    /// Recorded envs (the first N; default: every env).
    #[arg(long)]
    pub recorded: Option<u32>,
    /// Exports measured (the median is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Folder for the recording and the exports (default: the system's temporary folder).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Also measure CSV.
    #[arg(long)]
    pub csv: bool,
    /// How the recording's chunks are compressed: zstd (default), lz4 or none, as
    /// `record --compression` writes them.
    #[arg(long, value_name = "KIND", value_parser = ["zstd", "lz4", "none"])]
    pub compression: Option<String>,
    /// The zstd level, 1 (fastest) to 19 (smallest) [default: 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=19))]
    pub compression_level: Option<u8>,
}

pub fn bench(a: &ExportBenchArgs) -> Result<(), BenchError> {
    let dir = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    let input = dir.join(format!("lrbc-bench-export-{}.mcap", std::process::id()));
    let recorded: Vec<u32> = (0..a.recorded.unwrap_or(a.envs).min(a.envs)).collect();
    // One frame's message, to size the recording.
    let probe = synthetic::Spec {
        recorded,
        compression: Compression::asked(a.compression.as_deref(), a.compression_level)
            .map_err(|e| BenchError::Usage(e.to_string()))?,
        ..synthetic::Spec::of(a.envs, a.obs, a.act, 1)
    };
    let (_, frame_bytes) = synthetic::write(&probe, std::io::Cursor::new(Vec::new()))
        .map_err(|e| BenchError::Other(e.to_string()))?;
    let spec = synthetic::Spec {
        frames: ((a.size_mib << 20) / (frame_bytes as u64 + 40)).max(1),
        ..probe
    };
    eprintln!(
        "lrbc-bench export: writing {} frames of {} envs (obs {}, act {}, {} recorded) to {}",
        spec.frames,
        a.envs,
        a.obs,
        a.act,
        spec.recorded.len(),
        input.display()
    );
    let file = std::fs::File::create(&input)
        .map_err(|e| BenchError::Other(format!("{}: {e}", input.display())))?;
    synthetic::write(&spec, std::io::BufWriter::with_capacity(1 << 20, file))
        .map_err(|e| BenchError::Other(format!("{}: {e}", input.display())))?;
    let in_bytes = std::fs::metadata(&input).map_or(0, |m| m.len());
    let mut formats = vec![(ExportFormat::Parquet, "parquet")];
    if a.csv {
        formats.push((ExportFormat::Csv, "csv"));
    }
    println!("| format | input MB | rows | output MB | seconds | rows/s | MB/s |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut failure = None;
    for (format, ext) in formats {
        let out = dir.join(format!("lrbc-bench-export-{}.{ext}", std::process::id()));
        let mut times = Vec::new();
        let mut rows = 0;
        for _ in 0..a.rounds {
            let started = Instant::now();
            match export::export_file(&input, &out, format, &ExportOptions::default(), |_| {}) {
                Ok(s) => rows = s.rows,
                Err(e) => {
                    failure = Some(export_error(&e, &input, &out));
                    break;
                }
            }
            times.push(started.elapsed().as_secs_f64());
        }
        let out_bytes = std::fs::metadata(&out).map_or(0, |m| m.len());
        // Cleanup: there may be nothing to remove.
        let _ = std::fs::remove_file(&out);
        if failure.is_some() {
            break;
        }
        let secs = lrbc_live::stats::median(times).unwrap_or(0.0).max(1e-9);
        println!(
            "| {ext} | {:.0} | {rows} | {:.0} | {secs:.2} | {:.0} | {:.0} |",
            mb(in_bytes),
            mb(out_bytes),
            rows as f64 / secs,
            mb(in_bytes) / secs
        );
    }
    // Cleanup: there may be nothing to remove.
    let _ = std::fs::remove_file(&input);
    failure.map_or(Ok(()), Err)
}
