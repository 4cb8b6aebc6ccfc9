//! The envs panel: rewards of the watched envs with episode boundaries, observation and
//! action channels by name, and an all-env overview (reward distribution over time,
//! done and truncation counts); the detector's events as marks on the plots, and its
//! totals of NaN, Inf and out-of-range values since the start, pointing at env and
//! channel. Every series is decimated to the pixel. With a baseline recording
//! (`crate::ui::baseline`), each watched env's reward and channels in the baseline are
//! drawn as dashed lines of the same colour, each of the baseline's frames at the time of
//! the shown run's frame at the same place. The plotted series' CSV export is `csv`.

use egui_plot::{Legend, Line, LineStyle, MarkerShape, Plot, PlotPoints, Points, VLine};

mod csv;

use csv::csv_export;
pub use csv::plots_csv;

use super::super::baseline::{Baseline, BaselinePoint, BaselineSeries};
use super::super::decimate::SeriesCache;
use super::super::settings::Settings;
use super::super::widgets::{BAD, WARN, series_color};
use lrbc::layout::Geometry;
use lrbc_live::check::{Channel, ChannelKind};
use lrbc_live::detect::{EventKind, EventLog};
use lrbc_live::sampler::{
    EnvPoint, FLAG_DONE, FLAG_RESET, FLAG_TRUNCATED, FrameAgg, MAX_WATCHED_ENVS, Ring, SamplerData,
    Watched,
};
use lrbc_live::text::thousands;

/// Events marked on the plots, at most (the newest in the window).
const MARKS: usize = 200;

/// An event's mark: where on the time axis, which env, which channel.
struct Mark {
    x: f64,
    env: Option<u32>,
    channel: Option<ChannelKind>,
    kind: EventKind,
}

/// The events in `[from_ns, newest]`, as marks.
fn marks(events: Option<&EventLog>, from_ns: u64, newest: u64) -> Vec<Mark> {
    let Some(log) = events else {
        return Vec::new();
    };
    let mut v: Vec<Mark> = log
        .events()
        .iter()
        .rev()
        .filter(|e| e.time_ns >= from_ns && e.time_ns <= newest)
        .take(MARKS)
        .map(|e| Mark {
            x: -((newest - e.time_ns) as f64 / 1e9),
            env: e.env,
            channel: e.channel,
            kind: e.kind,
        })
        .collect();
    v.reverse();
    v
}

/// What the envs panel asks of the app.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct EnvsActions {
    /// The watched envs changed (the sampler must be told).
    pub watched_changed: bool,
}

/// Seconds before the newest sample, and the x range shown.
fn time_range(d: &SamplerData, window_secs: f32) -> (u64, f64) {
    let newest = d.frames.back().map_or(0, |f| f.t_ns);
    let oldest = d.frames.iter().next().map_or(newest, |f| f.t_ns);
    let span = (newest.saturating_sub(oldest)) as f64 / 1e9;
    let window = if window_secs <= 0.0 {
        span.max(1.0)
    } else {
        f64::from(window_secs)
    };
    (newest, window)
}

/// An overview line: name, value of a frame (given the env count), colour, width.
type OverviewSeries = (&'static str, fn(&FrameAgg, f32) -> f32, egui::Color32, f32);

/// Items of a time-ordered ring newer than `after_ns` and not older than `from_ns`, in
/// time order (scanned from the newest end, so the cost is what is new).
fn newer<T>(ring: &Ring<T>, after_ns: u64, from_ns: u64, t: impl Fn(&T) -> u64) -> Vec<&T> {
    let mut v: Vec<&T> = ring
        .iter()
        .rev()
        .take_while(|item| t(item) > after_ns && t(item) >= from_ns)
        .collect();
    v.reverse();
    v
}

/// The shown run's frames in the window, over the watched envs' histories.
fn frames_shown(d: &SamplerData, from_ns: u64) -> Option<(u64, u64)> {
    let mut span: Option<(u64, u64)> = None;
    for h in d.envs.values() {
        let first = h.points.partition_point(|p| p.t_ns < from_ns);
        let (Some(a), Some(b)) = (h.points.get(first), h.points.back()) else {
            continue;
        };
        span = Some(match span {
            None => (a.frame_seq, b.frame_seq),
            Some((x, y)) => (x.min(a.frame_seq), y.max(b.frame_seq)),
        });
    }
    span
}

/// The baseline's points of one env as plot points: each at the time of the shown run's
/// frame at its place (a frame the shown history lacks is left out), `value` of it.
fn baseline_points(
    shown: &Ring<EnvPoint>,
    points: &[BaselinePoint],
    from_ns: u64,
    newest: u64,
    value: impl Fn(&BaselinePoint) -> Option<f32>,
) -> Vec<[f64; 2]> {
    let mut out = Vec::new();
    let mut i = shown.partition_point(|p| p.t_ns < from_ns);
    for p in points {
        while shown.get(i).is_some_and(|s| s.frame_seq < p.frame_seq) {
            i += 1;
        }
        let Some(s) = shown.get(i).filter(|s| s.frame_seq == p.frame_seq) else {
            continue;
        };
        if let Some(v) = value(p) {
            out.push([(s.t_ns as f64 - newest as f64) / 1e9, f64::from(v)]);
        }
    }
    out
}

/// A baseline line: the series' colour, faded and dashed.
fn baseline_line(name: String, points: Vec<[f64; 2]>, color: egui::Color32) -> Line<'static> {
    Line::new(name, PlotPoints::from(points))
        .color(color.gamma_multiply(0.7))
        .style(LineStyle::dashed_dense())
}

