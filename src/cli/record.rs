//! `record`: a flight recording of a segment into an MCAP file.

use std::io::BufWriter;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::traffic::EngineCheck;
use super::{CliError, stop_flag};
use lrbc::attach::{Target, attach};
use lrbc::layout::LayoutChoice;
use lrbc_recording::format::Compression;
use lrbc_recording::recorder::{Counts, Recorder};

/// Envs recorded when none are chosen: the first four.
const DEFAULT_ENVS: u32 = 4;

#[derive(Debug)]
pub struct RecordOptions {
    pub out: PathBuf,
    /// `None`: every env.
    pub envs: Option<EnvList>,
    pub all_envs: bool,
    pub duration: Option<Duration>,
    pub max_bytes: Option<u64>,
    /// Camera images too (image region and streamed frames).
    pub images: bool,
    /// Percent of one core the recorder keeps to while the machine has no spare CPU;
    /// None: every frame it can.
    pub busy_budget: Option<f32>,
    /// How the file's chunks are compressed.
    pub compression: Compression,
    /// What the detector looks for (its events go into the file).
    pub detect: lrbc_live::detect::DetectSettings,
}

/// `--compression` and `--compression-level` of `record` and `serve --record`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompressionArgs {
    /// How the file's chunks are compressed [default: zstd, as other MCAP writers'].
    #[arg(long, value_name = "KIND", value_enum)]
    pub compression: Option<CompressionArg>,
    /// The zstd level, 1 (fastest) to 19 (smallest) [default: 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=19))]
    pub compression_level: Option<u8>,
}

/// `--compression`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CompressionArg {
    /// zstd chunks: about 4 to 12 times smaller, the default of MCAP writers.
    Zstd,
    /// lz4 chunks: faster, less small.
    Lz4,
    /// Chunks as they are.
    None,
}

impl CompressionArgs {
    /// Whether either option was given.
    pub fn given(&self) -> bool {
        self.compression.is_some() || self.compression_level.is_some()
    }

    /// The compression asked for; a level given for another kind than zstd is a bad
    /// argument.
    pub fn compression(&self) -> Result<Compression, CliError> {
        let kind = self.compression.map(|k| match k {
            CompressionArg::Zstd => "zstd",
            CompressionArg::Lz4 => "lz4",
            CompressionArg::None => "none",
        });
        Compression::asked(kind, self.compression_level).map_err(|e| CliError::Usage(e.to_string()))
    }
}

/// Env indices, sorted, without repeats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvList(pub Vec<u32>);

/// Parses an env list: indices and ranges, e.g. `0,3,8-11`.
pub fn parse_envs(text: &str) -> Result<EnvList, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        let n = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("{s:?} is not an env index (expected e.g. 0,3,8-11)"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (n(a)?, n(b)?);
                if a > b {
                    return Err(format!("the range {part} is empty"));
                }
                if u64::from(b - a) >= 1 << 20 {
                    return Err(format!("the range {part} is too long"));
                }
                out.extend(a..=b);
            }
            None => out.push(n(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(EnvList(out))
}

/// Parses a size in MiB (at least 1).
pub fn parse_mib(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n @ 1..=1_048_576) => Ok(n << 20),
        _ => Err(format!(
            "{text:?} is not a whole number of MiB from 1 to 1048576"
        )),
    }
}

/// How often the rings are read while no frame comes...
const RING_EVERY: Duration = Duration::from_millis(2);
/// ...and while the recorder yields to a busy machine, as the window's flight recorder
/// does (a 512 KiB ring is then lapped only by more than 25 MB/s): each wakeup is paid
/// for by the run.
const BUSY_RING_EVERY: Duration = Duration::from_millis(20);

