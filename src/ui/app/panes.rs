//! The tiles: each pane drawn with the state it needs.

use crate::session::Session;
use crate::ui::baseline::Baseline;
use crate::ui::panels::cameras::{CamerasView, ShotRequest};
use crate::ui::panels::divergence::{self, DivergenceAction, DivergenceView};
use crate::ui::panels::episodes::{EpisodesAction, EpisodesView};
use crate::ui::panels::events::{EventsAction, EventsView};
use crate::ui::panels::rpc::RpcInfo;
use crate::ui::panels::traffic::TrafficView;
use crate::ui::panels::{cameras, counters, envs, episodes, events, header, rpc, traffic};
use crate::ui::settings::{Pane, Settings};
use crate::ui::widgets::BAD;
use lrbc::attach::Attached;
use lrbc::procinfo::{ProcInfo, Processes};

/// The panels' own state, kept from one pass to the next: filters, selections, caches.
#[derive(Default)]
pub struct PanelViews {
    pub traffic: TrafficView,
    pub cameras: CamerasView,
    /// The Events panel's filters and rows.
    pub events: EventsView,
    pub episodes: EpisodesView,
    /// The Divergence panel's rows.
    pub divergence: DivergenceView,
    plot_cache: crate::ui::decimate::SeriesCache,
    counters_cache: counters::CountersCache,
}

impl std::fmt::Debug for PanelViews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PanelViews").finish_non_exhaustive()
    }
}

/// The engine's and the client's processes, as the segment names them (their pids),
/// looked at once a second.
#[derive(Debug)]
pub(super) struct SegmentProcesses {
    processes: Processes,
    looked_ns: u64,
    pub(super) engine: ProcInfo,
    pub(super) client: ProcInfo,
}

impl SegmentProcesses {
    pub(super) fn new() -> Self {
        let none = || ProcInfo {
            pid: 0,
            name: None,
            alive: false,
            cpu_percent: 0.0,
            memory_bytes: 0,
        };
        Self {
            processes: Processes::new(),
            looked_ns: 0,
            engine: none(),
            client: none(),
        }
    }

    /// Looks at the processes the live segment `a` names, unless it looked within the
    /// last second (`now_ns`).
    pub(super) fn refresh(&mut self, a: &Attached, now_ns: u64) {
        if now_ns.saturating_sub(self.looked_ns) <= 1_000_000_000 {
            return;
        }
        self.looked_ns = now_ns;
        let c = a.geometry.counters;
        let engine = a.segment.load_u32(c.server_pid).unwrap_or(0);
        let client = a.segment.load_u32(c.client_pid).unwrap_or(0);
        self.processes.refresh(&[engine, client]);
        self.engine = self.processes.info(engine);
        self.client = self.processes.info(client);
    }
}

/// Draws each pane with the state it needs.
pub(super) struct Panes<'a> {
    pub(super) session: &'a mut Session,
    pub(super) settings: &'a mut Settings,
    pub(super) views: &'a mut PanelViews,
    pub(super) processes: &'a SegmentProcesses,
    pub(super) t0_ns: u64,
    pub(super) shot: Option<ShotRequest>,
    /// An event clicked in the Events panel: the window goes there after this pass.
    pub(super) go: Option<lrbc_live::detect::Event>,
    /// An env or an episode clicked in the Episodes panel.
    pub(super) episode: Option<EpisodesAction>,
    pub(super) baseline: Option<&'a Baseline>,
    /// A divergence clicked in the Divergence panel.
    pub(super) divergence: Option<DivergenceAction>,
}

