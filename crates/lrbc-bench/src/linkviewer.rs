//! `lrbc-bench link-viewer` (hidden): a viewer of a served run for `lrbc-bench serve --link` and
//! the slow-link tests, run as a process of its own inside the link's network namespace.
//! It subscribes to every channel as it is advertised, measures each message's age
//! (arrival minus its log time on the wire, both Unix time on the one machine) over a
//! window, and prints one JSON line.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{Value, json};

use crate::shared::BenchError;
use lrbc_recording::format::Counts;
use lrbc_remote::view::Connection;
use lrbc_remote::view::wire::ServerMessage;

/// The server's status topic (`serve` sends one a second; its `capture` holds the
/// capture's counts, `ring_entries` among them).
const STATUS_TOPIC: &str = "/lrbc/serve/status";

#[derive(Debug, Clone, Args)]
pub struct LinkViewerArgs {
    /// The server: ws://127.0.0.1:PORT (loopback only).
    #[arg(long, value_parser = crate::shared::parse_server)]
    pub url: String,
    /// Seconds measured, after --skip-secs.
    #[arg(long, default_value = "30", value_parser = crate::shared::positive_seconds)]
    pub secs: Duration,
    /// Seconds received but not measured first (the link's queues fill).
    #[arg(long, default_value = "0", value_parser = crate::shared::seconds(0.0))]
    pub skip_secs: Duration,
}

/// What a message is, by its topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Frame,
    Image,
    Ring,
    Other,
}

const CLASSES: [(Class, &str); 4] = [
    (Class::Frame, "frame"),
    (Class::Image, "image"),
    (Class::Ring, "ring"),
    (Class::Other, "other"),
];

fn classify(topic: &str) -> Class {
    if topic == lrbc_recording::format::FRAME_TOPIC {
        Class::Frame
    } else if topic.starts_with("/lrbc/camera/") || topic.starts_with("/lrbc/stream/") {
        Class::Image
    } else if topic.starts_with("/lrbc/ring/") && !topic.ends_with("/header") {
        Class::Ring
    } else {
        Class::Other
    }
}

/// Messages of one class in the window.
#[derive(Debug, Default)]
struct Tally {
    count: u64,
    bytes: u64,
    /// Arrival minus log time, ms, of each message.
    ages_ms: Vec<f64>,
}

impl Tally {
    fn add(&mut self, bytes: usize, age_ms: f64) {
        self.count += 1;
        self.bytes += bytes as u64;
        self.ages_ms.push(age_ms);
    }

    fn json(&mut self, secs: f64) -> Value {
        self.ages_ms.sort_by(f64::total_cmp);
        let q = |q: f64| lrbc_live::stats::quantile(&self.ages_ms, q);
        json!({
            "count": self.count,
            "bytes": self.bytes,
            "per_sec": self.count as f64 / secs,
            "age_p50_ms": q(0.5),
            "age_p99_ms": q(0.99),
            "age_max_ms": self.ages_ms.last(),
        })
    }
}

/// A status message: when it arrived, its log time and the capture's counts then (None
/// when they are not readable).
struct Status {
    arrived: Instant,
    log_time: u64,
    capture: Option<Counts>,
    json: Value,
}

/// Everything the viewer keeps of its main connection.
#[derive(Default)]
struct Received {
    classes: [Tally; 4],
    all: Tally,
    frame_seq: Option<(u64, u64)>,
    /// Log times of every ring entry received (before the window too): the share is
    /// counted by log time, between two status messages.
    ring_log_times: Vec<u64>,
    /// The newest log time received: what was logged before it and did not come was
    /// lost (a server sends a connection's messages in order).
    newest_log_time: Option<u64>,
}

fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Only loopback: the viewer runs inside a namespace whose loopback is the link.
fn check_loopback(url: &str) -> Result<(), BenchError> {
    let host_port =
        lrbc_remote::view::client::host_port(url).map_err(|e| BenchError::Usage(e.to_string()))?;
    let host = host_port
        .rsplit_once(':')
        .map_or(host_port.as_str(), |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback());
    if loopback {
        Ok(())
    } else {
        Err(BenchError::Usage(format!(
            "the link viewer connects to loopback only, not {host}"
        )))
    }
}

fn connect(url: &str) -> Result<Connection, BenchError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Connection::connect(url, Duration::from_secs(5)) {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() >= deadline => return Err(BenchError::Other(e.to_string())),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The server's status messages on a connection of their own, subscribed to nothing
/// else: its queue never fills, so none is lost to the main connection's backlog (a
/// server that drops a slow client's oldest messages drops its statuses too). About a
/// kilobyte a second over the same link.
struct StatusReader {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Vec<Status>, Option<String>)>,
}

