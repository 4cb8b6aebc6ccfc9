//! Settings kept across runs (eframe storage), apart from runtime data.

use std::path::PathBuf;

/// The panels of the window, as tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Pane {
    Header,
    Counters,
    Envs,
    Traffic,
    Cameras,
    Rpc,
    Events,
    Episodes,
    Divergence,
}

impl Pane {
    pub const ALL: [Self; 9] = [
        Self::Counters,
        Self::Envs,
        Self::Episodes,
        Self::Events,
        Self::Traffic,
        Self::Cameras,
        Self::Header,
        Self::Rpc,
        Self::Divergence,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Self::Header => "Header",
            Self::Counters => "Counters",
            Self::Envs => "Envs",
            Self::Traffic => "Traffic",
            Self::Cameras => "Cameras",
            Self::Rpc => "RPC",
            Self::Events => "Events",
            Self::Episodes => "Episodes",
            Self::Divergence => "Divergence",
        }
    }
}

/// The default arrangement: envs, episodes and counters on the left, events, traffic and
/// cameras on the right, header and RPC as tabs.
pub fn default_tree() -> egui_tiles::Tree<Pane> {
    let mut tiles = egui_tiles::Tiles::default();
    let counters = tiles.insert_pane(Pane::Counters);
    let envs = tiles.insert_pane(Pane::Envs);
    let episodes = tiles.insert_pane(Pane::Episodes);
    let header = tiles.insert_pane(Pane::Header);
    let events = tiles.insert_pane(Pane::Events);
    let traffic = tiles.insert_pane(Pane::Traffic);
    let cameras = tiles.insert_pane(Pane::Cameras);
    let rpc = tiles.insert_pane(Pane::Rpc);
    let divergence = tiles.insert_pane(Pane::Divergence);
    let left_tabs = tiles.insert_tab_tile(vec![envs, episodes, counters, header]);
    let right_top = tiles.insert_tab_tile(vec![events, traffic, rpc, divergence]);
    let right_bottom = tiles.insert_tab_tile(vec![cameras]);
    let right = tiles.insert_vertical_tile(vec![right_top, right_bottom]);
    let root = tiles.insert_horizontal_tile(vec![left_tabs, right]);
    egui_tiles::Tree::new(egui::Id::unique("lrbc_tiles"), root, tiles)
}

/// A layout kept from an earlier version lacks the panels added since: each goes in as a
/// tab beside the Traffic panel (or, failing that, the layout starts over).
pub fn with_every_pane(mut tree: egui_tiles::Tree<Pane>) -> egui_tiles::Tree<Pane> {
    for pane in Pane::ALL {
        if tree.tiles.find_pane(&pane).is_some() {
            continue;
        }
        let beside = tree
            .tiles
            .find_pane(&Pane::Traffic)
            .and_then(|t| tree.tiles.parent_of(t));
        let new = tree.tiles.insert_pane(pane);
        match beside.and_then(|p| tree.tiles.get_mut(p)) {
            Some(egui_tiles::Tile::Container(c)) => c.add_child(new),
            _ => return default_tree(),
        }
    }
    tree
}

/// Every panel visible at once (a grid): what the UI benchmark and screenshots use.
pub fn grid_tree() -> egui_tiles::Tree<Pane> {
    egui_tiles::Tree::new_grid(egui::Id::unique("lrbc_tiles_grid"), Pane::ALL.to_vec())
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Theme {
    #[default]
    Dark,
    Light,
}

/// What the user set, kept across runs.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Settings {
    pub theme: Theme,
    /// Most recent first.
    pub recent_targets: Vec<String>,
    pub watched_envs: lrbc_live::sampler::WatchedEnvs,
    pub history_frames: usize,
    pub detail_frames: usize,
    /// Seconds of history the env plots show (0: all).
    pub plot_window_secs: f32,
    /// Observation channels plotted.
    pub obs_channels: Vec<u32>,
    /// Action channels plotted.
    pub act_channels: Vec<u32>,
    /// What the detector looks for: bounds, saturation, done bursts, stalls.
    pub detect: lrbc_live::detect::DetectSettings,
    /// The kinds of event (their names) whose first one makes the flight recorder save.
    pub flight_on: Vec<String>,
    pub screenshot_dir: PathBuf,
    pub traffic_filter: String,
    /// Redraws per second at most; 0 chooses (60, or 20 under software rendering).
    pub max_fps: u32,
    /// The sampler's share of one core while the machine is busy (percent); 0 follows
    /// every frame whatever it costs the run.
    pub busy_budget_percent: f32,
    /// What the window's data may take (histories, traffic list, images, streamed
    /// frames), in MiB.
    pub memory_budget_mib: u32,
    /// Seconds the flight recorder keeps.
    pub flight_seconds: f32,
    /// Where recordings and saved flight recordings go.
    pub recordings_dir: PathBuf,
    /// The episodes panel's distributions and outliers are over this many of the last
    /// episodes.
    pub episodes_last_n: usize,
    /// An env running this many times the median length without an ending is named.
    pub stuck_factor: f32,
}

