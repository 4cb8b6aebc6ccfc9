//! The inspector window (eframe/egui): attach view, status bar, and the header,
//! counters, envs, traffic, cameras and RPC panels as rearrangeable tiles.

pub mod app;
pub mod baseline;
pub mod decimate;
pub mod decoder;
pub mod discovery;
pub mod icon;
pub mod panels;
#[expect(unsafe_code, reason = "the one OpenGL query, with its SAFETY line")]
mod renderer;
pub mod screenshot;
pub mod settings;
pub mod widgets;

pub use app::InspectorApp;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use lrbc::attach::Target;
use lrbc::layout::LayoutChoice;

/// Drawing yields to the engine, the trainer and the sampler: the calling thread (the
/// window's, or the app's without a window) and every thread it starts from here on (a
/// software rasteriser's among them) run niced, but for the frame followers, which keep
/// the priority it had.
pub fn yield_to_the_run() {
    lrbc_live::follower::keep_priority_for_followers();
    lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Window);
}

/// Opens the window (blocks until it is closed, or Ctrl-C closes it).
pub fn run_window(
    target: Option<Target>,
    choice: LayoutChoice,
    overrides: settings::Overrides,
) -> Result<(), String> {
    run_window_until(target, choice, None, overrides)
}

/// Opens the window; it closes itself, as its close button would, when `stop` is set
/// (by default, and in `demo`, by Ctrl-C).
pub fn run_window_until(
    target: Option<Target>,
    choice: LayoutChoice,
    stop: Option<Arc<AtomicBool>>,
    overrides: settings::Overrides,
) -> Result<(), String> {
    run_window_on(Opening::Target(target), choice, stop, overrides)
}

/// Opens the window on runs served by `serve` (`lrbc-inspector --connect URL …`): the
/// first shown, each a row in the Attach view.
pub fn run_window_connected(
    urls: Vec<String>,
    overrides: settings::Overrides,
) -> Result<(), String> {
    run_window_on(Opening::Servers(urls), LayoutChoice::Auto, None, overrides)
}

/// What the window opens on.
enum Opening {
    Target(Option<Target>),
    /// A recording, and the baseline recording it is compared with.
    Recording(std::path::PathBuf, Option<std::path::PathBuf>),
    Servers(Vec<String>),
}

/// Opens the window on a recording (`lrbc-inspector open`), compared with `baseline` if
/// given.
pub fn run_window_on_recording(
    path: std::path::PathBuf,
    baseline: Option<std::path::PathBuf>,
    overrides: settings::Overrides,
) -> Result<(), String> {
    run_window_on(
        Opening::Recording(path, baseline),
        LayoutChoice::Auto,
        None,
        overrides,
    )
}

/// Whether a window can be opened here: always on Windows and macOS; on Linux and the
/// BSDs, when X11 (`DISPLAY`) or Wayland (`WAYLAND_DISPLAY`, `WAYLAND_SOCKET`) says
/// where its display is.
pub fn display_available() -> bool {
    if cfg!(any(windows, target_os = "macos")) {
        return true;
    }
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    set("DISPLAY") || set("WAYLAND_DISPLAY") || set("WAYLAND_SOCKET")
}

/// The window's options: title, size and icon.
pub fn native_options(settings_file: Option<std::path::PathBuf>) -> eframe::NativeOptions {
    eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("lrbc-inspector")
            .with_app_id("lrbc-inspector")
            .with_icon(Arc::new(icon::window_icon()))
            .with_inner_size([1400.0, 900.0])
            .with_min_inner_size([640.0, 400.0]),
        persist_window: true,
        persistence_path: settings_file,
        ..Default::default()
    }
}

fn run_window_on(
    opening: Opening,
    choice: LayoutChoice,
    stop: Option<Arc<AtomicBool>>,
    overrides: settings::Overrides,
) -> Result<(), String> {
    if !display_available() {
        return Err(
            "no display to open the window on (DISPLAY and WAYLAND_DISPLAY are unset); \
             the command-line views work without one (`lrbc-inspector --help`), or run under X \
             or Xvfb"
                .into(),
        );
    }
    let options = native_options(overrides.settings_file.clone());
    // Ctrl-C closes the window as its close button does: settings saved, the control
    // lease released, a recording under way finished.
    let stop = stop.unwrap_or_else(|| {
        let flag = Arc::new(AtomicBool::new(false));
        lrbc_platform::stop_on_interrupt(&flag);
        flag
    });
    yield_to_the_run();
    eframe::run_native(
        "lrbc-inspector",
        options,
        Box::new(move |cc| {
            let settings = cc
                .storage
                .and_then(|s| eframe::get_value::<settings::Settings>(s, app::SETTINGS_KEY))
                .unwrap_or_default()
                .with(&overrides);
            let tree = cc
                .storage
                .and_then(|s| eframe::get_value(s, app::TREE_KEY))
                .map(settings::with_every_pane);
            let target = match &opening {
                Opening::Target(t) => t.clone(),
                _ => None,
            };
            let mut app = InspectorApp::new(&cc.egui_ctx, settings, tree, target, choice);
            app.close_when = Some(stop);
            app.record_when_attached = overrides.record;
            match &opening {
                Opening::Recording(path, baseline) => {
                    app.open_recording(path);
                    if let Some(b) = baseline {
                        app.set_baseline(b);
                    }
                }
                Opening::Servers(urls) => {
                    for url in urls.iter().skip(1) {
                        app.add_node(url);
                    }
                    if let Some(first) = urls.first() {
                        app.connect(first);
                    }
                }
                Opening::Target(_) => {}
            }
            app.pacing.software_rendering = app::software_rendering_likely()
                || cc
                    .gl
                    .as_deref()
                    .is_some_and(|gl| app::software_renderer(&renderer::gl_renderer(gl)));
            Ok(Box::new(app))
        }),
    )
    .map_err(|e| format!("cannot open the window: {e}"))
}
