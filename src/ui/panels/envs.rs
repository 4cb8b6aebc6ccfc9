//! The envs panel: rewards of the watched envs with episode boundaries, observation and
//! action channels by name, and an all-env overview (reward distribution over time,
//! done and truncation counts, NaN/Inf/out-of-range values pointing at env and
//! channel). Every series is decimated to the pixel.

use egui_plot::{Legend, Line, MarkerShape, Plot, PlotPoints, Points};

use super::super::decimate::min_max;
use super::super::settings::Settings;
use super::super::widgets::{BAD, WARN, series_color};
use crate::layout::Geometry;
use crate::sampler::{Channel, FLAG_DONE, FLAG_RESET, FLAG_TRUNCATED, SamplerData};

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

fn channel_label(g: &Geometry, c: Channel) -> String {
    match c {
        Channel::Obs(i) => g.names.obs_label(i as usize),
        Channel::Act(i) => g.names.act_label(i as usize),
        Channel::Reward => "reward".into(),
    }
}

pub fn ui(ui: &mut egui::Ui, d: &SamplerData, settings: &mut Settings) -> EnvsActions {
    let g = d.geometry.clone();
    let mut actions = EnvsActions::default();
    controls(ui, &g, settings, &mut actions);
    let (newest, window) = time_range(d, settings.plot_window_secs);
    let x = |t_ns: u64| (t_ns as f64 - newest as f64) / 1e9;
    let columns = ui.available_width().max(50.0) as usize;
    let plot_height = ((ui.available_height() - 40.0) / 4.0).clamp(90.0, 260.0);

    ui.strong("Rewards of the watched envs (markers: triangle done, diamond truncated, dot reset)");
    Plot::new("env_rewards")
        .height(plot_height)
        .legend(Legend::default())
        .include_x(-window)
        .include_x(0.0)
        .x_axis_label("seconds before the newest frame")
        .show(ui, |p| {
            for (i, (env, h)) in d.envs.iter().enumerate() {
                let visible = h.points.iter().rev().take_while(|pt| x(pt.t_ns) >= -window);
                let mut pts: Vec<[f64; 2]> = visible
                    .map(|pt| [x(pt.t_ns), f64::from(pt.reward)])
                    .collect();
                pts.reverse();
                let color = series_color(i);
                p.line(
                    Line::new(
                        format!("env {env}"),
                        PlotPoints::from(min_max(pts, -window, 0.0, columns)),
                    )
                    .color(color),
                );
                let mark = |flag: u8| -> Vec<[f64; 2]> {
                    h.points
                        .iter()
                        .rev()
                        .take_while(|pt| x(pt.t_ns) >= -window)
                        .filter(|pt| pt.flags & flag != 0)
                        .take(2000)
                        .map(|pt| [x(pt.t_ns), f64::from(pt.reward)])
                        .collect()
                };
                p.points(
                    Points::new(format!("env {env}"), mark(FLAG_DONE))
                        .shape(MarkerShape::Down)
                        .radius(4.0)
                        .color(BAD),
                );
                p.points(
                    Points::new(format!("env {env}"), mark(FLAG_TRUNCATED))
                        .shape(MarkerShape::Diamond)
                        .radius(4.0)
                        .color(WARN),
                );
                p.points(
                    Points::new(format!("env {env}"), mark(FLAG_RESET))
                        .shape(MarkerShape::Circle)
                        .radius(3.0)
                        .color(color),
                );
            }
        });

    for (title, id, channels, is_obs) in [
        (
            "Observations",
            "env_obs",
            settings.obs_channels.clone(),
            true,
        ),
        ("Actions", "env_act", settings.act_channels.clone(), false),
    ] {
        ui.strong(format!("{title} of the watched envs"));
        Plot::new(id)
            .height(plot_height)
            .legend(Legend::default())
            .include_x(-window)
            .include_x(0.0)
            .show(ui, |p| {
                let mut series = 0;
                for (env, h) in &d.envs {
                    for &ch in &channels {
                        let (limit, offset) = if is_obs {
                            (g.obs_size, ch as usize)
                        } else {
                            (g.act_size, g.obs_size as usize + ch as usize)
                        };
                        if ch >= limit {
                            continue;
                        }
                        let mut pts: Vec<[f64; 2]> = h
                            .detail
                            .iter()
                            .rev()
                            .take_while(|dt| x(dt.t_ns) >= -window)
                            .filter_map(|dt| {
                                dt.values.get(offset).map(|&v| [x(dt.t_ns), f64::from(v)])
                            })
                            .collect();
                        pts.reverse();
                        let channel = if is_obs {
                            Channel::Obs(ch)
                        } else {
                            Channel::Act(ch)
                        };
                        p.line(
                            Line::new(
                                format!("env {env} {}", channel_label(&g, channel)),
                                PlotPoints::from(min_max(pts, -window, 0.0, columns)),
                            )
                            .color(series_color(series)),
                        );
                        series += 1;
                    }
                }
            });
    }

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
            let frames: Vec<_> = {
                let mut v: Vec<_> = d
                    .frames
                    .iter()
                    .rev()
                    .take_while(|f| x(f.t_ns) >= -window)
                    .collect();
                v.reverse();
                v
            };
            let series = |get: &dyn Fn(&crate::sampler::FrameAgg) -> f32| -> Vec<[f64; 2]> {
                min_max(
                    frames.iter().map(|f| [x(f.t_ns), f64::from(get(f))]),
                    -window,
                    0.0,
                    columns,
                )
            };
            p.line(
                Line::new("reward max", PlotPoints::from(series(&|f| f.reward_max)))
                    .color(egui::Color32::from_gray(140)),
            );
            p.line(
                Line::new("reward p90", PlotPoints::from(series(&|f| f.reward_p90)))
                    .color(series_color(0)),
            );
            p.line(
                Line::new("reward median", PlotPoints::from(series(&|f| f.reward_p50)))
                    .color(series_color(2))
                    .width(2.0),
            );
            p.line(
                Line::new("reward p10", PlotPoints::from(series(&|f| f.reward_p10)))
                    .color(series_color(0)),
            );
            p.line(
                Line::new("reward min", PlotPoints::from(series(&|f| f.reward_min)))
                    .color(egui::Color32::from_gray(140)),
            );
            let n = g.num_envs.max(1) as f32;
            p.line(
                Line::new(
                    "done share",
                    PlotPoints::from(series(&|f| f.dones as f32 / n)),
                )
                .color(BAD),
            );
            p.line(
                Line::new(
                    "truncated share",
                    PlotPoints::from(series(&|f| f.truncateds as f32 / n)),
                )
                .color(WARN),
            );
        });
    values_report(ui, d, &g, settings, &mut actions);
    actions
}

