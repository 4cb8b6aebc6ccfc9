//! `compare --episodes`: one row per env with A's and B's episodes side by side (the
//! episodes finished, the mean return and length with B's difference and its 95 %
//! interval, the share of each ending, the verdict on the return), as Parquet or CSV.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};

use super::episodes::{EpisodesCompared, FINISHED_ENDINGS, TalliesSideBySide};
use crate::export::parquet::{err, file_writer, finish_writer, put, put_each};
use crate::export::{ExportError, ExportFormat};

/// The schema of the per-env table; a mean or an interval a run has too few episodes
/// for is null.
pub const COMPARED_EPISODES_SCHEMA: &str = "
message lrbc_compared_episodes {
  REQUIRED INT64 env (INTEGER(64,false));
  REQUIRED INT64 finished_a (INTEGER(64,false));
  REQUIRED INT64 finished_b (INTEGER(64,false));
  OPTIONAL DOUBLE return_a;
  OPTIONAL DOUBLE return_b;
  OPTIONAL DOUBLE return_diff;
  OPTIONAL DOUBLE return_low;
  OPTIONAL DOUBLE return_high;
  OPTIONAL DOUBLE length_a;
  OPTIONAL DOUBLE length_b;
  OPTIONAL DOUBLE length_diff;
  OPTIONAL DOUBLE length_low;
  OPTIONAL DOUBLE length_high;
  OPTIONAL DOUBLE done_a;
  OPTIONAL DOUBLE done_b;
  OPTIONAL DOUBLE truncated_a;
  OPTIONAL DOUBLE truncated_b;
  OPTIONAL DOUBLE reset_a;
  OPTIONAL DOUBLE reset_b;
  OPTIONAL DOUBLE nonfinite_a;
  OPTIONAL DOUBLE nonfinite_b;
  REQUIRED BYTE_ARRAY verdict (STRING);
}
";

/// The optional columns of one env's row, in the schema's order.
fn optional_columns(t: &TalliesSideBySide) -> Vec<Option<f64>> {
    let ret = t.mean_return();
    let len = t.mean_length();
    let mut v = vec![
        t.a.returns.mean(),
        t.b.returns.mean(),
        ret.map(|i| i.estimate),
        ret.map(|i| i.low),
        ret.map(|i| i.high),
        t.a.lengths.mean(),
        t.b.lengths.mean(),
        len.map(|i| i.estimate),
        len.map(|i| i.low),
        len.map(|i| i.high),
    ];
    for ending in FINISHED_ENDINGS {
        v.push(t.a.share(ending));
        v.push(t.b.share(ending));
    }
    v
}

/// Writes the per-env table of `episodes` to `out` (replaced) as `format`; on failure
/// `out` is removed.
pub fn write_compared_episodes(
    episodes: &EpisodesCompared,
    out: &Path,
    format: ExportFormat,
) -> Result<(), ExportError> {
    let file = File::create(out).map_err(|e| ExportError::Output(e.to_string()))?;
    let written = match format {
        ExportFormat::Parquet => parquet_table(episodes, file),
        ExportFormat::Csv => csv_table(episodes, file),
    };
    if written.is_err() {
        // The partial output goes; the error that cut it short is the one reported.
        let _ = std::fs::remove_file(out);
    }
    written
}

fn csv_table(episodes: &EpisodesCompared, file: File) -> Result<(), ExportError> {
    let io = |e: std::io::Error| ExportError::Output(e.to_string());
    let mut w = BufWriter::new(file);
    let header: Vec<&str> = COMPARED_EPISODES_SCHEMA
        .lines()
        .filter_map(|l| l.trim().strip_suffix(';'))
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    writeln!(w, "{}", header.join(",")).map_err(io)?;
    for (env, t) in episodes.envs.iter().enumerate() {
        let cells: Vec<String> = optional_columns(t)
            .into_iter()
            .map(|v| v.map_or(String::new(), |x| x.to_string()))
            .collect();
        writeln!(
            w,
            "{env},{},{},{},{}",
            t.a.finished,
            t.b.finished,
            cells.join(","),
            t.verdict().as_str()
        )
        .map_err(io)?;
    }
    w.flush().map_err(io)
}

fn parquet_table(episodes: &EpisodesCompared, file: File) -> Result<(), ExportError> {
    let mut writer = file_writer(file, COMPARED_EPISODES_SCHEMA, false)?;
    let rows: Vec<(usize, &TalliesSideBySide, Vec<Option<f64>>)> = episodes
        .envs
        .iter()
        .enumerate()
        .map(|(env, t)| (env, t, optional_columns(t)))
        .collect();
    if rows.is_empty() {
        return finish_writer(writer);
    }
    let mut rg = writer.next_row_group().map_err(err)?;
    put_each::<Int64Type, _>(&mut rg, &rows, |r| r.0 as i64)?;
    put_each::<Int64Type, _>(&mut rg, &rows, |r| r.1.a.finished as i64)?;
    put_each::<Int64Type, _>(&mut rg, &rows, |r| r.1.b.finished as i64)?;
    let columns = rows.first().map_or(0, |r| r.2.len());
    for c in 0..columns {
        let def: Vec<i16> = rows.iter().map(|r| i16::from(r.2[c].is_some())).collect();
        let values: Vec<f64> = rows.iter().filter_map(|r| r.2[c]).collect();
        put::<DoubleType>(&mut rg, &values, Some(&def), None)?;
    }
    put_each::<ByteArrayType, _>(&mut rg, &rows, |r| ByteArray::from(r.1.verdict().as_str()))?;
    rg.close().map_err(err)?;
    finish_writer(writer)
}