pub fn ui(
    ui: &mut egui::Ui,
    d: &SamplerData,
    events: Option<&EventLog>,
    settings: &mut Settings,
    cache: &mut SeriesCache,
    baseline: Option<&Baseline>,
) -> EnvsActions {
    let g = d.geometry.clone();
    let mut actions = EnvsActions::default();
    controls(ui, &g, settings, &mut actions);
    let (newest, window) = time_range(d, settings.plot_window_secs);
    let window_ns = (window * 1e9) as u64;
    let from_ns = newest.saturating_sub(window_ns);
    let columns = ui.available_width().max(50.0) as u64;
    let width_ns = (window_ns / columns).max(1);
    csv_export(ui, d, &g, from_ns, newest);
    values_report(ui, d, events, settings, &mut actions);
    let series = baseline.map(|b| {
        if let Some((from, to)) = frames_shown(d, from_ns) {
            let envs: Vec<u32> = d.envs.keys().copied().collect();
            b.want(&envs, from, to);
        }
        let (series, note) = b.series();
        let name = b
            .path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        match note {
            Some(n) => ui.colored_label(WARN, format!("baseline {name}: {n}")),
            None => ui.weak(format!(
                "dashed: the baseline {name}, each frame at the time of this run's frame at the same place"
            )),
        };
        series
    });
    let view = View {
        d,
        g: &g,
        generation: d.generation,
        newest,
        window,
        from_ns,
        width_ns,
        plot_height: ((ui.available_height() - 40.0) / 4.0).clamp(90.0, 260.0),
        marks: marks(events, from_ns, newest),
        baseline: series.as_deref(),
    };
    let mut keys: Vec<String> = Vec::new();
    rewards_plot(ui, &view, cache, &mut keys);
    for (title, id, channels, is_obs) in [
        (
            "Observations",
            "env_obs",
            settings.obs_channels.clone(),
            true,
        ),
        ("Actions", "env_act", settings.act_channels.clone(), false),
    ] {
        channels_plot(ui, &view, cache, &mut keys, (title, id, &channels, is_obs));
    }
    overview_plot(ui, &view, cache, &mut keys);
    cache.retain(|k| keys.iter().any(|x| x == k));
    actions
}

/// What the plots of one redraw share: the data, its time window, the plots' height and
/// the events' marks.
struct View<'a> {
    d: &'a SamplerData,
    g: &'a Geometry,
    generation: u64,
    /// The newest frame's time, ns.
    newest: u64,
    /// The window's length, seconds.
    window: f64,
    from_ns: u64,
    /// The time one pixel column covers, ns.
    width_ns: u64,
    plot_height: f32,
    marks: Vec<Mark>,
    /// The baseline's values of the watched envs, if there is a baseline.
    baseline: Option<&'a BaselineSeries>,
}

