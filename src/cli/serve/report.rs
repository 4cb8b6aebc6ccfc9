//! What `serve` says each second: its progress line on standard error (the run, then
//! what each client took) and the status message its clients get.

use std::collections::BTreeMap;

use lrbc_live::text::plural;
use lrbc_live::watch::Report;
use lrbc_recording::recorder::Counts;
use lrbc_remote::server::{ClientCounts, PeerView, ServeCounts};

/// Clients listed one by one on the progress line at most; more are summed.
const CLIENTS_LISTED: usize = 4;

pub(super) fn status_json(
    r: &Report,
    service_flags: Option<u32>,
    c: &Counts,
    s: &ServeCounts,
    clients: usize,
) -> serde_json::Value {
    serde_json::json!({
        "state": r.state.as_str(),
        "note": r.note,
        "frame_seq": r.frame_seq,
        "action_seq": r.action_seq,
        "frame_hz": r.frame_hz,
        "action_hz": r.action_hz,
        "lag": r.lag,
        "server_pid": r.server_pid,
        "service_flags": service_flags,
        "capture": c,
        "served": s,
        "clients": clients,
    })
}

/// Per second, from two counts of a client.
fn per_second(now: &ClientCounts, then: &ClientCounts, secs: f64) -> (f64, f64, f64) {
    let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs;
    (
        rate(now.frames.delivered, then.frames.delivered),
        rate(now.frames.conflated, then.frames.conflated),
        rate(now.bytes, then.bytes) / 1e6,
    )
}

/// The progress line: the run, then what each client took (summed when there are more
/// than [`CLIENTS_LISTED`]); `seen` keeps each client's counts of the last line.
pub(super) fn progress(
    r: &Report,
    c: &Counts,
    s: &ServeCounts,
    last: &(Counts, ServeCounts, u64),
    secs: f64,
    clients: &[PeerView],
    seen: &mut BTreeMap<u64, ClientCounts>,
) -> String {
    let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / secs;
    let mut line = format!(
        "{} | {:.0} frames/s seen, {:.0} handed out | dropped by the limits: {} frames, {} images | missed {}, torn {}, skipped {}, unreadable {} | {} client{}",
        r.state.as_str(),
        rate(c.frames_seen, last.0.frames_seen),
        rate(s.frames, last.1.frames),
        s.frames_dropped,
        s.images_dropped,
        c.frames_missed,
        c.frames_torn,
        c.frames_skipped,
        c.frames_unreadable,
        clients.len(),
        plural(clients.len()),
    );
    let mut now_seen = BTreeMap::new();
    let mut sum = (0.0, 0.0, 0.0, 0.0, 0u64);
    for v in clients {
        let then = seen.get(&v.id).copied().unwrap_or_default();
        let (fps, conflated, mbs) = per_second(&v.counts, &then, secs);
        let link = v.link_bytes_per_s.unwrap_or(0.0) * 8.0 / 1e6;
        let dropped = v.counts.frames.dropped + v.counts.images.dropped;
        if clients.len() <= CLIENTS_LISTED {
            line += &format!(
                " | {}: {fps:.0} frames/s ({conflated:.0} conflated), {mbs:.2} MB/s, link {}, {dropped} dropped",
                v.addr,
                v.link_bytes_per_s
                    .map_or_else(|| "–".to_string(), |_| format!("{link:.1} Mbit/s")),
            );
        }
        sum = (
            sum.0 + fps,
            sum.1 + conflated,
            sum.2 + mbs,
            sum.3 + link,
            sum.4 + dropped,
        );
        now_seen.insert(v.id, v.counts);
    }
    if clients.len() > CLIENTS_LISTED {
        line += &format!(
            " | all: {:.0} frames/s ({:.0} conflated), {:.2} MB/s, links {:.1} Mbit/s, {} dropped",
            sum.0, sum.1, sum.2, sum.3, sum.4
        );
    }
    *seen = now_seen;
    line
}