fn controls(ui: &mut egui::Ui, g: &Geometry, settings: &mut Settings, actions: &mut EnvsActions) {
    ui.horizontal_wrapped(|ui| {
        ui.label("Watched envs:");
        let mut remove = None;
        for (i, &e) in settings.watched_envs.iter().enumerate() {
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
            settings.watched_envs.retain(|&w| w != e);
            actions.watched_changed = true;
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
            .on_hover_text("watch this env too (up to 16)")
            .clicked()
            && !settings.watched_envs.contains(&next)
            && settings.watched_envs.len() < 16
            && next < g.num_envs
        {
            settings.watched_envs.push(next);
            actions.watched_changed = true;
        }
        if ui
            .button("< Previous")
            .on_hover_text("shift the watched envs down ( [ )")
            .clicked()
        {
            shift_envs(settings, g, -1);
            actions.watched_changed = true;
        }
        if ui
            .button("Next >")
            .on_hover_text("shift the watched envs up ( ] )")
            .clicked()
        {
            shift_envs(settings, g, 1);
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

/// Moves every watched env by `delta`, wrapping within the segment's envs.
pub fn shift_envs(settings: &mut Settings, g: &Geometry, delta: i64) {
    let n = i64::from(g.num_envs.max(1));
    for e in &mut settings.watched_envs {
        *e = (i64::from(*e) + delta).rem_euclid(n) as u32;
    }
    settings.watched_envs.dedup();
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

fn values_report(
    ui: &mut egui::Ui,
    d: &SamplerData,
    g: &Geometry,
    settings: &mut Settings,
    actions: &mut EnvsActions,
) {
    let s = &d.scan;
    ui.horizontal_wrapped(|ui| {
        ui.strong("Values");
        if s.scans == 0 {
            ui.weak("not scanned yet");
            return;
        }
        let normal = ui.visuals().text_color();
        let color = |n: u64| if n > 0 { BAD } else { normal };
        ui.colored_label(color(s.nan), format!("NaN {}", s.nan));
        ui.colored_label(color(s.inf), format!("Inf {}", s.inf));
        ui.colored_label(
            color(s.out_of_range),
            format!("out of range {}", s.out_of_range),
        )
        .on_hover_text(format!(
            "|obs| > {}, |act| > {}",
            settings.obs_limit, settings.act_limit
        ));
        ui.label(format!(
            "in {} envs (scan of frame {})",
            s.envs_affected, s.frame_seq
        ));
    });
    for b in s.examples.iter().take(6) {
        ui.horizontal(|ui| {
            ui.colored_label(
                BAD,
                format!(
                    "env {} · {} = {}",
                    b.env,
                    channel_label(g, b.channel),
                    b.value
                ),
            );
            if !settings.watched_envs.contains(&b.env)
                && ui.small_button("watch this env").clicked()
            {
                settings.watched_envs.push(b.env);
                actions.watched_changed = true;
            }
        });
    }
}
