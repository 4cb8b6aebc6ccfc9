//! The dataset's Parquet files: their schemas' columns and writer, and the data file
//! (`data/chunk-000/file-000.parquet`), its rows buffered by row group.

use std::path::Path;
use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, Type as Physical};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, FloatType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{Type, TypePtr};

use super::{Features, IMAGE_FEATURE, Row};
use crate::export::ExportError;
use crate::export::parquet::{FileWriter, ListColumn, err, finish_writer, put};

/// Rows buffered before a row group of the data file is written.
const GROUP_ROWS: usize = 65_536;
/// Image bytes buffered before a row group of the data file is written.
const GROUP_IMAGE_BYTES: usize = 64 << 20;

/// The data file, buffered by row group.
pub(super) struct Data {
    writer: FileWriter,
    obs: ListColumn,
    act: ListColumn,
    image: Vec<ByteArray>,
    image_bytes: usize,
    with_image: bool,
    reward: Vec<f32>,
    done: Vec<bool>,
    truncated: Vec<bool>,
    timestamp: Vec<f32>,
    frame_index: Vec<i64>,
    episode_index: Vec<i64>,
    index: Vec<i64>,
    task_index: Vec<i64>,
    with_obs: bool,
    with_act: bool,
    with_truncated: bool,
}

/// A required column.
pub(super) fn required(
    name: &str,
    physical: Physical,
    logical: Option<LogicalType>,
) -> Result<TypePtr, ExportError> {
    Type::primitive_type_builder(name, physical)
        .with_repetition(Repetition::REQUIRED)
        .with_logical_type(logical)
        .build()
        .map(Arc::new)
        .map_err(err)
}

/// `optional group NAME (LIST) { repeated group list { required ELEMENT element; } }`
pub(super) fn list(
    name: &str,
    physical: Physical,
    logical: Option<LogicalType>,
) -> Result<TypePtr, ExportError> {
    let element = required("element", physical, logical)?;
    let repeated = Type::group_type_builder("list")
        .with_repetition(Repetition::REPEATED)
        .with_fields(vec![element])
        .build()
        .map(Arc::new)
        .map_err(err)?;
    Type::group_type_builder(name)
        .with_repetition(Repetition::OPTIONAL)
        .with_logical_type(Some(LogicalType::List))
        .with_fields(vec![repeated])
        .build()
        .map(Arc::new)
        .map_err(err)
}

/// A Parquet file at `path` of the columns `fields`, with the key-value metadata `kv`.
pub(super) fn writer(
    path: &Path,
    fields: Vec<TypePtr>,
    kv: Vec<KeyValue>,
) -> Result<FileWriter, ExportError> {
    let schema = Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .map(Arc::new)
        .map_err(err)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(concat!("lrbc-inspector ", env!("CARGO_PKG_VERSION")).into())
        .set_key_value_metadata(Some(kv))
        .build();
    let file = std::fs::File::create(path)
        .map_err(|e| ExportError::Output(format!("{}: {e}", path.display())))?;
    SerializedFileWriter::new(
        std::io::BufWriter::with_capacity(1 << 20, file),
        schema,
        Arc::new(props),
    )
    .map_err(err)
}

/// The data file's columns: the features in the order info.json lists them.
fn data_fields(f: &Features) -> Result<Vec<TypePtr>, ExportError> {
    let mut fields = Vec::new();
    if f.obs_size > 0 {
        fields.push(list("observation.state", Physical::FLOAT, None)?);
    }
    if f.act_size > 0 {
        fields.push(list("action", Physical::FLOAT, None)?);
    }
    if f.image.is_some() {
        let optional = |name: &str, logical: Option<LogicalType>| {
            Type::primitive_type_builder(name, Physical::BYTE_ARRAY)
                .with_repetition(Repetition::OPTIONAL)
                .with_logical_type(logical)
                .build()
                .map(Arc::new)
                .map_err(err)
        };
        fields.push(Arc::new(
            Type::group_type_builder(IMAGE_FEATURE)
                .with_repetition(Repetition::OPTIONAL)
                .with_fields(vec![
                    optional("bytes", None)?,
                    optional("path", Some(LogicalType::String))?,
                ])
                .build()
                .map_err(err)?,
        ));
    }
    fields.push(required("next.reward", Physical::FLOAT, None)?);
    fields.push(required("next.done", Physical::BOOLEAN, None)?);
    if f.truncated {
        fields.push(required("next.truncated", Physical::BOOLEAN, None)?);
    }
    fields.push(required("timestamp", Physical::FLOAT, None)?);
    for k in ["frame_index", "episode_index", "index", "task_index"] {
        fields.push(required(k, Physical::INT64, None)?);
    }
    Ok(fields)
}

