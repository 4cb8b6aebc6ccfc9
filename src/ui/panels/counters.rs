//! The counters panel: frame_seq and action_seq (live, or of a recording's current
//! frame), rates, lag, stalls, the sampler's figures, the loop's rhythm (rollouts,
//! updates, shares of wall time, a timeline of the newest pauses), step latency
//! (histogram and percentiles) and sparklines.

use egui_plot::{Bar, BarChart, Line, Plot, PlotPoints};

use super::super::widgets::{BAD, WARN, duration_ns, hz, state_color, state_text};
use lrbc_live::rhythm::{LoopKind, PauseVerdict, RhythmSummary, Side};
use lrbc_live::sampler::SamplerData;
use lrbc_live::text::plural;

/// The span of the rhythm's timeline, in seconds before its summary.
const TIMELINE_SECS: f64 = 60.0;
/// The colours of stepping and of waiting for each side.
const STEPPING: egui::Color32 = egui::Color32::from_rgb(90, 150, 110);
const TRAINER: egui::Color32 = egui::Color32::from_rgb(80, 130, 210);
const ENGINE: egui::Color32 = egui::Color32::from_rgb(200, 140, 60);
const UNKNOWN_SIDE: egui::Color32 = egui::Color32::from_rgb(140, 140, 150);

/// Latency percentiles over the last `n` frames that carried both times.
pub fn latency_stats(d: &SamplerData, n: usize) -> Option<(Vec<u64>, [u64; 4])> {
    let mut l: Vec<u64> = d
        .frames
        .iter()
        .rev()
        .take(n)
        .filter_map(|f| f.step_latency_ns)
        .collect();
    if l.is_empty() {
        return None;
    }
    l.sort_unstable();
    let p = |q: f64| lrbc_live::stats::quantile(&l, q).unwrap_or(0);
    let stats = [p(0.5), p(0.9), p(0.99), p(1.0)];
    Some((l, stats))
}

/// Frames per second in buckets over the last `secs` seconds (for the sparkline).
pub fn rate_series(d: &SamplerData, secs: f64, buckets: usize) -> Vec<[f64; 2]> {
    let Some(last) = d.frames.back() else {
        return Vec::new();
    };
    let end = last.t_ns as f64 / 1e9;
    let start = end - secs;
    let width = secs / buckets as f64;
    let mut counts = vec![0u64; buckets];
    let mut prev: Option<u64> = None;
    for f in d.frames.iter().rev() {
        let t = f.t_ns as f64 / 1e9;
        if t < start {
            break;
        }
        let b = (((t - start) / width) as usize).min(buckets - 1);
        // Frames between samples count too (missed ones included).
        let frames = prev.map_or(1, |p| p.saturating_sub(f.frame_seq).max(1));
        counts[b] += frames;
        prev = Some(f.frame_seq);
    }
    counts
        .iter()
        .enumerate()
        .map(|(i, &c)| [-secs + (i as f64 + 0.5) * width, c as f64 / width])
        .collect()
}

/// What the counters panel derives from the history, recomputed a few times a second
/// rather than every frame.
#[derive(Debug, Default)]
pub struct CountersCache {
    at_ns: u64,
    generation: u64,
    latency: Option<(usize, [u64; 4], Vec<u64>)>,
    rate: Vec<[f64; 2]>,
    dones: Vec<[f64; 2]>,
}

impl CountersCache {
    fn refresh(&mut self, d: &SamplerData) {
        let now = d.counters.read_ns;
        if now.saturating_sub(self.at_ns) < 200_000_000
            && self.generation == d.generation
            && self.at_ns != 0
        {
            return;
        }
        self.at_ns = now.max(1);
        self.generation = d.generation;
        self.latency = latency_stats(d, 20_000).map(|(sorted, stats)| {
            let hi = stats[2].max(1) as f64 * 1.2;
            let mut counts = vec![0u64; 40];
            for &v in &sorted {
                counts[(((v as f64 / hi) * 40.0) as usize).min(39)] += 1;
            }
            (sorted.len(), stats, counts)
        });
        self.rate = rate_series(d, 30.0, 60);
        let recent: Vec<[f64; 2]> = d
            .frames
            .iter()
            .rev()
            .take(2000)
            .map(|f| [f.t_ns as f64 / 1e9, f64::from(f.dones)])
            .collect();
        let end = recent.first().map_or(0.0, |p| p[0]);
        self.dones = recent.iter().rev().map(|p| [p[0] - end, p[1]]).collect();
    }
}

