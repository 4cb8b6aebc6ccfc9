//! `lrbc-bench poller`: `watch` against the numpy programs a user would write instead
//! (`benches/numpy_poller.py`: spins on `frame_seq`, copies every env's rewards and
//! dones under the seqlock, naps 200 µs; `benches/nan_checker.py`: copies every value
//! and checks it with `np.isfinite`, naps 100 µs), in turns in one run, on the same
//! engine and client: frames lost, frames whose values went unchecked, CPU and wake-ups
//! of each.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::shared::BenchError;
use lrbc_inspector::cli::watch::WatchLine;
use lrbc_platform::ProcessUsage;
use lrbc_sim::engine::Preset;

/// Arguments of `lrbc-bench poller`.
#[derive(Debug, Clone, clap::Args)]
pub struct PollerBenchArgs {
    /// Seconds of each observer's turn.
    #[arg(long, default_value = "10", value_parser = crate::shared::seconds_f64)]
    pub secs: f64,
    /// Turns of each observer per preset and pace (in alternating order).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Only these paces (Hz), instead of 250, 1000 and 2000.
    #[arg(long, value_delimiter = ',', value_parser = crate::shared::parse_hz)]
    pub hz: Vec<f64>,
    /// Only this preset (cams64 or train4096), instead of both.
    #[arg(long)]
    pub preset: Option<String>,
    /// Only these observers, instead of numpy, watch and follow: numpy (the poller),
    /// watch (as it runs by default, every value checked), follow (`watch --no-events
    /// --no-episodes`: the frames followed, as the poller does, nothing checked), nan (the
    /// numpy NaN checker, `benches/nan_checker.py --nap 100`: every value checked).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub observers: Vec<PollerObserver>,
}

/// One observer's turn.
#[derive(Clone, Copy, Debug, Default)]
struct Turn {
    seen: u64,
    lost: u64,
    /// Of the frames lost, those missed while the machine did not run the follower when it
    /// asked to be woken (`watch` only).
    late: u64,
    /// Of the frames lost, those whose copy was torn.
    torn: u64,
    /// Frames let pass on purpose on a busy machine (`watch` only).
    skipped: u64,
    /// Frames seen whose values were not all checked (None: it checks no values).
    unchecked: Option<u64>,
    cpu_share: f64,
    wakeups_per_s: f64,
}

impl Turn {
    fn add(&mut self, o: &Turn) {
        self.seen += o.seen;
        self.lost += o.lost;
        self.late += o.late;
        self.torn += o.torn;
        self.skipped += o.skipped;
        if let Some(u) = o.unchecked {
            *self.unchecked.get_or_insert(0) += u;
        }
        self.cpu_share += o.cpu_share;
        self.wakeups_per_s += o.wakeups_per_s;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PollerObserver {
    #[value(name = "numpy")]
    Poller,
    Watch,
    Follow,
    #[value(name = "nan")]
    NanChecker,
}

impl PollerObserver {
    /// The observers compared unless `--observers` says otherwise.
    const DEFAULT: [PollerObserver; 3] = [
        PollerObserver::Poller,
        PollerObserver::Watch,
        PollerObserver::Follow,
    ];

    fn name(self) -> &'static str {
        match self {
            PollerObserver::Poller => "numpy",
            PollerObserver::Watch => "watch",
            PollerObserver::Follow => "follow",
            PollerObserver::NanChecker => "nan",
        }
    }
}

/// The source checkout the benchmark was built from (its scripts and `target/`).
fn checkout() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `script` if it is a file; else an error that says `how` to name one.
fn existing(script: PathBuf, how: &str) -> Result<PathBuf, BenchError> {
    if script.is_file() {
        Ok(script)
    } else {
        Err(BenchError::Other(format!(
            "{}: not found ({how})",
            script.display()
        )))
    }
}

/// The numpy NaN checker: `arg` (`lrbc-bench detect --anchor`), or the checkout's
/// benches/nan_checker.py.
pub(crate) fn nan_checker_script(arg: Option<&Path>) -> Result<PathBuf, BenchError> {
    let script = arg.map_or_else(
        || checkout().join("benches/nan_checker.py"),
        Path::to_path_buf,
    );
    existing(script, "--anchor FILE names the numpy anchor")
}

fn poller_script() -> Result<PathBuf, BenchError> {
    existing(
        checkout().join("benches/numpy_poller.py"),
        "lrbc-bench poller runs from a checkout of the source",
    )
}

/// PYTHONPATH with numpy: the test command installs it under target/pydeps.
pub(crate) fn python_path() -> String {
    let deps = checkout().join("target/pydeps");
    let mut path = deps.display().to_string();
    if let Ok(p) = std::env::var("PYTHONPATH") {
        path = format!("{path}:{p}");
    }
    path
}

pub(crate) fn check_numpy() -> Result<(), BenchError> {
    let ok = Command::new("python3")
        .args(["-c", "import numpy"])
        .env("PYTHONPATH", python_path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(BenchError::Other(
            "lrbc-bench poller needs python3 with numpy (the test command, bash .ci/test, installs it under target/pydeps)".into(),
        ))
    }
}

/// Runs `command` to its end; its stdout's last line as JSON, and what it used.
pub(crate) fn run_to_end(
    mut command: Command,
    what: &str,
) -> Result<(serde_json::Value, ProcessUsage), BenchError> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| BenchError::Other(format!("cannot start {what}: {e}")))?;
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        use std::io::Read as _;
        stdout
            .read_to_string(&mut out)
            .map_err(|e| BenchError::Other(format!("{what}: {e}")))?;
    }
    let (code, usage) = lrbc_platform::wait_with_usage(&mut child)
        .map_err(|e| BenchError::Other(format!("{what}: {e}")))?;
    if code != Some(0) {
        return Err(BenchError::Other(format!("{what} ended with {code:?}")));
    }
    let line = out.lines().last().unwrap_or_default();
    let json = serde_json::from_str(line)
        .map_err(|e| BenchError::Other(format!("{what} printed {line:?}: {e}")))?;
    Ok((json, usage))
}

