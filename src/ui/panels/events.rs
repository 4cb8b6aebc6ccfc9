//! The events panel: what the detector found (`lrbc_live::detect`), one row per event,
//! newest first: time, frame, kind, env, channel and value, origin, frames. Filtered by
//! kind and by env; the totals above (events per kind, frames checked of those seen). A
//! click asks the window to go to the event: live, the view pauses at its frame and its
//! env is watched, its camera shown; on a recording, the timeline moves there.

use crate::ui::widgets::{BAD, WARN, event_color, list_row};
use lrbc_live::detect::{Event, EventKind, EventLog, Origin};
use lrbc_live::text::plural;
use lrbc_live::text::thousands;

/// The panel's state: its filters and the rows they let through.
#[derive(Debug, Default)]
pub struct EventsView {
    /// Only this kind (None: every kind).
    pub kind: Option<EventKind>,
    /// Only this env (text as typed; empty: every env).
    pub env: String,
    pub selected: Option<u64>,
    /// Indices into the log's events that pass the filters, newest first, and what they
    /// were computed for (the log's version and the filters).
    rows: Vec<usize>,
    rows_for: Option<(u64, Option<EventKind>, String)>,
}

impl EventsView {
    fn refilter(&mut self, log: &EventLog) {
        let key = (log.version, self.kind, self.env.clone());
        if self.rows_for.as_ref() == Some(&key) {
            return;
        }
        let env: Option<u32> = self.env.trim().parse().ok();
        self.rows = log
            .events()
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, e)| self.kind.is_none_or(|k| e.kind == k))
            .filter(|(_, e)| env.is_none_or(|n| e.env == Some(n)))
            .map(|(i, _)| i)
            .collect();
        self.rows_for = Some(key);
    }
}

/// What the user asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum EventsAction {
    /// Go to this event (pause there, watch its env, show its camera; or move the
    /// timeline there).
    Go(Event),
}

fn origin_text(o: Option<Origin>) -> &'static str {
    o.map_or("", Origin::as_str)
}

