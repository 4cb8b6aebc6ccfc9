//! Export of a flight recording for analysis: one row per frame and env (frame_seq,
//! times, env, reward, done, truncated, reset, and the observation and action lists of
//! the recorded envs) into a Parquet file (`parquet`, the crate's low-level writer, row
//! groups of bounded size, Snappy pages) or a CSV file (`csv`). The recording is
//! streamed in blocks by the recordings' reader (`replay::read_recording`): memory does
//! not grow with the file, and a file whose recorder was killed gives its complete
//! chunks; frames are decoded by the one frame decoder (`format::RecFrame`).
//! `synthetic` writes recordings for the benchmark and the tests. No egui.

mod csv;
mod episodes;
mod lerobot;
pub(crate) mod parquet;
pub mod synthetic;

use std::collections::BTreeMap;
use std::path::Path;

use crate::format::{GEOMETRY_METADATA, NAMES_METADATA, RecFrame, TOOL_METADATA};
use crate::replay::{self, ReadError};

pub use episodes::{EPISODES_SCHEMA, EpisodesSummary, export_episodes, export_episodes_file};
pub use lerobot::{CODEBASE_VERSION, LeRobotOptions, LeRobotSummary, export_lerobot};
pub use replay::End;

/// An export that could not be made, as one line.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("reading the recording: {0}")]
    Input(String),
    #[error("not an MCAP file")]
    NotMcap,
    #[error("not an lrbc recording: {0}")]
    NotLrbc(replay::NotLrbc),
    #[error("the recording is damaged: {0}")]
    Damaged(String),
    /// A chunk that cannot be read (its compression, or its data), named by its offset.
    #[error(transparent)]
    Chunk(crate::format::ChunkError),
    #[error("env {env} does not exist (the recording has {num_envs} envs)")]
    NoSuchEnv { env: u32, num_envs: usize },
    #[error("writing: {0}")]
    Output(String),
}

/// The file written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Parquet,
    /// Lists as `;`-joined values, null as an empty field.
    Csv,
}

/// Which rows.
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    /// Only these envs (None: every env).
    pub envs: Option<Vec<u32>>,
    /// Only frames at or after this many seconds since the first frame.
    pub from_s: Option<f64>,
    /// Only frames at or before this many seconds since the first frame.
    pub to_s: Option<f64>,
}

/// What an export read and wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Frames in the file.
    pub frames_read: u64,
    /// Frames within the range.
    pub frames_exported: u64,
    pub rows: u64,
    /// How the file ended.
    pub end: End,
}

/// Progress of an export, for a line now and then.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    pub bytes_read: u64,
    pub rows: u64,
}

/// One frame, decoded into reused buffers, and its time in the export.
#[derive(Clone, Debug, Default)]
pub struct ExportFrame {
    pub frame: RecFrame,
    /// Seconds since the first frame of the file.
    pub time_s: f64,
}

impl std::ops::Deref for ExportFrame {
    type Target = RecFrame;

    fn deref(&self) -> &RecFrame {
        &self.frame
    }
}

impl From<ReadError> for ExportError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Input(why) => Self::Input(why),
            ReadError::NotMcap => Self::NotMcap,
            ReadError::NotRecording(why) => Self::NotLrbc(why),
            ReadError::Damaged(why) => Self::Damaged(why),
            ReadError::Chunk(why) => Self::Chunk(why),
        }
    }
}

/// The rows of one frame that an export writes.
pub trait Sink {
    /// Writes the rows of `frame` for `envs` (indices below the frame's env count).
    fn frame(&mut self, frame: &ExportFrame, envs: &[u32]) -> Result<(), ExportError>;
    /// Writes what is buffered and the file's end, with `metadata` where the format keeps it.
    fn finish(self: Box<Self>, metadata: Vec<(String, String)>) -> Result<(), ExportError>;
}

/// Opens a sink writing `format` to `out`.
pub fn sink(format: ExportFormat, out: std::fs::File) -> Result<Box<dyn Sink>, ExportError> {
    Ok(match format {
        ExportFormat::Parquet => Box::new(parquet::ParquetSink::new(out)?),
        ExportFormat::Csv => Box::new(csv::CsvSink::new(out)?),
    })
}

/// The names of a recording's observations and actions (`lrbc.names`: `obs.N`, `act.N`).
fn names(m: &BTreeMap<String, String>, prefix: &str) -> Vec<String> {
    let mut v: Vec<(usize, &String)> = m
        .iter()
        .filter_map(|(k, name)| {
            let i = k.strip_prefix(prefix)?.strip_prefix('.')?.parse().ok()?;
            Some((i, name))
        })
        .collect();
    v.sort_by_key(|(i, _)| *i);
    let len = v.last().map_or(0, |(i, _)| i + 1).min(1 << 20);
    let mut out = vec![String::new(); len];
    for (i, name) in v {
        if let Some(slot) = out.get_mut(i) {
            slot.clone_from(name);
        }
    }
    out
}

