//! `lrbc-bench detect`: what the detector (`events`) costs and what it finds, against an
//! engine and a client in separate processes. Its CPU beside `watch --no-events` (the same
//! follower without the detector) and the numpy anchor a user would write
//! (`nan_checker.py`), the three attached together over the same seconds of one run; the
//! engine's rate (at 1 kHz and unpaced) with `events` switched on and off (`observers`);
//! how many planted one-frame NaNs it finds at their frame, env, channel and index, on a
//! quiet machine or with both cores loaded; and the events it prints over a clean run.
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::fixtures::start;
use crate::observers::{Observer, observer_cost, print_cost};
use crate::pollerbench::{check_numpy, python_path, run_to_end};
use crate::shared::BenchError;
use crate::shared::{parse_hz, seconds_f64};
use lrbc::attach::{Target, attach};
use lrbc::layout::LayoutChoice;
use lrbc_sim::children::{ChildProcess, inspector_exe, start_client, start_engine};
use lrbc_sim::engine::Preset;

/// Arguments of `lrbc-bench detect`.
#[derive(Debug, Clone, clap::Args)]
pub struct DetectBenchArgs {
    /// Seconds of each round of the CPU measure (the three observers attached together).
    #[arg(long, default_value = "10", value_parser = seconds_f64)]
    pub secs: f64,
    /// Rounds of the CPU measure per preset.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// The client's pace (Hz) in the CPU rounds, the runs with planted NaNs and the clean
    /// run.
    #[arg(long, default_value = "1000", value_parser = parse_hz)]
    pub hz: f64,
    /// Seconds of each run (at `--hz`, and unpaced) in which `events` is switched off and
    /// on (the engine's rate).
    #[arg(long, value_name = "SECS", default_value = "90", value_parser = seconds_f64)]
    pub rate_secs: f64,
    /// How long `events` is switched on or off at a time for the engine's rate.
    #[arg(long, value_name = "SECS", default_value = "0.1", value_parser = seconds_f64)]
    pub window: f64,
    /// One-frame NaNs planted for the detection rate (train4096, ten to an engine run).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub nans: u32,
    /// Seed of where and when the NaNs are planted: the same seed plants the same NaNs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The detection rate also with both cores loaded by two busy-loop processes, as on a
    /// training node.
    #[arg(long)]
    pub busy: bool,
    /// Seconds of `events` over a clean run (train4096, no plants); the client runs on
    /// after it ends.
    #[arg(long, value_name = "SECS", default_value = "600", value_parser = seconds_f64)]
    pub clean_secs: f64,
    /// Also the numpy anchor without its nap (it spins a core), in a turn of its own
    /// after each round.
    #[arg(long)]
    pub spin: bool,
    /// The numpy anchor (default: the checkout's benches/nan_checker.py).
    #[arg(long, value_name = "FILE")]
    pub anchor: Option<PathBuf>,
    /// Only these measures (comma-separated): cpu, ratio (the engine's rate), rate (the
    /// planted NaNs found), false (events over a clean run).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<DetectPart>,
}

/// A measure of `lrbc-bench detect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DetectPart {
    /// CPU of `events`, `watch --no-events` and the numpy anchor.
    Cpu,
    /// The engine's rate with `events` on ÷ off, at `--hz` and unpaced.
    Ratio,
    /// Planted one-frame NaNs found.
    Rate,
    /// Events printed over a clean run.
    #[value(name = "false")]
    Clean,
}

/// NaNs planted in one engine run.
const NANS_PER_RUN: usize = 10;
/// The first NaN of a run is planted at this frame or later (the detector is attached
/// before the client's first step).
const FIRST_PLANT: u64 = 1000;
/// `events` is stopped once the run is this many frames past its last NaN (the client
/// goes on for longer, so that its end is no stall in the detector's view).
const AFTER_LAST: u64 = 300;
/// Frames the client steps past the last NaN.
const CLIENT_AFTER_LAST: u64 = 1000;
/// Time for an observer to start and attach before it is counted on.
const ATTACH: Duration = Duration::from_millis(500);