pub fn run(target: &Target, choice: LayoutChoice, o: RecordOptions) -> Result<(), CliError> {
    let stop = stop_flag();
    // Naps of a hundred microseconds must not turn into two.
    lrbc_platform::set_timer_slack_ns(1_000);
    let a = attach(target, choice)?;
    let envs = if o.all_envs {
        (0..a.geometry.num_envs).collect()
    } else {
        o.envs
            .clone()
            .map(|l| l.0)
            .unwrap_or_else(|| (0..a.geometry.num_envs.min(DEFAULT_ENVS)).collect())
    };
    let file = std::fs::File::create(&o.out)
        .map_err(|e| CliError::Other(format!("{}: {e}", o.out.display())))?;
    let writing = |e: lrbc_recording::recorder::RecordError| {
        CliError::Other(format!("writing {}: {}", o.out.display(), e.cause()))
    };
    let mut capture = lrbc_recording::recorder::Capture::new(a, envs).map_err(writing)?;
    // An observer: this thread (encoding) runs in the time the engine and trainer leave
    // over. The frame follower, started above, keeps its own priority: a follower niced
    // below them would be woken late and lose frames.
    lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Background);
    if o.images {
        capture = capture.with_images();
    }
    capture.set_busy_budget(o.busy_budget);
    capture
        .detect_with(o.detect.clone())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let mut rec = Recorder::with_compression(capture, BufWriter::new(file), o.compression)
        .map_err(writing)?;
    let started = Instant::now();
    let deadline = o.duration.map(|d| super::deadline_after(started, d));
    let mut engine = EngineCheck::new();
    let mut processes = lrbc::procinfo::Processes::new();
    let mut server_pid = 0;
    let mut next_check = started;
    let mut next_line = started + Duration::from_secs(1);
    // A chunk ends each second: a killed recorder leaves a file that reads up to there.
    let mut next_chunk = started + Duration::from_secs(1);
    let mut why = String::from("stopped");
    let mut failure = None;
    loop {
        match rec.poll() {
            Ok(true) => {}
            // Nothing new: frames wake this thread when the follower delivers them (not
            // while it yields); the rings are read at least every RING_EVERY.
            Ok(false) => rec.wait(if rec.yielding() {
                BUSY_RING_EVERY
            } else {
                RING_EVERY
            }),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        if Instant::now() >= next_chunk {
            next_chunk += Duration::from_secs(1);
            if let Err(e) = rec.end_chunk() {
                failure = Some(e);
                break;
            }
        }
        // Relaxed: a flag with no data behind it.
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            why = "duration reached".into();
            break;
        }
        if o.max_bytes.is_some_and(|m| rec.bytes_written() >= m) {
            why = "size limit reached".into();
            break;
        }
        if let Some(pid) = engine.released_after_death(rec.attached()) {
            why = format!("the engine (pid {pid}) is gone");
            break;
        }
        if Instant::now() >= next_check {
            next_check += Duration::from_secs(1);
            let a = rec.attached();
            let pid = a
                .segment
                .load_u32(a.geometry.counters.server_pid)
                .unwrap_or(0);
            if pid != 0 {
                server_pid = pid;
            }
            // A stopped engine clears its pid; a killed one leaves it behind.
            if server_pid != 0 && (pid == 0 || !processes.is_alive(server_pid)) {
                why = format!("the engine (pid {server_pid}) is gone");
                break;
            }
        }
        if Instant::now() >= next_line {
            next_line += Duration::from_secs(1);
            let line = progress(&rec.counts(), rec.bytes_written(), rec.yielding(), started);
            eprintln!("record: {line}");
        }
    }
    if let Some(e) = failure {
        // The output failed: what reached the file reads up to its last whole chunk.
        drop(rec);
        return Err(writing(e));
    }
    let yielding = rec.yielding();
    // The frames delivered and not yet written, and the buffered tail, are written here,
    // where an error can still be reported; the last line counts them.
    let (counts, out) = rec.finish_into_inner().map_err(writing)?;
    let bytes = out
        .into_inner()
        .ok()
        .and_then(|f| f.metadata().ok())
        .map_or(0, |m| m.len());
    let line = progress(&counts, bytes, yielding, started);
    eprintln!("record: {why}; {line}; {} written", o.out.display());
    Ok(())
}

fn progress(c: &Counts, bytes: u64, yielding: bool, started: Instant) -> String {
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    let images = if c.images > 0 {
        format!(", {} images", c.images)
    } else {
        String::new()
    };
    let unreadable = if c.frames_unreadable > 0 {
        format!(
            ", {} unreadable (the segment's file is shorter than its layout)",
            c.frames_unreadable
        )
    } else {
        String::new()
    };
    format!(
        "{} frames, {:.1} MB, {:.0} frames/s, {} missed{}, {} torn, {} skipped{}{unreadable}, {} ring entries, {} ring bytes lost{images}, {} events, values of {} frames checked",
        c.frames_recorded,
        bytes as f64 / 1e6,
        c.frames_recorded as f64 / secs,
        c.frames_missed,
        if c.frames_missed_late > 0 {
            format!(
                " ({} while the recorder was woken late)",
                c.frames_missed_late
            )
        } else {
            String::new()
        },
        c.frames_torn,
        c.frames_skipped,
        if yielding {
            " (busy machine: keeping to the CPU budget)"
        } else {
            ""
        },
        c.ring_entries,
        c.ring_lost_bytes,
        c.events_found,
        c.frames_checked
    )
}
