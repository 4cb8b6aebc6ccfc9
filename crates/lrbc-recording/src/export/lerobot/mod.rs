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
//!
//! Modules: `choose` (the first pass), `stats` (the features' statistics), `data` (the
//! Parquet files' columns and the data file), `rows` (the second pass: the chosen
//! episodes' rows), `meta` (the `meta/` files).

mod choose;
mod data;
mod meta;
mod rows;
mod stats;

use std::path::Path;

use super::{ExportError, Progress};
use crate::replay::End;
use choose::{ChosenEpisodes, choose};
use data::Data;
use stats::DatasetStats;

/// The dataset format LeRobot 0.4 reads.
pub const CODEBASE_VERSION: &str = "v3.0";
/// The camera image feature.
pub const IMAGE_FEATURE: &str = "observation.images.camera";

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
        // The partial output goes; the error that cut it short is the one reported.
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

/// The features of the dataset that not every dataset has.
struct Features {
    /// Values of `observation.state` (none when 0).
    obs_size: usize,
    /// Values of `action` (none when 0).
    act_size: usize,
    /// `next.truncated`.
    truncated: bool,
    /// The camera images' width and height, when they go in.
    image: Option<(u32, u32)>,
}

/// One row of the dataset: a frame of an episode.
struct Row<'a> {
    obs: &'a [f32],
    act: &'a [f32],
    /// The camera image, as PNG.
    image: Option<&'a [u8]>,
    reward: f32,
    done: bool,
    truncated: bool,
    timestamp: f32,
    frame_index: i64,
    episode_index: i64,
    index: i64,
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
    let fps = chosen.fps();
    summary.fps = fps;
    let task = task_of(options, input);
    summary.task.clone_from(&task);
    let features = features_of(&chosen);

    for sub in ["meta/episodes/chunk-000", "data/chunk-000"] {
        mkdir(&dir.join(sub))?;
    }
    let mut data = Data::create(&dir.join("data/chunk-000/file-000.parquet"), &features)?;
    let mut stats = DatasetStats::new(&features);
    let episodes = rows::write_rows(input, &chosen, fps, &mut data, &mut stats, progress)?;
    data.finish()?;
    let frames = episodes.last().map_or(0, |e| e.to);
    summary.episodes = episodes.len() as u64;
    summary.frames = frames as u64;

    meta::write_tasks(dir, &task)?;
    meta::write_episodes(dir, &episodes, &task)?;
    summary.image = features.image.map(|(w, h)| (h, w));
    meta::write_info(dir, &features, &chosen.names, fps, episodes.len(), frames)?;
    meta::write_stats(dir, &stats.to_json(features.image.is_some()))?;
    Ok(summary)
}

/// The episodes' task: the one asked for, else the recording's name.
fn task_of(options: &LeRobotOptions, input: &Path) -> String {
    options.task.clone().unwrap_or_else(|| {
        input.file_stem().map_or_else(
            || "lrbc recording".into(),
            |s| s.to_string_lossy().into_owned(),
        )
    })
}

fn features_of(chosen: &ChosenEpisodes) -> Features {
    Features {
        obs_size: chosen.obs_size,
        act_size: chosen.act_size,
        truncated: chosen.truncateds,
        image: chosen.image.as_ref().map(|(w, h, _)| (*w, *h)),
    }
}

fn mkdir(p: &Path) -> Result<(), ExportError> {
    std::fs::create_dir_all(p).map_err(|e| ExportError::Output(format!("{}: {e}", p.display())))
}
