//! `lrbc-bench`: the benchmarks that run in real time or across processes, against the
//! lrbc-inspector built beside it (figures in `docs/benchmarks.md`; never timed tests). Not
//! shipped.
//!
//! It uses the crates it measures. It uses the app's library (`lrbc_inspector`) only
//! where the app is what is measured: the window's passes and its opening of a
//! recording (`uibench`, `openbench`, the headless app that `sampler` and `soak`
//! observe, with its `WindowArgs`), and the compression options of `record` that
//! `export` takes (`CompressionArgs`).
//!
//! Modules, each using only those above it:
//! - `shared`: the benchmarks' error, argument values, Ctrl-C and sizes
//! - `fixtures`: a run of an engine and a client, and a tallying viewer
//! - `roundtrip`: `round-trip`: lock-step round trips between processes
//! - `observers`: an observer switched off and on, and what it costs the engine's rate
//! - `linkbench`: `serve --link`: `serve` and a viewer behind rate-limited links
//! - `linkviewer`: the viewer process of the slow-link runs
//! - `uibench`: `ui` and `sampler`: the window's frame time (a pass without a window), the
//!   sampler's share and cost
//! - `recbench`: `record`: its cost, frames kept, compression
//! - `servebench`: `serve`: frames delivered, latency, cost
//! - `pollerbench`: `poller`: `watch` against the numpy poller
//! - `rounds`: the run `detect` and `episodes` measure, observers attached together in rounds
//! - `detectbench`: `detect`: the detector's cost and what it finds
//! - `episodesbench`: `episodes`: the cost of counting episodes, export rates
//! - `soak`: `soak`: resident memory over a long run
//! - `exportbench`: `export`: rows/s of the export
//! - `comparebench`: `compare`: frames/s and peak memory of two large recordings compared
//! - `openbench`: `open`: time to open and scrub a large recording

mod comparebench;
mod detectbench;
mod episodesbench;
mod exportbench;
mod fixtures;
mod linkbench;
mod linkviewer;
mod observers;
mod openbench;
mod pollerbench;
mod recbench;
mod rounds;
mod roundtrip;
mod servebench;
mod shared;
mod soak;
mod uibench;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

use crate::shared::BenchError;
use lrbc::clock::monotonic_now_ns;
use lrbc::layout::{LayoutChoice, RegionKind};
use lrbc::rings::v1::{V1Consumer, V1Producer};
use lrbc_live::traffic::{PollPace, RingSelection, Traffic, TrafficEvent};
use lrbc_sim::bench::{RingSegment, sample_envelopes};
use uibench::SamplerPart;

