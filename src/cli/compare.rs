//! `compare`: two recordings of runs, frame by frame from each run's start: each env's
//! first divergence (the frame, the value, A's and B's, and whether the policy, the
//! simulator or the reward started it), one line each in frame order, then a summary.

use std::path::PathBuf;

use lrbc_live::check::Channel;
use lrbc_live::detect::thousands;
use lrbc_recording::compare::{
    CompareCounts, Difference, Divergence, DivergenceOrigin, FilesCompared, Tolerance,
    compare_files,
};

use super::CliError;

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
    /// Run B, compared against A.
    #[arg(value_name = "B.mcap")]
    pub b: PathBuf,
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
    let mut seen = Vec::new();
    let r = compare_files(&args.a, &args.b, tolerance, false, |d| seen.push(*d))
        .map_err(|e| CliError::Other(e.to_string()))?;
    for d in &seen {
        if args.json {
            println!("{}", divergence_json(d, &r));
        } else {
            println!("{}", divergence_line(d, &r));
        }
    }
    if args.json {
        println!("{}", summary_json(&r, tolerance));
    } else {
        for line in summary_lines(&r) {
            eprintln!("{line}");
        }
    }
    if args.fail_on == Some(FailOn::Diverged) && r.counts.envs_diverged > 0 {
        return Err(CliError::Found(format!(
            "compare: {} env{} diverged",
            thousands(r.counts.envs_diverged),
            plural(r.counts.envs_diverged)
        )));
    }
    Ok(())
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
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

/// Divergences counted by origin (in a fixed order) and by channel (as first found).
struct Tallies {
    by_origin: Vec<(&'static str, u64)>,
    by_channel: Vec<(&'static str, u64)>,
}

fn tallies(r: &FilesCompared) -> Tallies {
    let origins = [
        DivergenceOrigin::Policy,
        DivergenceOrigin::Simulator,
        DivergenceOrigin::Reward,
        DivergenceOrigin::Unknown,
    ];
    let by_origin = origins
        .iter()
        .map(|o| {
            let n = r.divergences.iter().filter(|d| d.origin == *o).count() as u64;
            (o.as_str(), n)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    let mut by_channel: Vec<(&'static str, u64)> = Vec::new();
    for d in &r.divergences {
        let c = channel_str(&d.difference);
        match by_channel.iter_mut().find(|(k, _)| *k == c) {
            Some((_, n)) => *n += 1,
            None => by_channel.push((c, 1)),
        }
    }
    Tallies {
        by_origin,
        by_channel,
    }
}

fn summary_lines(r: &FilesCompared) -> Vec<String> {
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
    if let Some(first) = r.divergences.iter().min_by_key(|d| (d.frame, d.env)) {
        let t = tallies(r);
        let list = |v: &[(&str, u64)]| {
            v.iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        lines.push(format!(
            "compare: earliest divergence at frame {} (env {}, {}); by origin: {}; by channel: {}",
            first.frame,
            first.env,
            first.origin.as_str(),
            list(&t.by_origin),
            list(&t.by_channel),
        ));
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

fn object(counts: Vec<(&str, u64)>) -> serde_json::Map<String, serde_json::Value> {
    counts
        .into_iter()
        .map(|(k, n)| (k.to_string(), n.into()))
        .collect()
}

fn summary_json(r: &FilesCompared, tolerance: Tolerance) -> serde_json::Value {
    let t = tallies(r);
    let first = r.divergences.iter().min_by_key(|d| (d.frame, d.env));
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
            "by_channel": object(t.by_channel),
            "tolerance": {"abs": tolerance.abs, "rel": tolerance.rel},
            "truncated_a": r.end_a.truncated,
            "truncated_b": r.end_b.truncated,
        }
    })
}