fn turn(observer: PollerObserver, name: &str, secs: f64) -> Result<Turn, BenchError> {
    let get = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0);
    match observer {
        PollerObserver::Poller | PollerObserver::NanChecker => {
            let (script, nap, what) = if observer == PollerObserver::Poller {
                (poller_script()?, "200", "the numpy poller")
            } else {
                (nan_checker_script(None)?, "100", "the numpy NaN checker")
            };
            let mut c = Command::new("python3");
            c.arg(script)
                .args([name, &secs.to_string(), "--nap", nap])
                .env("PYTHONPATH", python_path());
            let (v, usage) = run_to_end(c, what)?;
            let seen = get(&v, "frames_seen");
            Ok(Turn {
                seen,
                lost: get(&v, "frames_missed") + get(&v, "frames_torn"),
                late: 0,
                torn: get(&v, "frames_torn"),
                skipped: 0,
                // The poller checks no values.
                unchecked: (observer == PollerObserver::NanChecker)
                    .then(|| seen.saturating_sub(get(&v, "frames_checked"))),
                // Its own figure, over its loop (the interpreter's start and numpy's
                // import left out).
                cpu_share: v["cpu_share_of_core"].as_f64().unwrap_or(0.0),
                wakeups_per_s: usage.context_switches as f64 / secs,
            })
        }
        PollerObserver::Watch | PollerObserver::Follow => {
            let mut c = Command::new(lrbc_sim::children::inspector_exe()?);
            c.args(["watch", "--shm", name, "--count", "1", "--json"])
                .args(["--interval", &secs.to_string()]);
            if observer == PollerObserver::Follow {
                c.args(["--no-events", "--no-episodes"]);
            }
            let (v, usage) = run_to_end(c, "watch")?;
            let line = WatchLine::from_json(&v)?;
            Ok(Turn {
                seen: line.frames.seen,
                lost: line.frames.lost(),
                late: line.frames.missed_late,
                torn: line.frames.torn,
                skipped: line.frames.skipped,
                // `follow` runs without the detector: its line has no frames checked.
                unchecked: line.frames_unchecked(),
                // The whole process, its start and attach included.
                cpu_share: usage.cpu_secs / secs,
                wakeups_per_s: usage.context_switches as f64 / secs,
            })
        }
    }
}

/// `watch` against the NaN checker over one preset and pace: its CPU and its unchecked
/// frames minus the checker's, each a mean over the rounds with its 95 % interval
/// (Welch's) and what the interval says. The rounds are the samples, not the frames:
/// frames are lost in bursts (one stall of the machine takes several), so a count of them
/// varies far more from round to round than a Poisson count would.
fn side_by_side(watch: &[Turn], checker: &[Turn]) -> String {
    use lrbc_live::stats::{Moments, mean_difference};
    let moments = |turns: &[Turn], of: fn(&Turn) -> Option<f64>| {
        let mut m = Moments::default();
        for v in turns.iter().filter_map(of) {
            m.push(v);
        }
        m
    };
    let line =
        |what: &str, of: fn(&Turn) -> Option<f64>, below: &str, above: &str| match mean_difference(
            &moments(checker, of),
            &moments(watch, of),
        ) {
            Some(i) => format!(
                "{what} {:+.1} a round (95 % CI {:+.1} to {:+.1}): {}",
                i.estimate,
                i.low,
                i.high,
                match i.sign() {
                    Some(false) => below,
                    Some(true) => above,
                    None => "within noise",
                }
            ),
            None => format!("{what}: too few rounds for an interval"),
        };
    format!(
        "  watch against the NaN checker: {}; {}",
        line(
            "CPU (points of a core)",
            |t| Some(100.0 * t.cpu_share),
            "below the checker's",
            "above the checker's"
        ),
        line(
            "unchecked frames",
            |t| t.unchecked.map(|u| u as f64),
            "fewer than the checker's",
            "more than the checker's"
        )
    )
}

