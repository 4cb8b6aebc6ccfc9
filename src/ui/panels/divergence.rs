//! The Divergence panel: the recording shown against a baseline recording (`open
//! RUN.mcap --baseline BASE.mcap`, or Baseline… in the top bar), compared on a thread of
//! their own (`crate::ui::baseline`). The panel lists each env that diverged: where (the frame from each run's start), in which value, the baseline's
//! value and this run's, and the origin (policy, simulator, reward). Above, the counts
//! and the episodes' mean return side by side. A click asks the window to go to the
//! divergence: the timeline moves to its frame and its env is watched.

use crate::ui::baseline::{Baseline, BaselineState};
use crate::ui::widgets::{BAD, WARN, list_row};
use lrbc_live::check::Channel;
use lrbc_live::text::thousands;
use lrbc_recording::compare::{
    Difference, Divergence, DivergenceOrigin, FilesCompared, ReturnVerdict,
};

/// The panel's state: the row clicked last.
#[derive(Debug, Default)]
pub struct DivergenceView {
    pub selected: Option<u32>,
}

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DivergenceAction {
    /// Go to this divergence: the timeline to its frame, its env watched.
    Go(Divergence),
}

fn value_label(d: &Difference) -> String {
    match *d {
        Difference::Value { channel, .. } => match channel {
            Channel::Obs(i) => format!("obs[{i}]"),
            Channel::Act(i) => format!("act[{i}]"),
            Channel::Reward => "reward".into(),
        },
        Difference::Flag { flag, .. } => flag.as_str().into(),
    }
}

fn values(d: &Difference) -> (String, String) {
    match *d {
        Difference::Value { a, b, .. } => (a.to_string(), b.to_string()),
        Difference::Flag { a, b, .. } => (a.to_string(), b.to_string()),
    }
}

/// One diverged env's row: env, frame, frame_seq (this run's), origin, value, the
/// baseline's and this run's.
pub fn row_text(d: &Divergence) -> String {
    let (a, b) = values(&d.difference);
    format!(
        "{:>5}  {:>9}  {:>10}  {:<9}  {:<10} {:>14} {:>14}",
        d.env,
        d.frame,
        d.frame_seq_b,
        d.origin.as_str(),
        value_label(&d.difference),
        a,
        b
    )
}

fn origin_color(o: DivergenceOrigin) -> egui::Color32 {
    match o {
        DivergenceOrigin::Simulator => BAD,
        DivergenceOrigin::Policy | DivergenceOrigin::Reward => WARN,
        DivergenceOrigin::Unknown => egui::Color32::GRAY,
    }
}

/// The comparison's headline and the episodes' statement.
fn summary_lines(r: &FilesCompared) -> Vec<String> {
    let c = r.counts;
    let mut lines = vec![format!(
        "{} frames compared ({} only in the baseline, {} only in this run); envs: {} identical, {} diverged, {} not compared",
        thousands(c.frames_compared),
        thousands(c.frames_only_a),
        thousands(c.frames_only_b),
        thousands(c.envs_identical),
        thousands(c.envs_diverged),
        thousands(c.envs_not_compared),
    )];
    let run = &r.episodes.run;
    let mean = |m: Option<f64>| m.map_or("–".to_string(), |v| format!("{v:.4}"));
    let mut ep = format!(
        "episodes: {} in the baseline, {} in this run; mean return {} against {}",
        thousands(run.a.finished),
        thousands(run.b.finished),
        mean(run.b.returns.mean()),
        mean(run.a.returns.mean()),
    );
    match (run.verdict(), run.mean_return()) {
        (ReturnVerdict::TooFew, _) | (_, None) => ep.push_str(" (too few episodes to tell)"),
        (v, Some(i)) => ep.push_str(&format!(
            ": {} (difference {:+.4}, 95 % interval {:.4} to {:.4})",
            v.as_str(),
            i.estimate,
            i.low,
            i.high
        )),
    }
    lines.push(ep);
    lines
}

