//! The inspector window (eframe/egui): attach view, status bar, and the header,
//! counters, envs, traffic, cameras and RPC panels as rearrangeable tiles.

pub mod app;
pub mod decimate;
pub mod panels;
pub mod raster;
pub mod screenshot;
pub mod session;
pub mod settings;
pub mod widgets;

pub use app::InspectorApp;

use crate::attach::Target;
use crate::layout::LayoutChoice;

/// Opens the window (blocks until it is closed).
pub fn run_window(target: Option<Target>, choice: LayoutChoice) -> Result<(), String> {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("lrbc-inspector")
            .with_inner_size([1400.0, 900.0])
            .with_min_inner_size([640.0, 400.0]),
        persist_window: true,
        ..Default::default()
    };
    eframe::run_native(
        "lrbc-inspector",
        options,
        Box::new(move |cc| {
            let settings = cc
                .storage
                .and_then(|s| eframe::get_value(s, app::SETTINGS_KEY))
                .unwrap_or_default();
            let tree = cc.storage.and_then(|s| eframe::get_value(s, app::TREE_KEY));
            Ok(Box::new(InspectorApp::new(
                &cc.egui_ctx,
                settings,
                tree,
                target,
                choice,
            )))
        }),
    )
    .map_err(|e| format!("cannot open the window: {e}"))
}
