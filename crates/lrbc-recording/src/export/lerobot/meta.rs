//! The dataset's `meta/` files: the task (`tasks.parquet`), the episodes
//! (`episodes/chunk-000/file-000.parquet`), the features and totals (`info.json`) and
//! the statistics (`stats.json`).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use parquet::basic::{LogicalType, Type as Physical};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::metadata::KeyValue;
use serde_json::{Value, json};

use super::data::{list, required, writer};
use super::rows::Written;
use super::{CODEBASE_VERSION, Features, IMAGE_FEATURE};
use crate::export::ExportError;
use crate::export::parquet::{err, finish_writer, put, put_each};

/// `meta/tasks.parquet`: the task string as the pandas index.
pub(super) fn write_tasks(dir: &Path, task: &str) -> Result<(), ExportError> {
    let pandas = json!({
        "index_columns": ["__index_level_0__"],
        "column_indexes": [],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": null},
            {"name": null, "field_name": "__index_level_0__", "pandas_type": "unicode", "numpy_type": "object", "metadata": null}
        ]
    });
    let mut w = writer(
        &dir.join("meta/tasks.parquet"),
        vec![
            required("task_index", Physical::INT64, None)?,
            required(
                "__index_level_0__",
                Physical::BYTE_ARRAY,
                Some(LogicalType::String),
            )?,
        ],
        vec![KeyValue::new("pandas".into(), pandas.to_string())],
    )?;
    let mut rg = w.next_row_group().map_err(err)?;
    put::<Int64Type>(&mut rg, &[0], None, None)?;
    put::<ByteArrayType>(&mut rg, &[ByteArray::from(task)], None, None)?;
    rg.close().map_err(err)?;
    finish_writer(w)
}

/// `meta/episodes/chunk-000/file-000.parquet`: row i is episode i.
pub(super) fn write_episodes(
    dir: &Path,
    episodes: &[Written],
    task: &str,
) -> Result<(), ExportError> {
    let mut fields = vec![
        required("episode_index", Physical::INT64, None)?,
        list("tasks", Physical::BYTE_ARRAY, Some(LogicalType::String))?,
    ];
    for k in [
        "length",
        "data/chunk_index",
        "data/file_index",
        "dataset_from_index",
        "dataset_to_index",
        "meta/episodes/chunk_index",
        "meta/episodes/file_index",
    ] {
        fields.push(required(k, Physical::INT64, None)?);
    }
    let mut w = writer(
        &dir.join("meta/episodes/chunk-000/file-000.parquet"),
        fields,
        Vec::new(),
    )?;
    let mut rg = w.next_row_group().map_err(err)?;
    let n = episodes.len();
    put_each::<Int64Type, _>(&mut rg, episodes, |e| e.episode_index)?;
    let task_bytes = vec![ByteArray::from(task); n];
    put::<ByteArrayType>(&mut rg, &task_bytes, Some(&vec![2; n]), Some(&vec![0; n]))?;
    let zeros = vec![0i64; n];
    put_each::<Int64Type, _>(&mut rg, episodes, |e| e.length)?;
    put::<Int64Type>(&mut rg, &zeros, None, None)?;
    put::<Int64Type>(&mut rg, &zeros, None, None)?;
    put_each::<Int64Type, _>(&mut rg, episodes, |e| e.from)?;
    put_each::<Int64Type, _>(&mut rg, episodes, |e| e.to)?;
    put::<Int64Type>(&mut rg, &zeros, None, None)?;
    put::<Int64Type>(&mut rg, &zeros, None, None)?;
    rg.close().map_err(err)?;
    finish_writer(w)
}

/// `meta/info.json`: the features, the totals (`episodes` of `frames` rows) and `fps`.
pub(super) fn write_info(
    dir: &Path,
    f: &Features,
    names: &BTreeMap<String, String>,
    fps: u32,
    episodes: usize,
    frames: i64,
) -> Result<(), ExportError> {
    let scalar = |dtype: &str| json!({"dtype": dtype, "shape": [1], "names": null});
    let (obs_size, act_size) = (f.obs_size, f.act_size);
    let mut features = serde_json::Map::new();
    if obs_size > 0 {
        features.insert(
            "observation.state".into(),
            json!({"dtype": "float32", "shape": [obs_size], "names": names_of(names, "obs", obs_size)}),
        );
    }
    if act_size > 0 {
        features.insert(
            "action".into(),
            json!({"dtype": "float32", "shape": [act_size], "names": names_of(names, "act", act_size)}),
        );
    }
    if let Some((w, h)) = f.image {
        features.insert(
            IMAGE_FEATURE.into(),
            json!({"dtype": "image", "shape": [h, w, 3], "names": ["height", "width", "channels"]}),
        );
    }
    features.insert("next.reward".into(), scalar("float32"));
    features.insert("next.done".into(), scalar("bool"));
    if f.truncated {
        features.insert("next.truncated".into(), scalar("bool"));
    }
    features.insert("timestamp".into(), scalar("float32"));
    for k in ["frame_index", "episode_index", "index", "task_index"] {
        features.insert(k.into(), scalar("int64"));
    }
    let n = episodes;
    let info = json!({
        "codebase_version": CODEBASE_VERSION,
        "robot_type": null,
        "total_episodes": n,
        "total_frames": frames,
        "total_tasks": 1,
        "chunks_size": 1000,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200,
        "fps": fps,
        "splits": {"train": format!("0:{n}")},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": null,
        "features": features,
    });
    write_json(&dir.join("meta/info.json"), &info)
}

/// `meta/stats.json`.
pub(super) fn write_stats(dir: &Path, stats: &Value) -> Result<(), ExportError> {
    write_json(&dir.join("meta/stats.json"), stats)
}

/// The names of a recording's observations or actions (`prefix` `obs` or `act`), one per
/// value; a value without a name is `obs_I`.
fn names_of(names: &BTreeMap<String, String>, prefix: &str, size: usize) -> Vec<String> {
    let mut v = crate::export::names(names, prefix);
    v.resize(size, String::new());
    let mut seen = HashSet::new();
    v.iter()
        .enumerate()
        .map(|(i, n)| {
            if n.is_empty() || n.contains('/') || !seen.insert(n.clone()) {
                format!("{prefix}_{i}")
            } else {
                n.clone()
            }
        })
        .collect()
}

fn write_json(path: &Path, v: &Value) -> Result<(), ExportError> {
    let text = serde_json::to_string_pretty(v).map_err(|e| ExportError::Output(e.to_string()))?;
    std::fs::write(path, text).map_err(|e| ExportError::Output(format!("{}: {e}", path.display())))
}
