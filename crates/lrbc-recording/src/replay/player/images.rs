//! The newest camera images at or before the cursor: the image region's into the data,
//! each stream's frame into the traffic store.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::PlayerThread;
use crate::replay::{Damage, LatestImages};
use lrbc::layout::Geometry;
use lrbc::sync::lock;
use lrbc_live::sampler::{ImageFrame, SamplerSettings};
use lrbc_live::text::plural;
use lrbc_live::traffic::{StreamedImage, TrafficLimits};

/// `record_index` of streamed frames taken from the index rather than from a traffic
/// row (above any row index, so that the cameras panel sees a new frame).
const STREAM_MARK_BASE: u64 = 1 << 62;

impl PlayerThread {
    /// The newest camera images at or before `cursor` into the data (the image region's)
    /// and the traffic store (the streams').
    pub(super) fn publish_images(
        &mut self,
        cursor: u64,
        settings: &SamplerSettings,
        limits: TrafficLimits,
    ) -> Result<(), Damage> {
        let LatestImages { cameras, streams } = self.rec.images_at(cursor)?;
        let key = (
            cameras
                .iter()
                .map(|(&e, &(t, _))| (e, t))
                .collect::<Vec<_>>(),
            settings.image_bytes,
        );
        if self.images_shown.as_ref() != Some(&key) {
            self.images_shown = Some(key);
            self.image_seq += 1;
            // The frame recorded last before the newest image.
            let newest = cameras.values().map(|(t, _)| *t).max();
            let frame_seq = match newest {
                Some(t) => self.rec.frame_at(t)?.map_or(0, |f| f.frame_seq),
                None => 0,
            };
            let (image, note) = region_image(
                &self.rec.geometry,
                &cameras,
                settings.image_bytes,
                (self.image_seq, frame_seq),
                ImageOrigin::Recording {
                    has_cameras: self.rec.has_camera_images(),
                },
            );
            let fps = newest.map_or(0.0, |t| image_rate(&mut self.image_times, t));
            let mut d = lock(&self.data);
            d.image = image;
            d.image_note = note;
            d.image_fps = fps;
        }
        let mut store = lock(&self.store);
        for (_, (_, envelope)) in streams {
            let Some(source) = lrbc::rpc::image::image_source(&envelope) else {
                continue;
            };
            let too_big = envelope.len() > limits.max_stream_bytes;
            if store
                .streams
                .get(&source)
                .is_some_and(|s| s.envelope == envelope || (too_big && s.not_kept.is_some()))
            {
                continue;
            }
            self.stream_marks += 1;
            let s = store
                .streams
                .entry(source)
                .or_insert_with(|| StreamedImage {
                    record_index: 0,
                    frames: 0,
                    envelope: Arc::from(&[][..]),
                    not_kept: None,
                });
            s.record_index = STREAM_MARK_BASE + self.stream_marks;
            s.frames = s.frames.max(1);
            if too_big {
                s.envelope = Arc::from(&[][..]);
                s.not_kept = Some(envelope.len());
            } else {
                s.envelope = envelope;
                s.not_kept = None;
            }
        }
        Ok(())
    }
}

/// Where the camera images come from, for the notes of the cameras panel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageOrigin {
    /// A recording, with or without camera images.
    Recording { has_cameras: bool },
    /// A served run (`serve --images`).
    Served,
}

impl ImageOrigin {
    /// Why there is no image at all.
    pub fn none(self) -> &'static str {
        match self {
            Self::Recording { has_cameras: true } => {
                "no camera image recorded at or before this point"
            }
            Self::Recording { has_cameras: false } => {
                "this recording has no camera images (record --images records them)"
            }
            Self::Served => "no camera image served yet (serve --images sends them)",
        }
    }
}