impl StatusReader {
    fn start(url: &str) -> Result<Self, BenchError> {
        let mut c = connect(url)?;
        let stop = Arc::new(AtomicBool::new(false));
        let st = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("link-status".into())
            .spawn(move || {
                let mut statuses = Vec::new();
                let mut subscribed = false;
                // Relaxed: a flag with no data behind it.
                while !st.load(Ordering::Relaxed) {
                    if !subscribed
                        && let Some(id) = (c.channels.values())
                            .find(|ch| ch.topic == STATUS_TOPIC)
                            .map(|ch| ch.id)
                    {
                        if let Err(e) = c.subscribe(&[id]) {
                            return (statuses, Some(e.to_string()));
                        }
                        subscribed = true;
                    }
                    let m = match c.next(Duration::from_millis(100)) {
                        Ok(Some(m)) => m,
                        Ok(None) => continue,
                        Err(e) => return (statuses, Some(e.to_string())),
                    };
                    if let ServerMessage::MessageData { log_time, data, .. } = m
                        && let Ok(json) = serde_json::from_slice::<Value>(&data)
                    {
                        statuses.push(Status {
                            arrived: Instant::now(),
                            log_time,
                            capture: Counts::from_json(&json["capture"]).ok(),
                            json,
                        });
                    }
                }
                (statuses, None)
            })
            .map_err(|e| BenchError::Other(format!("cannot start the status reader: {e}")))?;
        Ok(Self { stop, thread })
    }

    fn finish(self) -> (Vec<Status>, Option<String>) {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .unwrap_or_else(|_| (Vec::new(), Some("the status reader panicked".into())))
    }
}

pub fn run(args: &LinkViewerArgs) -> Result<(), BenchError> {
    check_loopback(&args.url)?;
    let status_reader = StatusReader::start(&args.url)?;
    let mut c = connect(&args.url)?;
    // Not niced: a viewer woken late on a busy machine would add its own delay to the
    // ages. It only counts (a few µs a message), so it is never the bottleneck.
    let start = Instant::now();
    let window_start = start + args.skip_secs;
    let end = window_start + args.secs;
    let mut subscribed = BTreeSet::new();
    let mut r = Received::default();
    let mut error = None;
    let mut measured_from = None;
    while Instant::now() < end {
        let new: Vec<u64> = (c.channels.keys())
            .filter(|id| !subscribed.contains(*id))
            .copied()
            .collect();
        if !new.is_empty() {
            subscribed.extend(new.iter().copied());
            if let Err(e) = c.subscribe(&new) {
                error = Some(e.to_string());
                break;
            }
        }
        let left = end.saturating_duration_since(Instant::now());
        let m = match c.next(left.min(Duration::from_millis(100))) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        };
        let ServerMessage::MessageData {
            subscription,
            log_time,
            data,
        } = m
        else {
            continue;
        };
        let (now, now_unix) = (Instant::now(), unix_now_ns());
        let Some(topic) = c.channel_of(subscription).map(|ch| ch.topic.as_str()) else {
            continue;
        };
        let class = classify(topic);
        if class == Class::Ring {
            r.ring_log_times.push(log_time);
        }
        r.newest_log_time = r.newest_log_time.max(Some(log_time));
        if now < window_start {
            continue;
        }
        measured_from.get_or_insert(now);
        let age_ms = (i128::from(now_unix) - i128::from(log_time)) as f64 / 1e6;
        r.all.add(data.len(), age_ms);
        r.classes[class as usize].add(data.len(), age_ms);
        if class == Class::Frame
            && let Ok(f) = lrbc::rpc::recording_fb::root_as_frame(&data)
        {
            let seq = f.frame_seq();
            let (first, _) = r.frame_seq.unwrap_or((seq, seq));
            r.frame_seq = Some((first, seq));
        }
    }
    let secs = measured_from
        .map_or(0.0, |t| t.elapsed().as_secs_f64())
        .max(1e-3);
    drop(c);
    let (statuses, status_error) = status_reader.finish();
    let mut v = report(&mut r, secs, &args.url, error);
    let bounds = share_bounds(&statuses, window_start, r.newest_log_time);
    v["ring_share"] = ring_share(&r.ring_log_times, bounds);
    v["captured_per_sec"] = captured_per_sec(bounds);
    // The statuses the share is counted between, and the last one.
    v["status_first"] = bounds.map_or(Value::Null, |(a, _)| a.json.clone());
    v["status_last"] = statuses.last().map_or(Value::Null, |s| s.json.clone());
    v["status_error"] = json!(status_error);
    println!("{v}");
    Ok(())
}

/// The two status messages the share is counted between: the last one that came before
/// the window (else the first), and the last one logged no later than the newest
/// message the main connection received (entries logged before that and not received
/// were lost, not late).
fn share_bounds(
    statuses: &[Status],
    window_start: Instant,
    newest_log_time: Option<u64>,
) -> Option<(&Status, &Status)> {
    let counted = || statuses.iter().filter(|s| s.capture.is_some());
    let first = (counted().rfind(|s| s.arrived < window_start)).or_else(|| counted().next())?;
    let newest = newest_log_time?;
    let last = counted().rfind(|s| s.log_time <= newest)?;
    (last.log_time > first.log_time).then_some((first, last))
}

