//! The cameras panel: every env's image in a grid (textures updated in place when
//! `image_seq` moves), FPS and frame overlay, zoom with the pixel under the cursor, and
//! screenshots (save dialog, or quick-save without one).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ui::decoder::ImageDecoder;
use crate::ui::panels::traffic::{Shown, raw_to_color_image};
use crate::ui::screenshot::Shot;
use crate::ui::widgets::WARN;
use lrbc_live::sampler::{ImageFrame, SamplerData};
use lrbc_live::traffic::StreamedImage;

/// The panel's state.
#[derive(Default)]
pub struct CamerasView {
    textures: Vec<egui::TextureHandle>,
    shown_image_seq: Option<u64>,
    pub selected: u32,
    pub zoom: bool,
    pub cell: f32,
    /// Image streams seen in traffic: the newest decoded frame of each, or why not.
    streams: BTreeMap<String, Shown>,
    /// Per stream, the record last handed to the decoder and when.
    requested: BTreeMap<String, (u64, Instant)>,
    /// Decodes the streams' frames off the UI thread (started with the first stream).
    decoder: Option<ImageDecoder>,
}

/// Streamed images are decoded at most this often per stream.
const STREAM_DECODE_EVERY: Duration = Duration::from_millis(100);

impl std::fmt::Debug for CamerasView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CamerasView")
            .field("selected", &self.selected)
            .finish_non_exhaustive()
    }
}

/// A screenshot the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShotRequest {
    Quick(Shot),
    Dialog(Shot),
}

fn texture_size_bytes(t: &egui::TextureHandle) -> usize {
    let [w, h] = t.size();
    w * h * 4
}

impl CamerasView {
    /// Bytes of the textures: the env images', and the streamed frames'.
    pub fn texture_bytes_split(&self) -> (usize, usize) {
        let env: usize = self.textures.iter().map(texture_size_bytes).sum();
        let streams: usize = self
            .streams
            .values()
            .filter_map(|shown| shown.as_ref().ok())
            .map(|(t, _)| texture_size_bytes(t))
            .sum();
        (env, streams)
    }

    /// Bytes of every texture the panel holds.
    pub fn texture_bytes(&self) -> usize {
        let (a, b) = self.texture_bytes_split();
        a + b
    }

    /// Uploads new images into the textures (in place when they exist).
    fn update(&mut self, ctx: &egui::Context, f: &ImageFrame) {
        if self.shown_image_seq == Some(f.image_seq) && self.textures.len() == f.num_envs as usize {
            return;
        }
        let (w, h, c) = (f.width as usize, f.height as usize, f.channels as usize);
        let per = w * h * c;
        if self.textures.len() != f.num_envs as usize {
            self.textures.clear();
        }
        for env in 0..f.num_envs as usize {
            let Some(px) = f.pixels.get(env * per..(env + 1) * per) else {
                break;
            };
            let Some(img) = raw_to_color_image(px, w, h, c) else {
                break;
            };
            match self.textures.get_mut(env) {
                Some(t) => t.set(img, egui::TextureOptions::NEAREST),
                None => self.textures.push(ctx.load_texture(
                    format!("env_image_{env}"),
                    img,
                    egui::TextureOptions::NEAREST,
                )),
            }
        }
        self.shown_image_seq = Some(f.image_seq);
    }
}