/// The watched envs' rewards, with their done, truncation and reset markers; the keys of
/// the series drawn go to `keys`.
fn rewards_plot(
    ui: &mut egui::Ui,
    view: &View<'_>,
    cache: &mut SeriesCache,
    keys: &mut Vec<String>,
) {
    let View {
        d,
        generation,
        newest,
        window,
        from_ns,
        width_ns,
        plot_height,
        ref marks,
        baseline,
        ..
    } = *view;
    ui.strong("Rewards of the watched envs (markers: triangle done, diamond truncated, dot reset; lines: events)");
    Plot::new("env_rewards")
        .height(plot_height)
        .legend(Legend::default())
        .include_x(-window)
        .include_x(0.0)
        .x_axis_label("seconds before the newest frame")
        .show(ui, |p| {
            for (i, (env, h)) in d.envs.iter().enumerate() {
                let key = format!("reward/{env}");
                let series = cache.get(&key, generation);
                let fresh = newer(&h.points, series.resume_from(width_ns), from_ns, |pt| {
                    pt.t_ns
                });
                series.update(
                    width_ns,
                    from_ns,
                    fresh.iter().map(|pt| (pt.t_ns, pt.reward)),
                );
                let color = series_color(i);
                p.line(
                    Line::new(
                        format!("env {env}"),
                        PlotPoints::from(series.points(newest)),
                    )
                    .color(color),
                );
                keys.push(key);
                if let Some(points) = baseline.and_then(|b| b.envs.get(env)) {
                    let pts =
                        baseline_points(&h.points, points, from_ns, newest, |p| Some(p.reward));
                    p.line(baseline_line(format!("env {env} baseline"), pts, color));
                }
                for (flag, shape, radius, c) in [
                    (FLAG_DONE, MarkerShape::Down, 4.0, BAD),
                    (FLAG_TRUNCATED, MarkerShape::Diamond, 4.0, WARN),
                    (FLAG_RESET, MarkerShape::Circle, 3.0, color),
                ] {
                    let key = format!("mark/{env}/{flag}");
                    let marks = cache.get(&key, generation);
                    let fresh = newer(&h.points, marks.resume_from(width_ns), from_ns, |pt| {
                        pt.t_ns
                    });
                    // Markers are sparse: one bucket per pixel keeps every one that shows.
                    marks.update(
                        width_ns,
                        from_ns,
                        fresh.iter().map(|pt| {
                            (
                                pt.t_ns,
                                if pt.flags & flag != 0 {
                                    pt.reward
                                } else {
                                    f32::NAN
                                },
                            )
                        }),
                    );
                    p.points(
                        Points::new(format!("env {env}"), PlotPoints::from(marks.points(newest)))
                            .shape(shape)
                            .radius(radius)
                            .color(c),
                    );
                    keys.push(key);
                }
            }
            for m in marks
                .iter()
                .filter(|m| m.env.is_some_and(|e| d.envs.contains_key(&e)))
            {
                p.vline(VLine::new("events", m.x).color(crate::ui::widgets::event_color(m.kind)));
            }
        });
}

/// The watched envs' observation (`is_obs`) or action channels of the settings, titled
/// `title`, plot `id`; the keys of the series drawn go to `keys`.
fn channels_plot(
    ui: &mut egui::Ui,
    view: &View<'_>,
    cache: &mut SeriesCache,
    keys: &mut Vec<String>,
    (title, id, channels, is_obs): (&str, &str, &[u32], bool),
) {
    let View {
        d,
        g,
        generation,
        newest,
        window,
        from_ns,
        width_ns,
        plot_height,
        ref marks,
        baseline,
    } = *view;
    ui.strong(format!("{title} of the watched envs"));
    Plot::new(id)
        .height(plot_height)
        .legend(Legend::default())
        .include_x(-window)
        .include_x(0.0)
        .show(ui, |p| {
            let mut n = 0;
            for (env, h) in &d.envs {
                for &ch in channels {
                    let (limit, offset) = if is_obs {
                        (g.obs_size, ch as usize)
                    } else {
                        (g.act_size, g.obs_size as usize + ch as usize)
                    };
                    if ch >= limit {
                        continue;
                    }
                    let key = format!("{id}/{env}/{ch}");
                    let series = cache.get(&key, generation);
                    let fresh = newer(&h.detail, series.resume_from(width_ns), from_ns, |dt| {
                        dt.t_ns
                    });
                    series.update(
                        width_ns,
                        from_ns,
                        fresh.iter().map(|dt| {
                            (dt.t_ns, dt.values.get(offset).copied().unwrap_or(f32::NAN))
                        }),
                    );
                    let channel = if is_obs {
                        Channel::Obs(ch)
                    } else {
                        Channel::Act(ch)
                    };
                    p.line(
                        Line::new(
                            format!("env {env} {}", channel.label(&g.names)),
                            PlotPoints::from(series.points(newest)),
                        )
                        .color(series_color(n)),
                    );
                    keys.push(key);
                    if let Some(points) = baseline.and_then(|b| b.envs.get(env)) {
                        let pts = baseline_points(&h.points, points, from_ns, newest, |p| {
                            p.values.as_ref().and_then(|v| v.get(offset).copied())
                        });
                        p.line(baseline_line(
                            format!("env {env} {} baseline", channel.label(&g.names)),
                            pts,
                            series_color(n),
                        ));
                    }
                    n += 1;
                }
            }
            let kind = if is_obs {
                ChannelKind::Observation
            } else {
                ChannelKind::Action
            };
            for m in marks.iter().filter(|m| {
                m.channel == Some(kind) && m.env.is_some_and(|e| d.envs.contains_key(&e))
            }) {
                p.vline(VLine::new("events", m.x).color(crate::ui::widgets::event_color(m.kind)));
            }
        });
}

