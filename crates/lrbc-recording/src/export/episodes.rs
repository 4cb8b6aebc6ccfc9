//! `export --episodes`: one row per episode of a recording (every env's, found by the
//! same accountant as live: `replay::RecordedEpisodes`), as Parquet or CSV. Rows come in
//! the order the episodes ended; those going on at the end of the file come last, ending
//! `running`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, FloatType, Int64Type};

use super::parquet::{FileWriter, err, file_writer, finish_writer, put, put_each};
use super::{ExportError, ExportFormat, Progress};
use crate::format::RecFrame;
use crate::replay::{self, End, RecordedEpisodes};
use lrbc_live::episodes::Episode;

/// The schema of an episodes export.
pub const EPISODES_SCHEMA: &str = "
message lrbc_episodes {
  REQUIRED INT64 env (INTEGER(64,false));
  REQUIRED INT64 first_frame (INTEGER(64,false));
  REQUIRED INT64 last_frame (INTEGER(64,false));
  REQUIRED DOUBLE first_time_s;
  REQUIRED DOUBLE last_time_s;
  REQUIRED INT64 first_sampled_ns (INTEGER(64,false));
  REQUIRED INT64 last_sampled_ns (INTEGER(64,false));
  REQUIRED INT64 length (INTEGER(64,false));
  REQUIRED DOUBLE return;
  REQUIRED FLOAT min_reward;
  REQUIRED FLOAT max_reward;
  REQUIRED BYTE_ARRAY ending (STRING);
  REQUIRED BOOLEAN complete;
  REQUIRED INT64 lacking_frames (INTEGER(64,false));
  REQUIRED BOOLEAN began_before;
  OPTIONAL INT64 nonfinite_frame (INTEGER(64,false));
}
";

/// The CSV header, the same columns.
const CSV_HEADER: &str = "env,first_frame,last_frame,first_time_s,last_time_s,first_sampled_ns,last_sampled_ns,length,return,min_reward,max_reward,ending,complete,lacking_frames,began_before,nonfinite_frame";

/// Rows per Parquet row group.
const GROUP_ROWS: usize = 64 * 1024;

/// What an episodes export read and wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpisodesSummary {
    pub frames_read: u64,
    /// Rows written: every episode, those going on at the end included.
    pub episodes: u64,
    pub complete: u64,
    /// Going on at the end of the file.
    pub running: u64,
    pub end: End,
}

fn io(e: std::io::Error) -> ExportError {
    ExportError::Output(e.to_string())
}

/// Where the rows go.
enum Writer {
    Parquet {
        writer: Box<FileWriter>,
        rows: Vec<(Episode, f64, f64)>,
    },
    Csv(BufWriter<File>),
}

impl Writer {
    fn new(format: ExportFormat, out: File) -> Result<Self, ExportError> {
        Ok(match format {
            ExportFormat::Parquet => Self::Parquet {
                writer: Box::new(file_writer(out, EPISODES_SCHEMA, true)?),
                rows: Vec::new(),
            },
            ExportFormat::Csv => {
                let mut w = BufWriter::with_capacity(1 << 20, out);
                writeln!(w, "{CSV_HEADER}").map_err(io)?;
                Self::Csv(w)
            }
        })
    }