impl Data {
    /// Creates the data file at `path` with the columns of `features`.
    pub(super) fn create(path: &Path, features: &Features) -> Result<Self, ExportError> {
        Ok(Self {
            writer: writer(path, data_fields(features)?, Vec::new())?,
            obs: ListColumn::default(),
            act: ListColumn::default(),
            image: Vec::new(),
            image_bytes: 0,
            with_image: features.image.is_some(),
            reward: Vec::new(),
            done: Vec::new(),
            truncated: Vec::new(),
            timestamp: Vec::new(),
            frame_index: Vec::new(),
            episode_index: Vec::new(),
            index: Vec::new(),
            task_index: Vec::new(),
            with_obs: features.obs_size > 0,
            with_act: features.act_size > 0,
            with_truncated: features.truncated,
        })
    }

    /// Buffers one row.
    pub(super) fn push(&mut self, row: &Row<'_>) {
        if self.with_obs {
            self.obs.push(Some(row.obs));
        }
        if self.with_image
            && let Some(png) = row.image
        {
            self.image_bytes += png.len();
            self.image.push(ByteArray::from(png.to_vec()));
        }
        if self.with_act {
            self.act.push(Some(row.act));
        }
        self.reward.push(row.reward);
        self.done.push(row.done);
        if self.with_truncated {
            self.truncated.push(row.truncated);
        }
        self.timestamp.push(row.timestamp);
        self.frame_index.push(row.frame_index);
        self.episode_index.push(row.episode_index);
        self.index.push(row.index);
        self.task_index.push(0);
    }

    /// Whether the rows buffered make a row group.
    pub(super) fn full(&self) -> bool {
        self.index.len() >= GROUP_ROWS || self.image_bytes >= GROUP_IMAGE_BYTES
    }

    /// Writes the rows buffered as a row group.
    pub(super) fn flush(&mut self) -> Result<(), ExportError> {
        if self.index.is_empty() {
            return Ok(());
        }
        let mut rg = self.writer.next_row_group().map_err(err)?;
        if self.with_obs {
            put::<FloatType>(
                &mut rg,
                &self.obs.values,
                Some(&self.obs.def),
                Some(&self.obs.rep),
            )?;
        }
        if self.with_act {
            put::<FloatType>(
                &mut rg,
                &self.act.values,
                Some(&self.act.def),
                Some(&self.act.rep),
            )?;
        }
        if self.with_image {
            // struct<bytes, path>: the bytes there, the path null.
            let n = self.image.len();
            put::<ByteArrayType>(&mut rg, &self.image, Some(&vec![2; n]), None)?;
            put::<ByteArrayType>(&mut rg, &[], Some(&vec![1; n]), None)?;
        }
        put::<FloatType>(&mut rg, &self.reward, None, None)?;
        put::<BoolType>(&mut rg, &self.done, None, None)?;
        if self.with_truncated {
            put::<BoolType>(&mut rg, &self.truncated, None, None)?;
        }
        put::<FloatType>(&mut rg, &self.timestamp, None, None)?;
        put::<Int64Type>(&mut rg, &self.frame_index, None, None)?;
        put::<Int64Type>(&mut rg, &self.episode_index, None, None)?;
        put::<Int64Type>(&mut rg, &self.index, None, None)?;
        put::<Int64Type>(&mut rg, &self.task_index, None, None)?;
        rg.close().map_err(err)?;
        self.obs.clear();
        self.act.clear();
        self.image.clear();
        self.image_bytes = 0;
        self.reward.clear();
        self.done.clear();
        self.truncated.clear();
        self.timestamp.clear();
        self.frame_index.clear();
        self.episode_index.clear();
        self.index.clear();
        self.task_index.clear();
        Ok(())
    }

    /// Writes the last row group and closes the file.
    pub(super) fn finish(mut self) -> Result<(), ExportError> {
        self.flush()?;
        finish_writer(self.writer)
    }
}
