//! `demo`: a simulated engine and client in separate processes with the inspector
//! attached, the engine planting a few faults for the detector to find (unless asked
//! not to), the client stepping as an on-policy trainer does: rollouts, each followed by
//! an update during which the engine waits. Headless views (watch, traffic and events)
//! until a window can be shown.

use std::io::Write as _;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Args;

use super::{CliError, stop_flag};
use lrbc::attach::{Target, attach};
use lrbc::clock::MonotonicClock;
use lrbc::clock::monotonic_now_ns;
use lrbc::layout::LayoutChoice;
use lrbc::sync::lock;
use lrbc_live::detect::{DEFAULT_EVENTS_KEPT, DetectSettings, Diagnosis};
use lrbc_live::traffic::{RingSelection, Traffic, TrafficEvent};
use lrbc_live::watch::AttachmentWatch;
use lrbc_sim::children::{ChildProcess, start_client, start_engine};
use lrbc_sim::engine::Preset;

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Sizes from the seed's examples.
    #[arg(long, value_parser = super::values::preset(), default_value = "cams64")]
    pub preset: Preset,
    /// The client's pace, steps per second.
    #[arg(
        long,
        value_name = "F",
        default_value = "500",
        allow_negative_numbers = true,
        value_parser = super::args::parse_hz
    )]
    pub hz: f64,
    /// Steps in each of the client's rollouts (`sim client --rollout`); it pauses
    /// --update after each, as an on-policy trainer updating its policy does.
    #[arg(
        long,
        value_name = "N",
        default_value = "64",
        value_parser = super::sim::parse_rollout
    )]
    pub rollout: u64,
    /// How long each of the client's updates lasts (`sim client --update`): seconds,
    /// or with a unit (500ms), from 0 to 3600 s.
    #[arg(
        long,
        value_name = "SECS",
        default_value = "0.3",
        allow_negative_numbers = true,
        value_parser = super::sim::parse_update
    )]
    pub update: Duration,
    /// A client that steps without pauses (no rollouts, no updates): frames come at
    /// --hz, and the demo's faults about 3.3 times sooner.
    #[arg(long, conflicts_with_all = ["rollout", "update"])]
    pub no_updates: bool,
    /// Show the headless views even when a display is available.
    #[arg(long)]
    pub headless: bool,
    /// Faults the engine plants (`sim engine --plant`; repeat for more) instead of the
    /// demo's: a NaN in an observation at step 1500, an infinite action at 3000, a
    /// done burst at 4500 and a 1 s stall at 6000.
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true, value_parser = lrbc_sim::engine::Plant::parse)]
    pub plant: Vec<lrbc_sim::engine::Plant>,
    /// Plant no fault.
    #[arg(long, conflicts_with = "plant")]
    pub no_faults: bool,
}

/// The faults the demo's engine plants unless told otherwise. With the demo's defaults
/// (500 Hz, rollouts of 64 frames, 0.3 s updates: about 150 frames a second) they come
/// at about 10, 20, 30 and 40 s.
const DEMO_PLANTS: [&str; 4] = [
    "nan@1500:env=3,channel=obs,index=2",
    "inf@3000:env=7,channel=act,index=1",
    "done-burst@4500",
    "stall@6000:secs=1",
];

pub fn run(args: &DemoArgs) -> Result<(), CliError> {
    let stop = stop_flag();
    let name = format!("LuckyEngine_{}", std::process::id());
    let plants: Vec<String> = if args.no_faults {
        Vec::new()
    } else if args.plant.is_empty() {
        DEMO_PLANTS.iter().map(|p| (*p).to_string()).collect()
    } else {
        args.plant.iter().map(ToString::to_string).collect()
    };
    let plant_args: Vec<&str> = plants
        .iter()
        .flat_map(|p| ["--plant", p.as_str()])
        .collect();
    let mut engine = start_engine(&name, args.preset, &plant_args).map_err(child_error)?;
    let mut client_args: Vec<String> = vec![
        "--hz".into(),
        args.hz.to_string(),
        "--policy".into(),
        "balance".into(),
    ];
    let pace = if args.no_updates {
        format!("{} Hz", args.hz)
    } else {
        // Seconds as a decimal, which --update reads back to the nanosecond.
        let update_secs = args.update.as_secs_f64();
        client_args.extend([
            "--rollout".into(),
            args.rollout.to_string(),
            "--update".into(),
            update_secs.to_string(),
        ]);
        format!(
            "{} Hz in rollouts of {} frames with {update_secs} s updates",
            args.hz, args.rollout
        )
    };
    let mut client = start_client(&name, &client_args, Stdio::null()).map_err(child_error)?;
    let display = crate::ui::display_available();
    eprintln!(
        "demo: engine pid {}, client pid {} at {pace}, segment {name}; Ctrl-C stops all three",
        engine.pid(),
        client.pid(),
    );
    let result = if display && !args.headless {
        eprintln!(
            "demo: opening the inspector window on {name} (close it or press Ctrl-C to stop)"
        );
        match crate::ui::run_window_until(
            Some(Target::Shm(name.clone())),
            LayoutChoice::Auto,
            Some(Arc::clone(&stop)),
            crate::ui::settings::Overrides::default(),
        ) {
            Ok(()) => Ok(()),
            Err(e) => {
                eprintln!("demo: {e}; showing the headless views instead");
                headless(&name, &stop, &mut engine, &mut client)
            }
        }
    } else {
        if !display {
            eprintln!(
                "demo: no display (DISPLAY and WAYLAND_DISPLAY are unset): showing the headless views"
            );
        }
        headless(&name, &stop, &mut engine, &mut client)
    };
    client.stop(Duration::from_secs(5));
    engine.stop(Duration::from_secs(5));
    let gone = !lrbc::segment::Location::shm(&name).exists();
    eprintln!(
        "demo: stopped; segment {name} {}",
        if gone {
            "removed"
        } else {
            "still present (the engine did not clean up)"
        }
    );
    result
}