impl Default for Settings {
    fn default() -> Self {
        let s = lrbc_live::sampler::SamplerSettings::default();
        Self {
            theme: Theme::Dark,
            recent_targets: Vec::new(),
            watched_envs: s.watched_envs,
            history_frames: s.history_frames,
            detail_frames: s.detail_frames,
            plot_window_secs: 20.0,
            obs_channels: vec![0, 2],
            act_channels: vec![0],
            detect: lrbc_live::detect::DetectSettings::default(),
            flight_on: vec![lrbc_live::detect::EventKind::Nonfinite.as_str().into()],
            screenshot_dir: default_screenshot_dir(),
            traffic_filter: String::new(),
            max_fps: 0,
            busy_budget_percent: lrbc_live::sampler::WINDOW_BUSY_BUDGET_PERCENT,
            memory_budget_mib: lrbc_live::memory::DEFAULT_BUDGET_MIB,
            flight_seconds: 60.0,
            recordings_dir: default_recordings_dir(),
            episodes_last_n: 1000,
            stuck_factor: 3.0,
        }
    }
}

/// The user's pictures folder's `lrbc-inspector` (Linux: `$XDG_PICTURES_DIR`, else
/// `~/Pictures`; Windows: the Pictures known folder), else
/// `./lrbc-inspector-screenshots`.
pub fn default_screenshot_dir() -> PathBuf {
    lrbc_platform::pictures_dir().map_or_else(
        || PathBuf::from("lrbc-inspector-screenshots"),
        |p| p.join("lrbc-inspector"),
    )
}

/// `lrbc-recordings` in the user's home folder (Linux: `$HOME`; Windows: the profile
/// folder, `%USERPROFILE%`), else `./lrbc-recordings`.
pub fn default_recordings_dir() -> PathBuf {
    lrbc_platform::home_dir()
        .unwrap_or_default()
        .join("lrbc-recordings")
}

/// Settings given on the command line for one run (they are kept like any change made
/// in the window).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    pub memory_budget_mib: Option<u32>,
    pub busy_budget_percent: Option<f32>,
    /// Changes to what the detector looks for, from the command line's options.
    pub detect: lrbc_live::detect::DetectChanges,
    /// Record from the start (as Record in the status bar), once a live segment is
    /// attached; not a setting (not kept).
    pub record: bool,
    /// Where the window keeps its settings and layout, instead of the user's data folder.
    pub settings_file: Option<PathBuf>,
}

impl Settings {
    /// These settings with the command line's overrides.
    pub fn with(mut self, o: &Overrides) -> Self {
        if let Some(mib) = o.memory_budget_mib {
            self.memory_budget_mib = mib;
        }
        if let Some(pct) = o.busy_budget_percent {
            self.busy_budget_percent = pct;
        }
        if let Ok(d) = o.detect.applied_to(&self.detect) {
            self.detect = d;
        }
        self
    }

    /// The kinds of event whose first one makes the flight recorder save.
    pub fn flight_kinds(&self) -> Vec<lrbc_live::detect::EventKind> {
        self.flight_on
            .iter()
            .filter_map(|k| lrbc_live::detect::EventKind::parse(k))
            .collect()
    }

    /// The memory budget, within its bounds.
    pub fn memory_budget(&self) -> lrbc_live::memory::MemoryBudget {
        lrbc_live::memory::MemoryBudget::from_mib(self.memory_budget_mib)
    }

    /// What the traffic list may keep.
    pub fn traffic_limits(&self) -> lrbc_live::traffic::TrafficLimits {
        lrbc_live::traffic::TrafficLimits::of(self.memory_budget())
    }

    pub fn sampler(&self) -> lrbc_live::sampler::SamplerSettings {
        let budget = self.memory_budget();
        lrbc_live::sampler::SamplerSettings {
            history_bytes: budget.histories(),
            image_bytes: budget.camera_images(),
            watched_envs: self.watched_envs.clone(),
            history_frames: self.history_frames.clamp(1_000, 10_000_000),
            detail_frames: self.detail_frames.clamp(100, 1_000_000),
            detect: Some((self.detect.clone(), lrbc_live::detect::DEFAULT_EVENTS_KEPT)),
            episodes: Some(lrbc_live::episodes::BookDetail::Full {
                recent: lrbc_live::episodes::EpisodeBook::kept_for_bytes(budget.episodes()),
            }),
            busy_budget_percent: (self.busy_budget_percent.is_finite()
                && self.busy_budget_percent > 0.0)
                .then(|| self.busy_budget_percent.min(100.0)),
            ..lrbc_live::sampler::SamplerSettings::default()
        }
    }

    /// What the flight recorder keeps.
    pub fn flight_limits(&self) -> lrbc_recording::recorder::RollingLimits {
        lrbc_recording::recorder::RollingLimits {
            seconds: f64::from(self.flight_seconds.clamp(1.0, 3600.0)),
            max_bytes: self.memory_budget().flight() as u64,
        }
    }

    pub fn remember(&mut self, target: &str) {
        self.recent_targets.retain(|t| t != target);
        self.recent_targets.insert(0, target.to_string());
        self.recent_targets.truncate(10);
    }
}
