//! The counters panel: frame_seq and action_seq (live, or of a recording's current
//! frame), rates, lag, stalls, the sampler's figures, step latency (histogram and
//! percentiles) and sparklines.

use egui_plot::{Bar, BarChart, Line, Plot, PlotPoints};

use super::super::widgets::{BAD, WARN, duration_ns, hz, state_color, state_text};
use lrbc_live::sampler::SamplerData;

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

/// Draws the panel; `seqs` is `(frame_seq, action_seq)` now.
pub fn ui(ui: &mut egui::Ui, seqs: (u64, u64), d: &SamplerData, cache: &mut CountersCache) {
    cache.refresh(d);
    counters_and_state(ui, seqs, d);
    sampler_line(ui, d);
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
            "sampler: {} of {} frames sampled, {} missed, {} torn, {} skipped, {} unreadable",
            s.frames_sampled,
            s.frames_seen,
            s.frames_missed,
            s.frames_torn,
            s.frames_skipped,
            s.frames_unreadable
        ));
        if s.frames_seen > 0 && s.frames_sampled < s.frames_seen {
            let share = 100.0 * s.frames_sampled as f64 / s.frames_seen as f64;
            // Frames skipped on purpose are no fault; lost ones are.
            let lost = 100.0 * (s.frames_missed + s.frames_torn + s.frames_unreadable) as f64
                / s.frames_seen as f64;
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
                if *count == 1 { "" } else { "s" },
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
