//! `compare`: two recordings of runs, frame by frame from each run's start: each env's
//! first divergence (the frame, the value, A's and B's, and whether the policy, the
//! simulator or the reward started it), one line each in frame order, then a summary. Or
//! a recording and a live run (`--shm`, `--pid`): each divergence as the run reaches it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lrbc::attach::{Target, attach};
use lrbc_recording::compare::{AgainstBaseline, LiveFrames};

use lrbc_live::check::Channel;
use lrbc_live::stats::Interval;
use lrbc_live::text::{plural, thousands};
use lrbc_recording::compare::{
    CompareCounts, Difference, Divergence, DivergenceOrigin, EpisodeTally, EpisodesCompared,
    EventsCompared, FINISHED_ENDINGS, FilesCompared, ReturnVerdict, Tolerance, compare_files,
    write_compared_episodes,
};

use super::looking::look_until_done;
use super::{CliError, stop_flag};

/// What `--fail-on` answers with exit code 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Any env diverged.
    Diverged,
}

/// The options of `compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Run A: the baseline.
    #[arg(value_name = "A.mcap")]
    pub a: PathBuf,
    /// Run B, compared against A (or a live run: --shm, --pid).
    #[arg(value_name = "B.mcap", conflicts_with_all = ["shm", "pid", "path"])]
    pub b: Option<PathBuf>,
    #[command(flatten)]
    pub target: super::TargetArgs,
    /// Values count as equal within ABS, plus REL times the larger of the two; without
    /// it, equal is bit for bit.
    #[arg(long, value_name = "ABS[,REL]", allow_negative_numbers = true, value_parser = parse_tolerance)]
    pub tolerance: Option<Tolerance>,
    /// One JSON object per diverged env, then one with the summary.
    #[arg(long)]
    pub json: bool,
    /// Exit with code 3 when the runs differ (`diverged`): a determinism test.
    #[arg(long, value_name = "WHAT", value_enum)]
    pub fail_on: Option<FailOn>,
    /// Write each env's episodes in A and B side by side to OUT (.csv or .parquet).
    #[arg(long, value_name = "OUT")]
    pub episodes: Option<PathBuf>,
    /// Stop comparing a live run after this many seconds (units ms, s, min, h allowed).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = super::args::positive_seconds)]
    pub secs: Option<Duration>,
    /// While the machine has no spare CPU, following a live run keeps within this percent
    /// of one core (frames let pass are not compared); 0: every frame whatever the load.
    #[arg(long, value_name = "PCT", default_value_t = lrbc_live::busy::DEFAULT_BUSY_BUDGET_PERCENT, allow_negative_numbers = true, value_parser = super::args::parse_percent)]
    pub busy_budget: f32,
}

/// `ABS` or `ABS,REL`: finite, not negative.
fn parse_tolerance(text: &str) -> Result<Tolerance, String> {
    let number = |s: &str| -> Result<f32, String> {
        match s.trim().parse::<f32>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
            _ => Err(format!(
                "{s:?} is not a tolerance (a number, 0 or more, such as 1e-6)"
            )),
        }
    };
    match text.split_once(',') {
        Some((abs, rel)) => Ok(Tolerance {
            abs: number(abs)?,
            rel: number(rel)?,
        }),
        None => Ok(Tolerance {
            abs: number(text)?,
            rel: 0.0,
        }),
    }
}

pub fn run_args(args: &CompareArgs) -> Result<(), CliError> {
    let tolerance = args.tolerance.unwrap_or(Tolerance::EXACT);
    let b = match (&args.b, args.target.resolve()) {
        (Some(b), _) => b,
        (None, Some(target)) => {
            if args.episodes.is_some() {
                return Err(CliError::Usage(
                    "--episodes compares two recordings: give B.mcap, not a live run".into(),
                ));
            }
            return run_live(args, &target, tolerance);
        }
        (None, None) => {
            return Err(CliError::Usage(
                "compare needs B.mcap, or a live run to compare with A (--shm NAME or --pid PID)"
                    .into(),
            ));
        }
    };
    let table = match &args.episodes {
        Some(out) => Some((out, super::export::episodes_format(out)?)),
        None => None,
    };
    let mut seen = Vec::new();
    let r = compare_files(&args.a, b, tolerance, false, |d| seen.push(*d))?;
    for d in &seen {
        if args.json {
            println!("{}", divergence_json(d, &r));
        } else {
            println!("{}", divergence_line(d, &r));
        }
    }
    if let Some((out, format)) = table {
        write_compared_episodes(&r.episodes, out, format)
            .map_err(|e| CliError::Other(format!("compare --episodes {}: {e}", out.display())))?;
    }
    if args.json {
        println!("{}", summary_json(&r, tolerance, true));
    } else {
        for line in summary_lines(&r, true) {
            eprintln!("{line}");
        }
    }
    failed_on(args, &r)
}

