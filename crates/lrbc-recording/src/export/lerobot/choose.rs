//! The first pass over the recording: every episode, and those that go in the dataset
//! (finished, complete, finite, with a row in each of their frames and, when the
//! dataset has images, begun after their env's first image); the frame rate, the sizes
//! and the names the files are written with.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::File;
use std::path::Path;

use super::LeRobotSummary;
use crate::export::{ExportError, Progress};
use crate::format::{NAMES_METADATA, RecFrame};
use crate::replay::{self, RecordedEpisodes};
use lrbc::rpc::foxglove_fb as fox;
use lrbc_live::episodes::{Ending, Episode};

/// An episode's place: its env and first frame.
pub(super) type Key = (u32, u64);

/// What the first pass finds.
#[derive(Default)]
pub(super) struct ChosenEpisodes {
    pub(super) keys: HashSet<Key>,
    /// Chosen but begun before its env's first camera image.
    imageless: HashSet<Key>,
    /// The first camera image of a chosen env: width, height, encoding.
    pub(super) image: Option<(u32, u32, String)>,
    pub(super) envs: BTreeSet<u32>,
    intervals: Vec<u64>,
    pub(super) obs_size: usize,
    pub(super) act_size: usize,
    pub(super) truncateds: bool,
    pub(super) names: BTreeMap<String, String>,
    pub(super) summary: LeRobotSummary,
}

/// First pass: every episode, and those that go in.
pub(super) fn choose(
    input: &Path,
    mut progress: impl FnMut(Progress),
) -> Result<ChosenEpisodes, ExportError> {
    let mut file = File::open(input).map_err(|e| ExportError::Input(e.to_string()))?;
    let mut c = ChosenEpisodes::default();
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
                replay::StreamItem::Metadata(m) => {
                    if m.name == NAMES_METADATA {
                        c.names = m.metadata.clone();
                    }
                }
                replay::StreamItem::Camera { env, data, .. } => {
                    if imaged.insert(env)
                        && let Ok(raw) = fox::root_as_raw_image(data)
                    {
                        let encoding = raw.encoding().unwrap_or_default().to_string();
                        first_images.insert(env, (raw.width(), raw.height(), encoding));
                    }
                }
                replay::StreamItem::Frame { log_ns, data } => {
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
    put_images(&mut c, &first_images);
    Ok(c)
}

/// Images go in when the chosen envs have some (`first_images`: each env's first image),
/// all of one size and a pixel format that is a colour or grey image; the episodes begun
/// before their env's first image are then left out.
fn put_images(c: &mut ChosenEpisodes, first_images: &BTreeMap<u32, (u32, u32, String)>) {
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
}

/// Counts `e` in or out (`imaged`: an image of its env came before its first frame).
fn take(c: &mut ChosenEpisodes, e: &Episode, rowless: bool, imaged: bool) {
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

impl ChosenEpisodes {
    /// The dataset's frames per second: of the mean interval between frames, stalls and
    /// bursts (beyond half or twice the median) left out.
    pub(super) fn fps(&self) -> u32 {
        let mut intervals = self.intervals.clone();
        intervals.sort_unstable();
        let median = lrbc_live::stats::quantile(&intervals, 0.5).unwrap_or(0);
        let usual: Vec<u64> = intervals
            .iter()
            .copied()
            .filter(|&d| d * 2 >= median && d <= median * 2)
            .collect();
        let mean = usual.iter().sum::<u64>() as f64 / usual.len().max(1) as f64;
        if mean > 0.0 {
            ((1e9 / mean).round() as u32).max(1)
        } else {
            1
        }
    }
}

#[cfg(test)]
mod tests;