/// The anchor: `--anchor`, or the checkout's benches/nan_checker.py.
fn anchor_script(arg: Option<&Path>) -> Result<PathBuf, BenchError> {
    let script = arg.map_or_else(
        || {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join("benches/nan_checker.py")
        },
        Path::to_path_buf,
    );
    if script.is_file() {
        Ok(script)
    } else {
        Err(BenchError::Other(format!(
            "{}: not found (--anchor FILE names the numpy anchor)",
            script.display()
        )))
    }
}

/// What one `events` process printed and used.
#[derive(Clone, Debug, Default)]
struct EventsOutcome {
    /// Its events, as the JSON objects it printed (the last form of each).
    events: Vec<serde_json::Value>,
    /// Frames it saw, checked whole, and whose rewards and flags it checked.
    seen: u64,
    checked: u64,
    flags_checked: u64,
    /// CPU seconds of the whole process.
    cpu_secs: f64,
}

/// `checked 10,016 of 10,029 frames (rewards and flags of 10,020)` of `events`' summary
/// line: (checked, seen, rewards and flags checked).
fn parse_summary(line: &str) -> Option<(u64, u64, u64)> {
    let number = |s: &str| s.replace(',', "").parse::<u64>().ok();
    let rest = &line[line.find("checked ")? + "checked ".len()..];
    let mut words = rest.split_whitespace();
    let checked = number(words.next()?)?;
    (words.next()? == "of").then_some(())?;
    let seen = number(words.next()?)?;
    let flags = rest
        .find("rewards and flags of ")
        .and_then(|i| {
            let tail = &rest[i + "rewards and flags of ".len()..];
            number(tail.trim_end_matches(|c: char| !c.is_ascii_digit()))
        })
        .unwrap_or(checked);
    Some((checked, seen, flags.max(checked)))
}

/// Reads a child's pipe to its end on a thread of its own, so that neither pipe fills
/// while the other is read.
fn read_all(
    pipe: Option<impl Read + Send + 'static>,
    thread: &str,
) -> Result<Option<JoinHandle<String>>, BenchError> {
    let Some(mut pipe) = pipe else {
        return Ok(None);
    };
    std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
        .map(Some)
        .map_err(|e| BenchError::Other(format!("cannot start a reader: {e}")))
}

/// An `events --json` process, its output read as it goes; ended (SIGKILL) if dropped
/// before [`EventsProcess::finish`].
#[derive(Debug)]
struct EventsProcess {
    child: Option<Child>,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

impl EventsProcess {
    /// `events --shm NAME --json`, for `secs` or until [`EventsProcess::interrupt`].
    fn start(name: &str, secs: Option<f64>) -> Result<Self, BenchError> {
        let mut command = Command::new(inspector_exe()?);
        lrbc_platform::terminate_with_parent(&mut command);
        command.args(["events", "--shm", name, "--json"]);
        if let Some(secs) = secs {
            command.args(["--secs", &secs.to_string()]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| BenchError::Other(format!("cannot start events: {e}")))?;
        let stdout = read_all(child.stdout.take(), "bench-events-out")?;
        let stderr = read_all(child.stderr.take(), "bench-events-err")?;
        Ok(Self {
            child: Some(child),
            stdout,
            stderr,
        })
    }

    /// Ctrl-C: it prints what it found and its summary, and ends.
    fn interrupt(&self) {
        if let Some(child) = &self.child {
            lrbc_platform::send_signal(child.id(), lrbc_platform::Signal::Interrupt);
        }
    }

    /// Waits for its end: its events, its summary's counts and its CPU.
    fn finish(mut self) -> Result<EventsOutcome, BenchError> {
        let Some(mut child) = self.child.take() else {
            return Err(BenchError::Other("events was not started".into()));
        };
        let (code, usage) = lrbc_platform::wait_with_usage(&mut child)
            .map_err(|e| BenchError::Other(format!("events: {e}")))?;
        let join =
            |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        let (out, err) = (join(self.stdout.take()), join(self.stderr.take()));
        if code != Some(0) {
            let last = err.lines().last().unwrap_or_default();
            return Err(BenchError::Other(format!(
                "events ended with {code:?}: {last}"
            )));
        }
        let events = out
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l)
                    .map_err(|e| BenchError::Other(format!("events printed {l:?}: {e}")))
            })
            .collect::<Result<Vec<serde_json::Value>, _>>()?;
        let summary = err
            .lines()
            .rev()
            .find(|l| l.starts_with("events: "))
            .unwrap_or_default();
        let (checked, seen, flags_checked) = parse_summary(summary).unwrap_or_default();
        Ok(EventsOutcome {
            events: last_forms(events),
            seen,
            checked,
            flags_checked,
            cpu_secs: usage.cpu_secs,
        })
    }
}