/// The newest image of every camera and viewport stream seen in the command rings,
/// decoded on the decoder's thread: until a stream's first frame is decoded it says so,
/// and after that it shows its last decoded frame while the next one is decoded.
fn streamed(ui: &mut egui::Ui, streams: &BTreeMap<String, StreamedImage>, view: &mut CamerasView) {
    let now = Instant::now();
    view.streams.retain(|k, _| streams.contains_key(k));
    view.requested.retain(|k, _| streams.contains_key(k));
    let decoder = view
        .decoder
        .get_or_insert_with(|| ImageDecoder::new(ui.ctx()));
    decoder.retain(|k| streams.contains_key(k));
    for (source, s) in streams {
        if let Some((_, outcome)) = decoder.take(source) {
            let shown = outcome.map(|img| {
                let label = img.label();
                match view.streams.remove(source) {
                    Some(Ok((mut tex, _))) => {
                        tex.set(img.image, egui::TextureOptions::NEAREST);
                        (tex, label)
                    }
                    _ => (
                        ui.ctx().load_texture(
                            format!("stream_{source}"),
                            img.image,
                            egui::TextureOptions::NEAREST,
                        ),
                        label,
                    ),
                }
            });
            view.streams.insert(source.clone(), shown);
        }
        let due = view.requested.get(source).is_none_or(|(index, at)| {
            *index != s.record_index && now.duration_since(*at) >= STREAM_DECODE_EVERY
        });
        if !due {
            continue;
        }
        view.requested.insert(source.clone(), (s.record_index, now));
        match s.not_kept {
            Some(bytes) => {
                view.streams.insert(
                    source.clone(),
                    Err(format!(
                        "a frame of {:.1} MiB was not kept: over the memory budget for streamed frames (Settings)",
                        bytes as f64 / 1048576.0
                    )),
                );
            }
            None => decoder.request(source, s.record_index, Arc::clone(&s.envelope)),
        }
    }
    ui.horizontal_wrapped(|ui| {
        for (source, s) in streams {
            ui.vertical(|ui| {
                ui.label(format!("{source} · {} frames seen", s.frames));
                match view.streams.get(source) {
                    Some(Ok((tex, label))) => {
                        let size = tex.size_vec2();
                        let scale = (view.cell * 2.0 / size.x.max(size.y)).max(1.0);
                        ui.image((tex.id(), size * scale));
                        ui.weak(label);
                    }
                    Some(Err(e)) => {
                        ui.colored_label(WARN, format!("cannot show: {e}"));
                    }
                    None => {
                        ui.weak("decoding…");
                    }
                }
            });
        }
    });
}

pub fn ui(
    ui: &mut egui::Ui,
    d: &SamplerData,
    streams: &BTreeMap<String, StreamedImage>,
    view: &mut CamerasView,
) -> Option<ShotRequest> {
    if view.cell <= 0.0 {
        view.cell = 96.0;
    }
    // Below the toolbar, so that a stream appearing never moves the buttons.
    let show_streams = |ui: &mut egui::Ui, view: &mut CamerasView| {
        if !streams.is_empty() {
            egui::CollapsingHeader::new(format!("Streamed in traffic ({})", streams.len()))
                .id_salt("streamed_images")
                .default_open(true)
                .show(ui, |ui| streamed(ui, streams, view));
            ui.separator();
        }
    };
    let Some(f) = d.image.clone() else {
        show_streams(ui, view);
        view.textures.clear();
        if let Some(note) = &d.image_note {
            ui.colored_label(WARN, note);
        } else if d.geometry.image.is_none() {
            ui.weak("This segment has no image region.");
        } else {
            ui.weak("Waiting for the first complete image set (image_seq)…");
        }
        return None;
    };
    view.update(ui.ctx(), &f);
    view.selected = view.selected.min(f.num_envs.saturating_sub(1));
    if let Some(note) = &d.image_note {
        // With an image: what it does not show (a recording's envs without images).
        ui.colored_label(WARN, note);
    }
    image_line(ui, d, &f, view);
    let request = screenshot_buttons(ui, view);
    ui.separator();
    show_streams(ui, view);
    if view.zoom {
        zoomed(ui, &f, view);
        return request;
    }
    grid(ui, &f, view);
    request
}

/// The image set's rate, frame, `image_seq` and size, whether it may be torn, and the
/// grid's cell size and zoom.
fn image_line(ui: &mut egui::Ui, d: &SamplerData, f: &ImageFrame, view: &mut CamerasView) {
    ui.horizontal_wrapped(|ui| {
        ui.label(format!(
            "{:.1} FPS · frame {} · image_seq {} · {}×{}×{}",
            d.image_fps, f.frame_seq, f.image_seq, f.width, f.height, f.channels
        ));
        if !f.consistent {
            ui.colored_label(WARN, "may be torn (no write_seq)");
        }
        ui.separator();
        let size_label = ui.label("Size");
        ui.add(egui::Slider::new(&mut view.cell, 32.0..=384.0).show_value(false))
            .labelled_by(size_label.id);
        ui.toggle_value(&mut view.zoom, "Zoom selected");
    });
}