/// The key-value metadata of an export: the recording's names and geometry, and the tool.
fn file_metadata(metadata: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(m) = metadata.get(NAMES_METADATA) {
        for (key, prefix) in [("lrbc.obs_names", "obs"), ("lrbc.act_names", "act")] {
            let json = serde_json::to_string(&names(m, prefix)).unwrap_or_default();
            out.push((key.to_string(), json));
        }
    }
    if let Some(g) = metadata.get(GEOMETRY_METADATA) {
        for key in [
            "layout",
            "num_envs",
            "obs_size",
            "act_size",
            "recorded_envs",
        ] {
            if let Some(v) = g.get(key) {
                out.push((format!("lrbc.{key}"), v.clone()));
            }
        }
    }
    if let Some(t) = metadata.get(TOOL_METADATA).and_then(|t| t.get("version")) {
        out.push(("lrbc.recorded_by".into(), format!("lrbc-inspector {t}")));
    }
    out.push((
        "lrbc.exported_by".into(),
        concat!("lrbc-inspector ", env!("CARGO_PKG_VERSION")).into(),
    ));
    out
}

/// Exports the recording read from `input` into `sink`; `progress` is called after each
/// block read.
pub fn export(
    input: &mut impl std::io::Read,
    mut sink: Box<dyn Sink>,
    options: &ExportOptions,
    mut progress: impl FnMut(Progress),
) -> Result<ExportSummary, ExportError> {
    let mut metadata: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut frame = ExportFrame::default();
    let mut summary = ExportSummary::default();
    let mut t0: Option<(bool, u64)> = None;
    let mut all_envs: Vec<u32> = Vec::new();
    let rows = std::cell::Cell::new(0u64);
    let end = replay::read_recording(
        input,
        |event| {
            match event {
                replay::StreamItem::Metadata(m) => {
                    metadata.insert(m.name.clone(), m.metadata.clone());
                }
                replay::StreamItem::Camera { .. } => {}
                replay::StreamItem::Frame { log_ns, data } => {
                    frame
                        .frame
                        .decode_into(log_ns, data)
                        .map_err(|e| ExportError::Damaged(e.to_string()))?;
                    summary.frames_read += 1;
                    // Engine time when the recording has it, else the recorder's.
                    let (engine, t0_ns) = *t0.get_or_insert((
                        frame.frame_time_ns != 0,
                        if frame.frame_time_ns != 0 {
                            frame.frame_time_ns
                        } else {
                            frame.sampled_ns
                        },
                    ));
                    let t = if engine {
                        frame.frame_time_ns
                    } else {
                        frame.sampled_ns
                    };
                    frame.time_s = (i128::from(t) - i128::from(t0_ns)) as f64 / 1e9;
                    if options.from_s.is_some_and(|f| frame.time_s < f)
                        || options.to_s.is_some_and(|to| frame.time_s > to)
                    {
                        return Ok(());
                    }
                    let n = frame.rewards.len();
                    let envs: &[u32] = match &options.envs {
                        Some(list) => {
                            if let Some(&env) = list.iter().find(|&&e| e as usize >= n) {
                                return Err(ExportError::NoSuchEnv { env, num_envs: n });
                            }
                            list
                        }
                        None => {
                            if all_envs.len() != n {
                                all_envs = (0..n as u32).collect();
                            }
                            &all_envs
                        }
                    };
                    sink.frame(&frame, envs)?;
                    summary.frames_exported += 1;
                    rows.set(rows.get() + envs.len() as u64);
                }
            }
            Ok(())
        },
        |bytes_read| {
            progress(Progress {
                bytes_read,
                rows: rows.get(),
            });
        },
    )?;
    summary.rows = rows.get();
    summary.end = end;
    sink.finish(file_metadata(&metadata))?;
    Ok(summary)
}

/// Exports the file `input` to `out` (replaced); on failure `out` is removed.
pub fn export_file(
    input: &Path,
    out: &Path,
    format: ExportFormat,
    options: &ExportOptions,
    progress: impl FnMut(Progress),
) -> Result<ExportSummary, ExportError> {
    let mut file = std::fs::File::open(input).map_err(|e| ExportError::Input(e.to_string()))?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(ExportError::Input("it is a folder".into()));
    }
    let same = |a: &Path, b: &Path| matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(a), Ok(b)) if a == b);
    if same(input, out) {
        return Err(ExportError::Output("it is the recording itself".into()));
    }
    let created = std::fs::File::create(out).map_err(|e| ExportError::Output(e.to_string()))?;
    let result = sink(format, created).and_then(|s| export(&mut file, s, options, progress));
    if result.is_err() {
        // The partial output goes; the error that cut it short is the one reported.
        let _ = std::fs::remove_file(out);
    }
    result
}

#[cfg(test)]
mod tests;