/// Draws the panel; `seqs` is `(frame_seq, action_seq)` now; `rhythm` the loop's as the
/// detector tells it (None: no detector).
pub fn ui(
    ui: &mut egui::Ui,
    seqs: (u64, u64),
    d: &SamplerData,
    rhythm: Option<&RhythmSummary>,
    cache: &mut CountersCache,
) {
    cache.refresh(d);
    counters_and_state(ui, seqs, d);
    sampler_line(ui, d);
    ui.separator();
    loop_rhythm(ui, rhythm);
    ui.separator();
    step_latency(ui, d, cache);
    ui.separator();
    sparklines(ui, cache);
}

/// `frame_seq`, `action_seq`, their lag and rates in large figures; the segment's state.
fn counters_and_state(ui: &mut egui::Ui, (frame_seq, action_seq): (u64, u64), d: &SamplerData) {
    let big = |ui: &mut egui::Ui, label: &str, value: String| {
        ui.vertical(|ui| {
            ui.weak(label);
            ui.label(egui::RichText::new(value).size(22.0).monospace());
        });
    };
    ui.horizontal(|ui| {
        big(ui, "frame_seq", frame_seq.to_string());
        ui.add_space(16.0);
        big(ui, "action_seq", action_seq.to_string());
        ui.add_space(16.0);
        big(
            ui,
            "lag",
            (i128::from(action_seq) - i128::from(frame_seq)).to_string(),
        );
        if let Some(r) = &d.report {
            ui.add_space(16.0);
            big(ui, "frame rate", r.frame_hz.map_or("-".into(), hz));
            ui.add_space(16.0);
            big(ui, "action rate", r.action_hz.map_or("-".into(), hz));
        }
    });
    if let Some(r) = &d.report {
        ui.horizontal(|ui| {
            ui.label("state:");
            ui.colored_label(state_color(r.state), state_text(r.state));
            if r.state == lrbc_live::watch::State::Stale {
                ui.colored_label(WARN, "stalled: no new frame for 2 s or more");
            }
            if let Some(n) = &r.note {
                ui.weak(n);
            }
        });
    }
}

/// What the sampler took of the frames, and why it skips some on a busy machine.
fn sampler_line(ui: &mut egui::Ui, d: &SamplerData) {
    let s = d.stats;
    ui.horizontal(|ui| {
        ui.label(format!(
            "sampler: {} of {} frames sampled, {} missed{}, {} torn, {} skipped, {} unreadable",
            s.frames.sampled,
            s.frames.seen,
            s.frames.missed,
            if s.frames.missed_late > 0 {
                format!(
                    " ({} while the follower was woken late)",
                    s.frames.missed_late
                )
            } else {
                String::new()
            },
            s.frames.torn,
            s.frames.skipped,
            s.frames.unreadable
        ));
        if s.frames.seen > 0 && s.frames.sampled < s.frames.seen {
            let share = 100.0 * s.frames.sampled as f64 / s.frames.seen as f64;
            // Frames skipped on purpose are no fault; lost ones are.
            let lost = 100.0 * s.frames.lost() as f64 / s.frames.seen as f64;
            ui.colored_label(
                if lost > 1.0 {
                    WARN
                } else {
                    ui.visuals().text_color()
                },
                format!("({share:.1} %)"),
            );
        }
    });
    if d.yielding {
        ui.label(
            "the machine has no spare CPU: the sampler keeps within its budget and skips frames \
             (Settings: 'Sampler on a busy machine'; 0 follows every frame)",
        );
    }
}