/// Exit code 3 when `--fail-on diverged` and an env diverged.
fn failed_on(args: &CompareArgs, r: &FilesCompared) -> Result<(), CliError> {
    if args.fail_on == Some(FailOn::Diverged) && r.counts.envs_diverged > 0 {
        return Err(CliError::Found(format!(
            "compare: {} env{} diverged",
            thousands(r.counts.envs_diverged),
            plural(r.counts.envs_diverged)
        )));
    }
    Ok(())
}

/// A recording against a live run: each env's first divergence printed as the run
/// reaches it, until the recording's last frame, `--fail-on diverged`'s first divergence,
/// `--secs`, Ctrl-C or the engine gone.
fn run_live(args: &CompareArgs, target: &Target, tolerance: Tolerance) -> Result<(), CliError> {
    let stop = stop_flag();
    let mut baseline = AgainstBaseline::open(&args.a, tolerance)?;
    let attached = attach(target, args.target.layout)?;
    for w in &attached.geometry.warnings {
        eprintln!("warning: {w}");
    }
    let g = &attached.geometry;
    let obs_size = g.obs_size as usize;
    // The live run's names of its values, for the lines.
    let names = FilesCompared {
        names: lrbc_recording::format::names_metadata(&g.names),
        ..FilesCompared::default()
    };
    let budget = (args.busy_budget > 0.0).then_some(args.busy_budget);
    let mut sampler =
        super::watch::headless_sampler(target, args.target.layout, budget, None, None)?;
    // Only the envs both runs have are compared: the others' values need no copy.
    let max_envs = baseline.num_envs().min(g.num_envs as usize);
    let (sink, frames, dropped) = LiveFrames::new(max_envs as u32, budget);
    let subscription = lrbc_live::follower::subscribe(&attached, Box::new(sink))
        .map_err(|e| CliError::Other(format!("cannot follow the segment: {e}")))?;
    // This thread and the comparison's run in the time the engine and trainer leave
    // over; the follower, started above, keeps its own priority.
    lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Background);
    eprintln!(
        "compare: {} against {}: each env's first divergence as the run reaches it (Ctrl-C to stop)",
        attached.label(),
        args.a.display()
    );
    let (json, first_only) = (args.json, args.fail_on == Some(FailOn::Diverged));
    let done = Arc::new(AtomicBool::new(false));
    let quit = Arc::new(AtomicBool::new(false));
    let worker = {
        let (done, quit) = (Arc::clone(&done), Arc::clone(&quit));
        std::thread::Builder::new()
            .name("lrbc-compare-live".into())
            .spawn(move || {
                baseline.follow(&frames, obs_size, &quit, |found, _| {
                    for d in found {
                        if json {
                            println!("{}", divergence_json(d, &names));
                        } else {
                            println!("{}", divergence_line(d, &names));
                        }
                    }
                    // `--fail-on diverged` stops at the first divergence.
                    !first_only || found.is_empty()
                });
                // Relaxed: a flag with no data behind it.
                done.store(true, Ordering::Relaxed);
                baseline
            })
            .map_err(|e| CliError::Other(format!("cannot start the comparison: {e}")))?
    };
    let looked = look_until_done(&sampler, &stop, args.secs, "the follower's", |_| {
        done.load(Ordering::Relaxed) || worker.is_finished()
    });
    drop(subscription);
    quit.store(true, Ordering::Relaxed);
    let baseline = worker
        .join()
        .map_err(|_| CliError::Other("the comparison's thread stopped unexpectedly".into()))?;
    sampler.stop();
    looked?;
    let r = baseline.finish()?;
    if args.json {
        println!("{}", summary_json(&r, tolerance, false));
    } else {
        for line in summary_lines(&r, false) {
            eprintln!("{line}");
        }
    }
    // Relaxed: read after the follower let go of the sink.
    let dropped = dropped.load(Ordering::Relaxed);
    if dropped > 0 {
        eprintln!(
            "compare: {} frame{} dropped: the comparison fell behind the run (counted only in A)",
            thousands(dropped),
            plural(dropped)
        );
    }
    failed_on(args, &r)
}

