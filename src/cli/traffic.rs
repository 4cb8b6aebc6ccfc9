//! `traffic`: one line per ring entry, now or as it happens.

use std::time::{Duration, Instant};

use super::{CliError, stop_flag};
use lrbc::attach::{Target, attach};
use lrbc::clock::monotonic_now_ns;
use lrbc::layout::LayoutChoice;
use lrbc_live::traffic::{PollPace, RingSelection, Traffic, TrafficEvent};

/// Options of `traffic`.
#[derive(Clone, Copy, Debug)]
pub struct TrafficOptions {
    pub follow: bool,
    pub rings: RingSelection,
    pub json: bool,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
}

fn line(e: &TrafficEvent, start_ns: u64) -> Option<String> {
    Some(match e {
        TrafficEvent::Record(r) => {
            let t_ns = r.sent_ns().unwrap_or(r.seen_ns);
            let t = (i128::from(t_ns) - i128::from(start_ns)) as f64 / 1e9;
            let status = match (&r.error, r.pairing) {
                (Some(err), _) => format!("error: {err}"),
                (None, lrbc_live::traffic::Pairing::Orphan) => "ok (no request seen)".into(),
                (None, lrbc_live::traffic::Pairing::SubscribedBeforeAttach) => {
                    "ok (stream subscribed before attach)".into()
                }
                (None, _) => "ok".into(),
            };
            let latency = r
                .latency_ns
                .map_or(String::new(), |l| format!("  {:.3} ms", l as f64 / 1e6));
            format!(
                "{t:+10.3}s {:<8} {:>20} {:<28} {:>7} B  {status}{latency}",
                r.ring.as_str(),
                r.correlation_id,
                r.method,
                r.payload.len()
            )
        }
        TrafficEvent::Answered { .. } => return None,
        TrafficEvent::Lost {
            ring,
            lost_bytes,
            lost_entries,
        } => format!(
            "{:>11} {:<8} LOST {lost_bytes} bytes ({} entries): the watcher was lapped",
            "",
            ring.as_str(),
            lost_entries.map_or("unknown number of".to_string(), |n| n.to_string())
        ),
        TrafficEvent::Malformed {
            ring,
            position,
            error,
            raw,
        } => format!(
            "{:>11} {:<8} MALFORMED at position {position}: {error}; raw: {}",
            "",
            ring.as_str(),
            lrbc::layout::fields::hex_string(raw)
        ),
        TrafficEvent::Unanswered {
            ring,
            correlation_id,
            method,
            waited_ns,
            ..
        } => format!(
            "{:>11} {:<8} {correlation_id:>20} {method:<28} UNANSWERED after {:.1} s",
            "",
            ring.as_str(),
            *waited_ns as f64 / 1e9
        ),
    })
}

/// A named mapping (Windows) lives while any process maps it: once its engine is dead,
/// `traffic` closes its views and ends, so that a restarted engine can create the name.
pub(super) struct EngineCheck {
    processes: lrbc::procinfo::Processes,
    next: Instant,
}

impl EngineCheck {
    pub(super) fn new() -> Self {
        Self {
            processes: lrbc::procinfo::Processes::new(),
            next: Instant::now(),
        }
    }

    /// Once a second: the dead engine's pid after releasing its mapping, if it died.
    pub(super) fn released_after_death(&mut self, a: &lrbc::attach::Attached) -> Option<u32> {
        let lrbc::segment::Location::Named(name) = a.segment.location() else {
            return None;
        };
        if Instant::now() < self.next {
            return None;
        }
        self.next = Instant::now() + Duration::from_secs(1);
        let pid = a.segment.load_u32(a.geometry.counters.server_pid)?;
        if pid == 0 || self.processes.is_alive(pid) {
            return None;
        }
        lrbc::segment::release_named(name);
        Some(pid)
    }
}

pub fn run(target: &Target, choice: LayoutChoice, o: TrafficOptions) -> Result<(), CliError> {
    let stop = stop_flag();
    // An observer: it runs in the time the engine and trainer leave over.
    lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Background);
    let a = attach(target, choice)?;
    let mut traffic = Traffic::new(&a, o.rings);
    if traffic.rings().is_empty() {
        return Err(CliError::Other(
            "the segment has none of the selected rings".into(),
        ));
    }
    let start_ns = monotonic_now_ns();
    let started = Instant::now();
    let deadline = o.duration.map(|d| super::deadline_after(started, d));
    let mut printed = 0u64;
    let mut events = Vec::new();
    let mut pace = PollPace::default();
    let mut engine = EngineCheck::new();
    'outer: loop {
        events.clear();
        traffic.poll(&a.segment, monotonic_now_ns(), 4096, &mut events);
        let had_events = !events.is_empty();
        for e in &events {
            if o.json {
                if let Some(v) = e.to_json() {
                    println!("{v}");
                }
            } else if let Some(l) = line(e, start_ns) {
                println!("{l}");
            }
            if matches!(e, TrafficEvent::Record(_)) {
                printed += 1;
                if o.count.is_some_and(|c| printed >= c) {
                    break 'outer;
                }
            }
        }
        // Relaxed: a flag with no data behind it.
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if !o.follow && !had_events && traffic.caught_up(&a.segment) {
            break;
        }
        if let Some(pid) = engine.released_after_death(&a) {
            eprintln!(
                "traffic: the engine (pid {pid}) is gone; its mapping was closed so that a restarted engine can create the name again"
            );
            break;
        }
        // Often enough not to be lapped, without waking a busy machine when idle.
        std::thread::sleep(pace.after_poll(had_events));
    }
    let totals = traffic.totals();
    if o.json {
        let map: serde_json::Map<String, serde_json::Value> = totals
            .iter()
            .map(|(k, t)| (k.as_str().to_string(), serde_json::json!(t)))
            .collect();
        println!("{}", serde_json::json!({ "totals": map }));
    } else {
        println!();
        println!(
            "{:<8} {:>9} {:>12} {:>12} {:>12} {:>10} {:>11} {:>8}",
            "ring",
            "entries",
            "bytes",
            "lost bytes",
            "lost entries",
            "malformed",
            "unanswered",
            "orphans"
        );
        for (k, t) in &totals {
            println!(
                "{:<8} {:>9} {:>12} {:>12} {:>12} {:>10} {:>11} {:>8}",
                k.as_str(),
                t.entries,
                t.bytes,
                t.lost_bytes,
                if t.loss_events > t.lost_entries && t.lost_bytes > 0 {
                    format!("{}+?", t.lost_entries)
                } else {
                    t.lost_entries.to_string()
                },
                t.malformed,
                t.unanswered,
                t.orphans
            );
        }
        for (k, t) in &totals {
            if t.subscribed_before_attach > 0 {
                println!(
                    "{}: {} streamed (subscribed before attach), not orphans",
                    k.as_str(),
                    t.subscribed_before_attach
                );
            }
        }
    }
    Ok(())
}