/// The row of an event: time (s from `t0_ns`), frame, kind, env, channel, value, origin,
/// frames.
pub fn row_text(e: &Event, t0_ns: u64) -> String {
    let t = e.time_ns.saturating_sub(t0_ns) as f64 / 1e9;
    let env = e.env.map_or_else(String::new, |n| n.to_string());
    let frames = if e.ongoing {
        format!("{}+", e.count)
    } else {
        e.count.to_string()
    };
    format!(
        "{t:>9.3}  {:>10}  {:<12} {:>5}  {:<40} {:>10}  {:<9} {:>6}",
        e.first_frame,
        e.kind.as_str(),
        env,
        truncate(&e.channel_text(), 40),
        truncate(&e.value_text(), 10),
        origin_text(e.origin),
        frames
    )
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// The headline: events found, and the frames checked of those seen.
pub fn summary(log: &EventLog) -> String {
    let t = log.totals();
    let mut parts = vec![format!("{} events", thousands(t.events()))];
    if t.frames_seen > 0 || t.frames_checked > 0 {
        parts.push(t.checked_text());
        if t.frames_flags_checked > t.frames_checked {
            parts.push(format!(
                "rewards and flags of {}",
                thousands(t.frames_flags_checked)
            ));
        }
    }
    parts.join(" · ")
}

pub fn ui(
    ui: &mut egui::Ui,
    log: Option<&EventLog>,
    view: &mut EventsView,
    t0_ns: u64,
) -> Option<EventsAction> {
    let Some(log) = log else {
        ui.weak("The detector does not run for this source.");
        return None;
    };
    let mut action = None;
    let totals = log.totals();
    ui.horizontal_wrapped(|ui| {
        ui.strong(summary(log));
        if totals.frames_seen > totals.frames_checked && totals.frames_checked > 0 {
            let unchecked = totals.frames_seen - totals.frames_checked;
            let frames = if unchecked == 1 { "frame" } else { "frames" };
            ui.colored_label(
                WARN,
                format!("the values of {} {frames} were not checked", thousands(unchecked)),
            )
            .on_hover_text("frames that passed while the machine was busy (their rewards and flags were still checked), or whose copy was torn");
        }
        if log.dropped > 0 {
            ui.colored_label(WARN, format!("{} oldest not kept", thousands(log.dropped)));
        }
        if let Some(n) = &log.note {
            ui.colored_label(WARN, n);
        }
    });
    ui.horizontal_wrapped(|ui| {
        let kind_label = ui.label("Kind");
        let shown = view.kind.map_or("every kind".to_string(), |k| {
            format!("{} ({})", k.as_str(), totals.of(k))
        });
        egui::ComboBox::from_id_salt("events_kind")
            .selected_text(shown)
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut view.kind, None, "every kind");
                for k in EventKind::ALL {
                    ui.selectable_value(
                        &mut view.kind,
                        Some(k),
                        format!("{} ({})", k.as_str(), totals.of(k)),
                    )
                    .on_hover_text(k.describe());
                }
            })
            .response
            .labelled_by(kind_label.id);
        let env_label = ui.label("Env");
        ui.add(
            egui::TextEdit::singleline(&mut view.env)
                .hint_text("any")
                .desired_width(60.0),
        )
        .labelled_by(env_label.id);
        if !view.env.trim().is_empty() && view.env.trim().parse::<u32>().is_err() {
            ui.colored_label(BAD, "an env is a number");
        }
    });
    view.refilter(log);
    ui.monospace(format!(
        "{:>9}  {:>10}  {:<12} {:>5}  {:<40} {:>10}  {:<9} {:>6}",
        "time (s)", "frame", "kind", "env", "channel", "value", "origin", "frames"
    ));
    let row_height = ui.text_style_height(&egui::TextStyle::Monospace) + 4.0;
    let list_height = (ui.available_height() * 0.6).max(80.0);
    let events = log.events();
    ui.push_id("events_list", |ui| {
        egui::ScrollArea::vertical()
            .max_height(list_height)
            .auto_shrink([false, false])
            .show_rows(ui, row_height, view.rows.len(), |ui, range| {
                ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
                for &i in &view.rows[range] {
                    let Some(e) = events.get(i) else { continue };
                    let mut rt = egui::RichText::new(row_text(e, t0_ns)).monospace();
                    rt = rt.color(event_color(e.kind));
                    if view.selected == Some(e.id) {
                        rt = rt.background_color(ui.visuals().selection.bg_fill);
                    }
                    let row = list_row(ui, rt, row_height).on_hover_text(&e.message);
                    if row.clicked() {
                        view.selected = Some(e.id);
                        action = Some(EventsAction::Go(e.clone()));
                    }
                }
            });
    });
    ui.separator();
    match view.selected.and_then(|id| log.get(id)) {
        Some(e) => {
            ui.label(&e.message);
            ui.weak(format!(
                "frames {}–{}, {} frame{}{}",
                e.first_frame,
                e.last_frame,
                e.count,
                plural(e.count),
                if e.ongoing { ", going on" } else { "" }
            ));
        }
        None if events.is_empty() => {
            ui.weak("Nothing found yet: every value is checked as frames come.");
        }
        None => {
            ui.weak("Click an event to go to its frame.");
        }
    }
    action
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_says_where_and_what_in_fixed_columns() {
        let e = Event {
            ongoing: false,
            env: Some(5),
            channel: Some(lrbc_live::check::ChannelKind::Observation),
            index: Some(1),
            name: Some("pole_angle".into()),
            value: Some(f64::NAN),
            values: Some(1),
            origin: Some(Origin::Simulator),
            ..Event::new(1, EventKind::Nonfinite, 3000, 2_500_000_000)
        };
        let row = row_text(&e, 500_000_000);
        assert!(row.starts_with("    2.000        3000  nonfinite"), "{row}");
        assert!(row.contains("observation pole_angle (obs[1])"), "{row}");
        assert!(row.contains("NaN"), "{row}");
        assert!(row.contains("simulator"), "{row}");
        assert!(row.trim_end().ends_with(" 1"), "{row}");
    }
}
