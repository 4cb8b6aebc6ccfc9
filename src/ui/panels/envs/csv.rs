//! The envs panel's CSV export: the series the plots show, a row per env and frame.

use lrbc::layout::Geometry;
use lrbc_live::sampler::{
    EnvDetail, EnvHistory, EnvPoint, FLAG_DONE, FLAG_RESET, FLAG_TRUNCATED, SamplerData,
};

/// A CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\"")).into()
    } else {
        text.into()
    }
}

/// The watched envs' series kept from `from_ns` on, as CSV: a row per env and frame
/// (`env`, `frame_seq`, `t_s` in seconds before `newest_ns` as on the plots' x axis,
/// `reward`, `done`, `truncated`, `reset`, then a column per observation and action
/// channel). Reward points and observation rows are sampled apart: a frame that has
/// only one of them leaves the other's fields empty.
pub fn plots_csv(
    envs: &std::collections::BTreeMap<u32, EnvHistory>,
    obs_labels: &[String],
    act_labels: &[String],
    from_ns: u64,
    newest_ns: u64,
) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("env,frame_seq,t_s,reward,done,truncated,reset");
    for label in obs_labels.iter().chain(act_labels) {
        out.push(',');
        out.push_str(&csv_field(label));
    }
    out.push('\n');
    let channels = obs_labels.len() + act_labels.len();
    for (env, h) in envs {
        let mut rows: std::collections::BTreeMap<u64, (Option<&EnvPoint>, Option<&EnvDetail>)> =
            std::collections::BTreeMap::new();
        for p in h.points.iter().filter(|p| p.t_ns >= from_ns) {
            rows.entry(p.frame_seq).or_default().0 = Some(p);
        }
        for dt in h.detail.iter().filter(|dt| dt.t_ns >= from_ns) {
            rows.entry(dt.frame_seq).or_default().1 = Some(dt);
        }
        for (seq, (point, detail)) in rows {
            let t_ns = point.map_or_else(|| detail.map_or(0, |dt| dt.t_ns), |p| p.t_ns);
            let t_s = (i128::from(t_ns) - i128::from(newest_ns)) as f64 / 1e9;
            // Writing to a String cannot fail.
            let _ = write!(out, "{env},{seq},{t_s}");
            match point {
                Some(p) => {
                    let flag = |f: u8| p.flags & f != 0;
                    // Writing to a String cannot fail.
                    let _ = write!(
                        out,
                        ",{},{},{},{}",
                        p.reward,
                        flag(FLAG_DONE),
                        flag(FLAG_TRUNCATED),
                        flag(FLAG_RESET)
                    );
                }
                None => out.push_str(",,,,"),
            }
            for i in 0..channels {
                out.push(',');
                if let Some(v) = detail.and_then(|dt| dt.values.get(i)) {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "{v}");
                }
            }
            out.push('\n');
        }
    }
    out
}

/// The CSV export's state, kept in egui's memory: the dialog thread's answer to come,
/// and the last outcome.
#[derive(Clone, Default)]
struct CsvExport {
    pending: Option<crossbeam_channel::Receiver<Result<std::path::PathBuf, String>>>,
    status: Option<String>,
}

