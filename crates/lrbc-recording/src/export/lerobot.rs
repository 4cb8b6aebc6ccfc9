//! `export --lerobot DIR`: a recording as one LeRobot dataset (format v3.0, as LeRobot
//! 0.4 writes and reads it): one episode per finished, complete episode of each env whose
//! rows the file holds in every frame of it (found by the same accountant as live); a row
//! per frame of it: `observation.state` and `action` as the frame holds them (the
//! observation after the step, the action the step was taken with), `next.reward`,
//! `next.done` and `next.truncated` of that step, `timestamp` (`frame_index / fps`),
//! `frame_index`, `episode_index`, `index` and `task_index`; and, when the file holds
//! those envs' camera images, `observation.images.camera`: the env's newest image at the
//! frame, as PNG (LeRobot's `image` dtype: no video encoder, no external program, lossless,
//! no timestamp tolerance to meet). The file is read twice: once to choose the episodes,
//! once to write them.
//!
//! ```text
//! DIR/meta/info.json, meta/stats.json, meta/tasks.parquet,
//!     meta/episodes/chunk-000/file-000.parquet, data/chunk-000/file-000.parquet
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, Type as Physical};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, FloatType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{Type, TypePtr};
use serde_json::{Value, json};

use super::parquet::{ListColumn, err, finish_writer, put};
use super::{ExportError, Progress};
use crate::format::{NAMES_METADATA, RecFrame};
use crate::replay::{self, End, RecordedEpisodes};
use lrbc::rpc::foxglove_fb as fox;
use lrbc_live::episodes::{Ending, Episode};

/// The dataset format LeRobot 0.4 reads.
pub const CODEBASE_VERSION: &str = "v3.0";
/// Rows buffered before a row group of the data file is written.
const GROUP_ROWS: usize = 65_536;
/// Values kept per feature to estimate its quantiles (a deterministic reservoir).
const QUANTILE_SAMPLE: usize = 100_000;

/// What to write.
#[derive(Clone, Debug)]
pub struct LeRobotOptions {
    /// The episodes' task (one for every episode); None: the recording's name.
    pub task: Option<String>,
}

/// What was written, and what was left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeRobotSummary {
    pub episodes: u64,
    pub frames: u64,
    pub fps: u32,
    /// The envs whose episodes went in.
    pub envs: Vec<u32>,
    pub task: String,
    /// Left out: going on at the end of the file.
    pub running: u64,
    /// Left out: lacking frames, or begun before the file's first frame.
    pub incomplete: u64,
    /// Left out: holding a non-finite value.
    pub nonfinite: u64,
    /// Left out: of an env whose row a frame of the episode does not hold.
    pub without_rows: u64,
    /// Left out: begun before its env's first camera image (when the file holds images).
    pub without_image: u64,
    /// The camera images' size (height, width), when they went in.
    pub image: Option<(u32, u32)>,
    /// Why the file's camera images did not go in, when it has some.
    pub image_note: Option<String>,
    pub end: End,
}

/// An episode's place: its env and first frame.
type Key = (u32, u64);

/// What the first pass finds.
#[derive(Default)]
struct Chosen {
    keys: HashSet<Key>,
    /// Chosen but begun before its env's first camera image.
    imageless: HashSet<Key>,
    /// The first camera image of a chosen env: width, height, encoding.
    image: Option<(u32, u32, String)>,
    envs: std::collections::BTreeSet<u32>,
    intervals: Vec<u64>,
    obs_size: usize,
    act_size: usize,
    truncateds: bool,
    names: BTreeMap<String, String>,
    summary: LeRobotSummary,
}

