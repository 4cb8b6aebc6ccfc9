//! `screenshots`: renders the pictures of the window headlessly, from a
//! simulated run (engine and client threads in this process), with the CPU rasteriser.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::CliError;
use crate::ui::InspectorApp;
use crate::ui::raster::HeadlessRenderer;
use crate::ui::settings::{Pane, Settings};
use lrbc::layout::LayoutChoice;
use lrbc_sim::engine::Preset;
use lrbc_sim::inprocess::SimRun;

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
    r.render(ctx, size, 1.0, frames, |ui| app.run_frame(ui))
}

/// Where the flight recorder of the screenshots' run writes.
fn flight_dir() -> PathBuf {
    std::env::temp_dir().join(format!("lrbc-screenshots-{}", std::process::id()))
}

fn settings_of(out: &Path) -> Settings {
    Settings {
        screenshot_dir: out.join("captures"),
        // The flight recorder saves the seconds around the planted NaN: not into the
        // user's folder, nor among the pictures (removed at the end).
        recordings_dir: flight_dir(),
        watched_envs: vec![0, 1, 2],
        plot_window_secs: 10.0,
        ..Settings::default()
    }
}

/// A child process, killed when this goes.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `remote.png`: the window connected to `serve` of the same run (a process of this
/// program), on loopback.
fn remote(
    sim: &SimRun,
    settings: &Settings,
    renderer: &mut HeadlessRenderer,
    out: &Path,
) -> Result<PathBuf, CliError> {
    use std::io::BufRead as _;
    let failed = |what: &str, e: &dyn std::fmt::Display| CliError::Other(format!("{what}: {e}"));
    let exe = std::env::current_exe().map_err(|e| failed("this program's path", &e))?;
    let lrbc::attach::Target::Shm(name) = sim.target() else {
        return Err(CliError::Other("the simulated run has no name".into()));
    };
    let mut child = Child(
        std::process::Command::new(exe)
            .args([
                "serve",
                "--shm",
                &name,
                "--listen",
                "127.0.0.1:0",
                "--images",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| failed("cannot start serve", &e))?,
    );
    let mut first = String::new();
    if let Some(stdout) = child.0.stdout.take() {
        std::io::BufReader::new(stdout)
            .read_line(&mut first)
            .map_err(|e| failed("serve said nothing", &e))?;
    }
    let url = first
        .trim()
        .strip_prefix("listening on ")
        .ok_or_else(|| CliError::Other(format!("serve's first line: {first:?}")))?
        .to_string();
    let ctx = egui::Context::default();
    let mut app = InspectorApp::new(&ctx, settings.clone(), None, None, LayoutChoice::Auto);
    app.connect(&url);
    let size = egui::vec2(1400.0, 900.0);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        let _ = render_app(renderer, &mut app, &ctx, size, 1);
        std::thread::sleep(Duration::from_millis(100));
    }
    let path = save(
        &render_app(renderer, &mut app, &ctx, size, 3),
        out,
        "remote.png",
    )?;
    drop(app);
    drop(child);
    Ok(path)
}

pub fn run(out: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(out)
        .map_err(|e| CliError::Other(format!("cannot create {}: {e}", out.display())))?;
    // Faults for the Events panel: a NaN observation, an infinite action, a done burst.
    let plants = [
        "nan@500:env=1,channel=obs,index=2",
        "inf@900:env=2,channel=act,index=1",
        "done-burst@1300",
        "-inf@1600:env=0,channel=reward",
    ]
    .iter()
    .map(|p| lrbc_sim::engine::Plant::parse(p).map_err(|e| CliError::Other(e.to_string())))
    .collect::<Result<Vec<_>, _>>()?;
    let sim =
        SimRun::start_planted(Preset::Cams64, Some(500.0), plants).map_err(CliError::Other)?;
    // Let the run build some history.
    std::thread::sleep(Duration::from_millis(300));
    let ctx = egui::Context::default();
    let mut app = InspectorApp::new(
        &ctx,
        settings_of(out),
        None,
        Some(sim.target()),
        LayoutChoice::Auto,
    );
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
            matches!(store.get(i), Some(lrbc_live::traffic::TrafficRow::Record(r)) if r.method == "GetAgentSchema" || r.method == "ResetAgent")
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
    // The episodes' distributions, one colour per ending.
    app.tree =
        egui_tiles::Tree::new_tabs(egui::Id::unique("shot_distributions"), vec![Pane::Episodes]);
    app.episodes_view.section = crate::ui::panels::episodes::Section::Distributions;
    let img = render_app(&mut renderer, &mut app, &ctx, egui::vec2(1200.0, 800.0), 4);
    written.push(save(&img, out, "panel-episodes-distributions.png")?);
    app.show_attach = true;
    // The attach view asks the discovery thread for a fresh list when it shows; keep
    // drawing until that list has come in.
    let shown = Instant::now();
    while shown.elapsed() < Duration::from_millis(2500) {
        let _ = render_app(&mut renderer, &mut app, &ctx, egui::vec2(1200.0, 700.0), 1);
        std::thread::sleep(Duration::from_millis(100));
    }
    written.push(save(
        &render_app(&mut renderer, &mut app, &ctx, egui::vec2(1200.0, 700.0), 3),
        out,
        "attach.png",
    )?);
    drop(app);
    written.push(remote(&sim, &settings_of(out), &mut renderer, out)?);
    drop(sim);
    let _ = std::fs::remove_dir_all(flight_dir());
    for p in written {
        println!("{}", p.display());
    }
    Ok(())
}
