//! The Parquet sink: columns buffered for a row group of bounded size, then written with
//! the `parquet` crate's column writers (Snappy pages, no dictionaries).

use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{BoolType, DataType, DoubleType, FloatType, Int32Type, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::{SerializedFileWriter, SerializedRowGroupWriter};
use parquet::schema::parser::parse_message_type;

use super::{ExportError, ExportFrame, Sink};

/// The schema of an export. Unsigned logical types over the physical integers; lists in
/// the three-level form every reader knows.
pub const SCHEMA: &str = "
message lrbc_frames {
  REQUIRED INT64 frame_seq (INTEGER(64,false));
  REQUIRED INT64 frame_time_ns (INTEGER(64,false));
  REQUIRED INT64 sampled_ns (INTEGER(64,false));
  REQUIRED DOUBLE time_s;
  REQUIRED INT32 env (INTEGER(32,false));
  REQUIRED FLOAT reward;
  REQUIRED BOOLEAN done;
  OPTIONAL BOOLEAN truncated;
  REQUIRED BOOLEAN reset;
  OPTIONAL GROUP observation (LIST) {
    REPEATED GROUP list {
      REQUIRED FLOAT element;
    }
  }
  OPTIONAL GROUP action (LIST) {
    REPEATED GROUP list {
      REQUIRED FLOAT element;
    }
  }
}
";

/// A row group holds at most this many rows …
const GROUP_ROWS: usize = 256 * 1024;
/// … and this many observation and action values (with their levels, about 64 MiB).
const GROUP_VALUES: usize = 8 * 1024 * 1024;

pub(crate) fn err(e: parquet::errors::ParquetError) -> ExportError {
    ExportError::Output(e.to_string())
}

/// A nullable list column: the values, and a definition and repetition level per slot.
#[derive(Default)]
pub(super) struct ListColumn {
    pub(super) values: Vec<f32>,
    pub(super) def: Vec<i16>,
    pub(super) rep: Vec<i16>,
}

impl ListColumn {
    pub(super) fn push(&mut self, list: Option<&[f32]>) {
        match list {
            None => {
                self.def.push(0);
                self.rep.push(0);
            }
            Some([]) => {
                self.def.push(1);
                self.rep.push(0);
            }
            Some(values) => {
                self.values.extend_from_slice(values);
                self.def.extend(std::iter::repeat_n(2, values.len()));
                self.rep.push(0);
                self.rep.extend(std::iter::repeat_n(1, values.len() - 1));
            }
        }
    }

    pub(super) fn clear(&mut self) {
        self.values.clear();
        self.def.clear();
        self.rep.clear();
    }
}

#[derive(Default)]
struct Columns {
    frame_seq: Vec<i64>,
    frame_time_ns: Vec<i64>,
    sampled_ns: Vec<i64>,
    time_s: Vec<f64>,
    env: Vec<i32>,
    reward: Vec<f32>,
    done: Vec<bool>,
    truncated: Vec<bool>,
    truncated_def: Vec<i16>,
    reset: Vec<bool>,
    observation: ListColumn,
    action: ListColumn,
}

pub struct ParquetSink {
    writer: FileWriter,
    columns: Columns,
}

impl ParquetSink {
    pub fn new(out: File) -> Result<Self, ExportError> {
        let writer = file_writer(out, SCHEMA, false)?;
        Ok(Self {
            writer,
            columns: Columns::default(),
        })
    }

    fn flush_group(&mut self) -> Result<(), ExportError> {
        let c = &mut self.columns;
        if c.frame_seq.is_empty() {
            return Ok(());
        }
        let mut rg = self.writer.next_row_group().map_err(err)?;
        put::<Int64Type>(&mut rg, &c.frame_seq, None, None)?;
        put::<Int64Type>(&mut rg, &c.frame_time_ns, None, None)?;
        put::<Int64Type>(&mut rg, &c.sampled_ns, None, None)?;
        put::<DoubleType>(&mut rg, &c.time_s, None, None)?;
        put::<Int32Type>(&mut rg, &c.env, None, None)?;
        put::<FloatType>(&mut rg, &c.reward, None, None)?;
        put::<BoolType>(&mut rg, &c.done, None, None)?;
        put::<BoolType>(&mut rg, &c.truncated, Some(&c.truncated_def), None)?;
        put::<BoolType>(&mut rg, &c.reset, None, None)?;
        for list in [&c.observation, &c.action] {
            put::<FloatType>(&mut rg, &list.values, Some(&list.def), Some(&list.rep))?;
        }
        rg.close().map_err(err)?;
        c.frame_seq.clear();
        c.frame_time_ns.clear();
        c.sampled_ns.clear();
        c.time_s.clear();
        c.env.clear();
        c.reward.clear();
        c.done.clear();
        c.truncated.clear();
        c.truncated_def.clear();
        c.reset.clear();
        c.observation.clear();
        c.action.clear();
        Ok(())
    }
}

/// A Parquet file being written.
pub(crate) type FileWriter = SerializedFileWriter<BufWriter<File>>;

/// A Parquet file of `schema` written to `out`: Snappy pages, dictionaries or not.
pub(crate) fn file_writer(
    out: File,
    schema: &str,
    dictionaries: bool,
) -> Result<FileWriter, ExportError> {
    let schema = Arc::new(parse_message_type(schema).map_err(err)?);
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(dictionaries)
        .set_created_by(concat!("lrbc-inspector ", env!("CARGO_PKG_VERSION")).into())
        .build();
    SerializedFileWriter::new(
        BufWriter::with_capacity(1 << 20, out),
        schema,
        Arc::new(props),
    )
    .map_err(err)
}

/// Writes the next column of `rg`: its values, and their definition and repetition
/// levels when the column has them.
pub(crate) fn put<T: DataType>(
    rg: &mut SerializedRowGroupWriter<'_, BufWriter<File>>,
    values: &[T::T],
    def: Option<&[i16]>,
    rep: Option<&[i16]>,
) -> Result<(), ExportError> {
    let mut col = rg
        .next_column()
        .map_err(err)?
        .ok_or_else(|| ExportError::Output("the Parquet schema has fewer columns".into()))?;
    col.typed::<T>()
        .write_batch(values, def, rep)
        .map_err(err)?;
    col.close().map_err(err)
}

/// Writes the next column of `rg`, required: one value of each of `rows`.
pub(crate) fn put_each<T: DataType, R>(
    rg: &mut SerializedRowGroupWriter<'_, BufWriter<File>>,
    rows: &[R],
    value: impl Fn(&R) -> T::T,
) -> Result<(), ExportError> {
    put::<T>(rg, &rows.iter().map(value).collect::<Vec<_>>(), None, None)
}

/// Closes `w`: its footer written, its buffer flushed to the file.
pub(crate) fn finish_writer(w: FileWriter) -> Result<(), ExportError> {
    let out = w.into_inner().map_err(err)?;
    out.into_inner()
        .map(drop)
        .map_err(|e| ExportError::Output(e.error().to_string()))
}

impl Sink for ParquetSink {
    fn frame(&mut self, f: &ExportFrame, envs: &[u32]) -> Result<(), ExportError> {
        let c = &mut self.columns;
        for &env in envs {
            let e = env as usize;
            // Bit-for-bit: the unsigned logical types read these back as u64 and u32.
            c.frame_seq.push(f.frame_seq as i64);
            c.frame_time_ns.push(f.frame_time_ns as i64);
            c.sampled_ns.push(f.sampled_ns as i64);
            c.time_s.push(f.time_s);
            c.env.push(env as i32);
            c.reward.push(f.rewards.get(e).copied().unwrap_or(f32::NAN));
            let flag = |v: &[u8]| v.get(e).is_some_and(|&b| b != 0);
            c.done.push(flag(&f.dones));
            match f.truncateds.as_deref().and_then(|t| t.get(e)) {
                Some(&t) => {
                    c.truncated.push(t != 0);
                    c.truncated_def.push(1);
                }
                None => c.truncated_def.push(0),
            }
            c.reset.push(flag(&f.resets));
            let rows = f.rows_of(env);
            c.observation.push(rows.map(|(o, _)| o));
            c.action.push(rows.map(|(_, a)| a));
        }
        if c.frame_seq.len() >= GROUP_ROWS
            || c.observation.values.len() + c.action.values.len() >= GROUP_VALUES
        {
            self.flush_group()?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>, metadata: Vec<(String, String)>) -> Result<(), ExportError> {
        self.flush_group()?;
        for (k, v) in metadata {
            self.writer.append_key_value_metadata(KeyValue::new(k, v));
        }
        finish_writer(self.writer)
    }
}