/// First pass: every episode, and those that go in.
fn choose(input: &Path, mut progress: impl FnMut(Progress)) -> Result<Chosen, ExportError> {
    let mut file = File::open(input).map_err(|e| ExportError::Input(e.to_string()))?;
    let mut c = Chosen::default();
    let mut acc: Option<RecordedEpisodes> = None;
    let mut frame = RecFrame::default();
    let mut out: Vec<Episode> = Vec::new();
    // Envs whose open episode had a frame without their row.
    let mut rowless: HashSet<u32> = HashSet::new();
    let mut last_t: Option<u64> = None;
    // Envs with a camera image so far, and envs whose episode began after one of theirs.
    let mut imaged: HashSet<u32> = HashSet::new();
    let mut image_at_start: HashSet<u32> = HashSet::new();
    let mut starting: Option<Vec<u32>> = None;
    let mut first_images: BTreeMap<u32, (u32, u32, String)> = BTreeMap::new();
    let end = replay::read_recording(
        &mut std::io::BufReader::new(&mut file),
        |event| {
            match event {
                replay::Event::Metadata(m) => {
                    if m.name == NAMES_METADATA {
                        c.names = m.metadata.clone();
                    }
                }
                replay::Event::Camera { env, data, .. } => {
                    if imaged.insert(env)
                        && let Ok(raw) = fox::root_as_raw_image(data)
                    {
                        let encoding = raw.encoding().unwrap_or_default().to_string();
                        first_images.insert(env, (raw.width(), raw.height(), encoding));
                    }
                }
                replay::Event::Frame { log_ns, data } => {
                    frame
                        .decode_into(log_ns, data)
                        .map_err(|e| ExportError::Damaged(e.to_string()))?;
                    // Envs whose episode begins at this frame: all at the first, else those
                    // that ended at the one before.
                    let n = frame.rewards.len() as u32;
                    let begin: Vec<u32> = starting.take().unwrap_or_else(|| (0..n).collect());
                    for env in begin {
                        if imaged.contains(&env) {
                            image_at_start.insert(env);
                        } else {
                            image_at_start.remove(&env);
                        }
                    }
                    let a = acc.get_or_insert_with(|| {
                        RecordedEpisodes::of(
                            frame.rewards.len() as u32,
                            frame.obs_size as u32,
                            frame.act_size as u32,
                        )
                    });
                    c.obs_size = frame.obs_size;
                    c.act_size = frame.act_size;
                    c.truncateds |= frame.truncateds.is_some();
                    let t = if frame.frame_time_ns != 0 {
                        frame.frame_time_ns
                    } else {
                        frame.sampled_ns
                    };
                    if let Some(p) = last_t
                        && t > p
                        && c.intervals.len() < 100_000
                    {
                        c.intervals.push(t - p);
                    }
                    last_t = Some(t);
                    for env in 0..n {
                        if frame.envs.binary_search(&env).is_err() {
                            rowless.insert(env);
                        }
                    }
                    a.frame(&frame, &mut out);
                    let mut ended = Vec::new();
                    for e in out.drain(..) {
                        take(
                            &mut c,
                            &e,
                            rowless.remove(&e.env),
                            image_at_start.contains(&e.env),
                        );
                        ended.push(e.env);
                    }
                    starting = Some(ended);
                }
            }
            Ok::<(), ExportError>(())
        },
        |bytes_read| {
            progress(Progress {
                bytes_read,
                rows: 0,
            });
        },
    )?;
    if let Some(a) = &mut acc {
        a.finish(&mut out);
        c.summary.running += out.len() as u64;
    }
    c.summary.end = end;
    // Images go in when the chosen envs have some, all of one size and a pixel format
    // that is a colour or grey image; the episodes begun before their env's first image
    // are then left out.
    let theirs: Vec<&(u32, u32, String)> =
        c.envs.iter().filter_map(|e| first_images.get(e)).collect();
    if let Some(&first) = theirs.first() {
        if !theirs.iter().all(|i| *i == first) {
            c.summary.image_note = Some("the envs' camera images differ in size or format".into());
        } else if !matches!(first.2.as_str(), "rgb8" | "rgba8" | "mono8") {
            c.summary.image_note = Some(format!(
                "camera images of encoding {:?} are not colour or grey images",
                first.2
            ));
        } else {
            c.image = Some(first.clone());
            c.summary.without_image = c.imageless.len() as u64;
            for k in std::mem::take(&mut c.imageless) {
                c.keys.remove(&k);
            }
            c.envs = c.keys.iter().map(|k| k.0).collect();
        }
    }
    Ok(c)
}