/// The value's label: `obs[3] (knee_vel)`, `act[1]`, `reward`, `done`.
fn label(d: &Difference, r: &FilesCompared) -> String {
    match *d {
        Difference::Value { channel, .. } => {
            let plain = match channel {
                Channel::Obs(i) => format!("obs[{i}]"),
                Channel::Act(i) => format!("act[{i}]"),
                Channel::Reward => "reward".into(),
            };
            match r.name_of(channel) {
                Some(name) => format!("{plain} ({name})"),
                None => plain,
            }
        }
        Difference::Flag { flag, .. } => flag.as_str().into(),
    }
}

/// A's value and B's, as text.
fn values(d: &Difference) -> (String, String) {
    match *d {
        // Shortest text that reads back as the same f32.
        Difference::Value { a, b, .. } => (a.to_string(), b.to_string()),
        Difference::Flag { a, b, .. } => (a.to_string(), b.to_string()),
    }
}

fn divergence_line(d: &Divergence, r: &FilesCompared) -> String {
    let (a, b) = values(&d.difference);
    let seqs = if d.frame_seq_a == d.frame_seq_b {
        format!("frame_seq {}", d.frame_seq_a)
    } else {
        format!("frame_seq A {} B {}", d.frame_seq_a, d.frame_seq_b)
    };
    format!(
        "env {:<5} frame {} ({seqs})  {:<9}  {}: A {a}  B {b}",
        d.env,
        d.frame,
        d.origin.as_str(),
        label(&d.difference, r),
    )
}

fn channel_str(d: &Difference) -> &'static str {
    match *d {
        Difference::Value { channel, .. } => channel.kind().as_str(),
        Difference::Flag { flag, .. } => flag.as_str(),
    }
}

fn divergence_json(d: &Divergence, r: &FilesCompared) -> serde_json::Value {
    let (a, b) = values(&d.difference);
    let index = match d.difference {
        Difference::Value { channel, .. } => channel.index(),
        Difference::Flag { .. } => None,
    };
    let name = match d.difference {
        Difference::Value { channel, .. } => r.name_of(channel),
        Difference::Flag { .. } => None,
    };
    serde_json::json!({
        "env": d.env,
        "frame": d.frame,
        "frame_seq_a": d.frame_seq_a,
        "frame_seq_b": d.frame_seq_b,
        "origin": d.origin.as_str(),
        "channel": channel_str(&d.difference),
        "index": index,
        "name": name,
        // As text: a NaN or an infinity is no JSON number.
        "a": a,
        "b": b,
    })
}

/// The summary's figures of the divergences, found once for the text and the JSON.
struct Tallies<'a> {
    /// The first divergence by frame (then env).
    earliest: Option<&'a Divergence>,
    /// By origin, in [`ORIGINS`]' order, those found.
    by_origin: Vec<(&'static str, u64)>,
    by_channel: BTreeMap<&'static str, u64>,
}

const ORIGINS: [DivergenceOrigin; 4] = [
    DivergenceOrigin::Policy,
    DivergenceOrigin::Simulator,
    DivergenceOrigin::Reward,
    DivergenceOrigin::Unknown,
];

impl<'a> Tallies<'a> {
    fn of(r: &'a FilesCompared) -> Self {
        let mut by_channel = BTreeMap::new();
        let mut origins = [0u64; ORIGINS.len()];
        for d in &r.divergences {
            *by_channel.entry(channel_str(&d.difference)).or_insert(0) += 1;
            if let Some(k) = ORIGINS.iter().position(|o| *o == d.origin) {
                origins[k] += 1;
            }
        }
        Self {
            earliest: r.divergences.iter().min_by_key(|d| (d.frame, d.env)),
            by_origin: ORIGINS
                .iter()
                .zip(origins)
                .filter(|(_, n)| *n > 0)
                .map(|(o, n)| (o.as_str(), n))
                .collect(),
            by_channel,
        }
    }
}