/// Every env: the reward's distribution and the share of dones and truncations per
/// frame; the keys of the series drawn go to `keys`.
fn overview_plot(
    ui: &mut egui::Ui,
    view: &View<'_>,
    cache: &mut SeriesCache,
    keys: &mut Vec<String>,
) {
    let View {
        d,
        g,
        generation,
        newest,
        window,
        from_ns,
        width_ns,
        plot_height,
        ref marks,
        ..
    } = *view;
    ui.strong(format!(
        "All {} envs: reward distribution, dones and truncations per frame",
        g.num_envs
    ));
    Plot::new("env_overview")
        .height(plot_height)
        .legend(Legend::default())
        .include_x(-window)
        .include_x(0.0)
        .show(ui, |p| {
            let n = g.num_envs.max(1) as f32;
            let stats: [OverviewSeries; 7] = [
                (
                    "reward max",
                    |f, _| f.reward_max,
                    egui::Color32::from_gray(140),
                    1.0,
                ),
                ("reward p90", |f, _| f.reward_p90, series_color(0), 1.0),
                ("reward median", |f, _| f.reward_p50, series_color(2), 2.0),
                ("reward p10", |f, _| f.reward_p10, series_color(0), 1.0),
                (
                    "reward min",
                    |f, _| f.reward_min,
                    egui::Color32::from_gray(140),
                    1.0,
                ),
                ("done share", |f, n| f.dones as f32 / n, BAD, 1.0),
                ("truncated share", |f, n| f.truncateds as f32 / n, WARN, 1.0),
            ];
            for (name, get, color, width) in stats {
                let key = format!("agg/{name}");
                let series = cache.get(&key, generation);
                let fresh = newer(&d.frames, series.resume_from(width_ns), from_ns, |f| f.t_ns);
                series.update(width_ns, from_ns, fresh.iter().map(|f| (f.t_ns, get(f, n))));
                p.line(
                    Line::new(name, PlotPoints::from(series.points(newest)))
                        .color(color)
                        .width(width),
                );
                keys.push(key);
            }
            // Every event of every env: the overview is of all of them.
            for m in marks {
                p.vline(VLine::new("events", m.x).color(crate::ui::widgets::event_color(m.kind)));
            }
        });
}