/// Counts `e` in or out (`imaged`: an image of its env came before its first frame).
fn take(c: &mut Chosen, e: &Episode, rowless: bool, imaged: bool) {
    let s = &mut c.summary;
    if !e.ending.finished() {
        s.running += 1;
    } else if !e.complete() {
        s.incomplete += 1;
    } else if e.ending == Ending::NonFinite {
        s.nonfinite += 1;
    } else if rowless {
        s.without_rows += 1;
    } else {
        c.keys.insert((e.env, e.first_frame));
        c.envs.insert(e.env);
        if !imaged {
            c.imageless.insert((e.env, e.first_frame));
        }
    }
}

/// A feature's statistics, per dimension: exact min, max, mean and std, and quantiles
/// from a deterministic sample.
struct Stats {
    dims: usize,
    min: Vec<f64>,
    max: Vec<f64>,
    sum: Vec<f64>,
    sumsq: Vec<f64>,
    count: u64,
    sample: Vec<f32>,
    state: u64,
}

impl Stats {
    fn new(dims: usize) -> Self {
        Self {
            dims,
            min: vec![f64::INFINITY; dims],
            max: vec![f64::NEG_INFINITY; dims],
            sum: vec![0.0; dims],
            sumsq: vec![0.0; dims],
            count: 0,
            sample: Vec::new(),
            state: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn push(&mut self, row: &[f32]) {
        for (d, &v) in row.iter().enumerate().take(self.dims) {
            let v = f64::from(v);
            self.min[d] = self.min[d].min(v);
            self.max[d] = self.max[d].max(v);
            self.sum[d] += v;
            self.sumsq[d] += v * v;
        }
        self.count += 1;
        // Reservoir sampling of whole rows (xorshift: the same dataset every time).
        let rows = self.sample.len() / self.dims.max(1);
        if rows < QUANTILE_SAMPLE {
            self.sample
                .extend_from_slice(&row[..self.dims.min(row.len())]);
        } else {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            let k = (self.state % self.count) as usize;
            if k < QUANTILE_SAMPLE {
                let at = k * self.dims;
                self.sample[at..at + self.dims].copy_from_slice(&row[..self.dims]);
            }
        }
    }

    fn to_json(&self) -> Value {
        let n = self.count.max(1) as f64;
        let mean: Vec<f64> = self.sum.iter().map(|s| s / n).collect();
        let std: Vec<f64> = self
            .sumsq
            .iter()
            .zip(&mean)
            .map(|(sq, m)| (sq / n - m * m).max(0.0).sqrt())
            .collect();
        let rows = self.sample.len() / self.dims.max(1);
        let q = |p: f64| -> Vec<f64> {
            (0..self.dims)
                .map(|d| {
                    let mut v: Vec<f32> =
                        (0..rows).map(|r| self.sample[r * self.dims + d]).collect();
                    v.sort_by(f32::total_cmp);
                    lrbc_live::stats::quantile(&v, p).map_or(0.0, f64::from)
                })
                .collect()
        };
        json!({
            "min": self.min, "max": self.max, "mean": mean, "std": std, "count": [self.count],
            "q01": q(0.01), "q10": q(0.10), "q50": q(0.50), "q90": q(0.90), "q99": q(0.99),
        })
    }
}

/// The camera image feature.
pub const IMAGE_FEATURE: &str = "observation.images.camera";
/// Image bytes buffered before a row group of the data file is written.
const GROUP_IMAGE_BYTES: usize = 64 << 20;

/// A camera image (`foxglove.RawImage` of `rgb8`, `rgba8` or `mono8`) as RGB pixels.
fn rgb_of(bytes: &[u8]) -> Option<(u32, u32, Vec<u8>)> {
    let raw = fox::root_as_raw_image(bytes).ok()?;
    let (w, h) = (raw.width() as usize, raw.height() as usize);
    let per = match raw.encoding()? {
        "rgb8" => 3,
        "rgba8" => 4,
        "mono8" => 1,
        _ => return None,
    };
    let step = raw.step() as usize;
    let data = raw.data()?.bytes();
    let mut rgb = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        let row = data.get(y * step..y * step + w * per)?;
        for p in row.chunks_exact(per) {
            match per {
                1 => rgb.extend_from_slice(&[p[0], p[0], p[0]]),
                _ => rgb.extend_from_slice(&p[..3]),
            }
        }
    }
    Some((w as u32, h as u32, rgb))
}

/// PNG bytes of RGB pixels.
fn png_of(w: u32, h: u32, rgb: &[u8]) -> Result<Vec<u8>, ExportError> {
    use image::ImageEncoder as _;
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(rgb, w, h, image::ExtendedColorType::Rgb8)
        .map_err(|e| ExportError::Output(format!("PNG: {e}")))?;
    Ok(out)
}

/// The statistics of the camera images, per colour channel, in [0, 1].
struct ImageStats {
    channels: [Stats; 3],
    rows: u64,
}

impl ImageStats {
    fn push(&mut self, rgb: &[u8]) {
        // Every 7th pixel: enough for the figures, and cheap.
        for p in rgb.chunks_exact(3).step_by(7) {
            for (c, s) in self.channels.iter_mut().enumerate() {
                s.push(&[f32::from(p[c]) / 255.0]);
            }
        }
    }

