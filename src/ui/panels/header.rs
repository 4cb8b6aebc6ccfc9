//! The header panel: every field with offset, value and hex (atomic words live, or of
//! the current frame of a recording), the region map as a bar over the segment's bytes,
//! validation problems, and the names. It draws from a source-agnostic view: a label,
//! the geometry and the header's values.

use lrbc::layout::{FieldSpec, FieldValue, Geometry};
use lrbc::rpc::header::describe;

use super::super::widgets::{WARN, region_color};

pub fn ui(ui: &mut egui::Ui, label: &str, g: &Geometry, values: &[(&FieldSpec, FieldValue)]) {
    ui.horizontal(|ui| {
        ui.strong(label);
        ui.label(format!(
            "{} · {} bytes · {} envs × obs {} × act {}",
            g.layout, g.size_bytes, g.num_envs, g.obs_size, g.act_size
        ));
    });
    if !g.warnings.is_empty() {
        ui.add_space(4.0);
        for w in &g.warnings {
            ui.colored_label(WARN, format!("warning: {w}"));
        }
    }
    ui.add_space(4.0);
    region_bar(ui, g);
    ui.add_space(6.0);
    egui::ScrollArea::vertical()
        .id_salt("header_fields")
        .auto_shrink([false, true])
        .max_height(ui.available_height() - 90.0)
        .show(ui, |ui| {
            egui::Grid::new("header_grid")
                .striped(true)
                .num_columns(6)
                .show(ui, |ui| {
                    for h in ["offset", "size", "field", "value", "hex", "meaning"] {
                        ui.strong(h);
                    }
                    ui.end_row();
                    for (f, v) in values {
                        ui.monospace(f.offset_bytes.to_string());
                        ui.monospace(f.size_bytes.to_string());
                        let name = ui.monospace(f.name);
                        name.on_hover_text(format!(
                            "{}{}",
                            f.doc,
                            if f.atomic { " (atomic, live)" } else { "" }
                        ));
                        let value = v.display();
                        let shown = if value.chars().count() > 24 {
                            format!("{}…", value.chars().take(23).collect::<String>())
                        } else {
                            value.clone()
                        };
                        ui.monospace(shown).on_hover_text(value);
                        let hex = match v {
                            FieldValue::Blob(b) if b.iter().all(|&x| x == 0) => {
                                "all zero".to_string()
                            }
                            FieldValue::Blob(b) => format!("{} bytes", b.len()),
                            other => other.hex(f.size_bytes),
                        };
                        ui.monospace(hex);
                        match v {
                            FieldValue::Unsigned(n) => match describe(f.name, *n) {
                                Some(meaning) => ui.monospace(format!("({meaning})")),
                                None => ui.label(""),
                            },
                            _ => ui.label(""),
                        };
                        ui.end_row();
                    }
                });
        });
    ui.add_space(4.0);
    egui::CollapsingHeader::new(format!(
        "Names ({} observations, {} actions)",
        g.names.obs.len(),
        g.names.act.len()
    ))
    .id_salt("names")
    .show(ui, |ui| {
        if g.names.obs.is_empty() && g.names.act.is_empty() {
            ui.weak("No names region: channels show as obs[i] and act[i].");
        }
        ui.label(format!("obs: {}", g.names.obs.join(", ")));
        ui.label(format!("act: {}", g.names.act.join(", ")));
    });
}

/// The regions drawn to scale over the segment's bytes; hover for details.
fn region_bar(ui: &mut egui::Ui, g: &Geometry) {
    let width = ui.available_width().max(100.0);
    let (rect, response) = ui.allocate_exact_size(egui::vec2(width, 22.0), egui::Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    let size = g.size_bytes.max(1) as f32;
    let x_of = |off: u64| rect.left() + rect.width() * (off as f32 / size);
    let mut hovered = None;
    for r in &g.regions {
        let (x0, mut x1) = (x_of(r.offset_bytes), x_of(r.end_bytes()));
        if x1 - x0 < 2.0 {
            x1 = x0 + 2.0;
        }
        let rr =
            egui::Rect::from_min_max(egui::pos2(x0, rect.top()), egui::pos2(x1, rect.bottom()));
        painter.rect_filled(rr, 0.0, region_color(r.kind));
        if response.hovered()
            && let Some(p) = response.hover_pos()
            && rr.contains(p)
        {
            hovered = Some(*r);
        }
        if x1 - x0 > 40.0 {
            painter.text(
                rr.center(),
                egui::Align2::CENTER_CENTER,
                r.kind.as_str(),
                egui::FontId::proportional(11.0),
                egui::Color32::BLACK,
            );
        }
    }
    if let Some(r) = hovered {
        response.on_hover_text(format!(
            "{}: offset {}, length {} bytes, end {}",
            r.kind.as_str(),
            r.offset_bytes,
            r.length_bytes,
            r.end_bytes()
        ));
    } else {
        response.on_hover_text("the segment's bytes; hover a region");
    }
}
