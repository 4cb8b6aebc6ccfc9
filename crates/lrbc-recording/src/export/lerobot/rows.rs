//! The second pass over the recording: the chosen episodes' rows, gathered per env while
//! the episode goes on and written to the data file (and counted in the statistics) as
//! it ends; each camera image as PNG, the newest of its env going with each row.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use super::Row;
use super::choose::ChosenEpisodes;
use super::data::Data;
use super::stats::DatasetStats;
use crate::export::{ExportError, Progress};
use crate::format::{RecFrame, raw_encoding, region_pixels};
use crate::replay::{self, RecordedEpisodes};
use lrbc::rpc::foxglove_fb as fox;
use lrbc_live::episodes::Episode;

/// An episode written: its index and where its rows are in the dataset.
pub(super) struct Written {
    pub(super) episode_index: i64,
    pub(super) length: i64,
    pub(super) from: i64,
    pub(super) to: i64,
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

/// The second pass's state.
struct Pass<'a> {
    chosen: &'a ChosenEpisodes,
    fps: u32,
    obs_size: usize,
    act_size: usize,
    with_image: bool,
    data: &'a mut Data,
    stats: &'a mut DatasetStats,
    acc: Option<RecordedEpisodes>,
    frame: RecFrame,
    ended: Vec<Episode>,
    open: BTreeMap<u32, Open>,
    /// Each env's newest camera image, as PNG.
    latest: BTreeMap<u32, Arc<Vec<u8>>>,
    rows: i64,
    written: Vec<Written>,
    /// The first error while writing: reading goes on, the export fails at the end.
    failed: Option<ExportError>,
}

/// Reads `input` again and writes the rows of the episodes `chosen` holds into `data`,
/// counting them in `stats`; the episodes written, in order.
pub(super) fn write_rows(
    input: &Path,
    chosen: &ChosenEpisodes,
    fps: u32,
    data: &mut Data,
    stats: &mut DatasetStats,
    progress: &mut impl FnMut(Progress),
) -> Result<Vec<Written>, ExportError> {
    let mut file = File::open(input).map_err(|e| ExportError::Input(e.to_string()))?;
    let mut pass = Pass {
        chosen,
        fps,
        obs_size: chosen.obs_size,
        act_size: chosen.act_size,
        with_image: chosen.image.is_some(),
        data,
        stats,
        acc: None,
        frame: RecFrame::default(),
        ended: Vec::new(),
        open: BTreeMap::new(),
        latest: BTreeMap::new(),
        rows: 0,
        written: Vec::new(),
        failed: None,
    };
    let rows_written = std::cell::Cell::new(0u64);
    replay::read_recording(
        &mut std::io::BufReader::new(&mut file),
        |event| {
            match event {
                replay::StreamItem::Frame { log_ns, data } => pass.frame(log_ns, data)?,
                replay::StreamItem::Camera { env, data, .. }
                    if pass.with_image && pass.chosen.envs.contains(&env) =>
                {
                    pass.camera(env, data)?;
                }
                _ => {}
            }
            rows_written.set(pass.rows as u64);
            Ok::<(), ExportError>(())
        },
        |bytes_read| {
            progress(Progress {
                bytes_read,
                rows: rows_written.get(),
            });
        },
    )?;
    match pass.failed {
        Some(e) => Err(e),
        None => Ok(pass.written),
    }
}