/// The colour of a wait on `side`.
fn side_color(side: Side) -> egui::Color32 {
    match side {
        Side::Trainer => TRAINER,
        Side::Engine => ENGINE,
        Side::Unknown => UNKNOWN_SIDE,
    }
}

/// The loop's rhythm: what the loop is, the shares of wall time as one bar, the figures,
/// and the newest pauses on a timeline of the last minute.
fn loop_rhythm(ui: &mut egui::Ui, rhythm: Option<&RhythmSummary>) {
    ui.strong("Loop rhythm");
    let Some(r) = rhythm else {
        ui.weak("not known: the detector is off (Settings), and it learns the loop's rhythm");
        return;
    };
    let mut head = r.loop_text();
    if let Some(c) = head.get_mut(0..1) {
        c.make_ascii_uppercase();
    }
    ui.label(head);
    if r.followed_secs > 0.0 {
        shares_bar(ui, r);
    }
    let mut figures = Vec::new();
    if let Some(step) = r.step_secs {
        figures.push(format!("a step every {}", duration_ns((step * 1e9) as u64)));
    }
    figures.push(match r.pauses {
        1 => "1 pause".to_string(),
        n => format!("{n} pauses"),
    });
    if r.stalls > 0 {
        figures.push(match r.stalls {
            1 => "1 stall".to_string(),
            n => format!("{n} stalls"),
        });
    }
    if r.time_limits > 0 || r.resets_in_step > 0 {
        figures.push(r.endings_text());
    }
    ui.label(figures.join(" · "));
    if r.kind == LoopKind::Continuous || (r.pauses == 0 && r.kind != LoopKind::Learning) {
        return;
    }
    timeline(ui, r);
}

/// The shares of wall time as one bar: stepping, waiting for the trainer, for the
/// engine, for a side not known; their figures below.
fn shares_bar(ui: &mut egui::Ui, r: &RhythmSummary) {
    let parts = [
        ("stepping", r.stepping_secs, STEPPING),
        ("waiting for the trainer", r.trainer_secs, TRAINER),
        ("waiting for the engine", r.engine_secs, ENGINE),
        ("side unknown", r.unknown_secs, UNKNOWN_SIDE),
    ];
    let width = ui.available_width().min(520.0);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(width, 12.0), egui::Sense::hover());
    let painter = ui.painter_at(rect);
    let mut x = rect.left();
    for (_, secs, color) in parts {
        let w = (r.share(secs) as f32) * rect.width();
        if w > 0.0 {
            painter.rect_filled(
                egui::Rect::from_min_max(
                    egui::pos2(x, rect.top()),
                    egui::pos2(x + w, rect.bottom()),
                ),
                0.0,
                color,
            );
        }
        x += w;
    }
    ui.horizontal_wrapped(|ui| {
        for (name, secs, color) in parts {
            if name == "side unknown" && secs <= 0.0 {
                continue;
            }
            swatch(ui, color, true);
            ui.label(format!("{name} {:.0} %", 100.0 * r.share(secs)));
        }
    });
}

