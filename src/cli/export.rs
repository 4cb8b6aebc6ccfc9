//! `export`: a recording into Parquet or CSV for analysis; `bench export`, its rate on a
//! large synthetic recording.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;

use super::CliError;
use super::record::{EnvList, parse_envs};
use lrbc_live::text::plural;
use lrbc_recording::export::{self, ExportError, ExportFormat, ExportOptions, ExportSummary};

#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("out").required(true).args(["parquet", "csv", "episodes", "lerobot"])))]
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
    /// Write one row per episode instead (every env's: env, first and last frame and
    /// time, length, return, smallest and largest reward, ending, complete), as Parquet
    /// (`.parquet`) or CSV (`.csv`).
    #[arg(long, value_name = "OUT.parquet|OUT.csv", conflicts_with_all = ["envs", "from", "to"])]
    pub episodes: Option<PathBuf>,
    /// Write a LeRobot dataset (v3.0) into this folder instead (it must not exist, or be
    /// empty): one episode per finished, complete episode of each env the file holds the
    /// rows of.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["envs", "from", "to"])]
    pub lerobot: Option<PathBuf>,
    /// The LeRobot episodes' task (default: the recording's file name).
    #[arg(long, value_name = "TEXT", requires = "lerobot")]
    pub task: Option<String>,
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

/// Bytes as megabytes (10^6).
pub fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// The error of an export of `input` to `out`, as one line naming the file at fault.
pub fn one_line(e: &ExportError, input: &Path, out: &Path) -> CliError {
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
fn truncated_line(s: &ExportSummary) -> String {
    format!(
        "export: the recording stops short (its recorder did not finish): exported its {} complete chunks, {} frames",
        s.end.chunks, s.frames_read
    )
}

/// `--episodes OUT`: the format from OUT's extension.
pub(super) fn episodes_format(out: &Path) -> Result<ExportFormat, CliError> {
    match out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("parquet") => Ok(ExportFormat::Parquet),
        Some("csv") => Ok(ExportFormat::Csv),
        _ => Err(CliError::Usage(format!(
            "--episodes {}: name a .parquet or a .csv file",
            out.display()
        ))),
    }
}

fn run_episodes(a: &ExportArgs, out: &Path) -> Result<(), CliError> {
    let format = episodes_format(out)?;
    let same = |x: &Path, y: &Path| matches!((std::fs::canonicalize(x), std::fs::canonicalize(y)), (Ok(x), Ok(y)) if x == y);
    if same(&a.file, out) {
        return Err(CliError::Other(format!(
            "{}: it is the recording itself",
            out.display()
        )));
    }
    let total = std::fs::metadata(&a.file).map_or(0, |m| m.len());
    let started = Instant::now();
    let mut next_line = started + Duration::from_secs(1);
    let s = export::export_episodes_file(&a.file, out, format, |p| {
        let now = Instant::now();
        if now >= next_line {
            next_line = now + Duration::from_secs(1);
            eprintln!(
                "export: {:.0} of {:.0} MB ({:.0} %), {} episodes",
                mb(p.bytes_read),
                mb(total),
                100.0 * p.bytes_read as f64 / total.max(1) as f64,
                p.rows
            );
        }
    })
    .map_err(|e| one_line(&e, &a.file, out))?;
    if s.end.truncated {
        eprintln!(
            "export: the recording stops short (its recorder did not finish): its {} complete chunks, {} frames",
            s.end.chunks, s.frames_read
        );
    }
    eprintln!(
        "export: {} episodes ({} complete, {} going on at the end) of {} frames to {} in {:.1} s",
        s.episodes,
        s.complete,
        s.running,
        s.frames_read,
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn run_lerobot(a: &ExportArgs, dir: &Path) -> Result<(), CliError> {
    if a.task.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(CliError::Usage("--task: give a text".into()));
    }
    let total = std::fs::metadata(&a.file).map_or(0, |m| m.len());
    let started = Instant::now();
    let mut next_line = started + Duration::from_secs(1);
    let options = export::LeRobotOptions {
        task: a.task.clone(),
    };
    let s = export::export_lerobot(&a.file, dir, &options, |p| {
        let now = Instant::now();
        if now >= next_line {
            next_line = now + Duration::from_secs(1);
            eprintln!(
                "export: {:.0} of {:.0} MB read ({} rows written)",
                mb(p.bytes_read),
                mb(total),
                p.rows
            );
        }
    })
    .map_err(|e| one_line(&e, &a.file, dir))?;
    if s.end.truncated {
        eprintln!(
            "export: the recording stops short (its recorder did not finish): its {} complete chunks",
            s.end.chunks
        );
    }
    let envs = if s.envs.len() > 8 {
        format!("{} envs", s.envs.len())
    } else {
        format!(
            "env{} {}",
            plural(s.envs.len()),
            s.envs
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    eprintln!(
        "export: {} episodes, {} frames of {envs} at {} fps, task {:?}, to {} in {:.1} s",
        s.episodes,
        s.frames,
        s.fps,
        s.task,
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    match (s.image, &s.image_note) {
        (Some((h, w)), _) => eprintln!(
            "export: camera images ({w}×{h}, PNG) as observation.images.camera; {} episodes begun before their env's first image left out",
            s.without_image
        ),
        (None, Some(note)) => eprintln!("export: camera images not put in: {note}"),
        (None, None) => {}
    }
    eprintln!(
        "export: left out: {} going on at the end, {} incomplete, {} with a non-finite value, {} of envs whose rows a frame lacks",
        s.running, s.incomplete, s.nonfinite, s.without_rows
    );
    Ok(())
}

pub fn run(a: &ExportArgs) -> Result<(), CliError> {
    if let Some(out) = &a.episodes {
        return run_episodes(a, out);
    }
    if let Some(dir) = &a.lerobot {
        return run_lerobot(a, dir);
    }
    let (format, out) = match (&a.parquet, &a.csv) {
        (Some(p), None) => (ExportFormat::Parquet, p),
        (None, Some(c)) => (ExportFormat::Csv, c),
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
    let options = ExportOptions {
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
