//! `lrbc-bench episodes`: what counting every env's episodes costs, against an engine and
//! a client in separate processes: the follower's CPU with the accounting (`watch
//! --no-events`) beside the same follower without it (`watch --no-events
//! --no-episodes`) and with the detector too (`watch`, as the window runs them), attached
//! together over the same seconds of one run; the engine's rate with `episodes` switched
//! on and off (`observers`); and the rows per second of `export --episodes` and `export
//! --lerobot` on a large synthetic recording.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::observers::{Observer, observer_cost, print_cost};
use crate::rounds::{RunArgs, cpu_of_rounds, in_rounds, run_together};
use crate::shared::BenchError;
use crate::shared::{export_error, mb};
use lrbc_inspector::cli::watch::WatchLine;
use lrbc_recording::export::{self, ExportFormat, LeRobotOptions, synthetic};
use lrbc_sim::children::inspector_exe;
use lrbc_sim::engine::Preset;

/// Arguments of `lrbc-bench episodes`.
#[derive(Debug, Clone, clap::Args)]
pub struct EpisodesBenchArgs {
    /// The run measured: the CPU rounds, the client's pace and the engine's rate with
    /// `episodes` switched off and on.
    #[command(flatten)]
    pub run: RunArgs,
    /// Size of the synthetic recording of the export measure, MiB.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub size_mib: u64,
    /// Exports measured of each kind (the median is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub export_rounds: u32,
    /// Only these measures (comma-separated): cpu, ratio, export.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<EpisodesPart>,
}

/// A measure of `lrbc-bench episodes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EpisodesPart {
    Cpu,
    Ratio,
    Export,
}

fn watch(name: &str, secs: f64, extra: &[&str]) -> Result<Command, BenchError> {
    let mut c = Command::new(inspector_exe()?);
    c.args(["watch", "--shm", name, "--count", "1", "--json"])
        .args(["--interval", &secs.to_string()])
        .args(extra);
    Ok(c)
}

fn cpu_table(args: &EpisodesBenchArgs) -> Result<(), BenchError> {
    let observers: [(&str, &[&str]); 3] = [
        (
            "watch --no-events --no-episodes",
            &["--no-events", "--no-episodes"],
        ),
        ("watch --no-events (episodes)", &["--no-events"]),
        ("watch (detector and episodes)", &[]),
    ];
    println!(
        "CPU, train4096 at {} Hz: three `watch` attached together to one engine and client, \
         {} rounds of {} s",
        args.run.hz, args.run.rounds, args.run.secs
    );
    println!(
        "  {:<34} {:>8}  {:<24} {:>9} {:>10} {:>11}",
        "observer", "CPU", "per round", "seen", "episodes", "incomplete"
    );
    let mut cpu: [Vec<f64>; 3] = Default::default();
    let mut seen = [0u64; 3];
    let mut episodes = [0u64; 3];
    let mut incomplete = [0u64; 3];
    in_rounds(
        Preset::Train4096,
        args.run.hz,
        "episodes-cpu",
        args.run.rounds,
        |name| {
            let (results, ()) = run_together(
                observers
                    .map(|(what, extra)| ("bench-watch", watch(name, args.run.secs, extra), what)),
                || (),
            );
            let results = results
                .into_iter()
                .collect::<Result<Vec<_>, BenchError>>()?;
            for (k, (v, usage)) in results.iter().enumerate() {
                let line = WatchLine::from_json(v)?;
                cpu[k].push(usage.cpu_secs / args.run.secs);
                seen[k] += line.frames.seen;
                // `--no-episodes`: no episodes counted.
                if let Some(e) = line.episodes {
                    episodes[k] += e.ended;
                    incomplete[k] += e.incomplete;
                }
            }
            Ok(())
        },
    )?;
    for (k, (label, _)) in observers.iter().enumerate() {
        let (mean, per) = cpu_of_rounds(&cpu[k]);
        let (e, i) = if k == 0 {
            ("–".to_string(), "–".to_string())
        } else {
            (episodes[k].to_string(), incomplete[k].to_string())
        };
        println!(
            "  {label:<34} {:>6.1} %  {:<24} {:>9} {e:>10} {i:>11}",
            100.0 * mean,
            per,
            seen[k]
        );
    }
    println!(
        "  (CPU: share of one core of the whole process over its run, its start included, \
         the mean of the rounds; incomplete: episodes that lack a frame or began before the \
         attach, of those ended)"
    );
    Ok(())
}