/// The screenshot buttons (of the selected env, all envs, or the grid); the one clicked.
fn screenshot_buttons(ui: &mut egui::Ui, view: &CamerasView) -> Option<ShotRequest> {
    let mut request = None;
    ui.horizontal_wrapped(|ui| {
        ui.label(format!("Screenshot (env {}):", view.selected));
        if ui
            .button("Quick save env")
            .on_hover_text("PNG of the selected env into the screenshot folder (F12)")
            .clicked()
        {
            request = Some(ShotRequest::Quick(Shot::Env(view.selected)));
        }
        if ui.button("Quick save all envs").clicked() {
            request = Some(ShotRequest::Quick(Shot::AllEnvs));
        }
        if ui.button("Quick save grid").clicked() {
            request = Some(ShotRequest::Quick(Shot::Grid));
        }
        if ui.button("Save env…").clicked() {
            request = Some(ShotRequest::Dialog(Shot::Env(view.selected)));
        }
        if ui.button("Save all…").clicked() {
            request = Some(ShotRequest::Dialog(Shot::AllEnvs));
        }
        if ui.button("Save grid…").clicked() {
            request = Some(ShotRequest::Dialog(Shot::Grid));
        }
    });
    request
}

/// Every env's image in a grid, its number on it; a click selects an env, a double
/// click zooms it.
fn grid(ui: &mut egui::Ui, f: &ImageFrame, view: &mut CamerasView) {
    egui::ScrollArea::vertical()
        .id_salt("camera_grid")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            ui.horizontal_wrapped(|ui| {
                let aspect = f.height as f32 / f.width.max(1) as f32;
                let size = egui::vec2(view.cell, view.cell * aspect);
                for (env, tex) in view.textures.iter().enumerate() {
                    let selected = env as u32 == view.selected;
                    let r = ui.add(
                        egui::Image::from_texture((tex.id(), size)).sense(egui::Sense::click()),
                    );
                    ui.painter().text(
                        r.rect.left_top() + egui::vec2(3.0, 2.0),
                        egui::Align2::LEFT_TOP,
                        env.to_string(),
                        egui::FontId::monospace(11.0),
                        egui::Color32::WHITE,
                    );
                    if selected {
                        ui.painter().rect_stroke(
                            r.rect,
                            0.0,
                            egui::Stroke::new(2.0, egui::Color32::YELLOW),
                            egui::StrokeKind::Outside,
                        );
                    }
                    if r.clicked() {
                        view.selected = env as u32;
                    }
                    if r.double_clicked() {
                        view.zoom = true;
                    }
                }
            });
        });
}

fn zoomed(ui: &mut egui::Ui, f: &ImageFrame, view: &CamerasView) {
    let Some(tex) = view.textures.get(view.selected as usize) else {
        return;
    };
    let avail = ui.available_size() - egui::vec2(0.0, 24.0);
    let scale = (avail.x / f.width.max(1) as f32)
        .min(avail.y / f.height.max(1) as f32)
        .max(1.0);
    let size = egui::vec2(f.width as f32 * scale, f.height as f32 * scale);
    let r = ui.add(egui::Image::from_texture((tex.id(), size)).sense(egui::Sense::hover()));
    let text = match r.hover_pos() {
        Some(p) => {
            let x = ((p.x - r.rect.left()) / scale) as u32;
            let y = ((p.y - r.rect.top()) / scale) as u32;
            let c = f.channels as usize;
            let at = (view.selected as usize * (f.width * f.height) as usize
                + (y * f.width + x) as usize)
                * c;
            match f.pixels.get(at..at + c) {
                Some(px) if x < f.width && y < f.height => {
                    format!("env {} · pixel ({x}, {y}) = {px:?}", view.selected)
                }
                _ => format!("env {}", view.selected),
            }
        }
        None => format!("env {} · hover for pixel values", view.selected),
    };
    ui.monospace(text);
}