    fn to_json(&self) -> Value {
        let per: Vec<Value> = self.channels.iter().map(Stats::to_json).collect();
        let mut out = serde_json::Map::new();
        for k in [
            "min", "max", "mean", "std", "q01", "q10", "q50", "q90", "q99",
        ] {
            let v: Vec<Value> = per.iter().map(|p| json!([[p[k][0]]])).collect();
            out.insert(k.into(), Value::Array(v));
        }
        out.insert("count".into(), json!([self.rows]));
        Value::Object(out)
    }
}

/// The rows of one env's open episode.
#[derive(Default)]
struct Open {
    images: Vec<Arc<Vec<u8>>>,
    obs: Vec<f32>,
    act: Vec<f32>,
    reward: Vec<f32>,
    done: Vec<bool>,
    truncated: Vec<bool>,
}

/// The data file, buffered by row group.
struct Data {
    writer: SerializedFileWriter<BufWriter<File>>,
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

fn required(
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
fn list(
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

fn writer(
    path: &Path,
    fields: Vec<TypePtr>,
    kv: Vec<KeyValue>,
) -> Result<SerializedFileWriter<BufWriter<File>>, ExportError> {
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
    let file =
        File::create(path).map_err(|e| ExportError::Output(format!("{}: {e}", path.display())))?;
    SerializedFileWriter::new(
        BufWriter::with_capacity(1 << 20, file),
        schema,
        Arc::new(props),
    )
    .map_err(err)
}

impl Data {
    fn flush(&mut self) -> Result<(), ExportError> {
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
}

/// The names of a recording's observations or actions (`prefix` `obs` or `act`), one per
/// value; a value without a name is `obs_I`.
fn names_of(names: &BTreeMap<String, String>, prefix: &str, size: usize) -> Vec<String> {
    let mut v = super::names(names, prefix);
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

fn mkdir(p: &Path) -> Result<(), ExportError> {
    std::fs::create_dir_all(p).map_err(|e| ExportError::Output(format!("{}: {e}", p.display())))
}

/// Writes the LeRobot dataset of the recording `input` into `dir` (which must not exist,
/// or be empty). On failure what was written is removed.
pub fn export_lerobot(
    input: &Path,
    dir: &Path,
    options: &LeRobotOptions,
    mut progress: impl FnMut(Progress),
) -> Result<LeRobotSummary, ExportError> {
    if std::fs::metadata(input).is_ok_and(|m| m.is_dir()) {
        return Err(ExportError::Input("it is a folder".into()));
    }
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(ExportError::Output(format!(
                    "{} exists and is not empty",
                    dir.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(ExportError::Output(format!("{}: {e}", dir.display()))),
    }
    let result = write(input, dir, options, &mut progress);
    if result.is_err() {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

fn write(
    input: &Path,
    dir: &Path,
    options: &LeRobotOptions,
    progress: &mut impl FnMut(Progress),
) -> Result<LeRobotSummary, ExportError> {
    let chosen = choose(input, &mut *progress)?;
    let mut summary = chosen.summary.clone();
    summary.envs = chosen.envs.iter().copied().collect();
    let mut intervals = chosen.intervals.clone();
    intervals.sort_unstable();
    // The mean interval between frames, stalls and bursts (beyond half or twice the
    // median) left out.
    let median = intervals.get(intervals.len() / 2).copied().unwrap_or(0);
    let usual: Vec<u64> = intervals
        .iter()
        .copied()
        .filter(|&d| d * 2 >= median && d <= median * 2)
        .collect();
    let mean = usual.iter().sum::<u64>() as f64 / usual.len().max(1) as f64;
    let fps = if mean > 0.0 {
        ((1e9 / mean).round() as u32).max(1)
    } else {
        1
    };
    summary.fps = fps;
    let task = options.task.clone().unwrap_or_else(|| {
        input.file_stem().map_or_else(
            || "lrbc recording".into(),
            |s| s.to_string_lossy().into_owned(),
        )
    });
    summary.task.clone_from(&task);
    let (obs_size, act_size) = (chosen.obs_size, chosen.act_size);
    let (with_obs, with_act, with_truncated) = (obs_size > 0, act_size > 0, chosen.truncateds);

    for sub in ["meta/episodes/chunk-000", "data/chunk-000"] {
        mkdir(&dir.join(sub))?;
    }
    // The data file: the features' columns in the order info.json lists them.
    let mut fields = Vec::new();
    if with_obs {
        fields.push(list("observation.state", Physical::FLOAT, None)?);
    }
    if with_act {
        fields.push(list("action", Physical::FLOAT, None)?);
    }
    let with_image = chosen.image.is_some();
    if with_image {
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
    if with_truncated {
        fields.push(required("next.truncated", Physical::BOOLEAN, None)?);
    }
    fields.push(required("timestamp", Physical::FLOAT, None)?);
    for k in ["frame_index", "episode_index", "index", "task_index"] {
        fields.push(required(k, Physical::INT64, None)?);
    }
    let mut data = Data {
        writer: writer(
            &dir.join("data/chunk-000/file-000.parquet"),
            fields,
            Vec::new(),
        )?,
        obs: ListColumn::default(),
        act: ListColumn::default(),
        image: Vec::new(),
        image_bytes: 0,
        with_image,
        reward: Vec::new(),
        done: Vec::new(),
        truncated: Vec::new(),
        timestamp: Vec::new(),
        frame_index: Vec::new(),
        episode_index: Vec::new(),
        index: Vec::new(),
        task_index: Vec::new(),
        with_obs,
        with_act,
        with_truncated,
    };
    let mut stats: BTreeMap<&str, Stats> = BTreeMap::new();
    if with_obs {
        stats.insert("observation.state", Stats::new(obs_size));
    }
    if with_act {
        stats.insert("action", Stats::new(act_size));
    }
    for k in [
        "next.reward",
        "next.done",
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
        "task_index",
    ] {
        stats.insert(k, Stats::new(1));
    }
    if with_truncated {
        stats.insert("next.truncated", Stats::new(1));
    }
    // (episode_index, length, from, to) of each episode written.
    let mut episodes: Vec<(i64, i64, i64, i64)> = Vec::new();

    // Second pass: the chosen episodes' rows, each written as its episode ends.
    let mut file = File::open(input).map_err(|e| ExportError::Input(e.to_string()))?;
    let mut acc: Option<RecordedEpisodes> = None;
    let mut frame = RecFrame::default();
    let mut out: Vec<Episode> = Vec::new();
    let mut open: BTreeMap<u32, Open> = BTreeMap::new();
    let mut latest: BTreeMap<u32, Arc<Vec<u8>>> = BTreeMap::new();
    let mut image_stats = ImageStats {
        channels: [Stats::new(1), Stats::new(1), Stats::new(1)],
        rows: 0,
    };
    let mut rows = 0i64;
    let written = std::cell::Cell::new(0u64);
    let mut failed: Option<ExportError> = None;
    replay::read_recording(
        &mut std::io::BufReader::new(&mut file),
        |event| {
            let (log_ns, bytes) = match event {
                replay::Event::Frame { log_ns, data } => (log_ns, data),
                replay::Event::Camera { env, data, .. }
                    if with_image && chosen.envs.contains(&env) =>
                {
                    let (w, h, rgb) = rgb_of(data).ok_or_else(|| {
                        ExportError::Damaged(format!("a camera image of env {env} does not read"))
                    })?;
                    if Some((w, h)) != chosen.image.as_ref().map(|i| (i.0, i.1)) {
                        return Err(ExportError::Damaged(format!(
                            "a camera image of env {env} is {w}×{h}, not the size of the first"
                        )));
                    }
                    image_stats.push(&rgb);
                    latest.insert(env, Arc::new(png_of(w, h, &rgb)?));
                    return Ok(());
                }
                _ => return Ok(()),
            };
            frame
                .decode_into(log_ns, bytes)
                .map_err(|e| ExportError::Damaged(e.to_string()))?;
            let a = acc.get_or_insert_with(|| {
                RecordedEpisodes::of(
                    frame.rewards.len() as u32,
                    frame.obs_size as u32,
                    frame.act_size as u32,
                )
            });
            // The frame's rows of the envs whose episode going on was chosen.
            for &env in &chosen.envs {
                let going = a
                    .accountant()
                    .and_then(|x| x.started(env))
                    .filter(|(first, _)| *first <= frame.frame_seq)
                    .or_else(|| a.accountant().is_none().then_some((frame.frame_seq, false)));
                let first = match going {
                    Some((first, _)) => first,
                    None => frame.frame_seq,
                };
                if !chosen.keys.contains(&(env, first)) {
                    continue;
                }
                let (Some((o, ac)), e) = (frame.rows_of(env), env as usize) else {
                    continue;
                };
                let r = open.entry(env).or_default();
                if with_image {
                    match latest.get(&env) {
                        Some(png) => r.images.push(Arc::clone(png)),
                        None => continue,
                    }
                }
                r.obs.extend_from_slice(o);
                r.act.extend_from_slice(ac);
                r.reward
                    .push(frame.rewards.get(e).copied().unwrap_or(f32::NAN));
                r.done.push(frame.dones.get(e).is_some_and(|&d| d != 0));
                r.truncated.push(
                    frame
                        .truncateds
                        .as_deref()
                        .and_then(|t| t.get(e))
                        .is_some_and(|&t| t != 0),
                );
            }
            a.frame(&frame, &mut out);
            for e in out.drain(..) {
                let Some(r) = open.remove(&e.env) else {
                    continue;
                };
                if !chosen.keys.contains(&(e.env, e.first_frame)) {
                    continue;
                }
                let len = r.reward.len();
                if len as u64 != e.length() {
                    failed.get_or_insert(ExportError::Damaged(format!(
                        "env {}'s episode of frames {}–{}: {len} rows for {} frames",
                        e.env,
                        e.first_frame,
                        e.last_frame,
                        e.length()
                    )));
                    continue;
                }
                let ep = episodes.len() as i64;
                episodes.push((ep, len as i64, rows, rows + len as i64));
                for i in 0..len {
                    let o = &r.obs[i * obs_size..(i + 1) * obs_size];
                    let ac = &r.act[i * act_size..(i + 1) * act_size];
                    let ts = i as f32 / fps as f32;
                    if with_obs {
                        data.obs.push(Some(o));
                        if let Some(s) = stats.get_mut("observation.state") {
                            s.push(o);
                        }
                    }
                    if with_image && let Some(png) = r.images.get(i) {
                        data.image_bytes += png.len();
                        data.image.push(ByteArray::from(png.as_slice().to_vec()));
                        image_stats.rows += 1;
                    }
                    if with_act {
                        data.act.push(Some(ac));
                        if let Some(s) = stats.get_mut("action") {
                            s.push(ac);
                        }
                    }
                    let flags = [
                        r.reward[i],
                        f32::from(u8::from(r.done[i])),
                        f32::from(u8::from(r.truncated[i])),
                    ];
                    data.reward.push(flags[0]);
                    data.done.push(r.done[i]);
                    if with_truncated {
                        data.truncated.push(r.truncated[i]);
                    }
                    data.timestamp.push(ts);
                    data.frame_index.push(i as i64);
                    data.episode_index.push(ep);
                    data.index.push(rows + i as i64);
                    data.task_index.push(0);
                    for (k, v) in [
                        ("next.reward", flags[0]),
                        ("next.done", flags[1]),
                        ("next.truncated", flags[2]),
                        ("timestamp", ts),
                        ("frame_index", i as f32),
                        ("episode_index", ep as f32),
                        ("index", (rows + i as i64) as f32),
                        ("task_index", 0.0),
                    ] {
                        if let Some(s) = stats.get_mut(k) {
                            s.push(&[v]);
                        }
                    }
                }
                rows += len as i64;
                written.set(rows as u64);
                if (data.index.len() >= GROUP_ROWS || data.image_bytes >= GROUP_IMAGE_BYTES)
                    && let Err(e) = data.flush()
                {
                    failed.get_or_insert(e);
                }
            }
            Ok::<(), ExportError>(())
        },
        |bytes_read| {
            progress(Progress {
                bytes_read,
                rows: written.get(),
            });
        },
    )?;
    if let Some(e) = failed {
        return Err(e);
    }
    data.flush()?;
    finish_writer(data.writer)?;
    summary.episodes = episodes.len() as u64;
    summary.frames = rows as u64;

    // meta/tasks.parquet: the task string as the pandas index.
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
    put::<ByteArrayType>(&mut rg, &[ByteArray::from(task.as_str())], None, None)?;
    rg.close().map_err(err)?;
    finish_writer(w)?;

    // meta/episodes: row i is episode i.
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
    put::<Int64Type>(
        &mut rg,
        &episodes.iter().map(|e| e.0).collect::<Vec<_>>(),
        None,
        None,
    )?;
    let task_bytes = vec![ByteArray::from(task.as_str()); n];
    put::<ByteArrayType>(&mut rg, &task_bytes, Some(&vec![2; n]), Some(&vec![0; n]))?;
    let zeros = vec![0i64; n];
    put::<Int64Type>(
        &mut rg,
        &episodes.iter().map(|e| e.1).collect::<Vec<_>>(),
        None,
        None,
    )?;
    put::<Int64Type>(&mut rg, &zeros, None, None)?;
    put::<Int64Type>(&mut rg, &zeros, None, None)?;
    put::<Int64Type>(
        &mut rg,
        &episodes.iter().map(|e| e.2).collect::<Vec<_>>(),
        None,
        None,
    )?;
    put::<Int64Type>(
        &mut rg,
        &episodes.iter().map(|e| e.3).collect::<Vec<_>>(),
        None,
        None,
    )?;
    put::<Int64Type>(&mut rg, &zeros, None, None)?;
    put::<Int64Type>(&mut rg, &zeros, None, None)?;
    rg.close().map_err(err)?;
    finish_writer(w)?;

    // meta/info.json and meta/stats.json.
    let scalar = |dtype: &str| json!({"dtype": dtype, "shape": [1], "names": null});
    let mut features = serde_json::Map::new();
    if with_obs {
        features.insert(
            "observation.state".into(),
            json!({"dtype": "float32", "shape": [obs_size], "names": names_of(&chosen.names, "obs", obs_size)}),
        );
    }
    if with_act {
        features.insert(
            "action".into(),
            json!({"dtype": "float32", "shape": [act_size], "names": names_of(&chosen.names, "act", act_size)}),
        );
    }
    if let Some((w, h, _)) = &chosen.image {
        features.insert(
            IMAGE_FEATURE.into(),
            json!({"dtype": "image", "shape": [h, w, 3], "names": ["height", "width", "channels"]}),
        );
        summary.image = Some((*h, *w));
    }
    features.insert("next.reward".into(), scalar("float32"));
    features.insert("next.done".into(), scalar("bool"));
    if with_truncated {
        features.insert("next.truncated".into(), scalar("bool"));
    }
    features.insert("timestamp".into(), scalar("float32"));
    for k in ["frame_index", "episode_index", "index", "task_index"] {
        features.insert(k.into(), scalar("int64"));
    }
    let info = json!({
        "codebase_version": CODEBASE_VERSION,
        "robot_type": null,
        "total_episodes": n,
        "total_frames": rows,
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
    write_json(&dir.join("meta/info.json"), &info)?;
    let mut stats: serde_json::Map<String, Value> = stats
        .iter()
        .map(|(k, s)| ((*k).to_string(), s.to_json()))
        .collect();
    if with_image {
        stats.insert(IMAGE_FEATURE.into(), image_stats.to_json());
    }
    write_json(&dir.join("meta/stats.json"), &Value::Object(stats))?;
    Ok(summary)
}
