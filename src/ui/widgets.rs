//! Small shared pieces of the window: colours, formatting.

use lrbc::layout::RegionKind;
use lrbc_live::watch::State;

pub const WARN: egui::Color32 = egui::Color32::from_rgb(230, 170, 40);
pub const BAD: egui::Color32 = egui::Color32::from_rgb(230, 80, 70);
pub const GOOD: egui::Color32 = egui::Color32::from_rgb(90, 190, 110);
/// Events told but not judged faults (a pause of unknown rhythm).
pub const TOLD: egui::Color32 = egui::Color32::from_rgb(140, 150, 170);

/// The colour of an event of `kind` wherever it is drawn (lists, plot marks, the
/// timeline): errors red, other faults amber, what is only told grey.
pub fn event_color(kind: lrbc_live::detect::EventKind) -> egui::Color32 {
    use lrbc_live::detect::EventKind;
    match kind {
        EventKind::Nonfinite | EventKind::State | EventKind::Malformed => BAD,
        k if !k.is_fault() => TOLD,
        _ => WARN,
    }
}

/// A clickable row of a list drawn by `ScrollArea::show_rows`, exactly `row_height` tall
/// (the list lays rows out at that pitch). A label, not a selectable button: a button's
/// style is looked up by its id in the previous pass, and the rows' ids move on with the
/// list (each new row is a new id), so that every pass would ask for another and the
/// window would redraw without pause.
pub fn list_row(ui: &mut egui::Ui, text: egui::RichText, row_height: f32) -> egui::Response {
    ui.allocate_ui_with_layout(
        egui::vec2(ui.available_width(), row_height),
        egui::Layout::left_to_right(egui::Align::Center),
        |ui| {
            ui.set_min_height(row_height);
            ui.add(
                egui::Label::new(text)
                    .sense(egui::Sense::click())
                    .selectable(false),
            )
        },
    )
    .inner
}

/// A distinct colour per series index.
pub fn series_color(i: usize) -> egui::Color32 {
    const PALETTE: [egui::Color32; 8] = [
        egui::Color32::from_rgb(86, 156, 214),
        egui::Color32::from_rgb(230, 145, 56),
        egui::Color32::from_rgb(106, 190, 110),
        egui::Color32::from_rgb(214, 96, 120),
        egui::Color32::from_rgb(170, 130, 220),
        egui::Color32::from_rgb(220, 200, 80),
        egui::Color32::from_rgb(80, 200, 200),
        egui::Color32::from_rgb(200, 120, 80),
    ];
    PALETTE[i % PALETTE.len()]
}

pub fn region_color(kind: RegionKind) -> egui::Color32 {
    match kind {
        RegionKind::Header => egui::Color32::from_rgb(150, 150, 150),
        RegionKind::Obs => egui::Color32::from_rgb(86, 156, 214),
        RegionKind::Act => egui::Color32::from_rgb(230, 145, 56),
        RegionKind::Rewards => egui::Color32::from_rgb(106, 190, 110),
        RegionKind::Dones | RegionKind::Truncateds | RegionKind::Resets => {
            egui::Color32::from_rgb(214, 96, 120)
        }
        RegionKind::CmdS2c | RegionKind::CmdC2s => egui::Color32::from_rgb(170, 130, 220),
        RegionKind::CtlS2c | RegionKind::CtlC2s => egui::Color32::from_rgb(200, 170, 240),
        RegionKind::Image => egui::Color32::from_rgb(220, 200, 80),
        RegionKind::Names => egui::Color32::from_rgb(80, 200, 200),
    }
}

pub fn state_color(s: State) -> egui::Color32 {
    match s {
        State::Attached => GOOD,
        State::Stale | State::Replaced => WARN,
        State::EngineGone | State::Truncated | State::Unlinked => BAD,
    }
}

pub fn state_text(s: State) -> &'static str {
    match s {
        State::Attached => "attached",
        State::Stale => "stale",
        State::EngineGone => "engine gone",
        State::Replaced => "replaced, re-attached",
        State::Truncated => "truncated",
        State::Unlinked => "unlinked",
    }
}

/// "1.2 kHz", "53 Hz".
pub fn hz(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} kHz", v / 1000.0)
    } else {
        format!("{v:.0} Hz")
    }
}

/// "412 µs", "3.1 ms".
pub fn duration_ns(ns: u64) -> String {
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.0} µs", ns as f64 / 1e3)
    } else if ns < 10_000_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} s", ns as f64 / 1e9)
    }
}