fn ratio_table(args: &EpisodesBenchArgs) -> Result<(), BenchError> {
    println!(
        "engine's lock-step rate, train4096 at {} Hz (goal: at least 0.99); `episodes` \
         switched off and on in windows of 0.5 s, blocks of off-on-on-off, {:.0} s of one run:",
        args.run.hz, args.run.rate_secs
    );
    let c = observer_cost(
        Observer::Episodes,
        Some(args.run.hz),
        args.run.rate_secs.max(2.0),
        Duration::from_secs_f64(0.5),
        "episodes-ratio",
    )?;
    print_cost(Observer::Episodes, &c);
    Ok(())
}

fn export_table(args: &EpisodesBenchArgs) -> Result<(), BenchError> {
    let dir = std::env::temp_dir();
    let input = dir.join(format!("lrbc-bench-episodes-{}.mcap", std::process::id()));
    // A thousand frames, written and compressed as the recorder does, size the file.
    let probe = synthetic::Spec::of(64, 32, 8, 1000);
    let (written, _) = synthetic::write(&probe, std::io::Cursor::new(Vec::new()))
        .map_err(|e| BenchError::Other(e.to_string()))?;
    let per_frame = (written.into_inner().len() as u64 / probe.frames).max(1);
    let spec = synthetic::Spec {
        frames: ((args.size_mib << 20) / per_frame).max(1),
        ..probe
    };
    let file = std::fs::File::create(&input)
        .map_err(|e| BenchError::Other(format!("{}: {e}", input.display())))?;
    synthetic::write(&spec, std::io::BufWriter::with_capacity(1 << 20, file))
        .map_err(|e| BenchError::Other(format!("{}: {e}", input.display())))?;
    let in_bytes = std::fs::metadata(&input).map_or(0, |m| m.len());
    println!(
        "export of a synthetic recording: {:.0} MB ({:.2} GiB), {} frames of 64 envs (obs 32, act 8, \
         every env recorded; each env's episode ends every 200 frames), {} rounds, the median",
        mb(in_bytes),
        in_bytes as f64 / f64::from(1u32 << 30),
        spec.frames,
        args.export_rounds
    );
    println!("| export | rows | seconds | rows/s | MB read/s |");
    println!("|---|---:|---:|---:|---:|");
    let mut failure = None;
    for kind in ["--episodes (Parquet)", "--lerobot"] {
        let out = dir.join(format!("lrbc-bench-episodes-out-{}", std::process::id()));
        let mut times = Vec::new();
        let mut rows = 0;
        for _ in 0..args.export_rounds {
            // Cleanup: there may be nothing to remove.
            let _ = std::fs::remove_dir_all(&out);
            let _ = std::fs::remove_file(&out);
            let started = Instant::now();
            let result = if kind.starts_with("--episodes") {
                export::export_episodes_file(&input, &out, ExportFormat::Parquet, |_| {})
                    .map(|s| s.episodes)
            } else {
                export::export_lerobot(&input, &out, &LeRobotOptions { task: None }, |_| {})
                    .map(|s| s.frames)
            };
            match result {
                Ok(n) => rows = n,
                Err(e) => {
                    failure = Some(export_error(&e, &input, &out));
                    break;
                }
            }
            times.push(started.elapsed().as_secs_f64());
        }
        // Cleanup: there may be nothing to remove.
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::fs::remove_file(&out);
        if failure.is_some() {
            break;
        }
        let secs = lrbc_live::stats::median(times).unwrap_or(0.0).max(1e-9);
        // `--lerobot` reads the file twice.
        let reads = if kind == "--lerobot" { 2.0 } else { 1.0 };
        println!(
            "| `{kind}` | {rows} | {secs:.2} | {:.0} | {:.0} |",
            rows as f64 / secs,
            reads * mb(in_bytes) / secs
        );
    }
    // Cleanup: there may be nothing to remove.
    let _ = std::fs::remove_file(&input);
    failure.map_or(Ok(()), Err)
}

pub fn run(args: &EpisodesBenchArgs) -> Result<(), BenchError> {
    let wants = |p: EpisodesPart| args.only.is_empty() || args.only.contains(&p);
    println!(
        "lrbc-bench episodes: what counting every env's episodes costs; engine, client and \
         observers in separate processes"
    );
    if wants(EpisodesPart::Cpu) {
        cpu_table(args)?;
    }
    if wants(EpisodesPart::Ratio) {
        ratio_table(args)?;
    }
    if wants(EpisodesPart::Export) {
        export_table(args)?;
    }
    Ok(())
}