impl Drop for EventsProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One form of each event (an event printed as going on and again when it ended is one
/// event): the last printed.
fn last_forms(events: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    let mut out: Vec<serde_json::Value> = Vec::new();
    for e in events {
        match out.iter_mut().find(|o| o["id"] == e["id"]) {
            Some(o) => *o = e,
            None => out.push(e),
        }
    }
    out
}

/// An observer's share of the CPU rounds.
#[derive(Clone, Debug, Default)]
struct Turns {
    /// Share of one core, each round.
    cpu: Vec<f64>,
    seen: u64,
    /// Frames checked whole (`None`: it checks nothing).
    checked: Option<u64>,
    /// `events`: frames whose rewards and flags it checked.
    flags_checked: Option<u64>,
    /// `events`: events printed.
    events: u64,
}

impl Turns {
    fn add(&mut self, cpu: f64, seen: u64, checked: Option<u64>) {
        self.cpu.push(cpu);
        self.seen += seen;
        if let Some(c) = checked {
            *self.checked.get_or_insert(0) += c;
        }
    }
}

fn watch_command(name: &str, secs: f64) -> Result<Command, BenchError> {
    let mut c = Command::new(inspector_exe()?);
    c.args([
        "watch",
        "--shm",
        name,
        "--no-events",
        "--count",
        "1",
        "--json",
    ])
    .args(["--interval", &secs.to_string()]);
    Ok(c)
}

fn anchor_command(anchor: &Path, name: &str, secs: f64, nap_us: Option<u32>) -> Command {
    let mut c = Command::new("python3");
    c.arg(anchor)
        .args([name, &secs.to_string()])
        .env("PYTHONPATH", python_path());
    if let Some(nap) = nap_us {
        c.args(["--nap", &nap.to_string()]);
    }
    c
}

/// The numpy anchor's figures: share of a core (its own, over its loop), seen, checked.
fn anchor_figures(v: &serde_json::Value) -> (f64, u64, u64) {
    (
        v["cpu_share_of_core"].as_f64().unwrap_or(0.0),
        v["frames_seen"].as_u64().unwrap_or(0),
        v["frames_checked"].as_u64().unwrap_or(0),
    )
}

/// One round: `events`, `watch --no-events` and the anchor with its nap, attached
/// together to the run `name` for `secs`.
fn round(name: &str, secs: f64, anchor: &Path, turns: &mut [Turns; 4]) -> Result<(), BenchError> {
    let (watch, numpy, events) = std::thread::scope(|s| {
        let spawn = |thread: &str, command: Result<Command, BenchError>, what: &'static str| {
            std::thread::Builder::new()
                .name(thread.into())
                .spawn_scoped(s, move || command.and_then(|c| run_to_end(c, what)))
                .map_err(|e| BenchError::Other(format!("cannot start a thread: {e}")))
        };
        let watch = spawn(
            "bench-watch",
            watch_command(name, secs),
            "watch --no-events",
        );
        let numpy = spawn(
            "bench-anchor",
            Ok(anchor_command(anchor, name, secs, Some(100))),
            "the numpy anchor",
        );
        let events = EventsProcess::start(name, Some(secs)).and_then(EventsProcess::finish);
        let join = |h: Result<std::thread::ScopedJoinHandle<'_, _>, BenchError>| {
            h?.join()
                .map_err(|_| BenchError::Other("an observer's thread panicked".into()))?
        };
        (join(watch), join(numpy), events)
    });
    let (events, (watch, watch_usage), (numpy, _)) = (events?, watch?, numpy?);
    turns[0].add(events.cpu_secs / secs, events.seen, Some(events.checked));
    *turns[0].flags_checked.get_or_insert(0) += events.flags_checked;
    turns[0].events += events.events.len() as u64;
    turns[1].add(
        watch_usage.cpu_secs / secs,
        watch["frames_seen"].as_u64().unwrap_or(0),
        None,
    );
    let (cpu, seen, checked) = anchor_figures(&numpy);
    turns[2].add(cpu, seen, Some(checked));
    Ok(())
}

