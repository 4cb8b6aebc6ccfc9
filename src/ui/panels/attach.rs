//! The attach view: discovered segments and the processes that map them, attach by
//! click, by typed name or PID, connect to a server of a run, the servers connected (one
//! row each), and recent targets. The listing comes from
//! [`crate::ui::discovery::Discovery`], which runs on its own thread.

use crate::session::NodeRow;
use crate::ui::discovery::Listing;
use crate::ui::widgets::{BAD, state_color, state_text};
use lrbc::attach::Target;
use lrbc::discovery::ListOutcome;
use lrbc::procinfo::ProcInfo;
use lrbc_remote::view::LinkState;

/// Inputs of the attach view.
#[derive(Debug, Default)]
pub struct AttachForm {
    pub name: String,
    pub pid: String,
    /// A server's address (`ws://HOST:PORT`).
    pub server: String,
    pub error: Option<String>,
}

/// What the user chose: a segment on this machine, or a server of a run (`serve`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Chosen {
    Target(Target),
    Server(String),
    /// A server connected already (its `HOST:PORT`): show it in the panels.
    Node(String),
}

/// Draws the view; returns the target the user chose.
pub fn ui(
    ui: &mut egui::Ui,
    form: &mut AttachForm,
    listing: &Listing,
    recent: &[String],
    nodes: &[NodeRow],
) -> Option<Chosen> {
    let mut chosen = None;
    ui.heading("Attach to a segment, or connect to a served run");
    ui.label(
        "LRBC segments on this machine, refreshed every 2 s. Attaching maps the segment read-only.",
    );
    ui.add_space(6.0);
    if let Some(e) = &form.error {
        ui.colored_label(egui::Color32::from_rgb(230, 90, 80), e);
        ui.add_space(4.0);
    }
    if let Some(c) = typed_targets(ui, form) {
        chosen = Some(c);
    }
    if !nodes.is_empty() {
        ui.add_space(8.0);
        ui.strong(format!("Servers ({})", nodes.len()));
        if let Some(addr) = servers(ui, nodes) {
            chosen = Some(Chosen::Node(addr));
        }
    }
    ui.add_space(8.0);
    if let Some(c) = segments(ui, listing) {
        chosen = Some(c);
    }
    mappers(ui, listing);
    if let Some(c) = recent_targets(ui, recent) {
        chosen = Some(c);
    }
    chosen
}

/// A segment's name or an engine's PID, or a server's address, typed; the one whose
/// button was clicked (or Enter pressed in).
fn typed_targets(ui: &mut egui::Ui, form: &mut AttachForm) -> Option<Chosen> {
    let mut chosen = None;
    ui.horizontal(|ui| {
        let label = ui.label("Name");
        let r = ui
            .add(
                egui::TextEdit::singleline(&mut form.name)
                    .hint_text("LuckyEngine_1234")
                    .desired_width(220.0),
            )
            .labelled_by(label.id);
        let enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        if (ui.button("Attach by name").clicked() || enter) && !form.name.trim().is_empty() {
            chosen = Some(Chosen::Target(Target::Shm(form.name.trim().to_string())));
        }
        ui.separator();
        let label = ui.label("PID");
        ui.add(
            egui::TextEdit::singleline(&mut form.pid)
                .hint_text("4242")
                .desired_width(80.0),
        )
        .labelled_by(label.id);
        if ui.button("Attach by PID").clicked() {
            match form.pid.trim().parse::<u32>() {
                Ok(pid) => chosen = Some(Chosen::Target(Target::Pid(pid))),
                Err(_) => form.error = Some(format!("{:?} is not a process id", form.pid.trim())),
            }
        }
    });
    ui.horizontal(|ui| {
        let label = ui.label("Connect to a server…");
        let r = ui
            .add(
                egui::TextEdit::singleline(&mut form.server)
                    .hint_text("ws://127.0.0.1:8765 or wss://…")
                    .desired_width(220.0),
            )
            .labelled_by(label.id)
            .on_hover_text("a run served by `lrbc-inspector serve` on another machine (through `ssh -L 8765:localhost:8765 node`) or this one");
        let enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        if (ui.button("Connect").clicked() || enter) && !form.server.trim().is_empty() {
            chosen = Some(Chosen::Server(form.server.trim().to_string()));
        }
    });
    chosen
}

/// The segments discovered, one row each; the one whose "Attach" was clicked.
fn segments(ui: &mut egui::Ui, listing: &Listing) -> Option<Chosen> {
    let mut chosen = None;
    ui.strong(format!("Segments ({})", listing.segments.len()));
    if listing.refreshes == 0 {
        ui.weak("Looking…");
    } else if listing.segments.is_empty() {
        ui.weak(format!(
            "No LRBC segments in {}. Start one with `lrbc-inspector sim engine`.",
            lrbc::segment::SHM_PLACE
        ));
    }
    egui::Grid::new("segments")
        .striped(true)
        .num_columns(8)
        .show(ui, |ui| {
            for h in [
                "",
                "name",
                "layout",
                "bytes",
                "envs × obs × act",
                "engine",
                "client",
                "frame_seq",
            ] {
                ui.strong(h);
            }
            ui.end_row();
            for e in &listing.segments {
                match &e.outcome {
                    ListOutcome::Ok(s) => {
                        if ui
                            .button("Attach")
                            .on_hover_text(format!("attach to {}", e.name))
                            .clicked()
                        {
                            chosen = Some(Chosen::Target(Target::Shm(e.name.clone())));
                        }
                        ui.monospace(&e.name);
                        ui.label(s.layout.as_str());
                        ui.label(e.size_bytes.map_or("?".into(), |b| b.to_string()));
                        ui.label(format!("{} × {} × {}", s.num_envs, s.obs_size, s.act_size));
                        proc_label(ui, &s.server);
                        proc_label(ui, &s.client);
                        ui.label(s.frame_seq.to_string());
                    }
                    ListOutcome::Err { error } => {
                        ui.add_enabled(false, egui::Button::new("Attach"));
                        ui.monospace(&e.name);
                        ui.colored_label(
                            egui::Color32::from_rgb(230, 90, 80),
                            format!("unreadable: {error}"),
                        );
                        for _ in 0..5 {
                            ui.label("");
                        }
                    }
                }
                ui.end_row();
            }
        });
    chosen
}