/// "Export CSV…": the series the plots show ([`plots_csv`]), saved where a save dialog
/// on its own thread (`lrbc-csv-dialog`) says; the outcome shows next to the button.
pub(super) fn csv_export(
    ui: &mut egui::Ui,
    d: &SamplerData,
    g: &Geometry,
    from_ns: u64,
    newest: u64,
) {
    let id = ui.scope_id().with("csv_export");
    let mut state: CsvExport = ui.data(|m| m.get_temp(id)).unwrap_or_default();
    if let Some(rx) = &state.pending {
        match rx.try_recv() {
            Ok(result) => {
                state.status = Some(match result {
                    Ok(path) => format!("CSV saved to {}", path.display()),
                    Err(e) => e,
                });
                state.pending = None;
            }
            Err(crossbeam_channel::TryRecvError::Empty) => {
                ui.ctx()
                    .request_repaint_after(std::time::Duration::from_millis(250));
            }
            Err(crossbeam_channel::TryRecvError::Disconnected) => {
                state.status = Some("the save dialog ended without an answer".into());
                state.pending = None;
            }
        }
    }
    ui.horizontal(|ui| {
        let button = ui
            .add_enabled(state.pending.is_none(), egui::Button::new("Export CSV…"))
            .on_hover_text(
                "save the watched envs' rewards, flags, observations and actions within the plotted range as CSV",
            );
        if button.clicked() {
            let obs: Vec<String> = (0..g.obs_size as usize).map(|i| g.names.obs_label(i)).collect();
            let act: Vec<String> = (0..g.act_size as usize).map(|i| g.names.act_label(i)).collect();
            let text = plots_csv(&d.envs, &obs, &act, from_ns, newest);
            let (tx, rx) = crossbeam_channel::bounded(1);
            let spawned = std::thread::Builder::new()
                .name("lrbc-csv-dialog".into())
                .spawn(move || {
                    let picked = rfd::FileDialog::new()
                        .set_title("Export the plotted series as CSV")
                        .set_file_name("lrbc-envs.csv")
                        .add_filter("CSV", &["csv"])
                        .save_file();
                    let result = match picked {
                        Some(path) => std::fs::write(&path, text)
                            .map(|()| path.clone())
                            .map_err(|e| format!("{}: {e}", path.display())),
                        None => Err(
                            "no file chosen (the save dialog did not open or was cancelled)".into(),
                        ),
                    };
                    // The receiver is gone: nobody waits for this any more.
                    let _ = tx.send(result);
                });
            match spawned {
                Ok(_) => {
                    state.pending = Some(rx);
                    state.status = Some("choosing a file…".into());
                }
                Err(e) => state.status = Some(format!("the save dialog did not start: {e}")),
            }
        }
        if let Some(status) = &state.status {
            ui.label(status);
        }
    });
    ui.data_mut(|m| m.insert_temp(id, state));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::collections::BTreeMap;

    use super::*;
    use lrbc_live::sampler::Ring;

    fn history(points: &[(u64, u64, f32, u8)], detail: &[(u64, u64, &[f32])]) -> EnvHistory {
        let mut h = EnvHistory {
            points: Ring::new(16),
            detail: Ring::new(16),
        };
        for &(frame_seq, t_ns, reward, flags) in points {
            h.points.push(EnvPoint {
                frame_seq,
                t_ns,
                reward,
                flags,
            });
        }
        for &(frame_seq, t_ns, values) in detail {
            h.detail.push(EnvDetail {
                frame_seq,
                t_ns,
                values: values.into(),
            });
        }
        h
    }

    #[test]
    fn the_csv_has_a_row_per_env_and_frame_within_the_range() {
        let mut envs = BTreeMap::new();
        envs.insert(
            3,
            history(
                &[
                    (1, 1_000_000_000, 0.5, 0),
                    (2, 2_000_000_000, f32::NAN, FLAG_DONE),
                    (3, 3_000_000_000, 1.5, FLAG_RESET | FLAG_TRUNCATED),
                ],
                &[
                    (2, 2_000_000_000, &[1.0, 2.0, -1.0]),
                    (4, 4_000_000_000, &[3.0, 4.0, 0.25]),
                ],
            ),
        );
        envs.insert(7, history(&[(3, 3_000_000_000, -2.0, 0)], &[]));
        let obs = vec!["x".to_string(), "angle, rad".to_string()];
        let act = vec!["force".to_string()];
        // From 1.5 s on; the newest frame at 4 s.
        let csv = plots_csv(&envs, &obs, &act, 1_500_000_000, 4_000_000_000);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines,
            [
                "env,frame_seq,t_s,reward,done,truncated,reset,x,\"angle, rad\",force",
                "3,2,-2,NaN,true,false,false,1,2,-1",
                "3,3,-1,1.5,false,true,true,,,",
                "3,4,0,,,,,3,4,0.25",
                "7,3,-1,-2,false,false,false,,,",
            ]
        );
    }

    #[test]
    fn no_watched_envs_give_the_header_alone() {
        let csv = plots_csv(&BTreeMap::new(), &[], &["a".into()], 0, 0);
        assert_eq!(csv, "env,frame_seq,t_s,reward,done,truncated,reset,a\n");
    }
}
