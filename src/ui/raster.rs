//! A small CPU rasteriser for egui's tessellated output, so that screenshots of the
//! window render the same on a machine with no display and no GPU: triangles are
//! filled per pixel centre, colours and UVs interpolated, textures sampled bilinearly,
//! and blended with premultiplied alpha, as egui's own renderers do.

use std::collections::HashMap;

use egui::epaint::textures::TexturesDelta;
use egui::epaint::{ClippedPrimitive, Primitive, TextureId, Vertex};

/// A texture in premultiplied RGBA.
#[derive(Clone, Debug)]
struct Texture {
    width: usize,
    height: usize,
    pixels: Vec<[f32; 4]>,
}

impl Texture {
    fn sample(&self, u: f32, v: f32) -> [f32; 4] {
        if self.width == 0 || self.height == 0 {
            return [1.0; 4];
        }
        let x = (u * self.width as f32 - 0.5).clamp(0.0, (self.width - 1) as f32);
        let y = (v * self.height as f32 - 0.5).clamp(0.0, (self.height - 1) as f32);
        let (x0, y0) = (x.floor() as usize, y.floor() as usize);
        let (x1, y1) = ((x0 + 1).min(self.width - 1), (y0 + 1).min(self.height - 1));
        let (fx, fy) = (x - x0 as f32, y - y0 as f32);
        let p = |x: usize, y: usize| self.pixels[y * self.width + x];
        let (a, b, c, d) = (p(x0, y0), p(x1, y0), p(x0, y1), p(x1, y1));
        let mut out = [0.0; 4];
        for i in 0..4 {
            let top = a[i] + (b[i] - a[i]) * fx;
            let bottom = c[i] + (d[i] - c[i]) * fx;
            out[i] = top + (bottom - top) * fy;
        }
        out
    }
}

/// Keeps egui's textures and paints its meshes into an RGBA image.
#[derive(Debug, Default)]
pub struct Rasterizer {
    textures: HashMap<TextureId, Texture>,
}

fn premultiplied(c: egui::Color32) -> [f32; 4] {
    let [r, g, b, a] = c.to_array();
    [
        f32::from(r) / 255.0,
        f32::from(g) / 255.0,
        f32::from(b) / 255.0,
        f32::from(a) / 255.0,
    ]
}

