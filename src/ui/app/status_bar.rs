//! The status bar: the target, its state, the engine and client processes, the
//! sampler's counts, traffic losses, the count of events and the last message.

use super::InspectorApp;
use crate::ui::widgets::{BAD, WARN, state_color, state_text};
use lrbc::clock::monotonic_now_ns;
use lrbc::procinfo::ProcInfo;
use lrbc_remote::view::LinkState;

impl InspectorApp {
    pub(super) fn status_bar(&mut self, ui: &mut egui::Ui) {
        ui.horizontal_wrapped(|ui| {
            self.flight_buttons(ui);
            match &self.session {
                None => {
                    ui.label("not attached");
                }
                Some(s) => {
                    let ended = s.sampler.ended_threads();
                    if !ended.is_empty() {
                        ui.colored_label(
                            BAD,
                            format!(
                                "sampler thread {} stopped: figures are stale, re-attach",
                                ended.join(", ")
                            ),
                        );
                    }
                    let d = s.sampler.lock();
                    ui.monospace(s.label());
                    if let Some(link) = s.link() {
                        let text = link.summary();
                        let r = match link.state {
                            LinkState::Connected if link.frames_not_received > 0 => {
                                ui.colored_label(WARN, text)
                            }
                            LinkState::Connected => ui.label(text),
                            _ => ui.colored_label(BAD, text),
                        };
                        r.on_hover_text(format!(
                            "server {} ({}), session {}; {} reconnects, {} restarts; {} messages, {:.1} MB; age: from the server's time of a message to its arrival (both machines' clocks); link: the rate the server measured of this connection{}",
                            link.addr,
                            if link.server_name.is_empty() { "?" } else { &link.server_name },
                            link.session_id.as_deref().unwrap_or("?"),
                            link.reconnects,
                            link.restarts,
                            link.messages,
                            link.bytes as f64 / 1e6,
                            link.note.as_ref().map_or(String::new(), |n| format!("; the server said: {n}")),
                        ));
                    }
                    ui.label(d.geometry.layout.as_str());
                    match &d.report {
                        Some(r) => ui.colored_label(state_color(r.state), state_text(r.state)),
                        None => ui.weak("…"),
                    };
                    let pid = |ui: &mut egui::Ui, role: &str, p: &ProcInfo| {
                        if p.pid == 0 {
                            ui.weak(format!("{role}: none"));
                        } else if p.alive {
                            ui.label(format!(
                                "{role}: {} {}",
                                p.pid,
                                p.name.as_deref().unwrap_or("")
                            ));
                        } else {
                            ui.colored_label(BAD, format!("{role}: {} dead", p.pid));
                        }
                    };
                    if s.remote().is_some() {
                        // Its processes are on the server's machine.
                        match d.counters.server_pid {
                            0 => ui.weak("engine: none"),
                            p => ui.label(format!("engine: pid {p} on the server's machine")),
                        };
                    } else {
                        pid(ui, "engine", &self.processes.engine);
                        pid(ui, "client", &self.processes.client);
                    }
                    let st = d.stats;
                    ui.label(format!("sampled {}/{}", st.frames.sampled, st.frames.seen));
                    if st.frames.torn > 0 || st.frames.missed > 0 {
                        ui.colored_label(
                            WARN,
                            format!("missed {} torn {}", st.frames.missed, st.frames.torn),
                        )
                        .on_hover_text(format!(
                            "{} of the frames missed passed while the machine did not run the follower when it asked to be woken",
                            st.frames.missed_late
                        ));
                    }
                    if st.frames.unreadable > 0 {
                        ui.colored_label(BAD, format!("unreadable {}", st.frames.unreadable))
                            .on_hover_text("frames published while the segment's file was shorter than its layout: the data read as zeros, so they were not kept");
                    }
                    if st.frames.skipped > 0 {
                        let busy = if d.yielding { " (machine busy)" } else { "" };
                        ui.label(format!("skipped {}{busy}", st.frames.skipped))
                            .on_hover_text("frames let pass on purpose while the machine had no spare CPU, so as not to slow the run (Settings: 'Sampler on a busy machine')");
                    }
                    drop(d);
                    let lost: u64 = s
                        .traffic
                        .lock()
                        .totals
                        .iter()
                        .map(|(_, t)| t.lost_bytes)
                        .sum();
                    if lost > 0 {
                        ui.colored_label(BAD, format!("traffic lost {lost} bytes"));
                    }
                    if let Some(log) = s.events() {
                        let t = lrbc::sync::lock(&log).totals();
                        let n = t.events();
                        let text = format!("events {}", lrbc_live::text::thousands(n));
                        let r = if n > 0 {
                            ui.colored_label(WARN, text)
                        } else {
                            ui.label(text)
                        };
                        r.on_hover_text(format!(
                            "what the detector found (Events panel); {}",
                            t.checked_text()
                        ));
                    }
                }
            }
            self.flight_status_bar(ui);
            if let Some(m) = &self.message {
                ui.separator();
                let age = monotonic_now_ns().saturating_sub(m.at_ns);
                if age < 30_000_000_000 {
                    if m.error {
                        ui.colored_label(BAD, &m.text);
                    } else {
                        ui.label(&m.text);
                    }
                }
            }
        });
    }
}
