//! The traffic panel, in the manner of Wireshark: a live list (only the visible rows
//! are formatted), a filter, request/response pairs, the decoded field tree, a hex pane,
//! images carried in ImageFrame payloads, loss and malformed counters, pause.

use crate::ui::decoder::ImageDecoder;
use crate::ui::widgets::{BAD, WARN, duration_ns, list_row};
use lrbc::layout::fields::hex_string;
use lrbc::rpc::tree::{FieldTree, NodeValue, display_scalar};
use lrbc_live::traffic::{Decoded, Pairing, Record};
use lrbc_live::traffic::{TrafficRow, TrafficStore};

/// The list's state.
#[derive(Default)]
pub struct TrafficView {
    /// Frozen at this many rows while paused.
    pub paused_at: Option<u64>,
    pub selected: Option<u64>,
    /// Absolute indices of the rows matching the filter, and how far they were computed.
    filtered: Vec<u64>,
    filtered_upto: u64,
    filtered_for: String,
    filtered_first: u64,
    /// The selected entry's image (record index, texture and label, or why not).
    image: Option<(u64, Shown)>,
    /// The entry whose image was last asked for.
    image_requested: Option<u64>,
    /// Decodes the selected entry's image off the UI thread (started with the first).
    decoder: Option<ImageDecoder>,
    /// The list scrolled away from its newest rows by the user (it then stays put).
    scrolled_back: bool,
}

/// A decoded image as a texture with its label, or why it could not be shown.
pub type Shown = Result<(egui::TextureHandle, String), String>;

impl std::fmt::Debug for TrafficView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrafficView")
            .field("paused_at", &self.paused_at)
            .field("selected", &self.selected)
            .finish_non_exhaustive()
    }
}

impl TrafficView {
    pub fn toggle_pause(&mut self, store: &TrafficStore) {
        self.paused_at = match self.paused_at {
            Some(_) => None,
            None => Some(store.total_rows()),
        };
    }

    pub fn is_paused(&self) -> bool {
        self.paused_at.is_some()
    }

    fn refilter(&mut self, store: &TrafficStore, filter: &str) {
        let end = self
            .paused_at
            .unwrap_or(store.total_rows())
            .min(store.total_rows());
        if filter != self.filtered_for
            || store.first_index < self.filtered_first && self.filtered_upto < store.first_index
        {
            self.filtered.clear();
            self.filtered_upto = store.first_index;
            self.filtered_for = filter.to_string();
        }
        self.filtered_first = store.first_index;
        self.filtered.retain(|&i| i >= store.first_index);
        let start = self.filtered_upto.max(store.first_index);
        let needle = filter.to_lowercase();
        for i in start..end {
            if let Some(row) = store.get(i)
                && (needle.is_empty() || row_text(row).to_lowercase().contains(&needle))
            {
                self.filtered.push(i);
            }
        }
        self.filtered_upto = end.max(self.filtered_upto);
    }
}

fn ring_of(row: &TrafficRow) -> &'static str {
    match row {
        TrafficRow::Record(r) => r.ring.as_str(),
        TrafficRow::Lost { ring, .. }
        | TrafficRow::Malformed { ring, .. }
        | TrafficRow::Unanswered { ring, .. } => ring.as_str(),
    }
}

/// Text the filter matches against: ring, correlation id, method, status.
fn row_text(row: &TrafficRow) -> String {
    match row {
        TrafficRow::Record(r) => format!(
            "{} {} {} {} {}",
            r.ring.as_str(),
            r.correlation_id,
            r.method,
            r.error.as_deref().unwrap_or("ok"),
            match r.pairing {
                Pairing::Orphan => "orphan",
                Pairing::SubscribedBeforeAttach => "stream subscribed before attach",
                _ => "",
            }
        ),
        TrafficRow::Lost { ring, .. } => format!("{} lost", ring.as_str()),
        TrafficRow::Malformed { ring, error, .. } => format!("{} malformed {error}", ring.as_str()),
        TrafficRow::Unanswered {
            ring,
            method,
            correlation_id,
            ..
        } => format!("{} unanswered {method} {correlation_id}", ring.as_str()),
    }
}

fn status(r: &Record) -> (String, Option<egui::Color32>) {
    match (&r.error, r.pairing) {
        (Some(e), _) => (format!("error: {e}"), Some(BAD)),
        (None, Pairing::Orphan) => ("orphan".into(), Some(WARN)),
        (None, Pairing::SubscribedBeforeAttach) => ("subscribed before attach".into(), None),
        (None, Pairing::Unanswered) => ("unanswered".into(), Some(WARN)),
        (None, Pairing::Pending) => ("…".into(), None),
        _ => ("ok".into(), None),
    }
}

