//! The inspector window (eframe/egui): attach view, status bar, and the header,
//! counters, envs, traffic, cameras and RPC panels as rearrangeable tiles.

pub mod app;
pub mod decimate;
pub mod panels;
pub mod raster;
pub mod screenshot;
pub mod settings;
pub mod widgets;

pub use app::InspectorApp;

use crate::attach::Target;
use crate::layout::LayoutChoice;

/// The nice value of the window's thread (and of the threads the GL driver starts).
const WINDOW_NICE: i32 = 15;

/// Opens the window (blocks until it is closed).
pub fn run_window(
    target: Option<Target>,
    choice: LayoutChoice,
    overrides: settings::Overrides,
) -> Result<(), String> {
    run_window_until(target, choice, None, overrides)
}

/// Opens the window; it closes itself when `stop` is set (Ctrl-C in `demo`).
pub fn run_window_until(
    target: Option<Target>,
    choice: LayoutChoice,
    stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    overrides: settings::Overrides,
) -> Result<(), String> {
    run_window_on(target, None, choice, stop, overrides)
}

/// Opens the window on a recording (`lrbc-inspector open`).
pub fn run_window_on_recording(
    path: std::path::PathBuf,
    overrides: settings::Overrides,
) -> Result<(), String> {
    run_window_on(None, Some(path), LayoutChoice::Auto, None, overrides)
}

fn run_window_on(
    target: Option<Target>,
    recording: Option<std::path::PathBuf>,
    choice: LayoutChoice,
    stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    overrides: settings::Overrides,
) -> Result<(), String> {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("lrbc-inspector")
            .with_inner_size([1400.0, 900.0])
            .with_min_inner_size([640.0, 400.0]),
        persist_window: true,
        ..Default::default()
    };
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    if !set("DISPLAY") && !set("WAYLAND_DISPLAY") && !set("WAYLAND_SOCKET") {
        return Err(
            "no display to open the window on (DISPLAY and WAYLAND_DISPLAY are unset); \
             the command-line views work without one (`lrbc-inspector --help`), or run under X \
             or Xvfb"
                .into(),
        );
    }
    // Drawing yields to the engine, the trainer and the sampler: the window thread and
    // every thread it starts from here on (a software rasteriser's among them) run niced.
    crate::platform::lower_thread_priority(WINDOW_NICE);
    eframe::run_native(
        "lrbc-inspector",
        options,
        Box::new(move |cc| {
            let settings = cc
                .storage
                .and_then(|s| eframe::get_value::<settings::Settings>(s, app::SETTINGS_KEY))
                .unwrap_or_default()
                .with(overrides);
            let tree = cc.storage.and_then(|s| eframe::get_value(s, app::TREE_KEY));
            let mut app = InspectorApp::new(&cc.egui_ctx, settings, tree, target, choice);
            app.close_when = stop;
            if let Some(path) = &recording {
                app.open_recording(path);
            }
            app.software_rendering = app::software_rendering_likely();
            Ok(Box::new(app))
        }),
    )
    .map_err(|e| format!("cannot open the window: {e}"))
}