impl Pass<'_> {
    /// A camera image of a chosen env: counted, and kept as PNG for the env's next rows.
    fn camera(&mut self, env: u32, bytes: &[u8]) -> Result<(), ExportError> {
        let (w, h, rgb) = rgb_of(bytes).ok_or_else(|| {
            ExportError::Damaged(format!("a camera image of env {env} does not read"))
        })?;
        if Some((w, h)) != self.chosen.image.as_ref().map(|i| (i.0, i.1)) {
            return Err(ExportError::Damaged(format!(
                "a camera image of env {env} is {w}×{h}, not the size of the first"
            )));
        }
        self.stats.push_image(&rgb);
        self.latest.insert(env, Arc::new(png_of(w, h, &rgb)?));
        Ok(())
    }

    /// A frame: its rows of the chosen episodes going on, then the episodes it ends
    /// written.
    fn frame(&mut self, log_ns: u64, bytes: &[u8]) -> Result<(), ExportError> {
        self.frame
            .decode_into(log_ns, bytes)
            .map_err(|e| ExportError::Damaged(e.to_string()))?;
        let frame = &self.frame;
        let a = self.acc.get_or_insert_with(|| {
            RecordedEpisodes::of(
                frame.rewards.len() as u32,
                frame.obs_size as u32,
                frame.act_size as u32,
            )
        });
        // The frame's rows of the envs whose episode going on was chosen.
        for &env in &self.chosen.envs {
            let going = a
                .accountant()
                .and_then(|x| x.started(env))
                .filter(|(first, _)| *first <= frame.frame_seq)
                .or_else(|| a.accountant().is_none().then_some((frame.frame_seq, false)));
            let first = match going {
                Some((first, _)) => first,
                None => frame.frame_seq,
            };
            if !self.chosen.keys.contains(&(env, first)) {
                continue;
            }
            let (Some((o, ac)), e) = (frame.rows_of(env), env as usize) else {
                continue;
            };
            let r = self.open.entry(env).or_default();
            if self.with_image {
                match self.latest.get(&env) {
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
        a.frame(frame, &mut self.ended);
        let mut ended = std::mem::take(&mut self.ended);
        for e in ended.drain(..) {
            self.episode_ended(&e);
        }
        self.ended = ended;
        Ok(())
    }

    /// Writes `e`'s rows if it was chosen and they are all there.
    fn episode_ended(&mut self, e: &Episode) {
        let Some(r) = self.open.remove(&e.env) else {
            return;
        };
        if !self.chosen.keys.contains(&(e.env, e.first_frame)) {
            return;
        }
        let len = r.reward.len();
        if len as u64 != e.length() {
            self.failed.get_or_insert(ExportError::Damaged(format!(
                "env {}'s episode of frames {}–{}: {len} rows for {} frames",
                e.env,
                e.first_frame,
                e.last_frame,
                e.length()
            )));
            return;
        }
        let ep = self.written.len() as i64;
        let rows = self.rows;
        self.written.push(Written {
            episode_index: ep,
            length: len as i64,
            from: rows,
            to: rows + len as i64,
        });
        let (obs_size, act_size) = (self.obs_size, self.act_size);
        for i in 0..len {
            let row = Row {
                obs: &r.obs[i * obs_size..(i + 1) * obs_size],
                act: &r.act[i * act_size..(i + 1) * act_size],
                image: r.images.get(i).map(|png| png.as_slice()),
                reward: r.reward[i],
                done: r.done[i],
                truncated: r.truncated[i],
                timestamp: i as f32 / self.fps as f32,
                frame_index: i as i64,
                episode_index: ep,
                index: rows + i as i64,
            };
            self.data.push(&row);
            self.stats.push_row(&row);
        }
        self.rows += len as i64;
        if self.data.full()
            && let Err(e) = self.data.flush()
        {
            self.failed.get_or_insert(e);
        }
    }
}

/// A camera image (`foxglove.RawImage` of `rgb8`, `rgba8` or `mono8`) as RGB pixels, its
/// rows read by the recording format's [`region_pixels`].
fn rgb_of(bytes: &[u8]) -> Option<(u32, u32, Vec<u8>)> {
    let raw = fox::root_as_raw_image(bytes).ok()?;
    let (w, h) = (raw.width(), raw.height());
    let encoding = raw.encoding()?;
    let per = [1, 3, 4]
        .into_iter()
        .find(|&c| raw_encoding(c) == Some(encoding))?;
    let pixels = region_pixels(bytes, (w, h, per))?;
    let row = w as usize * per as usize;
    let mut rgb = Vec::with_capacity(w as usize * h as usize * 3);
    for y in 0..h as usize {
        let line = pixels.data.get(y * pixels.step..y * pixels.step + row)?;
        for p in line.chunks_exact(per as usize) {
            match per {
                1 => rgb.extend_from_slice(&[p[0], p[0], p[0]]),
                _ => rgb.extend_from_slice(&p[..3]),
            }
        }
    }
    Some((w, h, rgb))
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