    /// One episode, with its first and last time in seconds since the file's first frame.
    fn row(&mut self, e: &Episode, first_s: f64, last_s: f64) -> Result<(), ExportError> {
        match self {
            Self::Parquet { rows, .. } => {
                rows.push((*e, first_s, last_s));
                if rows.len() >= GROUP_ROWS {
                    self.flush()?;
                }
            }
            Self::Csv(w) => {
                let f = |v: f64| {
                    if v.is_finite() {
                        v.to_string()
                    } else {
                        lrbc_live::detect::format_value(v)
                    }
                };
                writeln!(
                    w,
                    "{},{},{},{first_s},{last_s},{},{},{},{},{},{},{},{},{},{},{}",
                    e.env,
                    e.first_frame,
                    e.last_frame,
                    e.first_ns,
                    e.last_ns,
                    e.length(),
                    f(e.ret),
                    f(f64::from(e.min_reward)),
                    f(f64::from(e.max_reward)),
                    e.ending.as_str(),
                    e.complete(),
                    e.lacking,
                    e.began_before,
                    e.nonfinite_frame.map_or(String::new(), |n| n.to_string()),
                )
                .map_err(io)?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ExportError> {
        let Self::Parquet { writer, rows } = self else {
            return Ok(());
        };
        if rows.is_empty() {
            return Ok(());
        }
        let mut rg = writer.next_row_group().map_err(err)?;
        // Bit-for-bit: the unsigned logical types read these back as u64.
        put_each::<Int64Type, _>(&mut rg, rows, |r| i64::from(r.0.env))?;
        put_each::<Int64Type, _>(&mut rg, rows, |r| r.0.first_frame as i64)?;
        put_each::<Int64Type, _>(&mut rg, rows, |r| r.0.last_frame as i64)?;
        put_each::<DoubleType, _>(&mut rg, rows, |r| r.1)?;
        put_each::<DoubleType, _>(&mut rg, rows, |r| r.2)?;
        put_each::<Int64Type, _>(&mut rg, rows, |r| r.0.first_ns as i64)?;
        put_each::<Int64Type, _>(&mut rg, rows, |r| r.0.last_ns as i64)?;
        put_each::<Int64Type, _>(&mut rg, rows, |r| r.0.length() as i64)?;
        put_each::<DoubleType, _>(&mut rg, rows, |r| r.0.ret)?;
        put_each::<FloatType, _>(&mut rg, rows, |r| r.0.min_reward)?;
        put_each::<FloatType, _>(&mut rg, rows, |r| r.0.max_reward)?;
        put_each::<ByteArrayType, _>(&mut rg, rows, |r| ByteArray::from(r.0.ending.as_str()))?;
        put_each::<BoolType, _>(&mut rg, rows, |r| r.0.complete())?;
        put_each::<Int64Type, _>(&mut rg, rows, |r| r.0.lacking as i64)?;
        put_each::<BoolType, _>(&mut rg, rows, |r| r.0.began_before)?;
        let def: Vec<i16> = rows
            .iter()
            .map(|r| i16::from(r.0.nonfinite_frame.is_some()))
            .collect();
        put::<Int64Type>(
            &mut rg,
            &rows
                .iter()
                .filter_map(|r| r.0.nonfinite_frame.map(|f| f as i64))
                .collect::<Vec<_>>(),
            Some(&def),
            None,
        )?;
        rg.close().map_err(err)?;
        rows.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<(), ExportError> {
        self.flush()?;
        match self {
            Self::Parquet { writer, .. } => finish_writer(*writer),
            Self::Csv(mut w) => w.flush().map_err(io),
        }
    }
}

/// Writes every episode of the recording read from `input` to `out` as `format`;
/// `progress` is called after each block read.
pub fn export_episodes(
    input: &mut impl std::io::Read,
    out: File,
    format: ExportFormat,
    mut progress: impl FnMut(Progress),
) -> Result<EpisodesSummary, ExportError> {
    let mut writer = Writer::new(format, out)?;
    let mut summary = EpisodesSummary::default();
    let mut acc: Option<RecordedEpisodes> = None;
    let mut frame = RecFrame::default();
    let mut out: Vec<Episode> = Vec::new();
    let mut t0: Option<u64> = None;
    let rows = std::cell::Cell::new(0u64);
    let write = |out: &mut Vec<Episode>,
                 t0: u64,
                 summary: &mut EpisodesSummary,
                 writer: &mut Writer|
     -> Result<(), ExportError> {
        let secs = |ns: u64| (i128::from(ns) - i128::from(t0)) as f64 / 1e9;
        for e in out.drain(..) {
            writer.row(&e, secs(e.first_ns), secs(e.last_ns))?;
            summary.episodes += 1;
            summary.complete += u64::from(e.complete() && e.ending.finished());
            summary.running += u64::from(!e.ending.finished());
            rows.set(summary.episodes);
        }
        Ok(())
    };
    let end = replay::read_recording(
        input,
        |event| {
            match event {
                replay::StreamItem::Metadata(_) | replay::StreamItem::Camera { .. } => {}
                replay::StreamItem::Frame { log_ns, data } => {
                    frame
                        .decode_into(log_ns, data)
                        .map_err(|e| ExportError::Damaged(e.to_string()))?;
                    summary.frames_read += 1;
                    let a = acc.get_or_insert_with(|| {
                        RecordedEpisodes::of(
                            frame.rewards.len() as u32,
                            frame.obs_size as u32,
                            frame.act_size as u32,
                        )
                    });
                    let t0 = *t0.get_or_insert(frame.sampled_ns);
                    a.frame(&frame, &mut out);
                    write(&mut out, t0, &mut summary, &mut writer)?;
                }
            }
            Ok::<(), ExportError>(())
        },
        |bytes_read| {
            progress(Progress {
                bytes_read,
                rows: rows.get(),
            });
        },
    )?;
    if let Some(a) = &mut acc {
        a.finish(&mut out);
        write(&mut out, t0.unwrap_or(0), &mut summary, &mut writer)?;
    }
    summary.end = end;
    writer.finish()?;
    Ok(summary)
}

/// Exports the episodes of the file `input` to `out` (replaced); on failure `out` is
/// removed.
pub fn export_episodes_file(
    input: &Path,
    out: &Path,
    format: ExportFormat,
    progress: impl FnMut(Progress),
) -> Result<EpisodesSummary, ExportError> {
    let mut file = File::open(input).map_err(|e| ExportError::Input(e.to_string()))?;
    let target = File::create(out).map_err(|e| ExportError::Output(e.to_string()))?;
    let result = export_episodes(
        &mut std::io::BufReader::new(&mut file),
        target,
        format,
        progress,
    );
    if result.is_err() {
        // The partial output goes; the error that cut it short is the one reported.
        let _ = std::fs::remove_file(out);
    }
    result
}
