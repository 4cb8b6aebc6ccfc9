//! `demo`: a simulated engine and client in separate processes with the inspector
//! attached. Headless views (watch and traffic) until a window can be shown.

use std::io::Write as _;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Args;

use super::children::{ChildProcess, start_client, start_engine};
use super::{CliError, stop_flag};
use lrbc::attach::{Target, attach};
use lrbc::clock::MonotonicClock;
use lrbc::clock::monotonic_now_ns;
use lrbc::layout::LayoutChoice;
use lrbc_live::traffic::{RingSelection, Traffic, TrafficEvent};
use lrbc_live::watch::Watcher;
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
    /// Show the headless views even when a display is available.
    #[arg(long)]
    pub headless: bool,
}

pub fn run(args: &DemoArgs) -> Result<(), CliError> {
    let stop = stop_flag();
    let name = format!("LuckyEngine_{}", std::process::id());
    let mut engine = start_engine(&name, args.preset, &[])?;
    let mut client = start_client(
        &name,
        &[
            "--hz".into(),
            args.hz.to_string(),
            "--policy".into(),
            "balance".into(),
        ],
        Stdio::null(),
    )?;
    let display = crate::ui::display_available();
    eprintln!(
        "demo: engine pid {}, client pid {} at {} Hz, segment {name}; Ctrl-C stops all three",
        engine.pid(),
        client.pid(),
        args.hz
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
    let mut watcher = Watcher::new(
        attach(&Target::Shm(name.to_string()), LayoutChoice::Auto)?,
        MonotonicClock,
    );
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
        traffic.poll(&a.segment, monotonic_now_ns(), 4096, &mut events);
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
