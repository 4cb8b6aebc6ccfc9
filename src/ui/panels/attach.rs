//! The attach view: discovered segments and the processes that map them, attach by
//! click, by typed name or PID, and recent targets. Discovery runs on its own thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::attach::Target;
use crate::discovery::{self, ListEntry, Outcome};
use crate::procinfo::{ProcInfo, Processes};

/// What discovery found.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    pub segments: Vec<ListEntry>,
    /// Processes that map each segment (from /proc/*/maps).
    pub mappers: BTreeMap<String, Vec<ProcInfo>>,
    pub refreshes: u64,
}

/// Refreshes the listing every two seconds while asked to.
#[derive(Debug)]
pub struct Discovery {
    pub listing: Arc<Mutex<Listing>>,
    pub active: Arc<AtomicBool>,
    /// Set to refresh at once (when the view is shown again).
    pub refresh_now: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The processes that map each segment. `processes` lives as long as the discovery
/// thread: CPU use is measured between two refreshes.
fn mappers(processes: &mut Processes) -> BTreeMap<String, Vec<ProcInfo>> {
    processes.refresh_all();
    let mut out: BTreeMap<String, Vec<ProcInfo>> = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        for name in discovery::mapped_shm_names(pid) {
            out.entry(name).or_default().push(processes.info(pid));
        }
    }
    out
}

impl Discovery {
    pub fn start(waker: Arc<dyn Fn() + Send + Sync>) -> Self {
        let listing = Arc::new(Mutex::new(Listing::default()));
        let active = Arc::new(AtomicBool::new(true));
        let refresh_now = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, a, s, r) = (
            Arc::clone(&listing),
            Arc::clone(&active),
            Arc::clone(&stop),
            Arc::clone(&refresh_now),
        );
        let thread = std::thread::Builder::new()
            .name("lrbc-discovery".into())
            .spawn(move || {
                let mut processes = Processes::new();
                // Relaxed: flags with no data behind them.
                while !s.load(Ordering::Relaxed) {
                    if a.load(Ordering::Relaxed) {
                        let segments = discovery::list();
                        let mappers = mappers(&mut processes);
                        if let Ok(mut g) = l.lock() {
                            g.segments = segments;
                            g.mappers = mappers;
                            g.refreshes += 1;
                        }
                        waker();
                    }
                    for _ in 0..20 {
                        if s.load(Ordering::Relaxed) {
                            return;
                        }
                        if r.swap(false, Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            })
            .ok();
        Self {
            listing,
            active,
            refresh_now,
            stop,
            thread,
        }
    }

    /// Lists only while the attach view shows; showing it again lists at once.
    pub fn set_active(&self, on: bool) {
        // Relaxed: flags with no data behind them.
        if self.active.swap(on, Ordering::Relaxed) != on && on {
            self.refresh_now.store(true, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self) -> Listing {
        self.listing.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Inputs of the attach view.
#[derive(Debug, Default)]
pub struct AttachForm {
    pub name: String,
    pub pid: String,
    pub error: Option<String>,
}

/// Draws the view; returns the target the user chose.
pub fn ui(
    ui: &mut egui::Ui,
    form: &mut AttachForm,
    listing: &Listing,
    recent: &[String],
) -> Option<Target> {
    let mut chosen = None;
    ui.heading("Attach to a segment");
    ui.label(
        "LRBC segments on this machine, refreshed every 2 s. Attaching maps the segment read-only.",
    );
    ui.add_space(6.0);
    if let Some(e) = &form.error {
        ui.colored_label(egui::Color32::from_rgb(230, 90, 80), e);
        ui.add_space(4.0);
    }
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
            chosen = Some(Target::Shm(form.name.trim().to_string()));
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
                Ok(pid) => chosen = Some(Target::Pid(pid)),
                Err(_) => form.error = Some(format!("{:?} is not a process id", form.pid.trim())),
            }
        }
    });
    ui.add_space(8.0);
    ui.strong(format!("Segments ({})", listing.segments.len()));
    if listing.refreshes == 0 {
        ui.weak("Looking…");
    } else if listing.segments.is_empty() {
        ui.weak(format!(
            "No LRBC segments in {}. Start one with `lrbc-inspector sim engine`.",
            crate::segment::SHM_PLACE
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
                    Outcome::Ok(s) => {
                        if ui
                            .button("Attach")
                            .on_hover_text(format!("attach to {}", e.name))
                            .clicked()
                        {
                            chosen = Some(Target::Shm(e.name.clone()));
                        }
                        ui.monospace(&e.name);
                        ui.label(s.layout.as_str());
                        ui.label(e.size_bytes.map_or("?".into(), |b| b.to_string()));
                        ui.label(format!("{} × {} × {}", s.num_envs, s.obs_size, s.act_size));
                        proc_label(ui, &s.server);
                        proc_label(ui, &s.client);
                        ui.label(s.frame_seq.to_string());
                    }
                    Outcome::Err { error } => {
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

/// A recent target as remembered: "pid:1234", "path:/x", or a name.
pub fn parse_recent(s: &str) -> Target {
    if let Some(pid) = s.strip_prefix("pid:").and_then(|p| p.parse().ok()) {
        Target::Pid(pid)
    } else if let Some(path) = s.strip_prefix("path:") {
        Target::Path(path.into())
    } else {
        Target::Shm(s.to_string())
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