/// Benchmarks that run in real time or across processes (figures in docs/benchmarks.md).
#[derive(Debug, Parser)]
#[command(name = "lrbc-bench", version)]
struct Cli {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum BenchCommand {
    /// Lock-step round trips between an engine and a client process: the transport
    /// alone, with dynamics, and with observers attached.
    RoundTrip(roundtrip::RoundtripArgs),
    /// The highest producer rate a traffic reader follows on a 512 KiB ring without loss.
    Ring {
        /// Seconds per rate.
        #[arg(long, default_value = "1", value_parser = crate::shared::seconds_f64)]
        secs: f64,
    },
    /// UI frame CPU time at train4096 with every panel open.
    Ui {
        /// Frames measured.
        #[arg(long, default_value_t = 600)]
        frames: usize,
        /// Only this panel (header, counters, envs, traffic, cameras, rpc) instead of all.
        #[arg(long)]
        pane: Option<String>,
    },
    /// The sampler's share of frames, and the engine's rate with watch or the window attached.
    Sampler {
        /// Seconds per pace.
        #[arg(long, default_value = "5", value_parser = crate::shared::seconds_f64)]
        secs: f64,
        /// Seconds of one run per observer for the engine's rate (switched off and on).
        #[arg(long, default_value = "90", value_parser = crate::shared::seconds_f64)]
        rate_secs: f64,
        /// Only the share of frames, or only the engine's rate.
        #[arg(long, value_enum)]
        only: Option<SamplerPart>,
        /// How long each observer is switched on or off at a time for the engine's rate
        /// (work that falls due while it is off runs in the 20 ms after it goes on,
        /// which the rate leaves out: longer windows count more of it).
        #[arg(long, default_value = "0.1", value_parser = crate::shared::seconds_f64)]
        window: f64,
    },
    /// What `record` costs the engine's unpaced rate, and the share of frames it keeps
    /// (train4096 unpaced; cams64 at 1 kHz with images).
    Record {
        /// Seconds of each recording for the share of frames.
        #[arg(long, default_value = "10", value_parser = crate::shared::seconds_f64)]
        secs: f64,
        /// Seconds of the run in which the recorder is switched off and on.
        #[arg(long, default_value = "90", value_parser = crate::shared::seconds_f64)]
        rate_secs: f64,
    },
    /// `serve` with loopback viewers: the share of frames delivered and their latency
    /// (cams64 with images, train4096, at 1 kHz, with and without limits), a viewer that
    /// stops reading, and what serving costs the engine's unpaced rate.
    Serve {
        /// Seconds of each share measurement.
        #[arg(long, default_value = "10", value_parser = crate::shared::seconds_f64)]
        secs: f64,
        /// Seconds of the run in which `serve` is switched off and on.
        #[arg(long, default_value = "90", value_parser = crate::shared::seconds_f64)]
        rate_secs: f64,
        /// Seconds a viewer stops reading.
        #[arg(long, default_value = "60", value_parser = crate::shared::seconds_f64)]
        stall_secs: f64,
        /// Instead of the loopback rows: `serve` and a viewer behind links of these rates
        /// (a list: 2mbit,5mbit,20mbit,100mbit; a plain number is Mbit/s), for train4096
        /// and for cams64 with images, at 1 kHz. Needs Linux, root, `ip` and `tc`.
        #[arg(long, value_name = "RATES", value_delimiter = ',', value_parser = linkbench::parse_rate)]
        link: Vec<u64>,
        /// Seconds of each link row; the second half is measured.
        #[arg(long, value_name = "SECS", default_value = "30", value_parser = crate::shared::seconds_f64)]
        link_secs: f64,
        /// Another lrbc-inspector whose `serve` is measured in the same run, each row next
        /// to this one's, with their ratio.
        #[arg(long, value_name = "BINARY", requires = "link")]
        against: Option<std::path::PathBuf>,
    },
    /// A viewer of a served run for `lrbc-bench serve --link`: subscribes to every channel,
    /// prints one JSON line of what it received and how late.
    #[command(hide = true)]
    LinkViewer(linkviewer::LinkViewerArgs),
    /// `watch` against the numpy poller a user would write, interleaved in one run: frames
    /// lost, CPU and wake-ups per second (cams64 and train4096 at 250 Hz, 1 kHz, 2 kHz).
    Poller(pollerbench::PollerBenchArgs),
    /// The detector (`events`): its CPU beside `watch --no-events` and the numpy anchor a
    /// user would write (train4096 and cams64 at 1 kHz), the engine's rate with it
    /// attached, planted one-frame NaNs found (on a quiet or a loaded machine), and the
    /// events it prints over a clean run.
    Detect(detectbench::DetectBenchArgs),
    /// Episodes: the follower's CPU with the accounting beside the same follower without
    /// it (train4096 at 1 kHz), the engine's rate with `episodes` attached, and rows/s of
    /// `export --episodes` and `export --lerobot` on a large synthetic recording.
    Episodes(episodesbench::EpisodesBenchArgs),
    /// Resident memory of `traffic`, the app and (with $DISPLAY) the window over a long
    /// run with command traffic: flat once their memory budgets are full.
    Soak(soak::SoakArgs),
    /// Rows/s and MB/s of `export` on a large synthetic recording (1 GiB by default).
    Export(exportbench::ExportBenchArgs),
    /// `compare` of two large synthetic recordings (1 GiB each by default): frames/s and
    /// peak resident memory, beside reading the two files.
    Compare(comparebench::CompareBenchArgs),
    /// `open` of a large recording (1 GiB by default): time to the first frame drawn
    /// and to a scrub to any time.
    Open(openbench::OpenBenchArgs),
    /// The app with every panel, driven without a window as eframe would drive it (a
    /// pass whenever a repaint is asked for; no raster), until Ctrl-C: an observer for
    /// `lrbc-bench sampler`.
    #[command(hide = true)]
    HeadlessApp {
        /// Segment name in /dev/shm.
        #[arg(long)]
        shm: String,
        #[command(flatten)]
        window: lrbc_inspector::cli::WindowArgs,
        /// Print "memory BYTES" (what the window's data uses of its budget) on stdout
        /// this often.
        #[arg(long, value_name = "SECS", value_parser = crate::shared::seconds_f64)]
        report_memory: Option<f64>,
    },
}

/// Runs one producer rate for `secs`; returns (produced, seen, lost bytes, malformed).
fn read_at(rate: f64, secs: f64) -> Result<(u64, u64, u64, u64), BenchError> {
    let name = format!("lrbc-bench-ring-{}-{}", std::process::id(), rate as u64);
    let seg = RingSegment::create(&name, 512 * 1024)?;
    let rw = Arc::clone(&seg.rw);
    let attached = lrbc::attach::Attached::open_at(&seg.location, Some(name), LayoutChoice::Auto)?;
    let ring = *attached
        .geometry
        .ring(RegionKind::CmdC2s)
        .ok_or_else(|| BenchError::Other("no ring".into()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let produced = Arc::new(AtomicU64::new(0));
    let samples = sample_envelopes();
    let producer = {
        let (rw, stop, produced) = (Arc::clone(&rw), Arc::clone(&stop), Arc::clone(&produced));
        std::thread::Builder::new()
            .name("bench-producer".into())
            .spawn(move || {
                let mut prod = V1Producer::new(&*rw, ring);
                let mut cons = V1Consumer::new(&*rw, ring);
                let mut buf = Vec::new();
                let start = Instant::now();
                let mut sent = 0u64;
                // Relaxed: a flag with no data behind it.
                while !stop.load(Ordering::Relaxed) {
                    let due = (start.elapsed().as_secs_f64() * rate) as u64;
                    while sent < due {
                        let bytes = &samples[(sent % 3) as usize].1;
                        if prod.try_push(&*rw, bytes).is_err() {
                            break;
                        }
                        sent += 1;
                        // The engine's consumer keeps up, as a real one does.
                        while let Ok(Some(_)) = cons.try_pop(&*rw, &mut buf) {}
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
                // Relaxed: read after join.
                produced.store(sent, Ordering::Relaxed);
            })
            .map_err(|e| BenchError::Other(e.to_string()))?
    };
    let mut traffic = Traffic::new(&attached, RingSelection::Cmd);
    let mut events = Vec::new();
    let (mut seen, mut lost, mut malformed) = (0u64, 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tally = |events: &[TrafficEvent]| {
        for e in events {
            match e {
                TrafficEvent::Record(_) => seen += 1,
                TrafficEvent::Lost { lost_bytes, .. } => lost += lost_bytes,
                TrafficEvent::Malformed { .. } => malformed += 1,
                _ => {}
            }
        }
    };
    // The reader's loop of `traffic --follow`, with its pace.
    let mut pace = PollPace::default();
    while Instant::now() < deadline {
        events.clear();
        traffic.poll(&attached.segment, monotonic_now_ns(), 4096, &mut events);
        tally(&events);
        std::thread::sleep(pace.after_poll(!events.is_empty()));
    }
    // Relaxed: a flag with no data behind it.
    stop.store(true, Ordering::Relaxed);
    producer
        .join()
        .map_err(|_| BenchError::Other("the producer thread panicked".into()))?;
    // Everything published is reported once the ring has been quiet a moment (the last
    // consumed entries wait for that, see docs/rings.md).
    let drain_until = Instant::now() + Duration::from_secs(5);
    while !traffic.caught_up(&attached.segment) && Instant::now() < drain_until {
        events.clear();
        traffic.poll(
            &attached.segment,
            monotonic_now_ns(),
            usize::MAX,
            &mut events,
        );
        tally(&events);
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(seg);
    // Relaxed: the producer thread has been joined.
    Ok((produced.load(Ordering::Relaxed), seen, lost, malformed))
}

fn ring(secs: f64) -> Result<(), BenchError> {
    println!(
        "lrbc-bench ring: a producer (with its consumer keeping up) against a `traffic --follow` reader, 512 KiB ring, {secs} s per rate"
    );
    println!(
        "{:>14} {:>12} {:>12} {:>14} {:>10}",
        "target/s", "produced", "seen", "lost bytes", "lossless"
    );
    let mut best = 0.0;
    for rate in [
        10_000.0,
        50_000.0,
        100_000.0,
        200_000.0,
        400_000.0,
        800_000.0,
        1_600_000.0,
        3_200_000.0,
    ] {
        let (produced, seen, lost, malformed) = read_at(rate, secs)?;
        let lossless = lost == 0 && malformed == 0 && seen == produced;
        println!(
            "{rate:>14.0} {produced:>12} {seen:>12} {lost:>14} {:>10}",
            if lossless { "yes" } else { "no" }
        );
        if lossless {
            best = (produced as f64 / secs).max(best);
        }
    }
    println!("highest producer rate followed without loss: {best:.0} envelopes/s");
    Ok(())
}

fn main() {
    lrbc_platform::keep_large_allocations_mapped();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    lrbc_platform::default_sigpipe();
    // The hidden commands are this program's own processes (observers, the link's
    // viewer), started by a benchmark or a test that has the binaries it needs.
    let own_process = matches!(
        cli.command,
        BenchCommand::LinkViewer(_) | BenchCommand::HeadlessApp { .. }
    );
    let ready = if own_process {
        Ok(())
    } else {
        build_inspector()
    };
    let code = match ready.and_then(|()| run(&cli.command)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}

/// Under `cargo run`, builds the lrbc-inspector binary that the benchmarks run, with this
/// program's profile, beside this one; run directly, the binary must be there.
fn build_inspector() -> Result<(), BenchError> {
    if std::env::var_os("CARGO").is_none() {
        return Ok(());
    }
    let mut command = lrbc_testkit::cargo::cargo();
    command.args([
        "build",
        "--quiet",
        "-p",
        "lrbc-inspector",
        "--bin",
        "lrbc-inspector",
    ]);
    if !cfg!(debug_assertions) {
        command.arg("--release");
    }
    let status = command
        .status()
        .map_err(|e| BenchError::Other(format!("cargo build of lrbc-inspector: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(BenchError::Other(format!(
            "cargo build of lrbc-inspector failed ({status})"
        )))
    }
}

pub fn run(cmd: &BenchCommand) -> Result<(), BenchError> {
    match cmd {
        BenchCommand::RoundTrip(args) => roundtrip::run(args),
        BenchCommand::Ring { secs } => ring(secs.max(0.1)),
        BenchCommand::Ui { frames, pane } => uibench::ui((*frames).max(10), pane.as_deref()),
        BenchCommand::Sampler {
            secs,
            rate_secs,
            only,
            window,
        } => uibench::sampler(
            secs.max(0.5),
            rate_secs.max(2.0),
            window.clamp(0.05, 10.0),
            *only,
        ),
        BenchCommand::HeadlessApp {
            shm,
            window,
            report_memory,
        } => uibench::headless_app(shm, window.overrides(), *report_memory),
        BenchCommand::Soak(args) => soak::run(args),
        BenchCommand::Poller(args) => pollerbench::run(args),
        BenchCommand::Detect(args) => detectbench::run(args),
        BenchCommand::Episodes(args) => episodesbench::run(args),
        BenchCommand::Record { secs, rate_secs } => recbench::run(*secs, *rate_secs),
        BenchCommand::Serve {
            secs,
            rate_secs,
            stall_secs,
            link,
            link_secs,
            against,
        } => servebench::run(
            *secs,
            *rate_secs,
            *stall_secs,
            (!link.is_empty()).then(|| linkbench::Links {
                rates_kbit: link,
                secs: link_secs.max(2.0),
                against: against.as_deref(),
            }),
        ),
        BenchCommand::LinkViewer(args) => linkviewer::run(args),
        BenchCommand::Export(args) => exportbench::bench(args),
        BenchCommand::Compare(args) => comparebench::run(args),
        BenchCommand::Open(args) => openbench::run(args),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::Cli;

    #[test]
    fn bad_values_are_refused_as_usage_errors() {
        let mut cases: Vec<Vec<&str>> = Vec::new();
        for v in ["1e300", "-1", "NaN"] {
            cases.push(vec!["ring", "--secs", v]);
            cases.push(vec!["sampler", "--rate-secs", v]);
            cases.push(vec!["poller", "--secs", v]);
            cases.push(vec!["poller", "--hz", v]);
            cases.push(vec!["round-trip", "--steps", v]);
            for option in ["--secs", "--hz", "--rate-secs", "--window", "--clean-secs"] {
                cases.push(vec!["detect", option, v]);
            }
            for option in ["--secs", "--hz", "--rate-secs"] {
                cases.push(vec!["episodes", option, v]);
            }
        }
        cases.push(vec!["poller", "--rounds", "0"]);
        cases.push(vec!["detect", "--rounds", "0"]);
        cases.push(vec!["detect", "--nans", "0"]);
        cases.push(vec!["detect", "--seed", "-1"]);
        cases.push(vec!["detect", "--only", "cpu,nan"]);
        cases.push(vec!["episodes", "--size-mib", "0"]);
        cases.push(vec!["episodes", "--only", "cpu,nan"]);
        cases.push(vec!["decode"]);
        for args in cases {
            let argv = std::iter::once("lrbc-bench").chain(args.iter().copied());
            let Err(e) = Cli::try_parse_from(argv) else {
                panic!("{args:?} parsed");
            };
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        }
        // And good ones parse.
        assert!(Cli::try_parse_from(["lrbc-bench", "ring", "--secs", "2"]).is_ok());
        assert!(
            Cli::try_parse_from([
                "lrbc-bench",
                "detect",
                "--only",
                "cpu,false",
                "--clean-secs",
                "2min",
                "--busy"
            ])
            .is_ok()
        );
        assert!(
            Cli::try_parse_from([
                "lrbc-bench",
                "episodes",
                "--only",
                "export",
                "--size-mib",
                "64"
            ])
            .is_ok()
        );
    }
}