/// The processes that map the segments listed.
fn mappers(ui: &mut egui::Ui, listing: &Listing) {
    if !listing.mappers.is_empty() {
        ui.add_space(8.0);
        ui.strong("Processes that map them");
        egui::Grid::new("mappers")
            .striped(true)
            .num_columns(5)
            .show(ui, |ui| {
                for h in ["segment", "pid", "process", "CPU %", "memory"] {
                    ui.strong(h);
                }
                ui.end_row();
                for (name, procs) in &listing.mappers {
                    if !listing.segments.iter().any(|s| &s.name == name) {
                        continue;
                    }
                    for p in procs {
                        ui.monospace(name);
                        ui.label(p.pid.to_string());
                        ui.label(format!(
                            "{}{}",
                            p.name.as_deref().unwrap_or("?"),
                            if p.alive { "" } else { " (dead)" }
                        ));
                        ui.label(format!("{:.1}", p.cpu_percent));
                        ui.label(format!("{:.1} MB", p.memory_bytes as f64 / 1e6));
                        ui.end_row();
                    }
                }
            });
    }
}

/// The recent targets; the one clicked.
fn recent_targets(ui: &mut egui::Ui, recent: &[String]) -> Option<Chosen> {
    let mut chosen = None;
    if !recent.is_empty() {
        ui.add_space(8.0);
        ui.strong("Recent");
        ui.horizontal_wrapped(|ui| {
            for r in recent {
                if ui.button(r).on_hover_text("attach again").clicked() {
                    chosen = Some(parse_recent(r));
                }
            }
        });
    }
    chosen
}

/// One row per server connected: its state, frame rate, reward median, NaN/Inf and
/// link; returns the server whose "Show" was clicked.
fn servers(ui: &mut egui::Ui, nodes: &[NodeRow]) -> Option<String> {
    let mut chosen = None;
    egui::Grid::new("servers")
        .striped(true)
        .num_columns(8)
        .show(ui, |ui| {
            for h in [
                "",
                "server",
                "state",
                "envs",
                "frames/s",
                "reward median",
                "NaN/Inf",
                "link",
            ] {
                ui.strong(h);
            }
            ui.end_row();
            for n in nodes {
                if ui
                    .button("Show")
                    .on_hover_text(format!("show {} in the panels", n.addr))
                    .clicked()
                {
                    chosen = Some(n.addr.clone());
                }
                ui.monospace(&n.addr);
                match n.state {
                    Some(s) => ui.colored_label(state_color(s), state_text(s)),
                    None => ui.weak("…"),
                };
                ui.label(if n.envs > 0 {
                    n.envs.to_string()
                } else {
                    "?".into()
                });
                ui.label(n.frame_hz.map_or("-".into(), |hz| format!("{hz:.0}")));
                ui.label(n.reward_median.map_or("-".into(), |r| format!("{r:.3}")));
                if n.nonfinite > 0 {
                    ui.colored_label(BAD, n.nonfinite.to_string());
                } else {
                    ui.label("0");
                }
                let text = n.link.summary();
                if n.link.state == LinkState::Connected {
                    ui.label(text);
                } else {
                    ui.colored_label(BAD, text);
                }
                ui.end_row();
            }
        });
    chosen
}

fn proc_label(ui: &mut egui::Ui, p: &ProcInfo) {
    if p.pid == 0 {
        ui.weak("none");
    } else {
        let text = format!("{} {}", p.pid, p.name.as_deref().unwrap_or("?"));
        if p.alive {
            ui.label(text);
        } else {
            ui.colored_label(
                egui::Color32::from_rgb(230, 90, 80),
                format!("{text} (dead)"),
            );
        }
    }
}

/// A recent target as remembered: "pid:1234", "path:/x", a server's "ws://HOST:PORT",
/// or a name.
pub fn parse_recent(s: &str) -> Chosen {
    if let Some(pid) = s.strip_prefix("pid:").and_then(|p| p.parse().ok()) {
        Chosen::Target(Target::Pid(pid))
    } else if let Some(path) = s.strip_prefix("path:") {
        Chosen::Target(Target::Path(path.into()))
    } else if s.starts_with("ws://") || s.starts_with("wss://") {
        Chosen::Server(s.to_string())
    } else {
        Chosen::Target(Target::Shm(s.to_string()))
    }
}

/// How a target is remembered.
pub fn remembered(t: &Target) -> String {
    match t {
        Target::Shm(n) => n.clone(),
        Target::Pid(p) => format!("pid:{p}"),
        Target::Path(p) => format!("path:{}", p.display()),
    }
}