fn cpu_table(args: &DetectBenchArgs, anchor: &Path) -> Result<(), BenchError> {
    println!(
        "CPU: `events`, `watch --no-events` and the numpy anchor (--nap 100) attached together \
         to one engine and client at {} Hz, {} rounds of {} s per preset{}",
        args.hz,
        args.rounds,
        args.secs,
        if args.spin {
            "; the anchor without nap in a turn of its own after each round"
        } else {
            ""
        }
    );
    println!(
        "  {:<10} {:<28} {:>8}  {:<30} {:>9} {:>9} {:>8} {:>14} {:>7}",
        "preset",
        "observer",
        "CPU",
        "per round",
        "seen",
        "checked",
        "share",
        "rewards/flags",
        "events"
    );
    for preset in [Preset::Train4096, Preset::Cams64] {
        let mut run = start(
            preset,
            (Some(args.hz), "random"),
            None,
            &format!("detect-cpu-{}", preset.as_str()),
        )?;
        std::thread::sleep(ATTACH);
        let mut turns: [Turns; 4] = Default::default();
        for _ in 0..args.rounds {
            round(&run.name, args.secs, anchor, &mut turns)?;
            if args.spin {
                let (v, _) = run_to_end(
                    anchor_command(anchor, &run.name, args.secs, None),
                    "the numpy anchor",
                )?;
                let (cpu, seen, checked) = anchor_figures(&v);
                turns[3].add(cpu, seen, Some(checked));
            }
        }
        if let Some(code) = run.client.as_mut().and_then(ChildProcess::exited) {
            return Err(BenchError::Other(format!(
                "the client exited ({code}) during the measurement"
            )));
        }
        drop(run);
        let labels = [
            "events (the detector)",
            "watch --no-events",
            "numpy anchor, --nap 100",
            "numpy anchor, no nap (alone)",
        ];
        for (t, label) in turns.iter().zip(labels) {
            if t.cpu.is_empty() {
                continue;
            }
            let mean = t.cpu.iter().sum::<f64>() / t.cpu.len() as f64;
            let per_round: Vec<String> =
                t.cpu.iter().map(|c| format!("{:.1}", 100.0 * c)).collect();
            let (checked, share) = match t.checked {
                Some(c) => (
                    c.to_string(),
                    format!("{:.2} %", 100.0 * c as f64 / t.seen.max(1) as f64),
                ),
                None => ("–".into(), "–".into()),
            };
            println!(
                "  {:<10} {label:<28} {:>6.1} %  {:<30} {:>9} {checked:>9} {share:>8} {:>14} {:>7}",
                preset.as_str(),
                100.0 * mean,
                per_round.join(", "),
                t.seen,
                t.flags_checked
                    .map_or_else(|| "–".into(), |f| f.to_string()),
                if label.starts_with("events") {
                    t.events.to_string()
                } else {
                    "–".into()
                },
            );
        }
    }
    println!(
        "  (CPU: share of one core, the mean of the rounds; events and watch: the whole \
         process over its run, its start included; the anchor: its own figure over its loop. \
         checked: frames whose every value was checked, of those seen)"
    );
    Ok(())
}

