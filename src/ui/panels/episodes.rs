//! The episodes panel: every env's episodes (`lrbc_live::episodes`). A headline (episodes
//! by ending, the mean return and length of the exact ones, the incomplete ones), and
//! five views: every env in a table sortable by each column, the recent episodes, the
//! distributions of return and length over the last N episodes (one colour per ending),
//! the mean return and length per time bin over the run, and the outliers (returns
//! beyond the far fences, envs running k times the median length without an ending). A
//! click on an env or an episode asks the window to watch that env (and, on a recording,
//! to go to the episode).

use egui_plot::{Bar, BarChart, Legend, Line, Plot, PlotPoints};

use crate::ui::widgets::{BAD, GOOD, WARN, list_row};
use lrbc_live::detect::format_value;
use lrbc_live::episodes::{Ending, EnvTotals, Episode, EpisodeBook};
use lrbc_live::rhythm::RhythmSummary;
use lrbc_live::text::plural;
use lrbc_live::text::thousands;

/// Which view of the episodes is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Section {
    #[default]
    Envs,
    Recent,
    Distributions,
    OverTime,
    Outliers,
}

impl Section {
    pub const ALL: [Self; 5] = [
        Self::Envs,
        Self::Recent,
        Self::Distributions,
        Self::OverTime,
        Self::Outliers,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Self::Envs => "Envs",
            Self::Recent => "Recent",
            Self::Distributions => "Distributions",
            Self::OverTime => "Over the run",
            Self::Outliers => "Outliers",
        }
    }
}

/// A column of the env table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EnvColumn {
    #[default]
    Env,
    Finished,
    LastReturn,
    MeanReturn,
    MeanLength,
    Truncated,
    SinceEnding,
}

impl EnvColumn {
    pub const ALL: [Self; 7] = [
        Self::Env,
        Self::Finished,
        Self::LastReturn,
        Self::MeanReturn,
        Self::MeanLength,
        Self::Truncated,
        Self::SinceEnding,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Self::Env => "env",
            Self::Finished => "finished",
            Self::LastReturn => "last return",
            Self::MeanReturn => "mean return",
            Self::MeanLength => "mean length",
            Self::Truncated => "truncated",
            Self::SinceEnding => "since ending",
        }
    }

    /// Characters of the column: its title and a sort arrow fit.
    fn width(self) -> usize {
        self.title().chars().count() + 2
    }
}

/// One row of the env table.
#[derive(Clone, Copy, Debug)]
pub struct EnvRow {
    pub env: u32,
    pub totals: EnvTotals,
    pub since_ending: Option<u64>,
}

impl EnvRow {
    /// The value sorted on (None last whatever the direction).
    fn key(&self, c: EnvColumn) -> Option<f64> {
        let t = &self.totals;
        match c {
            EnvColumn::Env => Some(f64::from(self.env)),
            EnvColumn::Finished => Some(t.finished as f64),
            EnvColumn::LastReturn => t.last.and_then(|e| e.exact_return()),
            EnvColumn::MeanReturn => t.mean_return(),
            EnvColumn::MeanLength => t.mean_length(),
            EnvColumn::Truncated => t.truncated_share(),
            EnvColumn::SinceEnding => self.since_ending.map(|v| v as f64),
        }
    }

    fn cell(&self, c: EnvColumn) -> String {
        let t = &self.totals;
        let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("–".to_string(), f);
        match c {
            EnvColumn::Env => self.env.to_string(),
            EnvColumn::Finished => thousands(t.finished),
            EnvColumn::LastReturn => match t.last {
                None => "–".into(),
                Some(e) if e.complete() => num(e.ret),
                // Not exact: marked, never shown as a plain figure.
                Some(e) => format!("~{}", num(e.ret)),
            },
            EnvColumn::MeanReturn => opt(t.mean_return(), &num),
            EnvColumn::MeanLength => opt(t.mean_length(), &|v| format!("{v:.1}")),
            EnvColumn::Truncated => opt(t.truncated_share(), &|v| format!("{:.0} %", v * 100.0)),
            EnvColumn::SinceEnding => self.since_ending.map_or("–".into(), thousands),
        }
    }