/// The summary; `episodes`: with the episodes and events side by side (two recordings).
fn summary_lines(r: &FilesCompared, episodes: bool) -> Vec<String> {
    let CompareCounts {
        frames_compared,
        frames_only_a,
        frames_only_b,
        envs_identical,
        envs_diverged,
        envs_not_compared,
    } = r.counts;
    let mut lines = vec![format!(
        "compare: {} frame{} compared ({} only in A, {} only in B); envs: {} identical, {} diverged, {} not compared",
        thousands(frames_compared),
        plural(frames_compared),
        thousands(frames_only_a),
        thousands(frames_only_b),
        thousands(envs_identical),
        thousands(envs_diverged),
        thousands(envs_not_compared),
    )];
    let t = Tallies::of(r);
    if let Some(first) = t.earliest {
        let list = |v: &mut dyn Iterator<Item = (&&str, &u64)>| {
            v.map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        lines.push(format!(
            "compare: earliest divergence at frame {} (env {}, {}); by origin: {}; by channel: {}",
            first.frame,
            first.env,
            first.origin.as_str(),
            list(&mut t.by_origin.iter().map(|(k, n)| (k, n))),
            list(&mut t.by_channel.iter()),
        ));
    }
    if episodes && frames_compared > 0 {
        lines.extend(episodes_lines(&r.episodes));
        lines.push(events_line(&r.events));
    }
    for (run, end) in [("A", r.end_a), ("B", r.end_b)] {
        if end.truncated {
            lines.push(format!(
                "compare: {run} stops before its end (its recorder did not finish)"
            ));
        }
    }
    lines
}

fn object<'k>(
    counts: impl IntoIterator<Item = (&'k str, u64)>,
) -> serde_json::Map<String, serde_json::Value> {
    counts
        .into_iter()
        .map(|(k, n)| (k.to_string(), n.into()))
        .collect()
}

fn summary_json(r: &FilesCompared, tolerance: Tolerance, episodes: bool) -> serde_json::Value {
    let t = Tallies::of(r);
    let first = t.earliest;
    let c = r.counts;
    serde_json::json!({
        "summary": {
            "frames_compared": c.frames_compared,
            "frames_only_a": c.frames_only_a,
            "frames_only_b": c.frames_only_b,
            "envs_identical": c.envs_identical,
            "envs_diverged": c.envs_diverged,
            "envs_not_compared": c.envs_not_compared,
            "earliest": first.map(|d| serde_json::json!({"frame": d.frame, "env": d.env})),
            "by_origin": object(t.by_origin),
            "by_channel": object(t.by_channel.iter().map(|(k, n)| (*k, *n))),
            "tolerance": {"abs": tolerance.abs, "rel": tolerance.rel},
            "truncated_a": r.end_a.truncated,
            "truncated_b": r.end_b.truncated,
            "episodes": episodes.then(|| episodes_json(&r.episodes)),
            "events": episodes.then(|| events_json(&r.events)),
        }
    })
}

/// An interval as JSON (null when a run has too few episodes for it).
fn interval_json(i: Option<Interval>) -> serde_json::Value {
    match i {
        Some(i) => serde_json::json!({"diff": i.estimate, "low": i.low, "high": i.high}),
        None => serde_json::Value::Null,
    }
}

fn episodes_json(e: &EpisodesCompared) -> serde_json::Value {
    let run = &e.run;
    let side = |t: &EpisodeTally| {
        serde_json::json!({
            "finished": t.finished,
            "exact_returns": t.returns.count,
            "mean_return": t.returns.mean(),
            "mean_length": t.lengths.mean(),
            "endings": object(FINISHED_ENDINGS.iter().map(|x| (x.as_str(), t.of(*x)))),
        })
    };
    let shares: serde_json::Map<String, serde_json::Value> = FINISHED_ENDINGS
        .iter()
        .map(|x| (x.as_str().to_string(), interval_json(run.share(*x))))
        .collect();
    serde_json::json!({
        "a": side(&run.a),
        "b": side(&run.b),
        "finished": interval_json(Some(run.finished())),
        "mean_return": interval_json(run.mean_return()),
        "mean_length": interval_json(run.mean_length()),
        "shares": shares,
        "verdict": run.verdict().as_str(),
        "envs_higher": e.envs_where(ReturnVerdict::Higher),
        "envs_lower": e.envs_where(ReturnVerdict::Lower),
    })
}

fn events_json(e: &EventsCompared) -> serde_json::Value {
    let kinds: serde_json::Map<String, serde_json::Value> = e
        .kinds()
        .map(|(kind, a, b)| {
            (
                kind.as_str().to_string(),
                serde_json::json!({"a": a, "b": b}),
            )
        })
        .collect();
    serde_json::json!({
        "by_kind": kinds,
        "recorded_a": e.recorded_a,
        "recorded_b": e.recorded_b,
    })
}

/// A number as the table shows it: four significant figures at most, or `–`.
fn num(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(0.0) => "0".into(),
        Some(v) => {
            let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
            format!("{v:.digits$}")
        }
    }
}