/// A small generator (splitmix64): the same plants for the same seed.
#[derive(Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// In `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The channel of a planted value, as `--plant` and `events --json` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Channel {
    Observation,
    Action,
    Reward,
}

impl Channel {
    fn plant_name(self) -> &'static str {
        match self {
            Channel::Observation => "obs",
            Channel::Action => "act",
            Channel::Reward => "reward",
        }
    }

    fn event_name(self) -> &'static str {
        match self {
            Channel::Observation => "observation",
            Channel::Action => "action",
            Channel::Reward => "reward",
        }
    }
}

/// One planted one-frame NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Nan {
    frame_seq: u64,
    env: u32,
    channel: Channel,
    /// None for a reward.
    index: Option<u32>,
}

impl Nan {
    /// As `sim engine --plant` takes it.
    fn spec(&self) -> String {
        let mut s = format!(
            "nan@{}:env={},channel={}",
            self.frame_seq,
            self.env,
            self.channel.plant_name()
        );
        if let Some(i) = self.index {
            s.push_str(&format!(",index={i}"));
        }
        s
    }

    /// Whether `event` (an object of `events --json`) is this NaN.
    fn found_by(&self, event: &serde_json::Value) -> bool {
        event["kind"] == "nonfinite"
            && event["first_frame"].as_u64() == Some(self.frame_seq)
            && event["env"].as_u64() == Some(u64::from(self.env))
            && event["channel"] == self.channel.event_name()
            && event["index"].as_u64() == self.index.map(u64::from)
    }
}

/// `count` NaNs in runs of [`NANS_PER_RUN`], each at a random env, channel, index and
/// frame, 300 to 700 frames apart.
fn plan(seed: u64, count: usize, (envs, obs, act): (u32, u32, u32)) -> Vec<Vec<Nan>> {
    let mut rng = SplitMix(seed);
    let mut runs = Vec::new();
    let mut left = count;
    while left > 0 {
        let n = left.min(NANS_PER_RUN);
        left -= n;
        let mut frame_seq = FIRST_PLANT + rng.below(500);
        let mut run = Vec::with_capacity(n);
        for _ in 0..n {
            let env = rng.below(u64::from(envs)) as u32;
            let (channel, index) = match rng.below(3) {
                0 => (Channel::Observation, Some(rng.below(u64::from(obs)) as u32)),
                1 => (Channel::Action, Some(rng.below(u64::from(act)) as u32)),
                _ => (Channel::Reward, None),
            };
            run.push(Nan {
                frame_seq,
                env,
                channel,
                index,
            });
            frame_seq += 300 + rng.below(401);
        }
        runs.push(run);
    }
    runs
}