pub fn ui(
    ui: &mut egui::Ui,
    baseline: Option<&Baseline>,
    view: &mut DivergenceView,
) -> Option<DivergenceAction> {
    let Some(baseline) = baseline else {
        ui.weak(
            "No baseline. Compare this run with a recording of another (Baseline… in the top \
             bar, or open RUN.mcap --baseline BASE.mcap) to see where it departs from it.",
        );
        return None;
    };
    let state = baseline.state();
    ui.horizontal_wrapped(|ui| {
        ui.label("Baseline");
        let name = baseline.path.file_name().map_or_else(
            || baseline.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        ui.monospace(name)
            .on_hover_text(baseline.path.display().to_string());
    });
    let found: Vec<Divergence> = match &state {
        BaselineState::Failed(e) => {
            ui.colored_label(BAD, format!("the comparison failed: {e}"));
            return None;
        }
        BaselineState::Comparing(found) => {
            ui.horizontal(|ui| {
                ui.spinner();
                match baseline.live_counts() {
                    Some(c) => ui.label(format!(
                        "comparing the live run as it goes: {} frames compared ({} of the baseline's not taken); {} envs diverged so far",
                        thousands(c.frames_compared),
                        thousands(c.frames_only_a),
                        found.len()
                    )),
                    None if baseline.is_live() => {
                        ui.label("comparing the live run as it goes: waiting for its frames")
                    }
                    None => ui.label(format!("comparing… {} envs diverged so far", found.len())),
                };
            });
            let mut f = found.clone();
            f.sort_by_key(|d| (d.frame, d.env));
            f
        }
        BaselineState::Done(r) => {
            for (k, line) in summary_lines(r).into_iter().enumerate() {
                if k == 0 {
                    ui.strong(line);
                } else {
                    ui.label(line);
                }
            }
            if r.end_a.truncated || r.end_b.truncated {
                ui.colored_label(
                    WARN,
                    "a recording stops before its end (its recorder did not finish)",
                );
            }
            let mut f = r.divergences.clone();
            f.sort_by_key(|d| (d.frame, d.env));
            f
        }
    };
    let mut action = None;
    ui.monospace(format!(
        "{:>5}  {:>9}  {:>10}  {:<9}  {:<10} {:>14} {:>14}",
        "env", "frame", "frame_seq", "origin", "value", "baseline", "this run"
    ));
    let row_height = ui.text_style_height(&egui::TextStyle::Monospace) + 4.0;
    ui.push_id("divergence_list", |ui| {
        egui::ScrollArea::vertical()
            .auto_shrink([false, false])
            .show_rows(ui, row_height, found.len(), |ui, range| {
                ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
                for d in &found[range] {
                    let mut rt = egui::RichText::new(row_text(d))
                        .monospace()
                        .color(origin_color(d.origin));
                    if view.selected == Some(d.env) {
                        rt = rt.background_color(ui.visuals().selection.bg_fill);
                    }
                    let row = list_row(ui, rt, row_height)
                        .on_hover_text("Go to this frame and watch the env");
                    if row.clicked() {
                        view.selected = Some(d.env);
                        action = Some(DivergenceAction::Go(*d));
                    }
                }
            });
    });
    if found.is_empty() && matches!(state, BaselineState::Done(_)) {
        ui.weak("No env diverged: this run is the baseline's, value for value.");
    }
    action
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_says_the_env_frame_value_and_both_runs_values() {
        let d = Divergence {
            env: 4,
            frame: 149,
            frame_seq_a: 150,
            frame_seq_b: 150,
            time_a_ns: 0,
            time_b_ns: 0,
            origin: DivergenceOrigin::Simulator,
            difference: Difference::Value {
                channel: Channel::Obs(2),
                a: 0.5,
                b: f32::NAN,
            },
        };
        let row = row_text(&d);
        assert!(
            row.starts_with("    4        149         150  simulator  obs[2]"),
            "{row}"
        );
        assert!(row.trim_end().ends_with("0.5            NaN"), "{row}");
    }
}