/// A small square of `color`, filled or outlined, for a legend.
fn swatch(ui: &mut egui::Ui, color: egui::Color32, filled: bool) {
    let (rect, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
    let painter = ui.painter_at(rect.expand(1.0));
    if filled {
        painter.rect_filled(rect, 1.0, color);
    } else {
        painter.rect_stroke(
            rect.shrink(1.0),
            1.0,
            egui::Stroke::new(2.0, color),
            egui::StrokeKind::Inside,
        );
    }
}

/// The newest pauses over the last minute before the summary: each a bar as long as it
/// lasted, coloured by the side that waited, outlined red when it was a stall.
fn timeline(ui: &mut egui::Ui, r: &RhythmSummary) {
    let width = ui.available_width().min(520.0);
    let (rect, response) = ui.allocate_exact_size(egui::vec2(width, 22.0), egui::Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    let end = r.at_ns as f64 / 1e9;
    let x_of =
        |t: f64| rect.left() + ((t - (end - TIMELINE_SECS)) / TIMELINE_SECS) as f32 * rect.width();
    let mut hovered = None;
    for p in &r.recent {
        let start = p.start_ns as f64 / 1e9;
        let len = p
            .secs
            .unwrap_or(p.trainer_secs + p.engine_secs + p.unknown_secs);
        if start + len < end - TIMELINE_SECS {
            continue;
        }
        let (x0, x1) = (
            x_of(start).max(rect.left()),
            x_of(start + len).min(rect.right()),
        );
        let bar = egui::Rect::from_min_max(
            egui::pos2(x0, rect.top() + 3.0),
            egui::pos2(x1.max(x0 + 2.0), rect.bottom() - 3.0),
        );
        painter.rect_filled(bar, 1.0, side_color(p.side));
        if p.verdict == PauseVerdict::Stall {
            painter.rect_stroke(
                bar,
                1.0,
                egui::Stroke::new(2.0, BAD),
                egui::StrokeKind::Outside,
            );
        }
        if response
            .hover_pos()
            .is_some_and(|h| h.x >= bar.left() - 2.0 && h.x <= bar.right() + 2.0)
        {
            hovered = Some(p);
        }
    }
    ui.horizontal(|ui| {
        ui.weak(format!("pauses, last {TIMELINE_SECS:.0} s"));
        ui.add_space(8.0);
        swatch(ui, TRAINER, true);
        ui.weak("trainer");
        swatch(ui, ENGINE, true);
        ui.weak("engine");
        swatch(ui, BAD, false);
        ui.weak("stall");
    });
    if let Some(p) = hovered {
        let len = p.secs.map_or_else(|| "?".into(), |s| format!("{s:.2} s"));
        let after = p.after_frames.map_or_else(String::new, |n| {
            format!(", {n} frames after the loop's last pause")
        });
        response.on_hover_text(format!(
            "frame {}: {len} {} ({}){after}",
            p.frame,
            p.side.waiting_text(),
            p.verdict.as_str()
        ));
    }
}

/// The step latency's percentiles and histogram (or why there are none).
fn step_latency(ui: &mut egui::Ui, d: &SamplerData, cache: &CountersCache) {
    let c = d.geometry.counters;
    ui.strong("Step latency (frame_time_ns − action_time_ns)");
    match &cache.latency {
        None => {
            ui.weak(if c.ext.is_some() {
                "no frame with both times yet"
            } else {
                "unavailable: the segment has no extension block (frame_time_ns, action_time_ns)"
            });
        }
        Some((count, [p50, p90, p99, max], counts)) => {
            ui.label(format!(
                "p50 {}   p90 {}   p99 {}   max {}   ({count} frame{})",
                duration_ns(*p50),
                duration_ns(*p90),
                duration_ns(*p99),
                duration_ns(*max),
                plural(*count),
            ));
            let width_us = (*p99).max(1) as f64 * 1.2 / counts.len() as f64 / 1e3;
            let bars: Vec<Bar> = counts
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    Bar::new((i as f64 + 0.5) * width_us, n as f64).width(width_us * 0.9)
                })
                .collect();
            Plot::new("latency_hist")
                .height(110.0)
                .allow_scroll(false)
                .allow_drag(false)
                .x_axis_label("µs")
                .show(ui, |p| p.bar_chart(BarChart::new("step latency", bars)));
        }
    }
}

/// The frame rate over the last 30 s and the dones of the last 2000 frames.
fn sparklines(ui: &mut egui::Ui, cache: &CountersCache) {
    ui.strong("Frame rate, last 30 s");
    let rate = cache.rate.clone();
    Plot::new("rate_spark")
        .height(70.0)
        .allow_scroll(false)
        .allow_drag(false)
        .show_axes([false, true])
        .show(ui, |p| {
            p.line(Line::new("frames/s", PlotPoints::from(rate)));
        });
    ui.strong("Dones per frame, last 2000 frames");
    let pts = cache.dones.clone();
    Plot::new("dones_spark")
        .height(70.0)
        .allow_scroll(false)
        .allow_drag(false)
        .show_axes([false, true])
        .show(ui, |p| {
            p.line(Line::new("dones", PlotPoints::from(pts)).color(BAD));
        });
}