fn controls(ui: &mut egui::Ui, g: &Geometry, settings: &mut Settings, actions: &mut EnvsActions) {
    ui.horizontal_wrapped(|ui| {
        ui.label("Watched envs:");
        let mut remove = None;
        for (i, e) in settings.watched_envs.iter().enumerate() {
            if ui
                .add(egui::Button::new(
                    egui::RichText::new(format!("env {e} x")).color(series_color(i)),
                ))
                .on_hover_text("stop watching this env")
                .clicked()
            {
                remove = Some(e);
            }
        }
        if let Some(e) = remove {
            actions.watched_changed |= settings.watched_envs.unwatch(e);
        }
        let id = ui.scope_id().with("add_env");
        let mut next: u32 = ui.data(|data| data.get_temp(id)).unwrap_or(0);
        let add_label = ui.label("Add");
        ui.add(
            egui::DragValue::new(&mut next)
                .range(0..=g.num_envs.saturating_sub(1))
                .prefix("env "),
        )
        .labelled_by(add_label.id);
        ui.data_mut(|data| data.insert_temp(id, next));
        if ui
            .button("Watch")
            .on_hover_text(format!(
                "watch this env too (up to {MAX_WATCHED_ENVS}: then in place of the one watched longest)"
            ))
            .clicked()
            && next < g.num_envs
        {
            actions.watched_changed |= settings.watched_envs.watch(next) != Watched::Already;
        }
        if ui
            .button("< Previous")
            .on_hover_text("shift the watched envs down ( [ )")
            .clicked()
        {
            settings.watched_envs.shift(-1, g.num_envs);
            actions.watched_changed = true;
        }
        if ui
            .button("Next >")
            .on_hover_text("shift the watched envs up ( ] )")
            .clicked()
        {
            settings.watched_envs.shift(1, g.num_envs);
            actions.watched_changed = true;
        }
        ui.separator();
        channel_menu(
            ui,
            "Observation channels…",
            g.obs_size,
            &mut settings.obs_channels,
            |i| g.names.obs_label(i),
        );
        channel_menu(
            ui,
            "Action channels…",
            g.act_size,
            &mut settings.act_channels,
            |i| g.names.act_label(i),
        );
        ui.separator();
        let window_label = ui.label("Window");
        ui.add(
            egui::DragValue::new(&mut settings.plot_window_secs)
                .range(0.0..=3600.0)
                .suffix(" s")
                .speed(0.5),
        )
        .labelled_by(window_label.id)
        .on_hover_text("seconds of history shown; 0 shows everything kept");
    });
}

fn channel_menu(
    ui: &mut egui::Ui,
    title: &str,
    count: u32,
    selected: &mut Vec<u32>,
    label: impl Fn(usize) -> String,
) {
    ui.menu_button(title, |ui| {
        egui::ScrollArea::vertical()
            .max_height(300.0)
            .show(ui, |ui| {
                for i in 0..count.min(512) {
                    let mut on = selected.contains(&i);
                    if ui.checkbox(&mut on, label(i as usize)).changed() {
                        if on {
                            selected.push(i);
                            selected.sort_unstable();
                        } else {
                            selected.retain(|&c| c != i);
                        }
                    }
                }
            });
    });
}

/// The detector's totals since the start (NaN, Inf and out-of-range values, the envs
/// they were in, the frames checked), and the newest value events, each with a button to
/// watch its env.
fn values_report(
    ui: &mut egui::Ui,
    d: &SamplerData,
    events: Option<&EventLog>,
    settings: &mut Settings,
    actions: &mut EnvsActions,
) {
    let Some(log) = events else {
        ui.horizontal(|ui| {
            ui.strong("Values");
            ui.weak("not checked (the detector does not run for this source)");
        });
        return;
    };
    let t = log.totals();
    ui.horizontal_wrapped(|ui| {
        ui.strong("Values");
        let normal = ui.visuals().text_color();
        let color = |n: u64| if n > 0 { BAD } else { normal };
        ui.colored_label(
            color(t.nan_values),
            format!("NaN {}", thousands(t.nan_values)),
        );
        ui.colored_label(
            color(t.inf_values),
            format!("Inf {}", thousands(t.inf_values)),
        );
        let bounds: Vec<String> = settings
            .detect
            .limits
            .bounds
            .iter()
            .map(lrbc_live::check::BoundRule::display)
            .collect();
        ui.colored_label(
            color(t.out_of_range_values),
            format!("out of range {}", thousands(t.out_of_range_values)),
        )
        .on_hover_text(if bounds.is_empty() {
            "no bounds set (Settings)".to_string()
        } else {
            bounds.join(", ")
        });
        ui.label(format!("in {} envs since the start", t.envs_affected));
        ui.weak(format!("· {}", t.checked_text()));
    });
    let g = &d.geometry;
    for e in log
        .events()
        .iter()
        .rev()
        .filter(|e| e.kind.is_value())
        .take(4)
    {
        let Some(env) = e.env.filter(|&env| env < g.num_envs) else {
            continue;
        };
        ui.horizontal(|ui| {
            ui.colored_label(
                crate::ui::widgets::event_color(e.kind),
                format!(
                    "frame {} · env {env} · {} = {}",
                    e.first_frame,
                    e.channel_text(),
                    e.value_text()
                ),
            );
            if !settings.watched_envs.contains(env) && ui.small_button("watch this env").clicked() {
                actions.watched_changed |= settings.watched_envs.watch(env) != Watched::Already;
            }
        });
    }
}