/// The headless views: a watch line every second, every traffic entry as it happens.
fn headless(
    name: &str,
    stop: &std::sync::atomic::AtomicBool,
    engine: &mut ChildProcess,
    client: &mut ChildProcess,
) -> Result<(), CliError> {
    let a = attach(&Target::Shm(name.to_string()), LayoutChoice::Auto)?;
    let mut traffic = Traffic::new(&a, RingSelection::All);
    let mut watcher = AttachmentWatch::new(
        attach(&Target::Shm(name.to_string()), LayoutChoice::Auto)?,
        MonotonicClock,
    );
    // The detector, told the rings' faults and the state as they are read here.
    let diagnosis = Diagnosis::start(&a, DetectSettings::default(), None, DEFAULT_EVENTS_KEPT)?;
    let feed = diagnosis.feed();
    let mut cursor = lock(diagnosis.log()).cursor_now();
    let mut forms = Vec::new();
    let mut printer = super::events::Printer::new(false, monotonic_now_ns(), Vec::new());
    let start = monotonic_now_ns();
    let mut next_watch = Instant::now() + Duration::from_secs(1);
    let mut events = Vec::new();
    let mut out = std::io::stdout().lock();
    // A closed stdout (`demo | head`) ends the demo cleanly, children and segment included.
    macro_rules! line {
        ($($arg:tt)*) => {
            if writeln!(out, $($arg)*).and_then(|()| out.flush()).is_err() {
                return Ok(());
            }
        };
    }
    // Relaxed: a flag with no data behind it.
    while !stop.load(Ordering::Relaxed) {
        if let Some(code) = engine.exited() {
            return Err(CliError::Other(format!(
                "the engine exited unexpectedly (code {code})"
            )));
        }
        if let Some(code) = client.exited() {
            return Err(CliError::Other(format!(
                "the client exited unexpectedly (code {code})"
            )));
        }
        events.clear();
        let now = monotonic_now_ns();
        traffic.poll(&a.segment, now, 4096, &mut events);
        for e in &events {
            feed.traffic(e, now);
        }
        forms.clear();
        cursor = lock(diagnosis.log()).updates_since(cursor, &mut forms).0;
        printer.take(std::mem::take(&mut forms), Instant::now());
        for e in &events {
            if let TrafficEvent::Record(r) = e {
                line!(
                    "traffic {:+9.3}s {:<8} {:>12} {:<24} {:>7} B {}",
                    (r.seen_ns.saturating_sub(start)) as f64 / 1e9,
                    r.ring.as_str(),
                    r.correlation_id,
                    r.method,
                    r.payload.len(),
                    r.error.as_deref().unwrap_or("ok")
                );
            } else if let Some(v) = e.to_json() {
                line!("traffic {v}");
            }
        }
        if Instant::now() >= next_watch {
            next_watch += Duration::from_secs(1);
            let r = watcher.tick();
            feed.state(r.state, r.note.as_deref(), monotonic_now_ns());
            line!(
                "watch   {:<11} frame_seq={} action_seq={} frame_hz={:.0} lag={}",
                r.state.as_str(),
                r.frame_seq,
                r.action_seq,
                r.frame_hz.unwrap_or(0.0),
                r.lag
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// A child that did not start or come up, as the command's error.
fn child_error(e: lrbc_sim::children::ChildError) -> CliError {
    CliError::Other(e.0)
}