    /// The row as text in fixed columns.
    pub fn text(&self) -> String {
        EnvColumn::ALL
            .iter()
            .map(|&c| format!("{:>w$}", self.cell(c), w = c.width()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EpisodesAction {
    /// Watch this env and show its camera.
    Env(u32),
    /// Watch its env; on a recording, go to it.
    Episode(Episode),
}

/// The panel's state.
#[derive(Debug)]
pub struct EpisodesView {
    pub section: Section,
    pub sort: EnvColumn,
    pub descending: bool,
    pub selected_env: Option<u32>,
    /// An episode clicked: (env, first frame).
    pub selected_episode: Option<(u32, u64)>,
    /// A baseline recording's episodes, whose distributions are drawn over this run's.
    pub baseline: Option<std::sync::Arc<EpisodeBook>>,
    rows: Vec<EnvRow>,
    rows_for: Option<(u64, EnvColumn, bool)>,
}

impl Default for EpisodesView {
    fn default() -> Self {
        Self {
            section: Section::Envs,
            sort: EnvColumn::Env,
            descending: false,
            selected_env: None,
            selected_episode: None,
            baseline: None,
            rows: Vec::new(),
            rows_for: None,
        }
    }
}

impl EpisodesView {
    /// The env table's rows in the order asked for (None values last).
    pub fn env_rows(&mut self, book: &EpisodeBook) -> &[EnvRow] {
        let key = (book.version, self.sort, self.descending);
        if self.rows_for != Some(key) {
            self.rows = (0..book.num_envs)
                .map(|env| EnvRow {
                    env,
                    totals: book.envs.get(env as usize).copied().unwrap_or_default(),
                    since_ending: book.frames_since_ending(env),
                })
                .collect();
            let (c, desc) = (self.sort, self.descending);
            self.rows.sort_by(|a, b| match (a.key(c), b.key(c)) {
                (Some(x), Some(y)) => {
                    let o = x.total_cmp(&y);
                    let o = if desc { o.reverse() } else { o };
                    o.then(a.env.cmp(&b.env))
                }
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => a.env.cmp(&b.env),
            });
            self.rows_for = Some(key);
        }
        &self.rows
    }
}

/// A return or a mean as shown: two decimals, or three significant digits in
/// scientific form when very large or small; NaN and infinities by name.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        format_value(v)
    } else if v != 0.0 && !(1e-2..1e6).contains(&v.abs()) {
        format!("{v:.2e}")
    } else {
        format!("{v:.2}")
    }
}

/// The colour of an ending.
pub fn ending_color(e: Ending) -> egui::Color32 {
    match e {
        Ending::Done => egui::Color32::from_rgb(86, 156, 214),
        Ending::Truncated => egui::Color32::from_rgb(230, 145, 56),
        Ending::Reset => egui::Color32::from_rgb(170, 130, 220),
        Ending::NonFinite => BAD,
        Ending::Running => egui::Color32::GRAY,
    }
}

/// The headline: episodes by ending, the means of the exact ones, the incomplete ones.
pub fn summary(book: &EpisodeBook) -> String {
    let t = &book.totals;
    let mut by = Vec::new();
    for e in Ending::ALL.into_iter().filter(|e| e.finished()) {
        let n = t.by_ending[e.position()];
        if n > 0 {
            by.push(format!("{} {}", e.as_str(), thousands(n)));
        }
    }
    let mut parts = vec![format!("{} episodes ended", thousands(t.finished()))];
    if !by.is_empty() {
        parts[0].push_str(&format!(" ({})", by.join(", ")));
    }
    if let (Some(r), Some(l)) = (t.mean_return(), t.mean_length()) {
        parts.push(format!(
            "mean return {} · mean length {l:.1} (of {} exact)",
            num(r),
            thousands(t.exact)
        ));
    }
    parts.join(" · ")
}

/// The row of an episode: time (s from `t0_ns`), env, frames, length, return, ending.
pub fn episode_text(e: &Episode, t0_ns: u64) -> String {
    let t = e.last_ns.saturating_sub(t0_ns) as f64 / 1e9;
    let ret = if e.complete() {
        num(e.ret)
    } else {
        format!("~{}", num(e.ret))
    };
    let note = if e.began_before {
        "began before".to_string()
    } else if e.lacking > 0 {
        format!(
            "{} frame{} lacking",
            thousands(e.lacking),
            plural(e.lacking)
        )
    } else {
        String::new()
    };
    format!(
        "{t:>9.3} {:>6} {:>21} {:>8} {:>12}  {:<10} {note}",
        e.env,
        format!("{}–{}", e.first_frame, e.last_frame),
        e.length(),
        ret,
        e.ending.as_str(),
    )
}

/// Counts of `values` (with their endings) in `bins` equal bins between their least and
/// greatest: (bin start, bin width, counts per ending per bin).
pub fn histogram(values: &[(f64, Ending)], bins: usize) -> Option<(f64, f64, Vec<[u64; 5]>)> {
    histogram_with(values, &[], bins).map(|h| (h.lo, h.width, h.counts))
}

/// Bins over two sets of values: this run's counts per ending, and another's (a
/// baseline's) counts.
#[derive(Clone, Debug, PartialEq)]
pub struct BinCounts {
    pub lo: f64,
    pub width: f64,
    pub counts: Vec<[u64; 5]>,
    pub others: Vec<u64>,
}

/// [`histogram`] of `values`, and the counts of `others` (a baseline's) in the same bins,
/// which span both.
pub fn histogram_with(
    values: &[(f64, Ending)],
    others: &[(f64, Ending)],
    bins: usize,
) -> Option<BinCounts> {
    let finite = values.iter().chain(others).filter(|(v, _)| v.is_finite());
    let lo = finite
        .clone()
        .map(|(v, _)| *v)
        .fold(f64::INFINITY, f64::min);
    let hi = finite.map(|(v, _)| *v).fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || bins == 0 {
        return None;
    }
    let width = if hi > lo {
        (hi - lo) / bins as f64
    } else {
        1.0
    };
    let bin = |v: f64| (((v - lo) / width) as usize).min(bins - 1);
    let mut counts = vec![[0u64; 5]; bins];
    for &(v, e) in values.iter().filter(|(v, _)| v.is_finite()) {
        counts[bin(v)][e.position()] += 1;
    }
    let mut other = vec![0u64; bins];
    for &(v, _) in others.iter().filter(|(v, _)| v.is_finite()) {
        other[bin(v)] += 1;
    }
    Some(BinCounts {
        lo,
        width,
        counts,
        others: other,
    })
}

/// A baseline's histogram as a line over the bars: its count in each bin at the bin's
/// middle, scaled to this run's number of episodes when the two differ.
fn baseline_steps(lo: f64, width: f64, counts: &[u64], scale: f64) -> Vec<[f64; 2]> {
    counts
        .iter()
        .enumerate()
        .map(|(k, &c)| [lo + (k as f64 + 0.5) * width, c as f64 * scale])
        .collect()
}

fn stacked_histogram(
    ui: &mut egui::Ui,
    id: &str,
    label: &str,
    values: &[(f64, Ending)],
    baseline: Option<&[(f64, Ending)]>,
    height: f32,
) {
    let Some(BinCounts {
        lo,
        width,
        counts,
        others: other,
    }) = histogram_with(values, baseline.unwrap_or(&[]), 30)
    else {
        ui.weak(format!("{label}: no exact episode yet"));
        return;
    };
    // The baseline's line in the theme's strongest text colour.
    let line_color = ui.visuals().strong_text_color();
    let mut charts: Vec<BarChart> = Vec::new();
    for e in Ending::ALL.into_iter().filter(|e| e.finished()) {
        let bars: Vec<Bar> = counts
            .iter()
            .enumerate()
            .map(|(k, c)| {
                Bar::new(lo + (k as f64 + 0.5) * width, c[e.position()] as f64).width(width * 0.9)
            })
            .collect();
        let refs: Vec<&BarChart> = charts.iter().collect();
        let chart = BarChart::new(e.as_str(), bars)
            .color(ending_color(e))
            .stack_on(&refs);
        charts.push(chart);
    }
    Plot::new(id)
        .height(height)
        .allow_scroll(false)
        .allow_drag(false)
        .x_axis_label(label)
        .legend(Legend::default())
        .show(ui, |p| {
            for c in charts {
                p.bar_chart(c);
            }
            if let Some(b) = baseline.filter(|b| !b.is_empty()) {
                // As many episodes as this run's: the shapes compare, not the counts.
                let scale = if values.is_empty() {
                    1.0
                } else {
                    values.len() as f64 / b.len() as f64
                };
                p.line(
                    Line::new(
                        "baseline",
                        PlotPoints::from(baseline_steps(lo, width, &other, scale)),
                    )
                    .color(line_color)
                    .width(2.0),
                );
            }
        });
}

/// The endings of envs in step, in words (None: none so far).
pub fn in_step_text(r: &RhythmSummary) -> Option<String> {
    (r.time_limits > 0 || r.resets_in_step > 0).then(|| format!("In step: {}", r.endings_text()))
}

/// Draws the panel; `rhythm` is the loop's as the detector tells it (its endings in
/// step), None without a detector.
pub fn ui(
    ui: &mut egui::Ui,
    book: Option<&EpisodeBook>,
    rhythm: Option<&RhythmSummary>,
    view: &mut EpisodesView,
    last_n: &mut usize,
    stuck_factor: &mut f32,
    t0_ns: u64,
) -> Option<EpisodesAction> {
    let Some(book) = book else {
        ui.weak("Episodes are not counted for this source (a served run).");
        return None;
    };
    let mut action = None;
    let t = &book.totals;
    ui.horizontal_wrapped(|ui| {
        ui.strong(summary(book));
        if t.incomplete > 0 {
            ui.colored_label(WARN, format!("{} incomplete", thousands(t.incomplete)))
                .on_hover_text("episodes that span frames not taken, or began before the first frame followed: their returns are shown with ~ and left out of every mean");
        }
        if t.frames_lacking > 0 {
            ui.colored_label(
                WARN,
                format!(
                    "{} frame{} not taken of {}",
                    thousands(t.frames_lacking),
                    plural(t.frames_lacking),
                    thousands(t.frames_taken + t.frames_lacking)
                ),
            );
        }
        if book.dropped > 0 {
            ui.weak(format!(
                "{} oldest episode{} not kept in full",
                thousands(book.dropped),
                plural(book.dropped)
            ));
        }
        if let Some(n) = &book.note {
            ui.colored_label(WARN, n);
        }
    });
    if let Some(text) = rhythm.and_then(in_step_text) {
        ui.label(text).on_hover_text(
            "envs that started together end together: more than the done-burst share of the envs truncated at one episode length is the time limit, and the trainer's reset of as many at once a new iteration or a curriculum change. Counted here, never a done burst; their episodes ended as truncated (or reset), as every other",
        );
    }
    ui.horizontal(|ui| {
        for s in Section::ALL {
            ui.selectable_value(&mut view.section, s, s.title());
        }
    });
    ui.separator();
    match view.section {
        Section::Envs => action = envs_table(ui, book, view),
        Section::Recent => action = recent(ui, book, view, t0_ns),
        Section::Distributions => distributions(ui, book, view.baseline.as_deref(), last_n),
        Section::OverTime => over_time(ui, book),
        Section::Outliers => action = outliers(ui, book, view, last_n, stuck_factor, t0_ns),
    }
    action
}

fn envs_table(
    ui: &mut egui::Ui,
    book: &EpisodeBook,
    view: &mut EpisodesView,
) -> Option<EpisodesAction> {
    let mut action = None;
    // The header: one clickable cell per column, as wide as the rows' cells (the same
    // characters, the same separating space), so that the titles sit over their figures.
    ui.horizontal(|ui| {
        ui.spacing_mut().item_spacing.x = 0.0;
        for c in EnvColumn::ALL {
            let arrow = match (view.sort == c, view.descending) {
                (true, true) => " ▼",
                (true, false) => " ▲",
                _ => "",
            };
            let mut text = egui::RichText::new(format!(
                "{:>w$} ",
                format!("{}{arrow}", c.title()),
                w = c.width()
            ))
            .monospace();
            if view.sort == c {
                text = text.strong();
            }
            let cell = ui
                .add(
                    egui::Label::new(text)
                        .sense(egui::Sense::click())
                        .selectable(false),
                )
                .on_hover_text("sort by this column (again: the other way)");
            if cell.clicked() {
                if view.sort == c {
                    view.descending = !view.descending;
                } else {
                    view.sort = c;
                    view.descending = c != EnvColumn::Env;
                }
            }
        }
    });
    let row_height = ui.text_style_height(&egui::TextStyle::Monospace) + 4.0;
    let selected = view.selected_env;
    let rows = view.env_rows(book).to_vec();
    ui.push_id("episodes_envs", |ui| {
        egui::ScrollArea::vertical()
            .auto_shrink([false, false])
            .show_rows(ui, row_height, rows.len(), |ui, range| {
                ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
                for r in &rows[range] {
                    let mut rt = egui::RichText::new(r.text()).monospace();
                    if r.totals.nonfinite > 0 {
                        rt = rt.color(BAD);
                    }
                    if selected == Some(r.env) {
                        rt = rt.background_color(ui.visuals().selection.bg_fill);
                    }
                    if list_row(ui, rt, row_height)
                        .on_hover_text("click: watch this env")
                        .clicked()
                    {
                        view.selected_env = Some(r.env);
                        action = Some(EpisodesAction::Env(r.env));
                    }
                }
            });
    });
    action
}

fn episode_rows(
    ui: &mut egui::Ui,
    id: &str,
    episodes: &[Episode],
    view: &mut EpisodesView,
    t0_ns: u64,
) -> Option<EpisodesAction> {
    let mut action = None;
    ui.monospace(format!(
        "{:>9} {:>6} {:>21} {:>8} {:>12}  {:<10}",
        "end (s)", "env", "frames", "length", "return", "ending"
    ));
    let row_height = ui.text_style_height(&egui::TextStyle::Monospace) + 4.0;
    ui.push_id(id, |ui| {
        egui::ScrollArea::vertical()
            .auto_shrink([false, false])
            .show_rows(ui, row_height, episodes.len(), |ui, range| {
                ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
                for e in &episodes[range] {
                    let mut rt = egui::RichText::new(episode_text(e, t0_ns))
                        .monospace()
                        .color(match e.ending {
                            Ending::NonFinite => BAD,
                            _ if !e.complete() => WARN,
                            _ => ui.visuals().text_color(),
                        });
                    if view.selected_episode == Some((e.env, e.first_frame)) {
                        rt = rt.background_color(ui.visuals().selection.bg_fill);
                    }
                    if list_row(ui, rt, row_height)
                        .on_hover_text("click: watch its env; on a recording, go to it")
                        .clicked()
                    {
                        view.selected_episode = Some((e.env, e.first_frame));
                        action = Some(EpisodesAction::Episode(*e));
                    }
                }
            });
    });
    action
}

fn recent(
    ui: &mut egui::Ui,
    book: &EpisodeBook,
    view: &mut EpisodesView,
    t0_ns: u64,
) -> Option<EpisodesAction> {
    let episodes: Vec<Episode> = book.recent().iter().rev().copied().collect();
    if episodes.is_empty() {
        ui.weak("No episode has ended yet.");
        return None;
    }
    episode_rows(ui, "episodes_recent", &episodes, view, t0_ns)
}

/// The returns and the lengths of some episodes, each with its ending.
struct EpisodeValues {
    returns: Vec<(f64, Ending)>,
    lengths: Vec<(f64, Ending)>,
}

/// The returns and lengths of the last `n` complete episodes of `book`.
fn last_returns_and_lengths(book: &EpisodeBook, n: usize) -> EpisodeValues {
    let last: Vec<&Episode> = book
        .recent()
        .iter()
        .rev()
        .filter(|e| e.complete())
        .take(n)
        .collect();
    let returns = last
        .iter()
        .filter_map(|e| Some((e.exact_return()?, e.ending)))
        .collect();
    let lengths = last.iter().map(|e| (e.length() as f64, e.ending)).collect();
    EpisodeValues { returns, lengths }
}

fn distributions(
    ui: &mut egui::Ui,
    book: &EpisodeBook,
    baseline: Option<&EpisodeBook>,
    last_n: &mut usize,
) {
    ui.horizontal(|ui| {
        let l = ui.label("Over the last");
        ui.add(egui::DragValue::new(last_n).range(10..=1_000_000).speed(10))
            .labelled_by(l.id);
        ui.label("episodes that ended (exact returns and lengths only)");
    });
    let n = (*last_n).max(1);
    let EpisodeValues { returns, lengths } = last_returns_and_lengths(book, n);
    let base = baseline.map(|b| last_returns_and_lengths(b, n));
    if let Some(EpisodeValues { returns: r, .. }) = &base {
        let mean = |v: &[(f64, Ending)]| {
            (!v.is_empty()).then(|| v.iter().map(|x| x.0).sum::<f64>() / v.len() as f64)
        };
        let text = |m: Option<f64>| m.map_or("–".to_string(), num);
        ui.label(format!(
            "line: the baseline's last {} episodes, scaled to this run's count; mean return {} here, {} in the baseline",
            thousands(r.len() as u64),
            text(mean(&returns)),
            text(mean(r)),
        ));
    }
    let height = (ui.available_height() / 2.0 - 30.0).max(140.0);
    stacked_histogram(
        ui,
        "episodes_returns",
        "return",
        &returns,
        base.as_ref().map(|b| b.returns.as_slice()),
        height,
    );
    stacked_histogram(
        ui,
        "episodes_lengths",
        "length (frames)",
        &lengths,
        base.as_ref().map(|b| b.lengths.as_slice()),
        height,
    );
}

fn over_time(ui: &mut egui::Ui, book: &EpisodeBook) {
    let (bins, width) = book.bins();
    if bins.is_empty() {
        ui.weak("No episode has ended yet.");
        return;
    }
    let t0 = book.t0_ns.unwrap_or(0);
    ui.weak(format!(
        "per {:.0} s, by the time each episode ended (exact ones only)",
        width as f64 / 1e9
    ));
    let at =
        |b: &lrbc_live::episodes::Bin| (b.start_ns.saturating_sub(t0) + width / 2) as f64 / 1e9;
    let returns: Vec<[f64; 2]> = bins
        .iter()
        .filter_map(|b| Some([at(b), b.mean_return()?]))
        .collect();
    let lengths: Vec<[f64; 2]> = bins
        .iter()
        .filter_map(|b| Some([at(b), b.mean_length()?]))
        .collect();
    Plot::new("episodes_return_time")
        .height(120.0)
        .allow_scroll(false)
        .y_axis_label("mean return")
        .show(ui, |p| {
            p.line(Line::new("mean return", PlotPoints::from(returns)).color(GOOD));
        });
    Plot::new("episodes_length_time")
        .height(120.0)
        .allow_scroll(false)
        .x_axis_label("s")
        .y_axis_label("mean length")
        .show(ui, |p| {
            p.line(Line::new("mean length", PlotPoints::from(lengths)));
        });
}

fn outliers(
    ui: &mut egui::Ui,
    book: &EpisodeBook,
    view: &mut EpisodesView,
    last_n: &mut usize,
    stuck_factor: &mut f32,
    t0_ns: u64,
) -> Option<EpisodesAction> {
    let mut action = None;
    let n = (*last_n).max(1);
    match book.return_fences(n) {
        Some((lo, hi)) => {
            ui.label(format!(
                "Returns beyond {} and {} (three interquartile ranges past the quartiles of the last {} exact returns):",
                num(lo),
                num(hi),
                thousands(n as u64)
            ));
        }
        None => {
            ui.weak("Returns: fewer than 8 exact ones so far.");
        }
    }
    let out = book.outlier_returns(n);
    if !out.is_empty() {
        let h = (ui.available_height() * 0.45).max(60.0);
        ui.allocate_ui(egui::vec2(ui.available_width(), h), |ui| {
            if let Some(a) = episode_rows(ui, "episodes_outliers", &out, view, t0_ns) {
                action = Some(a);
            }
        });
    }
    ui.separator();
    ui.horizontal(|ui| {
        let l = ui.label("Envs without an ending for more than");
        ui.add(
            egui::DragValue::new(stuck_factor)
                .range(1.5..=100.0)
                .speed(0.1)
                .suffix(" ×"),
        )
        .labelled_by(l.id);
        match book.median_length(n) {
            Some(m) => ui.label(format!("the median length ({m:.0} frames):")),
            None => ui.weak("the median length (no complete episode yet)"),
        };
    });
    let stuck = book.stuck_envs(f64::from(*stuck_factor), n);
    if stuck.is_empty() {
        ui.weak("none");
    }
    let row_height = ui.text_style_height(&egui::TextStyle::Monospace) + 4.0;
    ui.push_id("episodes_stuck", |ui| {
        egui::ScrollArea::vertical()
            .auto_shrink([false, false])
            .show_rows(ui, row_height, stuck.len(), |ui, range| {
                for &(env, frames) in &stuck[range] {
                    let began_before = book
                        .running
                        .get(env as usize)
                        .copied()
                        .flatten()
                        .is_some_and(|e| e.began_before);
                    let text = format!(
                        "env {env:>5}: {}{} frames without an ending",
                        if began_before { "at least " } else { "" },
                        thousands(frames)
                    );
                    let mut rt = egui::RichText::new(text).monospace().color(WARN);
                    if view.selected_env == Some(env) {
                        rt = rt.background_color(ui.visuals().selection.bg_fill);
                    }
                    if list_row(ui, rt, row_height).clicked() {
                        view.selected_env = Some(env);
                        action = Some(EpisodesAction::Env(env));
                    }
                }
            });
    });
    action
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(env: u32, ret: f64, ending: Ending) -> Episode {
        Episode {
            env,
            first_frame: 10,
            last_frame: 19,
            first_ns: 0,
            last_ns: 2_000_000_000,
            ret,
            min_reward: 0.0,
            max_reward: 1.0,
            ending,
            lacking: 0,
            began_before: false,
            nonfinite_frame: None,
        }
    }

    #[test]
    fn the_in_step_line_counts_time_limits_and_resets_or_is_not_shown() {
        let mut r = RhythmSummary::default();
        assert_eq!(in_step_text(&r), None);
        r.time_limits = 3;
        r.time_limit_frames = Some(100);
        assert_eq!(
            in_step_text(&r).as_deref(),
            Some("In step: 3 time limits of envs in step (truncated together at 100 frames)")
        );
        r.time_limits = 0;
        r.resets_in_step = 1;
        assert_eq!(
            in_step_text(&r).as_deref(),
            Some("In step: 1 reset of envs in step by the trainer")
        );
    }

    #[test]
    fn an_episodes_row_marks_a_return_that_is_not_exact() {
        let e = ep(7, 12.5, Ending::Done);
        let row = episode_text(&e, 0);
        assert!(row.contains("10–19"), "{row}");
        assert!(row.contains(" 12.50"), "{row}");
        assert!(!row.contains('~'), "{row}");
        let mut lacking = e;
        lacking.lacking = 3;
        let row = episode_text(&lacking, 0);
        assert!(
            row.contains("~12.50") && row.contains("3 frames lacking"),
            "{row}"
        );
    }

    #[test]
    fn the_env_table_sorts_by_any_column_with_empty_values_last() {
        let mut book = EpisodeBook::new(3, 100);
        book.apply(&ep(0, 5.0, Ending::Done));
        book.apply(&ep(2, 9.0, Ending::Truncated));
        let mut view = EpisodesView {
            sort: EnvColumn::MeanReturn,
            descending: true,
            ..EpisodesView::default()
        };
        let order: Vec<u32> = view.env_rows(&book).iter().map(|r| r.env).collect();
        assert_eq!(order, vec![2, 0, 1]);
        view.descending = false;
        let order: Vec<u32> = view.env_rows(&book).iter().map(|r| r.env).collect();
        assert_eq!(order, vec![0, 2, 1]);
        view.sort = EnvColumn::Truncated;
        view.descending = true;
        let rows = view.env_rows(&book);
        assert_eq!(rows[0].env, 2);
        assert!(rows[0].text().contains("100 %"), "{}", rows[0].text());
    }

    #[test]
    fn histograms_count_each_ending_in_its_bin() {
        let v = [
            (0.0, Ending::Done),
            (10.0, Ending::Truncated),
            (10.0, Ending::Done),
            (f64::NAN, Ending::NonFinite),
        ];
        let (lo, width, counts) = histogram(&v, 2).unwrap();
        assert_eq!((lo, width), (0.0, 5.0));
        assert_eq!(counts[0][Ending::Done.position()], 1);
        assert_eq!(counts[1][Ending::Done.position()], 1);
        assert_eq!(counts[1][Ending::Truncated.position()], 1);
        assert_eq!(counts.iter().flatten().sum::<u64>(), 3);
        assert!(histogram(&[], 10).is_none());
    }
}
