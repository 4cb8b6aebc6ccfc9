//! The RPC panel (the editor's RpcPanel companion): segment, connection, pids, the state
//! of each service from `service_flags`, toggles through the control ring, and the
//! engine's per-service counters.

use crate::ui::widgets::{BAD, GOOD, WARN, state_color, state_text};
use lrbc::procinfo::ProcInfo;
use lrbc::rpc::services;
use lrbc_live::controller::{ControlRequest, ControlState};
use lrbc_live::watch::Report;

/// What the panel shows (gathered by the app, so the panel needs no session access).
#[derive(Debug)]
pub struct RpcInfo<'a> {
    pub label: &'a str,
    pub report: Option<&'a Report>,
    pub server: &'a ProcInfo,
    pub client: &'a ProcInfo,
    pub service_flags: Option<u32>,
    pub unavailable: Option<&'a str>,
    pub lease_holder: Option<u32>,
    pub control: Option<ControlState>,
}

fn pid_line(ui: &mut egui::Ui, role: &str, p: &ProcInfo) {
    ui.label(role);
    if p.pid == 0 {
        ui.weak("none attached");
    } else if p.alive {
        ui.colored_label(
            GOOD,
            format!("{} {} (alive)", p.pid, p.name.as_deref().unwrap_or("?")),
        );
    } else {
        ui.colored_label(BAD, format!("{} (dead)", p.pid));
    }
    ui.end_row();
}

/// Draws the panel; returns a request for the control worker.
pub fn ui(ui: &mut egui::Ui, info: &RpcInfo<'_>) -> Option<ControlRequest> {
    let mut request = None;
    egui::Grid::new("rpc_status").num_columns(2).show(ui, |ui| {
        ui.label("Segment");
        ui.monospace(info.label);
        ui.end_row();
        ui.label("Connection");
        match info.report {
            Some(r) => ui.colored_label(state_color(r.state), state_text(r.state)),
            None => ui.weak("…"),
        };
        ui.end_row();
        pid_line(ui, "Engine", info.server);
        pid_line(ui, "Client", info.client);
        ui.label("Control lease");
        match info.lease_holder {
            None => ui.weak("free"),
            Some(pid) if pid == std::process::id() => {
                ui.colored_label(GOOD, format!("held by this inspector ({pid})"))
            }
            Some(pid) => ui.colored_label(WARN, format!("held by pid {pid}")),
        };
        ui.end_row();
    });
    ui.separator();
    if let Some(reason) = info.unavailable {
        ui.colored_label(WARN, format!("Service toggles are disabled: {reason}."));
    }
    let busy = info.control.as_ref().is_some_and(|c| c.busy);
    ui.add_enabled_ui(info.unavailable.is_none() && !busy, |ui| {
        egui::Grid::new("rpc_services")
            .striped(true)
            .num_columns(3)
            .show(ui, |ui| {
                for h in ["service", "requests", "errors"] {
                    ui.strong(h);
                }
                ui.end_row();
                for id in services::ids() {
                    let mut on = info
                        .service_flags
                        .map(|f| 1u32.checked_shl(u32::from(id)).is_some_and(|b| f & b != 0));
                    let label = services::label(id);
                    match &mut on {
                        Some(on) => {
                            let before = *on;
                            if ui
                                .checkbox(on, label)
                                .on_hover_text(format!("SetServiceEnabled {label}"))
                                .changed()
                            {
                                request = Some(ControlRequest::SetEnabled {
                                    service: id,
                                    enabled: !before,
                                });
                            }
                        }
                        None => {
                            ui.weak(format!("{label}: unknown (no service_flags)"));
                        }
                    }
                    let status = info.control.as_ref().and_then(|c| {
                        c.statuses
                            .iter()
                            .find(|s| s.service.eq_ignore_ascii_case(label))
                    });
                    ui.label(status.map_or("-".into(), |s| s.requests.to_string()));
                    ui.label(status.map_or("-".into(), |s| s.errors.to_string()));
                    ui.end_row();
                }
            });
        if ui.button("Refresh counters (GetServiceStatus)").clicked() {
            request = Some(ControlRequest::Status);
        }
    });
    if let Some(c) = &info.control {
        if c.busy {
            ui.weak("waiting for the engine…");
        }
        if let Some(last) = &c.last {
            ui.label(format!("Response: {last}"));
        }
        if let Some(e) = &c.last_error {
            ui.colored_label(BAD, e);
        }
    }
    request
}
