//! `screenshots`: renders the README's pictures of the window headlessly, from a
//! simulated run (engine and client threads in this process), with the CPU rasteriser.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::CliError;
use crate::attach::Target;
use crate::layout::LayoutChoice;
use crate::sim::client::{self, ClientConfig, Policy};
use crate::sim::engine::{Engine, EngineConfig, Preset};
use crate::ui::InspectorApp;
use crate::ui::raster::HeadlessRenderer;
use crate::ui::settings::{Pane, Settings};

/// A simulated engine and client running on threads of this process.
pub struct SimRun {
    pub name: String,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for SimRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimRun")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl SimRun {
    /// Starts an engine with `preset` and a client paced at `hz` (commands on).
    pub fn start(preset: Preset, hz: Option<f64>) -> Result<Self, CliError> {
        let name = format!(
            "lrbc-sim-{}-{}",
            std::process::id(),
            crate::segment::monotonic_now_ns() % 1_000_000
        );
        let (num_envs, obs_size, act_size, image) = preset.sizes();
        let cfg = EngineConfig {
            name: name.clone(),
            layout: crate::layout::plan::PlanLayout::Lrbc { ext: true },
            num_envs,
            obs_size,
            act_size,
            image,
            mode: crate::sim::engine::Mode::Training,
            hz: 60.0,
            ring_size: 512 * 1024,
            ctl_ring_size: Some(64 * 1024),
            force: false,
            dynamics: true,
            camera_hz: 30.0,
            seed: 7,
        };
        let mut engine = Engine::create(cfg).map_err(|e| CliError::Other(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let s = Arc::clone(&stop);
        threads.push(
            std::thread::Builder::new()
                .name("sim-engine".into())
                .spawn(move || {
                    engine.run(&s);
                })
                .map_err(|e| CliError::Other(e.to_string()))?,
        );
        let s = Arc::clone(&stop);
        let client_cfg = ClientConfig {
            name: name.clone(),
            steps: None,
            hz,
            policy: Policy::Sine,
            commands: true,
            record_latency: false,
            step_timeout: Duration::from_secs(5),
        };
        threads.push(
            std::thread::Builder::new()
                .name("sim-client".into())
                .spawn(move || {
                    let _ = client::run(&client_cfg, &s);
                })
                .map_err(|e| CliError::Other(e.to_string()))?,
        );
        Ok(Self {
            name,
            stop,
            threads,
        })
    }

    pub fn target(&self) -> Target {
        Target::Shm(self.name.clone())
    }
}

impl Drop for SimRun {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn save(img: &image::RgbaImage, dir: &Path, name: &str) -> Result<PathBuf, CliError> {
    let path = dir.join(name);
    img.save_with_format(&path, image::ImageFormat::Png)
        .map_err(|e| CliError::Other(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}

/// Runs the app for `frames` passes and renders the last one.
pub fn render_app(
    r: &mut HeadlessRenderer,
    app: &mut InspectorApp,
    ctx: &egui::Context,
    size: egui::Vec2,
    frames: usize,
) -> image::RgbaImage {
    r.render(ctx, size, 1.0, frames, |ui| app.ui(ui))
}

pub fn run(out: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(out)
        .map_err(|e| CliError::Other(format!("cannot create {}: {e}", out.display())))?;
    let sim = SimRun::start(Preset::Cams64, Some(500.0))?;
    // Let the run build some history.
    std::thread::sleep(Duration::from_millis(300));
    let ctx = egui::Context::default();
    let settings = Settings {
        screenshot_dir: out.join("captures"),
        watched_envs: vec![0, 1, 2],
        plot_window_secs: 10.0,
        ..Settings::default()
    };
    let mut app = InspectorApp::new(&ctx, settings, None, Some(sim.target()), LayoutChoice::Auto);
    if app.session.is_none() {
        return Err(CliError::Other(format!(
            "could not attach to the simulated run: {}",
            app.status_message().unwrap_or("?")
        )));
    }
    let mut renderer = HeadlessRenderer::new();
    let started = Instant::now();
    // Warm up: the first frames load fonts and textures; let the sampler gather frames.
    while started.elapsed() < Duration::from_secs(4) {
        let _ = render_app(&mut renderer, &mut app, &ctx, egui::vec2(1400.0, 900.0), 1);
        std::thread::sleep(Duration::from_millis(100));
    }
    let size = egui::vec2(1400.0, 900.0);
    let mut written = vec![save(
        &render_app(&mut renderer, &mut app, &ctx, size, 3),
        out,
        "overview.png",
    )?];
    // Select a traffic entry so the field tree shows.
    if let Some(s) = &app.session {
        let store = s.traffic.lock();
        let pick = (store.first_index..store.total_rows()).rev().find(|&i| {
            matches!(store.get(i), Some(crate::ui::session::TrafficRow::Record(r)) if r.method == "GetAgentSchema" || r.method == "ResetAgent")
        });
        app.traffic_view.selected = pick;
    }
    for pane in Pane::ALL {
        app.tree = egui_tiles::Tree::new_tabs(egui::Id::unique(("shot", pane.title())), vec![pane]);
        let img = render_app(&mut renderer, &mut app, &ctx, egui::vec2(1200.0, 800.0), 4);
        written.push(save(
            &img,
            out,
            &format!("panel-{}.png", pane.title().to_lowercase()),
        )?);
    }
    app.show_attach = true;
    std::thread::sleep(Duration::from_millis(2500));
    written.push(save(
        &render_app(&mut renderer, &mut app, &ctx, egui::vec2(1200.0, 700.0), 3),
        out,
        "attach.png",
    )?);
    drop(app);
    drop(sim);
    for p in written {
        println!("{}", p.display());
    }
    Ok(())
}