pub fn ui(
    ui: &mut egui::Ui,
    store: &TrafficStore,
    view: &mut TrafficView,
    filter: &mut String,
    t0_ns: u64,
) {
    toolbar(ui, store, view, filter);
    totals(ui, store);
    view.refilter(store, filter);
    list(ui, store, view, t0_ns);
    ui.separator();
    details(ui, store, view);
}

/// Pause, the filter, and what is new while paused.
fn toolbar(ui: &mut egui::Ui, store: &TrafficStore, view: &mut TrafficView, filter: &mut String) {
    ui.horizontal_wrapped(|ui| {
        let label = if view.is_paused() { "Resume" } else { "Pause" };
        if ui
            .button(label)
            .on_hover_text("freeze the list (Space); capture goes on")
            .clicked()
        {
            view.toggle_pause(store);
        }
        let filter_label = ui.label("Filter");
        ui.add(
            egui::TextEdit::singleline(filter)
                .hint_text("method, ring, id, error…")
                .desired_width(180.0),
        )
        .labelled_by(filter_label.id);
        if view.is_paused() {
            let new = store
                .total_rows()
                .saturating_sub(view.paused_at.unwrap_or(0));
            ui.colored_label(WARN, format!("paused, {new} new rows"));
        }
        if let Some(e) = &store.error {
            ui.colored_label(BAD, e);
        }
    });
}

/// Each ring's totals: entries, losses, malformed entries, unanswered requests, orphans.
fn totals(ui: &mut egui::Ui, store: &TrafficStore) {
    ui.vertical(|ui| {
        for (ring, t) in &store.totals {
            let lost = t.lost_bytes > 0 || t.malformed > 0;
            let mut text = format!(
                "{}: {} entries, {} lost bytes, {} malformed, {} unanswered, {} orphans",
                ring.as_str(),
                t.entries,
                t.lost_bytes,
                t.malformed,
                t.unanswered,
                t.orphans
            );
            if t.subscribed_before_attach > 0 {
                text.push_str(&format!(
                    ", {} streamed (subscribed before attach)",
                    t.subscribed_before_attach
                ));
            }
            if lost {
                ui.colored_label(BAD, text);
            } else {
                ui.weak(text);
            }
        }
    });
}

/// The rows that pass the filter, following the newest unless paused or scrolled back;
/// a click selects one.
fn list(ui: &mut egui::Ui, store: &TrafficStore, view: &mut TrafficView, t0_ns: u64) {
    let row_height = ui.text_style_height(&egui::TextStyle::Monospace) + 4.0;
    // A whole number of rows: following the newest, the list's top is a row's top, never
    // a row half under the totals above.
    let spacing = ui.spacing().item_spacing.y;
    let per_row = row_height + spacing;
    let available = ui.available_height();
    let wanted = (available * 0.5).max(120.0).min(available);
    let rows_shown = ((wanted + spacing) / per_row).floor().max(1.0);
    let list_height = rows_shown * per_row - spacing;
    let following = !view.is_paused();
    let shown = view.filtered.len();
    ui.push_id("traffic_list", |ui| {
        let mut area = egui::ScrollArea::vertical()
            .max_height(list_height)
            .auto_shrink([false, false]);
        // Following, the newest rows, the first of them whole: an offset of whole rows
        // (egui's stick-to-bottom would leave the top row half under the totals).
        let forced = (following && !view.scrolled_back)
            .then(|| shown.saturating_sub(rows_shown as usize) as f32 * per_row);
        if let Some(offset) = forced {
            area = area.vertical_scroll_offset(offset);
        }
        let out = area.show_rows(ui, row_height, shown, |ui, range| {
            ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
            for &i in &view.filtered[range] {
                let Some(row) = store.get(i) else { continue };
                let selected = view.selected == Some(i);
                let t = (row.seen_ns().saturating_sub(t0_ns)) as f64 / 1e9;
                let text = row_line(row, t);
                let color = match row {
                    TrafficRow::Record(r) => status(r).1,
                    _ => Some(BAD),
                };
                let mut rt = egui::RichText::new(text).monospace();
                if let Some(c) = color {
                    rt = rt.color(c);
                }
                if selected {
                    rt = rt.background_color(ui.visuals().selection.bg_fill);
                }
                let row = list_row(ui, rt, row_height);
                if row.clicked() {
                    view.selected = Some(i);
                }
            }
        });
        // Scrolled up by hand (the wheel, or the scroll bar), the list stays where it is;
        // back at the end, it follows again.
        let offset = out.state.clamped_offset().y;
        let end = (out.content_size.y - out.inner_rect.height()).max(0.0);
        // Moved up from where it was put, and not by the end's clamp (rows came since).
        let by_hand = ui.rect_contains_pointer(out.inner_rect)
            && forced.is_some_and(|f| offset < f - 0.5 && offset < end - 0.5);
        view.scrolled_back =
            following && (by_hand || (view.scrolled_back && offset < end - per_row));
    });
}

