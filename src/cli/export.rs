//! `export`: a recording into Parquet or CSV for analysis; `bench export`, its rate on a
//! large synthetic recording.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;

use super::CliError;
use super::record::{EnvList, parse_envs};
use lrbc_recording::export::{self, ExportError, Format, Options, Summary, synthetic};

#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("out").required(true).args(["parquet", "csv"])))]
pub struct ExportArgs {
    /// The recording (an MCAP file written by `record`).
    #[arg(value_name = "FILE.mcap")]
    pub file: PathBuf,
    /// Write a Parquet file (replaced if it exists).
    #[arg(long, value_name = "OUT")]
    pub parquet: Option<PathBuf>,
    /// Write a CSV file instead (lists as ;-joined values).
    #[arg(long, value_name = "OUT")]
    pub csv: Option<PathBuf>,
    /// Only these envs, e.g. 0,3,8-11 (default: every env).
    #[arg(long, value_name = "LIST", value_parser = parse_envs)]
    pub envs: Option<EnvList>,
    /// Only frames from this many seconds after the first frame (units ms, s, min, h allowed).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = super::args::seconds(0.0))]
    pub from: Option<Duration>,
    /// Only frames up to this many seconds after the first frame.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = super::args::seconds(0.0))]
    pub to: Option<Duration>,
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// The error of an export of `input` to `out`, as one line naming the file at fault.
fn one_line(e: &ExportError, input: &Path, out: &Path) -> CliError {
    let file = if matches!(e, ExportError::Output(_)) {
        out
    } else {
        input
    };
    match e {
        ExportError::NoSuchEnv { .. } => CliError::Other(e.to_string()),
        _ => CliError::Other(format!("{}: {e}", file.display())),
    }
}

/// The line said when a recording stops short.
fn truncated_line(s: &Summary) -> String {
    format!(
        "export: the recording stops short (its recorder did not finish): exported its {} complete chunks, {} frames",
        s.end.chunks, s.frames_read
    )
}

pub fn run(a: &ExportArgs) -> Result<(), CliError> {
    let (format, out) = match (&a.parquet, &a.csv) {
        (Some(p), None) => (Format::Parquet, p),
        (None, Some(c)) => (Format::Csv, c),
        _ => {
            return Err(CliError::Usage(
                "give one of --parquet OUT and --csv OUT".into(),
            ));
        }
    };
    if let (Some(from), Some(to)) = (a.from, a.to)
        && from > to
    {
        return Err(CliError::Usage(format!(
            "--from ({} s) is after --to ({} s)",
            from.as_secs_f64(),
            to.as_secs_f64()
        )));
    }
    let options = Options {
        envs: a.envs.clone().map(|l| l.0),
        from_s: a.from.map(|d| d.as_secs_f64()),
        to_s: a.to.map(|d| d.as_secs_f64()),
    };
    let total = std::fs::metadata(&a.file).map_or(0, |m| m.len());
    let started = Instant::now();
    let mut next_line = started + Duration::from_secs(1);
    let summary = export::export_file(&a.file, out, format, &options, |p| {
        let now = Instant::now();
        if now >= next_line {
            next_line = now + Duration::from_secs(1);
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            eprintln!(
                "export: {:.0} of {:.0} MB ({:.0} %), {} rows, {:.0} rows/s",
                mb(p.bytes_read),
                mb(total),
                100.0 * p.bytes_read as f64 / total.max(1) as f64,
                p.rows,
                p.rows as f64 / secs
            );
        }
    })
    .map_err(|e| one_line(&e, &a.file, out))?;
    if summary.end.truncated {
        eprintln!("{}", truncated_line(&summary));
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "export: {} rows ({} of {} frames) to {} in {secs:.1} s",
        summary.rows,
        summary.frames_exported,
        summary.frames_read,
        out.display()
    );
    Ok(())
}

/// `bench export`: the shape of the synthetic recording and where it goes.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
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
    #[command(flatten)]
    pub compression: super::record::CompressionArgs,
}

pub fn bench(a: &BenchArgs) -> Result<(), CliError> {
    let dir = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    let input = dir.join(format!("lrbc-bench-export-{}.mcap", std::process::id()));
    let recorded: Vec<u32> = (0..a.recorded.unwrap_or(a.envs).min(a.envs)).collect();
    // One frame's message, to size the recording.
    let probe = synthetic::Spec {
        num_envs: a.envs,
        obs_size: a.obs,
        act_size: a.act,
        recorded,
        frames: 1,
        frame_interval_ns: 1_000_000,
        chunk_size: None,
        nan_at: None,
        compression: a.compression.compression()?,
    };
    let (_, frame_bytes) = synthetic::write(&probe, std::io::Cursor::new(Vec::new()))
        .map_err(|e| CliError::Other(e.to_string()))?;
    let spec = synthetic::Spec {
        frames: ((a.size_mib << 20) / (frame_bytes as u64 + 40)).max(1),
        ..probe
    };
    eprintln!(
        "bench export: writing {} frames of {} envs (obs {}, act {}, {} recorded) to {}",
        spec.frames,
        a.envs,
        a.obs,
        a.act,
        spec.recorded.len(),
        input.display()
    );
    let file = std::fs::File::create(&input)
        .map_err(|e| CliError::Other(format!("{}: {e}", input.display())))?;
    synthetic::write(&spec, std::io::BufWriter::with_capacity(1 << 20, file))
        .map_err(|e| CliError::Other(format!("{}: {e}", input.display())))?;
    let in_bytes = std::fs::metadata(&input).map_or(0, |m| m.len());
    let mut formats = vec![(Format::Parquet, "parquet")];
    if a.csv {
        formats.push((Format::Csv, "csv"));
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
            match export::export_file(&input, &out, format, &Options::default(), |_| {}) {
                Ok(s) => rows = s.rows,
                Err(e) => {
                    failure = Some(one_line(&e, &input, &out));
                    break;
                }
            }
            times.push(started.elapsed().as_secs_f64());
        }
        let out_bytes = std::fs::metadata(&out).map_or(0, |m| m.len());
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
    let _ = std::fs::remove_file(&input);
    failure.map_or(Ok(()), Err)
}