/// A difference with its sign, and its interval, as the table shows them: each number
/// through `show`.
fn diff_cells(i: Option<Interval>, show: impl Fn(f64) -> String) -> (String, String) {
    match i {
        None => ("–".into(), "–".into()),
        Some(i) => {
            let d = show(i.estimate);
            let d = if i.estimate > 0.0 { format!("+{d}") } else { d };
            (d, format!("{} to {}", show(i.low), show(i.high)))
        }
    }
}

/// The episodes side by side: a table of the whole run, and the statement on the return.
fn episodes_lines(e: &EpisodesCompared) -> Vec<String> {
    let run = &e.run;
    if run.a.finished + run.b.finished == 0 {
        return vec!["compare: no episode ended within the frames both runs hold".into()];
    }
    let mut rows: Vec<[String; 5]> = vec![[
        "episodes".into(),
        "A".into(),
        "B".into(),
        "B − A".into(),
        "95 % interval".into(),
    ]];
    let plain = |v: f64| num(Some(v));
    let (d, i) = diff_cells(Some(run.finished()), |v| format!("{v:.0}"));
    rows.push([
        "finished".into(),
        thousands(run.a.finished),
        thousands(run.b.finished),
        d,
        i,
    ]);
    let (d, i) = diff_cells(run.mean_return(), plain);
    rows.push([
        "mean return".into(),
        num(run.a.returns.mean()),
        num(run.b.returns.mean()),
        d,
        i,
    ]);
    let (d, i) = diff_cells(run.mean_length(), plain);
    rows.push([
        "mean length".into(),
        num(run.a.lengths.mean()),
        num(run.b.lengths.mean()),
        d,
        i,
    ]);
    for ending in FINISHED_ENDINGS {
        if run.a.of(ending) + run.b.of(ending) == 0 {
            continue;
        }
        let pct = |v: Option<f64>| v.map_or("–".into(), |v| format!("{:.1} %", v * 100.0));
        let (d, i) = diff_cells(run.share(ending), |v| format!("{:.1} pts", v * 100.0));
        rows.push([
            format!("{} share", ending.as_str()),
            pct(run.a.share(ending)),
            pct(run.b.share(ending)),
            d,
            i,
        ]);
    }
    let mut lines = vec![
        "compare: episodes ended within the frames both runs hold (returns and lengths of exact episodes; \
         95 % intervals: Welch's t for means, Newcombe for shares, Poisson for counts)"
            .to_string(),
    ];
    for r in &rows {
        lines.push(format!(
            "  {:<16} {:>12} {:>12} {:>12}  {}",
            r[0], r[1], r[2], r[3], r[4]
        ));
    }
    let verdict = run.verdict();
    lines.push(match (verdict, run.mean_return()) {
        (ReturnVerdict::TooFew, _) | (_, None) => {
            "compare: too few exact episodes in a run (two or more each) to tell B's mean return from A's".into()
        }
        (ReturnVerdict::NotDistinguishable, Some(_)) => {
            "compare: B's mean return is not distinguishable from A's (the 95 % interval of the difference holds 0)".into()
        }
        (v, Some(i)) => format!(
            "compare: B's mean return is {} than A's by {} (95 % interval {} to {})",
            v.as_str(),
            num(Some(i.estimate.abs())),
            num(Some(i.low)),
            num(Some(i.high)),
        ),
    });
    let (higher, lower) = (
        e.envs_where(ReturnVerdict::Higher),
        e.envs_where(ReturnVerdict::Lower),
    );
    if higher + lower > 0 {
        lines.push(format!(
            "compare: per env, B's mean return is higher in {higher} and lower in {lower} of {} envs",
            e.envs.len()
        ));
    }
    lines
}

/// Events by kind in A and in B, one line.
fn events_line(e: &EventsCompared) -> String {
    let kinds: Vec<String> = e
        .kinds()
        .map(|(kind, a, b)| format!("{} {a} / {b}", kind.as_str()))
        .collect();
    let missing = match (e.recorded_a, e.recorded_b) {
        (true, true) => "",
        (false, true) => " (A holds no events: `events A.mcap` finds them again)",
        (true, false) => " (B holds no events: `events B.mcap` finds them again)",
        (false, false) => {
            return "compare: events: neither recording holds its events (`events FILE` finds them again)".into();
        }
    };
    if kinds.is_empty() {
        format!("compare: events: none in either run{missing}")
    } else {
        format!("compare: events, A / B: {}{missing}", kinds.join(", "))
    }
}