/// A row's line in the list, `t` seconds after the first.
fn row_line(row: &TrafficRow, t: f64) -> String {
    match row {
        TrafficRow::Record(r) => {
            let (st, _) = status(r);
            format!(
                "{t:>9.3}  {:<8} {:>20}  {:<26} {:>7} B  {:<10} {}",
                r.ring.as_str(),
                r.correlation_id,
                r.method,
                r.payload.len(),
                st,
                r.latency_ns.map(duration_ns).unwrap_or_default()
            )
        }
        TrafficRow::Lost {
            lost_bytes,
            lost_entries,
            ..
        } => format!(
            "{t:>9.3}  {:<8} LOST {lost_bytes} bytes ({} entries)",
            ring_of(row),
            lost_entries.map_or("?".into(), |n| n.to_string())
        ),
        TrafficRow::Malformed {
            error, position, ..
        } => format!(
            "{t:>9.3}  {:<8} MALFORMED at {position}: {error}",
            ring_of(row)
        ),
        TrafficRow::Unanswered {
            method,
            correlation_id,
            waited_ns,
            ..
        } => {
            format!(
                "{t:>9.3}  {:<8} {correlation_id:>20}  {method:<26} UNANSWERED after {}",
                ring_of(row),
                duration_ns(*waited_ns)
            )
        }
    }
}

fn details(ui: &mut egui::Ui, store: &TrafficStore, view: &mut TrafficView) {
    let Some(row) = view.selected.and_then(|i| store.get(i)) else {
        ui.weak("Select an entry to see its fields, its partner and its bytes.");
        return;
    };
    egui::ScrollArea::vertical().id_salt("traffic_details").auto_shrink([false, false]).show(ui, |ui| match row {
        TrafficRow::Record(r) => {
            ui.horizontal(|ui| {
                ui.strong(format!("{} · {} · correlation id {}", r.method, r.ring.as_str(), r.correlation_id));
                if let Some(p) = r.partner
                    && let Some(i) = store.find_record(p)
                {
                    let what = if r.is_request { "Go to the response" } else { "Go to the request" };
                    if ui.button(what).clicked() {
                        view.selected = Some(i);
                    }
                }
                if let Some(l) = r.latency_ns {
                    ui.label(format!("latency {}", duration_ns(l)));
                }
            });
            ui.label(format!("position {} · {} payload bytes · {}", r.position, r.payload.len(), r.pairing.describe()));
            match &r.decoded {
                Decoded::Envelope(d) => {
                    image_preview(ui, view, r);
                    tree_ui(ui, &d.tree, &r.payload, 0, r.index);
                }
                Decoded::Json(v) => {
                    ui.monospace(serde_json::to_string_pretty(v).unwrap_or_default());
                }
            }
            egui::CollapsingHeader::new("Bytes").id_salt(("hex", r.index)).show(ui, |ui| hex_pane(ui, &r.payload));
        }
        TrafficRow::Malformed { error, raw, position, ring, .. } => {
            ui.colored_label(BAD, format!("malformed entry on {} at position {position}: {error}", ring.as_str()));
            hex_pane(ui, raw);
        }
        TrafficRow::Lost { ring, lost_bytes, lost_entries, .. } => {
            ui.colored_label(
                BAD,
                format!(
                    "{} bytes ({} entries) of {} were overwritten or consumed before the inspector read them",
                    lost_bytes,
                    lost_entries.map_or("an unknown number of".into(), |n| n.to_string()),
                    ring.as_str()
                ),
            );
        }
        TrafficRow::Unanswered { method, correlation_id, waited_ns, .. } => {
            ui.colored_label(WARN, format!("{method} (correlation id {correlation_id}) had no response after {}", duration_ns(*waited_ns)));
        }
    });
}