impl Rasterizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies texture uploads (whole or patches) and frees.
    pub fn apply(&mut self, delta: &TexturesDelta) {
        for (id, deltas) in &delta.set {
            for d in deltas {
                let egui::ImageData::Color(img) = &d.image;
                let [w, h] = img.size;
                let patch: Vec<[f32; 4]> = img.pixels.iter().map(|&c| premultiplied(c)).collect();
                match d.pos {
                    None => {
                        self.textures.insert(
                            *id,
                            Texture {
                                width: w,
                                height: h,
                                pixels: patch,
                            },
                        );
                    }
                    Some([px, py]) => {
                        if let Some(t) = self.textures.get_mut(id) {
                            for y in 0..h {
                                for x in 0..w {
                                    let (tx, ty) = (px + x, py + y);
                                    if tx < t.width && ty < t.height {
                                        t.pixels[ty * t.width + tx] = patch[y * w + x];
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Frees what the delta says to free (after painting, as egui asks).
    pub fn free(&mut self, delta: &TexturesDelta) {
        for id in &delta.free {
            self.textures.remove(id);
        }
    }

    /// Paints `primitives` into an image of `size_px`, over `clear`.
    pub fn render(
        &self,
        primitives: &[ClippedPrimitive],
        pixels_per_point: f32,
        size_px: [usize; 2],
        clear: egui::Color32,
    ) -> image::RgbaImage {
        let [w, h] = size_px;
        let mut buf = vec![premultiplied(clear); w * h];
        for p in primitives {
            let Primitive::Mesh(mesh) = &p.primitive else {
                continue;
            };
            let clip = p.clip_rect;
            let cx0 = (clip.min.x * pixels_per_point).floor().max(0.0) as usize;
            let cy0 = (clip.min.y * pixels_per_point).floor().max(0.0) as usize;
            let cx1 = ((clip.max.x * pixels_per_point).ceil().max(0.0) as usize).min(w);
            let cy1 = ((clip.max.y * pixels_per_point).ceil().max(0.0) as usize).min(h);
            if cx0 >= cx1 || cy0 >= cy1 {
                continue;
            }
            let texture = self.textures.get(&mesh.texture_id);
            for tri in mesh.indices.chunks_exact(3) {
                let v = |i: u32| mesh.vertices.get(i as usize);
                let (Some(a), Some(b), Some(c)) = (v(tri[0]), v(tri[1]), v(tri[2])) else {
                    continue;
                };
                fill_triangle(
                    &mut buf,
                    w,
                    [cx0, cy0, cx1, cy1],
                    pixels_per_point,
                    [a, b, c],
                    texture,
                );
            }
        }
        let mut img = image::RgbaImage::new(w as u32, h as u32);
        for (dst, src) in img.pixels_mut().zip(&buf) {
            // Un-premultiply for a straight-alpha PNG (opaque over the clear colour).
            let a = src[3].clamp(0.0, 1.0);
            let un = |c: f32| {
                if a > 0.0 {
                    (c / a).clamp(0.0, 1.0)
                } else {
                    0.0
                }
            };
            *dst = image::Rgba([
                (un(src[0]) * 255.0).round() as u8,
                (un(src[1]) * 255.0).round() as u8,
                (un(src[2]) * 255.0).round() as u8,
                (a * 255.0).round() as u8,
            ]);
        }
        img
    }
}

fn fill_triangle(
    buf: &mut [[f32; 4]],
    width: usize,
    clip: [usize; 4],
    ppp: f32,
    [a, b, c]: [&Vertex; 3],
    texture: Option<&Texture>,
) {
    let p = |v: &Vertex| (v.pos.x * ppp, v.pos.y * ppp);
    let (pa, pb, pc) = (p(a), p(b), p(c));
    let area = (pb.0 - pa.0) * (pc.1 - pa.1) - (pb.1 - pa.1) * (pc.0 - pa.0);
    if area.abs() < 1e-9 {
        return;
    }
    let min_x = pa.0.min(pb.0).min(pc.0).floor().max(clip[0] as f32) as usize;
    let max_x = (pa.0.max(pb.0).max(pc.0).ceil() as usize).min(clip[2]);
    let min_y = pa.1.min(pb.1).min(pc.1).floor().max(clip[1] as f32) as usize;
    let max_y = (pa.1.max(pb.1).max(pc.1).ceil() as usize).min(clip[3]);
    let (ca, cb, cc) = (
        premultiplied(a.color),
        premultiplied(b.color),
        premultiplied(c.color),
    );
    for y in min_y..max_y {
        let py = y as f32 + 0.5;
        for x in min_x..max_x {
            let px = x as f32 + 0.5;
            let w0 = ((pb.0 - px) * (pc.1 - py) - (pb.1 - py) * (pc.0 - px)) / area;
            let w1 = ((pc.0 - px) * (pa.1 - py) - (pc.1 - py) * (pa.0 - px)) / area;
            let w2 = 1.0 - w0 - w1;
            if w0 < 0.0 || w1 < 0.0 || w2 < 0.0 {
                continue;
            }
            let mut src = [0.0f32; 4];
            for i in 0..4 {
                src[i] = ca[i] * w0 + cb[i] * w1 + cc[i] * w2;
            }
            if let Some(t) = texture {
                let u = a.uv.x * w0 + b.uv.x * w1 + c.uv.x * w2;
                let v = a.uv.y * w0 + b.uv.y * w1 + c.uv.y * w2;
                let s = t.sample(u, v);
                for i in 0..4 {
                    src[i] *= s[i];
                }
            }
            let dst = &mut buf[y * width + x];
            let k = 1.0 - src[3];
            for i in 0..4 {
                dst[i] = src[i] + dst[i] * k;
            }
        }
    }
}

/// Runs passes of a UI on a context and renders them, keeping the textures between
/// calls (egui uploads each texture once).
#[derive(Debug, Default)]
pub struct HeadlessRenderer {
    raster: Rasterizer,
}

impl HeadlessRenderer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs one pass of `ui` at `size` points; returns the output's primitives.
    pub fn pass(
        &mut self,
        ctx: &egui::Context,
        size: egui::Vec2,
        pixels_per_point: f32,
        ui: impl FnMut(&mut egui::Ui),
    ) -> (Vec<ClippedPrimitive>, f32) {
        let mut ui = ui;
        let input = egui::RawInput {
            screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, size)),
            ..Default::default()
        };
        ctx.set_pixels_per_point(pixels_per_point);
        let mut output = ctx.run_ui(input, |ui_root| ui(ui_root));
        self.raster.apply(&output.textures_delta);
        let primitives =
            ctx.tessellate(std::mem::take(&mut output.shapes), output.pixels_per_point);
        self.raster.free(&output.textures_delta);
        output.textures_delta.clear();
        (primitives, output.pixels_per_point)
    }

    /// Runs `frames` passes and renders the last one.
    pub fn render(
        &mut self,
        ctx: &egui::Context,
        size: egui::Vec2,
        pixels_per_point: f32,
        frames: usize,
        mut ui: impl FnMut(&mut egui::Ui),
    ) -> image::RgbaImage {
        let mut last = (Vec::new(), pixels_per_point);
        for _ in 0..frames.max(1) {
            last = self.pass(ctx, size, pixels_per_point, &mut ui);
        }
        let (primitives, ppp) = last;
        let px = [
            (size.x * ppp).round() as usize,
            (size.y * ppp).round() as usize,
        ];
        let clear = ctx.global_style().visuals.panel_fill;
        self.raster.render(&primitives, ppp, px, clear)
    }
}

/// Runs `frames` passes of `ui` on a fresh renderer and renders the last one.
pub fn render_ui(
    ctx: &egui::Context,
    size: egui::Vec2,
    pixels_per_point: f32,
    frames: usize,
    ui: impl FnMut(&mut egui::Ui),
) -> image::RgbaImage {
    HeadlessRenderer::new().render(ctx, size, pixels_per_point, frames, ui)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_rectangle_and_text_come_out_where_they_were_drawn() {
        let ctx = egui::Context::default();
        let img = render_ui(&ctx, egui::vec2(200.0, 100.0), 1.0, 3, |ui| {
            egui::CentralPanel::default().show(ui, |ui| {
                ui.painter().rect_filled(
                    egui::Rect::from_min_size(egui::pos2(10.0, 10.0), egui::vec2(50.0, 30.0)),
                    0.0,
                    egui::Color32::from_rgb(255, 0, 0),
                );
                ui.put(
                    egui::Rect::from_min_size(egui::pos2(80.0, 40.0), egui::vec2(100.0, 30.0)),
                    egui::Label::new("Hello"),
                );
            });
        });
        assert_eq!(img.dimensions(), (200, 100));
        assert_eq!(
            img.get_pixel(30, 25).0,
            [255, 0, 0, 255],
            "inside the rectangle"
        );
        assert_ne!(img.get_pixel(5, 5).0[0..3], [255, 0, 0], "outside it");
        // The text left some pixels that differ from the background.
        let bg = img.get_pixel(199, 99).0;
        let text_pixels = (80..180)
            .flat_map(|x| (40..70).map(move |y| (x, y)))
            .filter(|&(x, y)| img.get_pixel(x, y).0 != bg)
            .count();
        assert!(text_pixels > 20, "{text_pixels}");
    }
}