/// The image region as of the newest recorded images: the recorded envs' pixels, the
/// other envs black. No image: why, for the cameras panel.
pub fn region_image(
    g: &Geometry,
    cameras: &BTreeMap<u32, (u64, Arc<[u8]>)>,
    budget: usize,
    (image_seq, frame_seq): (u64, u64),
    origin: ImageOrigin,
) -> (Option<ImageFrame>, Option<String>) {
    let Some(img) = g.image else {
        return (None, None);
    };
    if cameras.is_empty() {
        return (None, Some(origin.none().into()));
    }
    let pixels = u64::from(g.num_envs) * u64::from(img.width) * u64::from(img.height);
    let cost = pixels.saturating_mul(u64::from(img.channels) + 4);
    if cost > budget as u64 {
        return (
            None,
            Some(format!(
                "camera images are not shown: {:.1} MiB with their textures, over the {:.1} MiB the memory budget gives them (Settings)",
                cost as f64 / 1048576.0,
                budget as f64 / 1048576.0
            )),
        );
    }
    let Some(encoding) = crate::format::raw_encoding(img.channels) else {
        let c = img.channels;
        return (None, Some(format!("images of {c} channels are not shown")));
    };
    let (row, h) = (
        img.width as usize * img.channels as usize,
        img.height as usize,
    );
    let per = row * h;
    let Some(total) = per.checked_mul(g.num_envs as usize) else {
        return (None, Some("the image region is too large".into()));
    };
    let mut buf = vec![0u8; total];
    if img.channels == 4 {
        // Opaque black.
        for p in buf.chunks_exact_mut(4) {
            p[3] = 255;
        }
    }
    let mut shown = 0usize;
    let mut newest = 0u64;
    for (&env, (log_ns, bytes)) in cameras {
        // Raw as recorded, or PNG or JPEG as `serve --image-format` sends them.
        let dims = (img.width, img.height, img.channels);
        let Some(rows) = crate::format::region_pixels(bytes, dims) else {
            continue;
        };
        let Some(dest) = buf.get_mut(env as usize * per..(env as usize + 1) * per) else {
            continue;
        };
        for (y, out) in dest.chunks_exact_mut(row).enumerate() {
            out.copy_from_slice(&rows.data[y * rows.step..y * rows.step + row]);
        }
        shown += 1;
        newest = newest.max(*log_ns);
    }
    if shown == 0 {
        return (
            None,
            Some(format!(
                "the recorded camera images are not {}×{} {encoding} as the image region",
                img.width, img.height
            )),
        );
    }
    // The envs without a recorded image are black: say which are real.
    let note = (shown < g.num_envs as usize).then(|| {
        let envs: Vec<u32> = cameras.keys().copied().collect();
        match origin {
            ImageOrigin::Recording { .. } => format!(
                "images of {} recorded (record --images takes the recorded envs'); the other tiles are black",
                describe_envs(&envs)
            ),
            ImageOrigin::Served => format!(
                "images of {} served (serve --envs chooses them); the other tiles are black",
                describe_envs(&envs)
            ),
        }
    });
    (
        Some(ImageFrame {
            image_seq,
            frame_seq,
            width: img.width,
            height: img.height,
            channels: img.channels,
            num_envs: g.num_envs,
            pixels: Arc::new(buf),
            captured_ns: newest,
            consistent: true,
        }),
        note,
    )
}

/// Notes an image set whose newest image was recorded at `t` and gives the rate of
/// sets over the recording's last second before it (0 until two are seen). A seek
/// (backwards, or ahead by more than a second) starts the count over.
pub fn image_rate(times: &mut std::collections::VecDeque<u64>, t: u64) -> f32 {
    const SECOND: u64 = 1_000_000_000;
    if times
        .back()
        .is_some_and(|&last| t < last || t - last > SECOND)
    {
        times.clear();
    }
    times.push_back(t);
    while times.front().is_some_and(|&f| t - f > SECOND) {
        times.pop_front();
    }
    match (times.front(), times.len()) {
        (Some(&first), n) if n >= 2 && t > first => (n - 1) as f32 * 1e9 / (t - first) as f32,
        _ => 0.0,
    }
}

/// "env 1", "envs 0–3, 7": ascending envs, runs joined.
fn describe_envs(envs: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &e in envs {
        match runs.last_mut() {
            Some((_, end)) if e == *end + 1 => *end = e,
            _ => runs.push((e, e)),
        }
    }
    let parts: Vec<String> = runs
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}–{b}")
            }
        })
        .collect();
    format!("env{} {}", plural(envs.len()), parts.join(", "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_image_rate_is_over_the_recordings_last_second_and_starts_over_on_a_seek() {
        let mut times = std::collections::VecDeque::new();
        assert_eq!(super::image_rate(&mut times, 1_000_000_000), 0.0);
        let mut fps = 0.0;
        for k in 1..=30u64 {
            fps = super::image_rate(&mut times, 1_000_000_000 + k * 33_333_333);
        }
        assert!((fps - 30.0).abs() < 0.5, "{fps}");
        // Back to the start: one set seen, no rate yet.
        assert_eq!(super::image_rate(&mut times, 500), 0.0);
        assert_eq!(times.len(), 1);
    }

    #[test]
    fn envs_are_described_in_runs() {
        assert_eq!(super::describe_envs(&[1]), "env 1");
        assert_eq!(super::describe_envs(&[0, 1, 2, 3, 7]), "envs 0–3, 7");
        assert_eq!(super::describe_envs(&[2, 4]), "envs 2, 4");
    }
}