pub fn run(args: &PollerBenchArgs) -> Result<(), BenchError> {
    let presets = match args.preset.as_deref() {
        None => vec![Preset::Cams64, Preset::Train4096],
        Some("cams64") => vec![Preset::Cams64],
        Some("train4096") => vec![Preset::Train4096],
        Some(p) => {
            return Err(BenchError::Usage(format!(
                "--preset {p}: cams64 or train4096"
            )));
        }
    };
    let paces = if args.hz.is_empty() {
        vec![250.0, 1000.0, 2000.0]
    } else {
        args.hz.clone()
    };
    if !cfg!(target_os = "linux") {
        return Err(BenchError::Other(
            "lrbc-bench poller runs on Linux: the numpy poller maps the segment from /dev/shm"
                .into(),
        ));
    }
    let observers = if args.observers.is_empty() {
        PollerObserver::DEFAULT.to_vec()
    } else {
        args.observers.clone()
    };
    if observers
        .iter()
        .any(|o| matches!(o, PollerObserver::Poller | PollerObserver::NanChecker))
    {
        check_numpy()?;
    }

    println!(
        "lrbc-bench poller: watch against the numpy poller (benches/numpy_poller.py, --nap 200) \
         or NaN checker (benches/nan_checker.py, --nap 100), {} rounds of {:.0} s each per \
         preset and pace, interleaved on one engine and client",
        args.rounds, args.secs
    );
    println!(
        "{:<10} {:>7} {:<8} {:>9} {:>7} {:>6} {:>6} {:>8} {:>8} {:>9} {:>9} {:>11}",
        "preset",
        "pace",
        "observer",
        "seen",
        "lost",
        "torn",
        "late",
        "lost ‰",
        "skipped",
        "unchecked",
        "CPU",
        "wake-ups/s"
    );
    for &preset in &presets {
        for (i, &hz) in paces.iter().enumerate() {
            let run =
                crate::fixtures::start(preset, (Some(hz), "random"), None, &format!("poller{i}"))?;
            // Let the pace settle.
            std::thread::sleep(Duration::from_millis(500));
            let mut totals = vec![Turn::default(); observers.len()];
            let mut rounds = vec![Vec::new(); observers.len()];
            for r in 0..args.rounds {
                // Each round in the other order than the one before.
                let mut order: Vec<usize> = (0..observers.len()).collect();
                if r % 2 == 1 {
                    order.reverse();
                }
                for k in order {
                    let t = turn(observers[k], &run.name, args.secs)?;
                    totals[k].add(&t);
                    rounds[k].push(t);
                }
            }
            drop(run);
            for (k, o) in observers.iter().enumerate() {
                let o = o.name();
                let t = totals[k];
                let n = f64::from(args.rounds);
                let lost: Vec<String> = rounds[k].iter().map(|t| t.lost.to_string()).collect();
                let cpu: Vec<String> = rounds[k]
                    .iter()
                    .map(|t| format!("{:.1}", 100.0 * t.cpu_share))
                    .collect();
                let unchecked: Vec<String> = rounds[k]
                    .iter()
                    .filter_map(|t| t.unchecked.map(|u| u.to_string()))
                    .collect();
                println!(
                    "{:<10} {:>5.0} Hz {:<8} {:>9} {:>7} {:>6} {:>6} {:>8.2} {:>8} {:>9} {:>8.1} % {:>11.0}   per round: lost {}; CPU % {}{}",
                    preset.as_str(),
                    hz,
                    o,
                    t.seen,
                    t.lost,
                    t.torn,
                    if matches!(
                        observers[k],
                        PollerObserver::Poller | PollerObserver::NanChecker
                    ) {
                        "-".to_string()
                    } else {
                        t.late.to_string()
                    },
                    if t.seen > 0 {
                        1000.0 * t.lost as f64 / t.seen as f64
                    } else {
                        0.0
                    },
                    t.skipped,
                    t.unchecked
                        .map_or_else(|| "-".to_string(), |u| u.to_string()),
                    100.0 * t.cpu_share / n,
                    t.wakeups_per_s / n,
                    lost.join(", "),
                    cpu.join(", "),
                    if unchecked.is_empty() {
                        String::new()
                    } else {
                        format!("; unchecked {}", unchecked.join(", "))
                    }
                );
            }
            let at = |o: PollerObserver| observers.iter().position(|&x| x == o);
            if let (Some(w), Some(c)) = (at(PollerObserver::Watch), at(PollerObserver::NanChecker))
            {
                println!("{}", side_by_side(&rounds[w], &rounds[c]));
            }
        }
    }
    println!(
        "(lost: missed + torn (+ unreadable); torn: of those, copies the engine wrote into; late: of those, missed while the machine did not run \
         the follower when it asked to be woken; skipped: let pass on purpose on a busy machine; \
         unchecked: frames seen whose values were not all checked; \
         CPU: share of one core, the mean of the rounds; wake-ups: context switches per second)"
    );
    Ok(())
}