/// The decoded tree, one collapsible level per table.
fn tree_ui(ui: &mut egui::Ui, tree: &FieldTree, buf: &[u8], idx: usize, salt: u64) {
    let Some(node) = tree.nodes.get(idx) else {
        return;
    };
    match node.value {
        NodeValue::Table { .. }
        | NodeValue::Struct { .. }
        | NodeValue::Vector { .. }
        | NodeValue::Union { .. } => {
            let title = if node.name.is_empty() {
                node.type_name.to_string()
            } else {
                format!("{}: {}", node.name, node.type_name)
            };
            let title = match node.value {
                NodeValue::Union { type_name } => format!("{} = {type_name}", node.name),
                _ => title,
            };
            egui::CollapsingHeader::new(title)
                .id_salt((salt, idx))
                .default_open(node.depth < 3)
                .show(ui, |ui| {
                    for c in tree.children(idx) {
                        tree_ui(ui, tree, buf, c, salt);
                    }
                });
        }
        v => {
            ui.horizontal(|ui| {
                ui.monospace(format!("{}: ", node.name));
                ui.weak(node.type_name);
                ui.monospace(display_scalar(buf, v));
            });
        }
    }
}

fn hex_pane(ui: &mut egui::Ui, bytes: &[u8]) {
    let shown = &bytes[..bytes.len().min(4096)];
    let mut text = String::new();
    for (line, chunk) in shown.chunks(16).enumerate() {
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        let hex: Vec<String> = chunk.iter().map(|b| hex_string(&[*b])).collect();
        text.push_str(&format!(
            "{:06x}  {:<48} {ascii}\n",
            line * 16,
            hex.join(" ")
        ));
    }
    if bytes.len() > shown.len() {
        text.push_str(&format!("… {} more bytes\n", bytes.len() - shown.len()));
    }
    ui.monospace(text);
}

/// Shows the image of a CameraImageFrame or ViewportImageFrame payload (raw, JPEG, PNG,
/// depth), decoded once per selected entry on the decoder's thread.
fn image_preview(ui: &mut egui::Ui, view: &mut TrafficView, r: &Record) {
    const KEY: &str = "selected";
    if view.image_requested != Some(r.index) {
        view.image_requested = Some(r.index);
        view.image = None;
        // Which stream, without decoding the pixels: most rows carry no image.
        if lrbc::rpc::image::image_source(&r.payload).is_none() {
            return;
        }
        view.decoder
            .get_or_insert_with(|| ImageDecoder::new(ui.ctx()))
            .request(KEY, r.index, std::sync::Arc::from(r.payload.as_slice()));
    }
    if let Some(decoder) = &view.decoder
        && let Some((index, outcome)) = decoder.take(KEY)
        && index == r.index
    {
        let shown = outcome.map(|img| {
            let label = format!("{} · {}", img.source, img.label());
            let tex = ui.ctx().load_texture(
                format!("traffic_image_{index}"),
                img.image,
                egui::TextureOptions::NEAREST,
            );
            (tex, label)
        });
        view.image = Some((index, shown));
    }
    match view.image.as_ref().map(|(_, s)| s) {
        Some(Ok((tex, label))) => {
            ui.label(format!("image: {label}"));
            let size = tex.size_vec2();
            let scale = (256.0 / size.x.max(size.y)).max(1.0);
            ui.image((tex.id(), size * scale));
        }
        Some(Err(e)) => {
            ui.colored_label(BAD, format!("the image does not decode: {e}"));
        }
        None if view.decoder.as_ref().is_some_and(|d| d.busy(KEY)) => {
            ui.weak("image: decoding…");
        }
        None => {}
    }
}

/// HWC u8 pixels with 1, 3 or 4 channels as an egui image.
pub fn raw_to_color_image(data: &[u8], w: usize, h: usize, c: usize) -> Option<egui::ColorImage> {
    if w == 0 || h == 0 || data.len() < w * h * c {
        return None;
    }
    let pixels = (0..w * h)
        .map(|i| {
            let p = &data[i * c..i * c + c];
            match c {
                1 => egui::Color32::from_gray(p[0]),
                3 => egui::Color32::from_rgb(p[0], p[1], p[2]),
                _ => egui::Color32::from_rgba_unmultiplied(p[0], p[1], p[2], p[3]),
            }
        })
        .collect();
    Some(egui::ColorImage::new([w, h], pixels))
}