/// One engine run with `nans` planted, `events` attached before the client's first
/// step and stopped once the run is past the last NaN.
fn planted_run(name: &str, nans: &[Nan], hz: f64) -> Result<EventsOutcome, BenchError> {
    let last = nans
        .iter()
        .map(|n| n.frame_seq)
        .max()
        .unwrap_or(FIRST_PLANT);
    let specs: Vec<String> = nans.iter().map(Nan::spec).collect();
    let mut engine_args = vec!["--force"];
    for s in &specs {
        engine_args.extend(["--plant", s.as_str()]);
    }
    let engine = start_engine(name, Preset::Train4096, &engine_args)?;
    let events = EventsProcess::start(name, None)?;
    std::thread::sleep(ATTACH);
    let steps = last + CLIENT_AFTER_LAST;
    let mut client = start_client(
        name,
        &[
            "--hz".into(),
            hz.to_string(),
            "--steps".into(),
            steps.to_string(),
        ],
        Stdio::null(),
    )?;
    let a = attach(&Target::Shm(name.to_string()), LayoutChoice::Auto)?;
    let deadline = Instant::now() + Duration::from_secs_f64(4.0 * steps as f64 / hz + 30.0);
    loop {
        let frame_seq = a
            .segment
            .load_u64(a.geometry.counters.frame_seq)
            .unwrap_or(0);
        if frame_seq >= last + AFTER_LAST {
            break;
        }
        if let Some(code) = client.exited() {
            return Err(BenchError::Other(format!(
                "the client exited ({code}) at frame {frame_seq}, before the last NaN"
            )));
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Other(format!(
                "the run reached frame {frame_seq} of {} in time",
                last + AFTER_LAST
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    events.interrupt();
    let outcome = events.finish();
    drop(a);
    drop(client);
    drop(engine);
    outcome
}

/// Two processes that spin, loading both cores as a trainer's do.
fn load_both_cores() -> Result<Vec<ChildProcess>, BenchError> {
    (0..2)
        .map(|_| {
            ChildProcess::spawn_program(
                Path::new("sh"),
                "busy loop",
                &["-c".into(), "while :; do :; done".into()],
                Stdio::null(),
            )
            .map_err(BenchError::from)
        })
        .collect()
}

fn rate_row(args: &DetectBenchArgs, busy: bool) -> Result<(), BenchError> {
    let (envs, obs, act, _) = Preset::Train4096.sizes();
    let runs = plan(args.seed, args.nans as usize, (envs, obs, act));
    let _load = if busy { load_both_cores()? } else { Vec::new() };
    let (mut found, mut planted) = (0usize, 0usize);
    let (mut seen, mut checked, mut flags) = (0u64, 0u64, 0u64);
    let (mut elsewhere, mut others) = (Vec::new(), Vec::new());
    let mut missed = Vec::new();
    let mut per_run = Vec::new();
    // Found and planted, by channel.
    let channels = [Channel::Observation, Channel::Action, Channel::Reward];
    let mut by_channel = [(0usize, 0usize); 3];
    for (r, nans) in runs.iter().enumerate() {
        let name = format!("lrbc-detectbench-{}-plants{r}", std::process::id());
        let o = planted_run(&name, nans, args.hz)?;
        let hits = nans
            .iter()
            .filter(|n| {
                let hit = o.events.iter().any(|e| n.found_by(e));
                if let Some(k) = channels.iter().position(|c| *c == n.channel) {
                    by_channel[k].0 += usize::from(hit);
                    by_channel[k].1 += 1;
                }
                if !hit {
                    missed.push(**n);
                }
                hit
            })
            .count();
        for e in &o.events {
            if nans.iter().any(|n| n.found_by(e)) {
                continue;
            }
            if e["kind"] == "nonfinite" {
                elsewhere.push(e.clone());
            } else {
                others.push(e.clone());
            }
        }
        per_run.push(format!("{hits}/{}", nans.len()));
        found += hits;
        planted += nans.len();
        seen += o.seen;
        checked += o.checked;
        flags += o.flags_checked;
    }
    let by_channel: Vec<String> = channels
        .iter()
        .zip(by_channel)
        .map(|(c, (f, p))| format!("{} {f}/{p}", c.event_name()))
        .collect();
    println!(
        "  {:<6} {planted:>8} {found:>6} {:>7.1} % {:>9} {:>9} {:>8.2} % {:>14} {:>10} {:>7}   {}; per run: {}",
        if busy { "busy" } else { "quiet" },
        100.0 * found as f64 / planted.max(1) as f64,
        seen,
        checked,
        100.0 * checked as f64 / seen.max(1) as f64,
        flags,
        elsewhere.len(),
        others.len(),
        by_channel.join(", "),
        per_run.join(", ")
    );
    for n in &missed {
        println!(
            "    not found: frame {} env {} {}{}",
            n.frame_seq,
            n.env,
            n.channel.event_name(),
            n.index.map_or_else(String::new, |i| format!(" [{i}]"))
        );
    }
    for e in elsewhere.iter().chain(&others) {
        println!(
            "    other event: frame {} {}",
            e["first_frame"],
            e["message"].as_str().unwrap_or_default()
        );
    }
    Ok(())
}

fn rate_table(args: &DetectBenchArgs) -> Result<(), BenchError> {
    println!(
        "planted one-frame NaNs (seed {}, random env, channel and index, {NANS_PER_RUN} to an \
         engine run, 300 to 700 frames apart), train4096, client at {} Hz, `events --json` \
         attached before the first step; found = an event at the NaN's frame_seq, env, \
         channel and index{}",
        args.seed,
        args.hz,
        if args.busy {
            "; busy: two busy-loop processes load both cores"
        } else {
            ""
        }
    );
    println!(
        "  {:<6} {:>8} {:>6} {:>9} {:>9} {:>9} {:>10} {:>14} {:>10} {:>7}",
        "load",
        "planted",
        "found",
        "share",
        "seen",
        "checked",
        "share",
        "rewards/flags",
        "elsewhere",
        "other"
    );
    rate_row(args, false)?;
    if args.busy {
        rate_row(args, true)?;
    }
    println!(
        "  (elsewhere: a NaN or infinity event at no planted place; other: events of other kinds)"
    );
    Ok(())
}

fn clean_table(args: &DetectBenchArgs) -> Result<(), BenchError> {
    println!(
        "clean run: train4096, client at {} Hz, no plants; `events --json` for {} s from 0.5 s \
         after the client's start (it ends before the client)",
        args.hz, args.clean_secs
    );
    let mut run = start(
        Preset::Train4096,
        (Some(args.hz), "random"),
        None,
        "detect-clean",
    )?;
    std::thread::sleep(ATTACH);
    let o = EventsProcess::start(&run.name, Some(args.clean_secs))?.finish()?;
    if let Some(code) = run.client.as_mut().and_then(ChildProcess::exited) {
        return Err(BenchError::Other(format!(
            "the client exited ({code}) during the clean run"
        )));
    }
    drop(run);
    println!(
        "  {:>8} {:>10} {:>10} {:>9} {:>14} {:>7}",
        "secs", "seen", "checked", "share", "rewards/flags", "events"
    );
    println!(
        "  {:>8.0} {:>10} {:>10} {:>7.2} % {:>14} {:>7}",
        args.clean_secs,
        o.seen,
        o.checked,
        100.0 * o.checked as f64 / o.seen.max(1) as f64,
        o.flags_checked,
        o.events.len()
    );
    for e in &o.events {
        println!(
            "    event: {} at frame {}: {}",
            e["kind"].as_str().unwrap_or_default(),
            e["first_frame"],
            e["message"].as_str().unwrap_or_default()
        );
    }
    Ok(())
}

fn ratio_table(args: &DetectBenchArgs) -> Result<(), BenchError> {
    let window = args.window.clamp(0.05, 10.0);
    // Paced, a window holds `hz × window` frames: one frame more or less is 1 % of a
    // hundred, so the paced windows are at least half a second.
    for (hz, window, what) in [
        (
            Some(args.hz),
            window.max(0.5),
            format!("at {} Hz (goal: at least 0.99)", args.hz),
        ),
        (
            None,
            window,
            "unpaced (engine and client spin: both cores busy)".to_string(),
        ),
    ] {
        println!(
            "engine's lock-step rate, train4096, {what}; `events` switched off and on in \
             windows of {window} s, blocks of off-on-on-off, {:.0} s of one run:",
            args.rate_secs
        );
        let c = observer_cost(
            Observer::Events,
            hz,
            args.rate_secs.max(2.0),
            Duration::from_secs_f64(window),
            "detect-ratio",
        )?;
        print_cost(Observer::Events, &c);
        println!(
            "  (engine and client, share of a core: with {:.1} % and {:.1} %, without {:.1} % and {:.1} %)",
            100.0 * c.pair_on.0,
            100.0 * c.pair_on.1,
            100.0 * c.pair_off.0,
            100.0 * c.pair_off.1
        );
    }
    Ok(())
}

pub fn run(args: &DetectBenchArgs) -> Result<(), BenchError> {
    if !cfg!(target_os = "linux") {
        return Err(BenchError::Other(
            "lrbc-bench detect runs on Linux: the numpy anchor maps the segment from /dev/shm"
                .into(),
        ));
    }
    let wants = |p: DetectPart| args.only.is_empty() || args.only.contains(&p);
    println!(
        "lrbc-bench detect: what the detector (`events`) costs and finds; engine, client and \
         observers in separate processes"
    );
    if wants(DetectPart::Cpu) {
        let anchor = anchor_script(args.anchor.as_deref())?;
        check_numpy().map_err(|_| {
            BenchError::Other(
                "lrbc-bench detect needs python3 with numpy for the anchor (the test command, \
                 bash .ci/test, installs it under target/pydeps)"
                    .into(),
            )
        })?;
        cpu_table(args, &anchor)?;
    }
    if wants(DetectPart::Ratio) {
        ratio_table(args)?;
    }
    if wants(DetectPart::Rate) {
        rate_table(args)?;
    }
    if wants(DetectPart::Clean) {
        clean_table(args)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_gives_the_frames_checked_and_seen() {
        assert_eq!(
            parse_summary("events: 1 (nonfinite 1); checked 10,016 of 10,029 frames"),
            Some((10_016, 10_029, 10_016))
        );
        assert_eq!(
            parse_summary(
                "events: 0; checked 1,016 of 10,029 frames (rewards and flags of 10,020)"
            ),
            Some((1_016, 10_029, 10_020))
        );
        assert_eq!(parse_summary("events: 0"), None);
    }

    #[test]
    fn the_same_seed_plants_the_same_nans_within_the_sizes() {
        let sizes = (4096, 100, 12);
        let runs = plan(7, 25, sizes);
        assert_eq!(runs, plan(7, 25, sizes));
        assert_ne!(runs, plan(8, 25, sizes));
        assert_eq!(runs.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 5]);
        for run in &runs {
            assert!(run[0].frame_seq >= FIRST_PLANT);
            for pair in run.windows(2) {
                let gap = pair[1].frame_seq - pair[0].frame_seq;
                assert!((300..=700).contains(&gap), "{gap}");
            }
            for n in run {
                assert!(n.env < 4096);
                match n.channel {
                    Channel::Observation => assert!(n.index.is_some_and(|i| i < 100)),
                    Channel::Action => assert!(n.index.is_some_and(|i| i < 12)),
                    Channel::Reward => assert_eq!(n.index, None),
                }
            }
        }
    }

    #[test]
    fn a_nan_is_found_by_an_event_at_its_frame_env_channel_and_index_alone() {
        let nan = Nan {
            frame_seq: 3000,
            env: 17,
            channel: Channel::Observation,
            index: Some(42),
        };
        assert_eq!(nan.spec(), "nan@3000:env=17,channel=obs,index=42");
        let event = serde_json::json!({"kind": "nonfinite", "first_frame": 3000, "env": 17,
            "channel": "observation", "index": 42, "value": "NaN"});
        assert!(nan.found_by(&event));
        for (key, other) in [
            ("first_frame", serde_json::json!(3001)),
            ("env", serde_json::json!(18)),
            ("channel", serde_json::json!("action")),
            ("index", serde_json::json!(41)),
            ("kind", serde_json::json!("out_of_range")),
        ] {
            let mut e = event.clone();
            e[key] = other;
            assert!(!nan.found_by(&e), "{key}");
        }
        let reward = Nan {
            channel: Channel::Reward,
            index: None,
            ..nan
        };
        assert_eq!(reward.spec(), "nan@3000:env=17,channel=reward");
        let event = serde_json::json!({"kind": "nonfinite", "first_frame": 3000, "env": 17,
            "channel": "reward", "value": "NaN"});
        assert!(reward.found_by(&event));
    }
}