impl egui_tiles::Behavior<Pane> for Panes<'_> {
    fn tab_title_for_pane(&mut self, pane: &Pane) -> egui::WidgetText {
        pane.title().into()
    }

    fn pane_ui(
        &mut self,
        ui: &mut egui::Ui,
        _tile_id: egui_tiles::TileId,
        pane: &mut Pane,
    ) -> egui_tiles::UiResponse {
        let frame = egui::Frame::NONE.inner_margin(6.0);
        frame.show(ui, |ui| {
            ui.set_min_size(ui.available_size());
            match pane {
                Pane::Header => {
                    let values = self.session.header_values();
                    let label = self.session.label();
                    header::ui(ui, &label, self.session.geometry(), &values);
                }
                Pane::Counters => {
                    let seqs = self.session.seqs();
                    let rhythm = self
                        .session
                        .events()
                        .and_then(|l| lrbc::sync::lock(&l).rhythm().cloned());
                    let d = self.session.data();
                    egui::ScrollArea::vertical()
                        .id_salt("counters")
                        .show(ui, |ui| {
                            counters::ui(
                                ui,
                                seqs,
                                &d,
                                rhythm.as_ref(),
                                &mut self.views.counters_cache,
                            );
                        });
                }
                Pane::Envs => {
                    let actions = {
                        let events = self.session.events();
                        let log = events.as_ref().map(|l| lrbc::sync::lock(l));
                        let d = self.session.data();
                        egui::ScrollArea::vertical()
                            .id_salt("envs")
                            .show(ui, |ui| {
                                envs::ui(
                                    ui,
                                    &d,
                                    log.as_deref(),
                                    self.settings,
                                    &mut self.views.plot_cache,
                                    self.baseline,
                                )
                            })
                            .inner
                    };
                    if actions.watched_changed {
                        self.session.sampler.set_settings(self.settings.sampler());
                    }
                }
                Pane::Events => {
                    let events = self.session.events();
                    let log = events.as_ref().map(|l| lrbc::sync::lock(l));
                    if let Some(EventsAction::Go(e)) =
                        events::ui(ui, log.as_deref(), &mut self.views.events, self.t0_ns)
                    {
                        self.go = Some(e);
                    }
                }
                Pane::Episodes => {
                    let rhythm = self
                        .session
                        .events()
                        .and_then(|l| lrbc::sync::lock(&l).rhythm().cloned());
                    let book = self.session.episodes();
                    let book = book.as_ref().map(|b| lrbc::sync::lock(b));
                    self.views.episodes.baseline = self.baseline.and_then(Baseline::book);
                    let s = &mut *self.settings;
                    if let Some(a) = episodes::ui(
                        ui,
                        book.as_deref(),
                        rhythm.as_ref(),
                        &mut self.views.episodes,
                        &mut s.episodes_last_n,
                        &mut s.stuck_factor,
                        self.t0_ns,
                    ) {
                        self.episode = Some(a);
                    }
                }
                Pane::Divergence => {
                    if let Some(a) = divergence::ui(ui, self.baseline, &mut self.views.divergence) {
                        self.divergence = Some(a);
                    }
                }
                Pane::Traffic => {
                    let store = self.session.store();
                    traffic::ui(
                        ui,
                        &store,
                        &mut self.views.traffic,
                        &mut self.settings.traffic_filter,
                        self.t0_ns,
                    );
                }
                Pane::Cameras => {
                    // The traffic lock is held only to copy the newest frame per stream.
                    let streams = self.session.store().streams.clone();
                    let d = self.session.data();
                    if let Some(r) = cameras::ui(ui, &d, &streams, &mut self.views.cameras) {
                        self.shot = Some(r);
                    }
                }
                Pane::Rpc => {
                    let (report, flags) = {
                        let d = self.session.data();
                        (d.report.clone(), d.counters.service_flags)
                    };
                    let holder = self.session.lease_holder();
                    let control = self.session.control_state();
                    let label = self.session.label();
                    let unavailable = self.session.control_unavailable();
                    let info = RpcInfo {
                        label: &label,
                        report: report.as_ref(),
                        server: &self.processes.engine,
                        client: &self.processes.client,
                        service_flags: flags,
                        unavailable: unavailable.as_deref(),
                        lease_holder: holder,
                        control,
                    };
                    if let Some(req) = rpc::ui(ui, &info) {
                        match self.session.control() {
                            Ok(w) => {
                                w.send(req);
                            }
                            Err(e) => {
                                ui.colored_label(BAD, e);
                            }
                        }
                    }
                }
            }
        });
        egui_tiles::UiResponse::None
    }

    fn simplification_options(&self) -> egui_tiles::SimplificationOptions {
        egui_tiles::SimplificationOptions {
            all_panes_must_have_tabs: true,
            ..Default::default()
        }
    }
}