/// Ring entries the server captured between two status messages, and those of them the
/// main connection received (by their log time): the capture counts an entry before
/// the status message that follows it is sent, and stamps the entry no later than that
/// status, so entries logged in (first, last] are exactly those the counts' difference
/// counts.
fn ring_share(ring_log_times: &[u64], bounds: Option<(&Status, &Status)>) -> Value {
    let Some((a, b)) = bounds else {
        return Value::Null;
    };
    let (t0, t1) = (a.log_time, b.log_time);
    let entries = |s: &Status| s.capture.map(|c| c.ring_entries);
    let (Some(n0), Some(n1)) = (entries(a), entries(b)) else {
        return Value::Null;
    };
    if n1 < n0 {
        return Value::Null;
    }
    let captured = n1 - n0;
    let delivered = (ring_log_times.iter())
        .filter(|&&t| t > t0 && t <= t1)
        .count() as u64;
    json!({
        "captured": captured,
        "delivered": delivered,
        "share": if captured == 0 { Value::Null } else { json!(delivered as f64 / captured as f64) },
        "secs": (t1 - t0) as f64 / 1e9,
        "from_log_time": t0,
        "to_log_time": t1,
    })
}

/// What serve's capture took per second between the two statuses: the frames, ring
/// entries and images it had to offer (its frame follower lets frames pass on a busy
/// machine).
fn captured_per_sec(bounds: Option<(&Status, &Status)>) -> Value {
    let Some((a, b)) = bounds else {
        return Value::Null;
    };
    let secs = b.log_time.saturating_sub(a.log_time) as f64 / 1e9;
    let rate = |count: fn(&Counts) -> u64| {
        json!(
            a.capture
                .zip(b.capture)
                .map(|(c0, c1)| count(&c1).saturating_sub(count(&c0)) as f64 / secs)
        )
    };
    json!({
        "frames": rate(|c| c.frames_recorded),
        "ring_entries": rate(|c| c.ring_entries),
        "images": rate(|c| c.images),
    })
}

fn report(r: &mut Received, secs: f64, url: &str, error: Option<String>) -> Value {
    let mut v = json!({
        "url": url,
        "secs": secs,
        "bytes_per_sec": r.all.bytes as f64 / secs,
        "all": r.all.json(secs),
    });
    for (class, name) in CLASSES {
        v[name] = r.classes[class as usize].json(secs);
    }
    let frames = r.classes[Class::Frame as usize].count;
    v["frame_seq_first"] = json!(r.frame_seq.map(|s| s.0));
    v["frame_seq_last"] = json!(r.frame_seq.map(|s| s.1));
    // Frames received of those published between the first and last received.
    v["frame_share"] = json!(
        r.frame_seq
            .map(|(a, b)| frames as f64 / (b.saturating_sub(a) + 1) as f64)
    );
    v["error"] = json!(error);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_fall_into_classes() {
        assert_eq!(classify("/lrbc/frame"), Class::Frame);
        assert_eq!(classify("/lrbc/camera/env3"), Class::Image);
        assert_eq!(classify("/lrbc/stream/env0/camera"), Class::Image);
        assert_eq!(classify("/lrbc/ring/cmd_c2s"), Class::Ring);
        assert_eq!(classify("/lrbc/ring/cmd_c2s/header"), Class::Other);
        assert_eq!(classify("/lrbc/serve/status"), Class::Other);
        assert_eq!(classify("/lrbc/ring_events"), Class::Other);
    }

    #[test]
    fn the_ring_share_counts_entries_logged_between_two_statuses() {
        let t = Instant::now();
        let window = t + Duration::from_secs(10);
        // A status logged at `log_time` arrives at `log_time` seconds.
        let status = |log_time: u64, n| Status {
            arrived: t + Duration::from_secs(log_time),
            log_time,
            capture: Some(Counts {
                ring_entries: n,
                ..Counts::default()
            }),
            json: Value::Null,
        };
        let statuses = [
            status(5, 99),
            status(10, 100),
            status(15, 103),
            status(20, 105),
        ];
        let ring = [5, 10, 11, 15, 19, 20, 21];
        let share = |statuses: &[Status], newest| {
            let s = ring_share(&ring, share_bounds(statuses, window, newest));
            (s["captured"].as_u64(), s["delivered"].as_u64())
        };
        // From the last status before the window to the last one.
        assert_eq!(share(&statuses, Some(21)), (Some(6), Some(5)));
        // Only up to what the main connection got.
        assert_eq!(share(&statuses, Some(17)), (Some(4), Some(3)));
        // Without a status before the window: from the first.
        assert_eq!(share(&statuses[2..], Some(21)), (Some(2), Some(2)));
        assert_eq!(share(&statuses[..1], Some(21)), (None, None));
        assert_eq!(share(&statuses, None), (None, None));
    }

    #[test]
    fn only_loopback_urls_are_taken() {
        assert!(check_loopback("ws://127.0.0.1:8765").is_ok());
        assert!(check_loopback("ws://[::1]:8765").is_ok());
        assert!(check_loopback("ws://localhost:8765").is_ok());
        assert!(check_loopback("ws://10.0.0.1:8765").is_err());
    }
}
